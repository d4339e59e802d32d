/**
 * npm run chaos — the fault-injection suite against the real local pipeline.
 * Prints its figures; exits 1 if any invariant broke. See docs/reliability.md.
 */
import { parseArgs } from "node:util";
import { MAX_SHARDS } from "../../shared/settings.ts";
import { type ChaosOptions, type ChaosReport, DEFAULTS, runChaos } from "./chaos.ts";

const HELP = `npm run chaos [-- options]

Drives the real local pipeline (both Workers, local D1 and Queues) with
Slack-style deliveries and redeliveries while faults are injected: the
ingress's durable write fails for a share of deliveries, a fake Slack fails a
share of calls (5xx, 429 with Retry-After, ok:false internal_error, hangs
past the timeout, some after applying the effect) and refuses one channel
outright (channel_not_found), and the local process is killed mid-run (its
in-memory queue is lost) and started again with a shard added (SHARD_COUNT
N → N+1, nothing else). Every team is installed through OAuth first, with
rotating tokens, one team's due again every few seconds; right after the
restart a workspace is installed (it lands on the new shard), one placed
before is uninstalled (then installed again) and another one's channel is
backfilled over the messages delivered before the kill. Then it checks the
invariants.

The fault shares, the kill point (half-way), the concurrency and the horizon
are DEFAULTS in scripts/chaos/chaos.ts. Options (defaults in brackets):
  --events N           events to send [${DEFAULTS.events}]
  --seed N             seed of every random choice: the same seed, the same faults [${DEFAULTS.seed}]
  --shards N           D1 databases (SHARD_COUNT, 1-15, 16 with --no-add-shard); the events' teams are spread so every
                       shard takes traffic, and each shard must deliver [${DEFAULTS.shards}]
  --single-workspace   one SLACK_BOT_TOKEN instead of the default: every team installed through
                       OAuth with rotating tokens, one team's token due for rotation mid-run
  --no-add-shard       restart on the same shard count instead of the default: the restart adds
                       a shard (SHARD_COUNT N+1), which no team placed before moves to
  --json               print the report as JSON
  -h, --help           this text

Exit codes: 0 every invariant held; 1 an invariant broke; 2 bad usage or the run could not start.`;

function parse(): { options: ChaosOptions; json: boolean } | undefined {
  const { values } = parseArgs({
    options: {
      events: { type: "string" },
      seed: { type: "string" },
      shards: { type: "string" },
      "single-workspace": { type: "boolean", default: false },
      "no-add-shard": { type: "boolean", default: false },
      json: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    console.log(HELP);
    return undefined;
  }
  const whole = (name: string, value: string | undefined, fallback: number, min: number, max: number) => {
    if (value === undefined) return fallback;
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new UsageError(`--${name} wants a whole number from ${min} to ${max}, got ${value}`);
    return n;
  };
  const json = values.json ?? false;
  return {
    json,
    options: {
      ...DEFAULTS,
      events: whole("events", values.events, DEFAULTS.events, 1, 20_000),
      seed: whole("seed", values.seed, DEFAULTS.seed, 0, 2 ** 31),
      // One more is added at the restart unless --no-add-shard.
      shards: whole("shards", values.shards, DEFAULTS.shards, 1, values["no-add-shard"] ? MAX_SHARDS : MAX_SHARDS - 1),
      oauth: !values["single-workspace"],
      addShard: !values["no-add-shard"],
      log: json ? () => {} : (line) => console.log(line),
    },
  };
}

class UsageError extends Error {}

export function formatReport(report: ChaosReport): string[] {
  const { verdict: v } = report;
  const lines = [
    "",
    "| figure | value |",
    "|---|---|",
    `| events sent | ${v.events.sent} (${v.events.fatal} aimed at a deleted channel) |`,
    `| acked 200 | ${v.events.acked} (never acked: ${v.events.neverAcked}) |`,
    `| deliveries | ${v.deliveries.total}: ${v.deliveries.answered500} answered 500, ${v.deliveries.noAnswer} unanswered (process down), ${v.deliveries.redeliveries} redeliveries |`,
    `| durable writes failed on purpose | ${v.deliveries.writeFaults.beforeCommit} before committing, ${v.deliveries.writeFaults.afterCommit} after |`,
    `| events redelivered after a failed delivery | ${v.deliveries.redeliveredAfterFailure} |`,
    `| effects performed | ${v.effects.applications} calls applied, ${v.effects.distinctApplied} distinct effects |`,
    `| duplicates | ${v.effects.duplicates} (${v.effects.explainedDuplicates} in the allowed window), visible: ${v.effects.visibleDuplicates} (posts and response_urls only) |`,
    `| rows | ${v.rows.total}: ${v.rows.done} done, ${v.rows.dead} dead, ${v.rows.stuck} stuck |`,
    `| rows per shard | ${v.rows.byShard.map((shard, index) => `shard ${index} (${report.teams[index]}): ${shard.total}, ${shard.done} done`).join("; ")} |`,
    `| operator API | backlog: ${report.operator.backlogDead} dead${report.operator.backlogDeadByShard ? ` (${report.operator.backlogDeadByShard.join(" + ")} by shard)` : ""}; dead list: ${report.operator.deadRows.length} rows over ${report.operator.pages} pages of 2 |`,
    `| dead by reason | ${
      Object.entries(v.rows.deadByReason)
        .map(([reason, n]) => `${reason}: ${n}`)
        .join("; ") || "none"
    } |`,
    `| lost | ${v.violations.lost.length} |`,
    `| Slack answers | ${Object.entries(report.slackFates)
      .map(([fate, n]) => `${fate} ${n}`)
      .join(", ")} |`,
    `| restart | ${report.restartMs === null ? "none" : `${(report.restartMs / 1000).toFixed(1)} s`}${report.shardsAfter > report.options.shards ? `, a shard added (${report.options.shards} → ${report.shardsAfter}; ${report.afterRestart.installedAfter} installed after it)` : ""} |`,
    ...(v.backfill
      ? [
          `| backfill right after the restart | ${report.afterRestart.backfilled}'s channel: ${v.backfill.read} messages read over ${v.backfill.pages} page${v.backfill.pages === 1 ? "" : "s"}, ${v.backfill.alreadyHandled} events already handled, ${v.backfill.recorded} recorded; re-handled or misplaced: ${v.violations.backfill.length} |`,
        ]
      : []),
    ...(v.uninstall
      ? [
          `| uninstall right after the restart | ${v.uninstall.team}: ${v.uninstall.parked} live rows parked; wrongly parked: ${v.violations.uninstall.length}; then installed again |`,
        ]
      : []),
    `| doubled (one key on two shards) | ${v.violations.doubled.length} |`,
    ...(report.oauth
      ? [
          `| OAuth | installs ${Object.entries(report.oauth.installs)
            .map(([team, n]) => `${team} ${n}`)
            .join(", ")}; refreshes ${
            Object.entries(report.oauth.refreshes)
              .map(([team, n]) => `${team} ${n}`)
              .join(", ") || "none"
          }; wrong tokens ${v.violations.wrongToken.length}, installations lost or blocked ${v.violations.installations.length} |`,
        ]
      : []),
    `| time to quiesce after the last delivery | ${(report.quiesceMs / 1000).toFixed(1)} s |`,
    "",
    v.ok ? "Every invariant held." : "INVARIANTS BROKEN:",
  ];
  for (const [name, list] of Object.entries(v.violations)) {
    if (list.length > 0) lines.push(`  ${name}: ${list.slice(0, 10).join(", ")}${list.length > 10 ? ` … (${list.length})` : ""}`);
  }
  // An unexplained repeat is diagnosed by when each application reached Slack, relative to the kill.
  for (const detail of v.duplicateDetails.filter((d) => d.unexplained > 0).slice(0, 10)) {
    const times = detail.applied.map((a) => `${a.atMs >= 0 ? "+" : ""}${a.atMs} ms${a.answered ? "" : " (answer lost)"}`);
    lines.push(
      `    ${detail.key}: applied at ${times.join(", ")} from the kill; explained by ${detail.explainedBy.join(", ") || "nothing"}`,
    );
  }
  return lines;
}

async function main(): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse();
  } catch (error) {
    console.error(`chaos: ${error instanceof Error ? error.message : String(error)}\n\n${HELP}`);
    return 2;
  }
  if (!parsed) return 0;
  let report: ChaosReport;
  try {
    report = await runChaos(parsed.options);
  } catch (error) {
    console.error(`chaos: the run could not complete: ${error instanceof Error ? error.message : String(error)}`);
    return 2;
  }
  if (parsed.json) console.log(JSON.stringify(report, null, 2));
  else for (const line of formatReport(report)) console.log(line);
  return report.verdict.ok ? 0 : 1;
}

if (import.meta.main) process.exitCode = await main();
