/**
 * The markdown report of one run: every figure in it comes from the result
 * object the run produced (docs/benchmarks.json has the same figures).
 */
import type { AckResult } from "./ack.ts";
import { BURST_TARGETS, type BurstResult } from "./burst.ts";
import type { CostResult, DesignCost, Phase } from "./cost.ts";
import type { DrainResult } from "./drain.ts";
import type { E2eResult, E2eRun } from "./e2e.ts";
import type { FlatResult } from "./flat.ts";
import type { LatencyResult } from "./latency.ts";
import type { Machine } from "./machine.ts";
import type { PipelineResult } from "./pipeline.ts";
import { PRICES, TICKS_PER_MONTH } from "./prices.ts";
import type { ShardsResult } from "./shards.ts";
import { round } from "./stats.ts";

export interface Verdict {
  readonly section: string;
  readonly name: string;
  readonly measured: string;
  readonly target: string;
  readonly met: boolean;
}

export interface BenchResult {
  readonly command: string;
  readonly smoke: boolean;
  readonly profile: boolean;
  readonly machine: Machine;
  readonly loadAverageAfter: readonly number[];
  readonly seconds: number;
  readonly verdicts: readonly Verdict[];
  readonly ack?: AckResult;
  readonly e2e?: E2eResult;
  readonly latency?: LatencyResult;
  readonly pipeline?: PipelineResult;
  readonly cost?: CostResult;
  readonly flat?: FlatResult;
  readonly drain?: DrainResult;
  readonly burst?: BurstResult;
  readonly shards?: ShardsResult;
}

export function verdictsOf(r: Omit<BenchResult, "verdicts">): Verdict[] {
  const out: Verdict[] = [];
  for (const t of r.ack?.targets ?? [])
    out.push({ section: "ack", name: t.name, measured: String(t.measured), target: t.target, met: t.met });
  for (const t of r.latency?.targets ?? [])
    out.push({ section: "latency", name: t.name, measured: String(t.measured), target: t.target, met: t.met });
  if (r.pipeline) {
    const t = r.pipeline.target;
    out.push({ section: "pipeline", name: t.name, measured: String(t.measured), target: t.target, met: t.met });
  }
  if (r.e2e) {
    for (const t of [r.e2e.target, r.e2e.steadyTarget]) {
      out.push({ section: "e2e", name: t.name, measured: String(t.measured), target: t.target, met: t.met });
    }
  }
  for (const v of r.flat?.verdicts ?? []) out.push({ section: "flat", ...v });
  for (const l of r.drain?.limits ?? []) out.push({ section: "drain", name: l.name, measured: l.measured, target: l.limit, met: l.within });
  if (r.drain) {
    out.push({
      section: "drain",
      name: `all ${r.drain.config.rows} lost rows delivered`,
      measured: `${r.drain.delivered} in ${r.drain.drainSeconds} s`,
      target: `all, within ${r.drain.config.timeoutSeconds} s`,
      met: r.drain.drained,
    });
  }
  for (const run of r.burst?.runs ?? []) {
    // The targets are the issue's, for ackbox's policies; the policy before is measured beside them, not judged.
    if (!run.variant.startsWith("ackbox")) continue;
    const about = `${run.events} events over ${run.channels} channel(s), ${run.variant}`;
    out.push({
      section: "burst",
      name: `${about}: dead`,
      measured: String(run.dead),
      target: `${BURST_TARGETS.dead}`,
      met: run.dead === 0 && run.unfinished === 0,
    });
    out.push({
      section: "burst",
      name: `${about}: 429s, share of calls`,
      measured: percent(run.rateLimitedShare),
      target: `≤ ${percent(BURST_TARGETS.rateLimitedShare)}`,
      met: run.rateLimitedShare <= BURST_TARGETS.rateLimitedShare,
    });
    out.push({
      section: "burst",
      name: `${about}: drain ÷ ideal`,
      measured: run.drainOverIdeal === null ? "not drained" : `${round(run.drainOverIdeal, 2)}×`,
      target: `≤ ${BURST_TARGETS.drainOverIdeal}×`,
      met: run.drainOverIdeal !== null && run.drainOverIdeal <= BURST_TARGETS.drainOverIdeal,
    });
  }
  for (const t of r.shards?.targets ?? [])
    out.push({ section: "shards", name: t.name, measured: t.measured, target: t.target, met: t.met });
  return out;
}

const percent = (ratio: number) => `${round(ratio * 100, 1)} %`;

function table(headers: readonly string[], rows: readonly (readonly (string | number)[])[]): string {
  const line = (cells: readonly (string | number)[]) => `| ${cells.map((c) => String(c).replace(/\|/g, "\\|")).join(" | ")} |`;
  return [line(headers), line(headers.map(() => "---")), ...rows.map(line)].join("\n");
}

const mark = (met: boolean) => (met ? "✅ met" : "❌ missed");
const usd = (x: number) => `$${x < 0.01 ? x.toFixed(4) : x.toFixed(2)}`;

export function renderMarkdown(r: BenchResult): string {
  const m = r.machine;
  const parts: string[] = [];
  parts.push(`# ackbox benchmarks${r.smoke ? " (smoke run: tiny counts, figures not meaningful)" : ""}`);
  parts.push(
    [
      `- Command: \`${r.command}\` (${round(r.seconds, 0)} s)`,
      `- Measured: ${m.date}, commit ${m.commit}${m.uncommittedChanges ? " plus uncommitted changes in the tree" : ""}`,
      `- Machine: ${m.cpus} CPUs (${m.cpuModel}), ${m.memoryGiB} GiB; load average ${m.loadAverage.join(" / ")} before, ${r.loadAverageAfter.join(" / ")} after`,
      `- Software: Node ${m.node}, ${Object.entries(m.versions)
        .map(([k, v]) => `${k} ${v}`)
        .join(", ")}`,
    ].join("\n"),
  );
  if (r.verdicts.length > 0) {
    parts.push("## Verdicts");
    parts.push(
      table(
        ["", "measured", "target", "verdict"],
        r.verdicts.map((v) => [`${v.section}: ${v.name}`, v.measured, v.target, mark(v.met)]),
      ),
    );
  }
  if (r.ack) parts.push(ackSection(r.ack));
  if (r.latency) parts.push(latencySection(r.latency));
  if (r.pipeline) parts.push(pipelineSection(r.pipeline));
  if (r.e2e) parts.push(e2eSection(r.e2e));
  if (r.cost) parts.push(costSection(r.cost, r.flat));
  if (r.flat) parts.push(flatSection(r.flat));
  if (r.drain) parts.push(drainSection(r.drain));
  if (r.burst) parts.push(burstSection(r.burst));
  if (r.shards) parts.push(shardsSection(r.shards));
  return `${parts.join("\n\n")}\n`;
}

function ackSection(a: AckResult): string {
  const main = a.variants.filter((v) => !v.meaning.startsWith("profile"));
  const profiles = a.variants.filter((v) => v.meaning.startsWith("profile"));
  const ingress = a.variants.find((v) => v.name === "ingress");
  const out = [
    "## 1. Ack path",
    `One local workerd (Miniflare, the runtime under \`wrangler dev\`), each Worker on its own 127.0.0.1 socket; autocannon, ${a.config.connections} connections, one request in flight per connection; ${a.config.requests} measured requests per variant in ${a.config.rounds} interleaved rounds (the order rotates each round) after ${a.config.warmup} warm-up requests each. Every request is a new signed Slack event (an app_mention or a channel message, fresh event_id).`,
    main.map((v) => `- **${v.name}**: ${v.meaning}`).join("\n"),
    table(
      ["variant", "req/s", "p50 ms", "p99 ms", "req/s by round", "p99 ms by round", "runtime CPU ms/req", "answers"],
      main.map((v) => [
        v.name,
        v.rps,
        v.p50Ms,
        v.p99Ms,
        v.rpsPerRound.join(" "),
        v.p99PerRound.join(" "),
        v.runtimeCpuMsPerRequest,
        Object.entries(v.statuses)
          .map(([k, n]) => `${n}× ${k}`)
          .join(", ") + (v.errors ? `, ${v.errors} errors` : ""),
      ]),
    ),
    table(
      ["ratio", "throughput", "p99"],
      Object.entries(a.ratios)
        .filter(([k]) => !profiles.some((p) => k.endsWith(p.name)))
        .map(([k, v]) => [k, v.throughput, v.p99]),
    ),
  ];
  if (ingress?.durable) {
    out.push(
      `Durability check: after the run the ingress's D1 holds ${ingress.durable.outboxRows} outbox rows for ${ingress.durable.answered200} answers of 200 (warm-up, sanity request and the sustained rounds below included): ${ingress.durable.outboxRows === ingress.durable.answered200 ? "every ack had its row" : "**they differ**"}.`,
    );
  }
  const verdicts = Object.entries(a.said ?? {}).filter(([name]) => name === "ingress" || name === "ingress-off");
  if (verdicts.length > 0) {
    out.push(
      `What became of each measured request's rows (the ack's \`first_attempt\`): ${verdicts
        .map(
          ([name, s]) =>
            `${name}: ${Object.entries(s.firstAttempt)
              .map(([verdict, n]) => `${verdict} ${n}`)
              .join(", ")}`,
        )
        .join(
          "; ",
        )}. Past the first attempt's bounds (3 rows a request, 128 inline rows in flight per isolate: shared/delivery/first-attempt.ts) a row goes to the queue at once.`,
    );
  }
  if (a.sustained) {
    const { ingress: i, off, ratio: q, said } = a.sustained;
    out.push(
      `Sustained flood: after the rounds, ingress and ingress-off alone, alternated, ${a.config.sustained.rounds} round(s) of ${a.config.sustained.requests} requests each (seconds per round, not ~1 s from idle): ingress ${i.rps} req/s (by round ${i.rpsPerRound.join(" ")}), p99 ${i.p99Ms} ms; ingress-off ${off.rps} req/s (${off.rpsPerRound.join(" ")}), p99 ${off.p99Ms} ms; ingress / ingress-off throughput ${q.throughput}, p99 ${q.p99}. The ingress's acks there: ${Object.entries(
        said.firstAttempt,
      )
        .map(([verdict, n]) => `${verdict} ${n}`)
        .join(", ")}.`,
    );
  }
  out.push(
    "Runtime CPU is the whole workerd process per request (the Worker, the runtime's HTTP stack, local D1's SQLite and the local queue broker), read from /proc; the runtime is CPU-bound here, so req/s tracks 1 ÷ that figure.",
  );
  if (profiles.length > 0 && ingress) {
    out.push("### Profile: what each part of the ack path costs (bench-only variants, same run)");
    out.push(
      table(
        ["variant", "req/s", "p99 ms", "runtime CPU ms/req", "Δ CPU vs ingress", "what changed"],
        [ingress, ...profiles].map((v) => [
          v.name,
          v.rps,
          v.p99Ms,
          v.runtimeCpuMsPerRequest,
          v === ingress ? "—" : round(v.runtimeCpuMsPerRequest - ingress.runtimeCpuMsPerRequest, 2),
          v === ingress ? "as built" : v.meaning.replace(/^profile( baseline)?: /, ""),
        ]),
      ),
    );
  }
  return out.join("\n\n");
}

function e2eRow(run: E2eRun): (string | number)[] {
  return [
    run.name,
    `${run.delivered}/${run.accepted}`,
    run.acceptedPerSecond,
    run.window.deliveredPerSecond,
    run.window.ratio,
    `${run.ackMs.p50} / ${run.ackMs.p99}`,
    `${run.sendToEffectMs.p50} / ${run.sendToEffectMs.p99}`,
    run.allDeliveredSeconds,
    run.tailSeconds,
    run.duplicates,
    run.runtimeCpuMsPerEvent,
  ];
}

function latencySection(l: LatencyResult): string {
  return [
    "## Ack → effect: ackbox beside slack-edge's lazy listener",
    `One local runtime (Miniflare, what wrangler dev runs): ackbox's ingress and consumer bundled from workers/ as built (real local D1 and Queues; the first attempt at the ack makes the call in the ingress's waitUntil), and slack-edge's lazy listener (scripts/bench/workers/slack-edge-peer.js) making the same call in its waitUntil with no durable record. Both call one fake Slack in the bench process, so an effect's arrival and its event's 200 are read on one clock. Each variant is first saturated (${l.config.saturate} requests, ${l.config.connections} connections) to find its own rate; then ${l.config.rounds} alternated round(s) of ${l.config.events} events each at a light ${l.config.lightRate}/s and at half of that variant's saturated rate, each rate offered steady (one request every 1/rate s: the targets' load) and as per-second rushes (autocannon's overallRate: each second's quota sent at full speed at its start, so the isolate is saturated while a rush lasts). Saturated: ${Object.entries(
      l.saturatedPerSecond,
    )
      .map(([k, v]) => `${k} ${v}/s`)
      .join(", ")}. Ratios floor each figure at 1 ms.`,
    table(
      [
        "variant",
        "load",
        "offered/s (achieved)",
        "delivered / accepted (failed)",
        "ack→effect p50 / p99 / max ms",
        "first attempt (the ack's verdicts)",
      ],
      l.runs.map((r) => [
        r.variant,
        r.load,
        `${r.offeredPerSecond} (${r.achievedPerSecond})`,
        `${r.delivered} / ${r.accepted} (${r.failed})`,
        `${r.ackToEffectMs.p50} / ${r.ackToEffectMs.p99} / ${r.ackToEffectMs.max}`,
        r.said
          ? Object.entries(r.said.firstAttempt)
              .map(([verdict, n]) => `${verdict} ${n}`)
              .join(", ")
          : "—",
      ]),
    ),
  ].join("\n\n");
}

function pipelineSection(p: PipelineResult): string {
  return [
    "## The whole local pipeline under load: delivered events ÷ /healthz through `npm start`",
    `\`npm start\` itself (scripts/start.ts as a child process: its launcher, its pretty printer of the Workers' log lines, its sweeper timer), both Workers, the consumer's SLACK_API_URL pointed at a fake Slack in the bench process. ${p.config.rounds} round(s), each ${p.config.requests} GET /healthz and ${p.config.requests} signed watched-channel events (app_mention → a threaded reply, channel message → a reaction), ${p.config.connections} connections, which goes first alternating by round, after a warm-up of each. Each load carries its own work and nothing of another's: after it, uncounted and bounded, the bench waits until every accepted event's effect has reached the fake Slack, until the inline rows' delayed backup messages have been taken by the consumer (as built: the inline lease, 20 s by default), and until the process tree is quiet. "Delivered events/s" is the whole pipeline's rate: events whose effect arrived ÷ the time from the load's first request to the later of its last ack and its last effect (a delivery left for later costs this figure); "acked events/s" counts the 200s to the last ack only. Ratio (the target's): delivered events/s ÷ healthz/s per round, and its median. Variants are settings of one product, each its own \`npm start\`, and beside them the floor issue 14 names, "a naive implementation (it sends to the queue before acking and delivers with a simple consumer)": scripts/bench/workers/naive-ingress.js and naive-consumer.js under plain \`wrangler dev\` (trace collector off, as npm start runs it), same queue settings, same loads — signature checked, no receipt, no outbox row, no log line: a duplicate is performed twice and an effect whose message the queue loses is lost. The "durable floor" is the same two Workers with DURABLE=1: the least any outbox design pays on its happy path — one D1 statement that is both receipt and row before the 200, the id sent to the queue after it, a claim with a token and a lease, the Slack call, a fenced finish; no log line, and no recovery path (no sweep: a row whose message is lost stays pending). CPU: every process of the run's tree, per accepted event, from the first round to the last one settled (healthz and the waits included), in all and by process; "net of idle" takes away what the tree burnt over the same wall time at the idle rate sampled for ${p.config.idleSampleMs / 1000} s before and after the rounds, the lower kept (the as-built variant waits about 20 s per events load for its backup messages, the others do not).`,
    table(
      [
        "variant",
        "healthz/s per round",
        "delivered events/s per round",
        "delivered ÷ healthz per round",
        "median",
        "acked events/s per round",
        "acked ÷ healthz: median",
        "delivered / accepted",
        "CPU ms/event",
        "net of idle",
      ],
      p.runs.map((r) => [
        r.variant,
        r.healthzPerSecond.join(", "),
        r.eventsPerSecond.join(", "),
        r.ratios.join(", "),
        r.ratio,
        r.eventsAckedPerSecond.join(", "),
        r.ackRatio,
        `${r.delivered} / ${r.accepted}`,
        r.cpuMsPerEvent,
        r.cpuNetOfIdleMsPerEvent,
      ]),
    ),
    `ackbox as built ÷ the floor: delivered ${p.versusFloor.delivered ?? "n/a"}, acked ${p.versusFloor.acked ?? "n/a"}; ÷ the durable floor: delivered ${p.versusDurableFloor.delivered ?? "n/a"}, acked ${p.versusDurableFloor.acked ?? "n/a"} (on the medians above). These charge ackbox for all of \`npm start\` — its Node launcher and pretty printer relay every Worker line — where the floors run under plain \`wrangler dev\` and print nothing; and the floors' consumer performs a whole batch at once where ackbox's runs six lanes.`,
    ...p.failed.map((f) => `**${f.variant}: not measured** — ${f.error}`),
    `The ack's first-attempt verdicts over the rounds, from npm start's own lines ("queue": the first attempt off or not wanted): ${
      p.runs
        .filter((r) => Object.keys(r.firstAttempt).length > 0)
        .map(
          (r) =>
            `${r.variant}: ${Object.entries(r.firstAttempt)
              .map(([k, n]) => `${k} ${n}`)
              .join(", ")}`,
        )
        .join("; ") || "none read"
    }.`,
    "CPU ms per accepted event, by process:",
    table(
      ["variant", ...(p.runs[0]?.cpuByProcess.map((c) => c.process) ?? [])],
      p.runs.map((r) => [
        r.variant,
        ...(p.runs[0]?.cpuByProcess.map((c) => r.cpuByProcess.find((x) => x.process === c.process)?.msPerEvent ?? 0) ?? []),
      ]),
    ),
  ].join("\n\n");
}

function e2eSection(e: E2eResult): string {
  const headers = [
    "run",
    "delivered / accepted",
    "accepted/s",
    "delivered/s (loaded window)",
    "delivered ÷ accepted",
    "ack p50 / p99 ms",
    "send→effect p50 / p99 ms",
    "all delivered after s",
    "tail after load s",
    "duplicates",
    "CPU ms/event",
  ];
  const out = [
    "## 2. End to end",
    `Both Workers in one \`wrangler dev -c ingress -c consumer\` started by the project's own launcher (scripts/local/pipeline.ts, \`startPipeline\`, what \`npm start\` runs; a private run folder and fresh state, no cron timer), real local D1 and Queues, the consumer's SLACK_API_URL pointed at a fake Slack on 127.0.0.1 that records when each effect arrives. ${e.config.events} signed events, ${e.config.connections} connections, after ${e.config.warmup} warm-up events. "Loaded window": from 1 s after the first request (a fifth of the run if shorter) to the last ack, effects delivered per second vs events accepted per second. send→effect: from the moment the load generator sent the request to the moment the fake Slack received its effect (both on the bench process's clock, so never negative; the ack's own time is in "ack p50 / p99").`,
    table(headers, [e2eRow(e.run), e2eRow(e.steady)]),
    `The first run offers as much load as the ingress answers: on this 2-core machine the load generator, both Workers, the local D1 and the local queue then share the same CPUs, and whatever the ingress takes the consumer does not get (in production the two Workers run apart, and consumer invocations scale out). The second run offers a steady ${Math.round(e.config.steadyShare * 100)} % of the first run's accepted rate: the ingress is under load, not saturated.`,
    "CPU per event is wrangler's process tree (both Workers, local D1, the local queue, wrangler's dev proxy and log printing): an upper bound.",
  ];
  if (e.profiles.length > 0) {
    out.push("### Profile: the same load through bench-only variants of the pipeline");
    out.push(
      "These runs go through the bench's own minimal launcher (scripts/bench/dev-harness.ts: the same two configs copied with one shared .dev.vars and a private dev registry), because startPipeline cannot yet override the consumer's queue settings; the baseline is run again through it so the comparison uses one launcher.",
    );
    out.push(e.profiles.map((r) => `- **${r.name}**: ${r.meaning}`).join("\n"));
    out.push(table(headers, e.profiles.map(e2eRow)));
  }
  return out.join("\n\n");
}

function phaseTable(p: Phase, perEventOf?: number): string {
  const rows = p.statements.map((s) => [
    s.name,
    s.calls,
    round(s.readPerCall, 2),
    round(s.writtenPerCall, 2),
    `${s.why ?? ""}${s.unexpected ? ` ⚠ ${s.unexpected}` : ""}`,
  ]);
  const head = `**${p.name}**: ${p.d1Statements} statements, ${p.rowsRead} rows read, ${p.rowsWritten} rows written${perEventOf ? ` (${round(p.rowsRead / perEventOf, 2)} read, ${round(p.rowsWritten / perEventOf, 2)} written per event)` : ""}`;
  return `${head}\n\n${table(["statement", "calls", "read / call", "written / call", "why"], rows)}`;
}

function costSection(c: CostResult, flat?: FlatResult): string {
  const d = c.designs;
  const out = [
    "## 3. Cost per event",
    `The product's own Worker entries (ingress \`fetch\`, consumer \`queue\` and \`scheduled\`, built from workers/*) and the design note's statements (its schema, recordIntent, claimBatch, completeClaimed, sweepOutbox, verbatim) run inside workerd against real local D1 through a meter that keeps each statement's \`meta.rows_read\` / \`meta.rows_written\` (scripts/bench/workers/probe.js). ${c.config.events} events each (half app_mention, half channel message), delivered in queue batches of ${c.config.batchSize}. Dollars are marginal list prices per million events, after the plan's included allowances (scripts/bench/prices.ts).`,
    table(
      [
        "design",
        "rows read",
        "rows written",
        "queue ops (write/read/delete/retry)",
        "Workers requests",
        "CPU ms (upper bound)",
        "D1 read",
        "D1 write",
        "queue",
        "requests",
        "CPU",
        "total per million events",
      ],
      d.map((x: DesignCost) => [
        x.design,
        x.perEvent.rowsRead,
        x.perEvent.rowsWritten,
        `${x.perEvent.queueOps} (${x.perEvent.queue.writes}/${x.perEvent.queue.reads}/${x.perEvent.queue.deletes}/${x.perEvent.queue.retries})`,
        x.perEvent.requests,
        x.perEvent.cpuMs,
        usd(x.dollarsPerMillionEvents.d1Read),
        usd(x.dollarsPerMillionEvents.d1Write),
        usd(x.dollarsPerMillionEvents.queue),
        usd(x.dollarsPerMillionEvents.requests),
        usd(x.dollarsPerMillionEvents.cpu),
        `**${usd(x.dollarsPerMillionEvents.total)}**`,
      ]),
    ),
    d.flatMap((x) => x.notes.map((n) => `- ${x.design}: ${n}`)).join("\n"),
  ];
  const note = d.find((x) => x.design === "design note");
  const big = flat?.levels.at(-1);
  if (note && big && big.doneRows > 0) {
    const claimSelect = big.note.claim.byStatement.find((s) => s.name === "note: claimBatch SELECT");
    if (claimSelect) {
      out.push(
        `With ${big.doneRows} done rows in its outbox (section 4), the design note's claimBatch SELECT alone reads ${claimSelect.rowsRead} rows per call, and its ingress runs it once per event (sweepOutbox in waitUntil): ${claimSelect.rowsRead} × $${PRICES.d1RowsReadPerMillion} per million rows = ${usd(claimSelect.rowsRead * PRICES.d1RowsReadPerMillion)} more per million events than the figure above, and growing with the table.`,
      );
    }
  }
  out.push("### Every statement, and why it reads and writes what it does");
  for (const x of d) for (const p of x.phases) out.push(phaseTable(p, p.perEvent ? x.events : undefined));
  out.push(
    `### A lost message, recovered by the sweep\n\n${c.config.lostEvents > 0 ? `${c.recovery.events} events acked with their queue message dropped; one sweep tick later (past SWEEP_GRACE_SECONDS) they were re-enqueued and delivered (${c.recovery.slackCalls} effects reached the fake Slack in all). The tick adds ${c.recovery.perEvent.rowsRead} rows read, ${c.recovery.perEvent.rowsWritten} rows written and ${c.recovery.perEvent.queueWrites} queue writes per recovered event (its fixed part amortised over ${c.recovery.events} rows).` : ""}`,
  );
  for (const p of c.recovery.phases) out.push(phaseTable(p));
  out.push("### Fixed cost: the cron tick with nothing to do");
  out.push(
    table(
      [
        "design",
        "statements",
        "rows read",
        "rows written",
        "rows read a month (one tick a minute)",
        "$ a month (D1 + the cron's requests)",
      ],
      d.map((x) => {
        const reads = x.idleTick.rowsRead * TICKS_PER_MONTH;
        const writes = x.idleTick.rowsWritten * TICKS_PER_MONTH;
        const dollars =
          (reads / 1e6) * PRICES.d1RowsReadPerMillion +
          (writes / 1e6) * PRICES.d1RowsWrittenPerMillion +
          (TICKS_PER_MONTH / 1e6) * PRICES.workersRequestsPerMillion;
        return [x.design, x.idleTick.statements, x.idleTick.rowsRead, x.idleTick.rowsWritten, reads, usd(dollars)];
      }),
    ),
  );
  out.push(
    "Measured on the tables as this section left them (a few hundred rows); section 4 measures the idle tick with a million done rows.",
  );
  out.push("### How D1 counts rows (measured on a scratch table)");
  out.push(
    table(
      ["write", "rows read", "rows written"],
      c.accounting.map((s) => [s.what, s.rowsRead, s.rowsWritten]),
    ),
  );
  out.push(
    'A row written is counted for the table row and for each index entry the write adds; entries it removes are not counted (the D1 pricing page: "Indexes will add an additional written row when writes include the indexed column").',
  );
  out.push(`Prices:\n\n${c.prices.map((p) => `- ${p.what}: <${p.url}>`).join("\n")}`);
  return out.join("\n\n");
}

/** Dollars a month of a tick a minute that reads and writes what `tick` did (D1 rows and the cron's requests). */
function idleMonth(tick: { rowsRead: number; rowsWritten: number }): number {
  return (
    ((tick.rowsRead * TICKS_PER_MONTH) / 1e6) * PRICES.d1RowsReadPerMillion +
    ((tick.rowsWritten * TICKS_PER_MONTH) / 1e6) * PRICES.d1RowsWrittenPerMillion +
    (TICKS_PER_MONTH / 1e6) * PRICES.workersRequestsPerMillion
  );
}

function flatSection(f: FlatResult): string {
  const out = [
    "## 4. Flat cost as the outbox grows",
    `Done rows seeded in bulk (recursive-CTE INSERTs, ${f.seedSeconds} s for both schemas), one finished every 0.6 s going back from a minute ago (a steady ~1.7 events/s; a million rows ≈ 6.9 days, inside the done-row retention, so no prune takes them). At each level: ${f.config.staleRows} stale pending rows (lost messages) for the sweep tick to find, then a tick with nothing stale, then a consumer claim of ${f.config.claimRows} of those rows; for the design note, ${f.config.staleRows} pending rows and one claimBatch (LIMIT ${f.config.noteClaimLimit}), then its cron tick with nothing pending.`,
    table(
      [
        "done rows",
        "ackbox tick: rows read (sweep statements)",
        "rows taken",
        "ackbox idle tick",
        `ackbox claim of ${f.config.claimRows}`,
        `design note claimBatch`,
        "design note idle tick",
        "idle ticks a month, ackbox / design note",
      ],
      f.levels.map((l) => [
        l.doneRows,
        `${l.ackbox.tick.rowsRead} (${l.ackbox.tick.sweepRowsRead})`,
        l.ackbox.tick.taken,
        l.ackbox.idleTick.rowsRead,
        `${l.ackbox.claim.rowsRead} (${l.ackbox.claim.claimed} claimed)`,
        `${l.note.claim.rowsRead} (${l.note.claim.claimed} claimed)`,
        l.note.idleTick.rowsRead,
        `${usd(idleMonth(l.ackbox.idleTick))} / ${usd(idleMonth(l.note.idleTick))}`,
      ]),
    ),
    table(
      ["check", "measured", "target", "verdict"],
      f.verdicts.map((v) => [v.name, v.measured, v.target, mark(v.met)]),
    ),
  ];
  const last = f.levels.at(-1);
  if (last) {
    out.push(`The ackbox tick at ${last.doneRows} done rows, statement by statement:`);
    out.push(
      table(
        ["statement", "calls", "rows read", "rows written"],
        last.ackbox.tick.byStatement.map((s) => [s.name, s.calls, s.rowsRead, s.rowsWritten]),
      ),
    );
  }
  return out.join("\n\n");
}

function drainSection(d: DrainResult): string {
  return [
    "## 5. Drain: lost messages, recovered by the sweeper",
    `Both Workers started by scripts/local's startPipeline (no cron timer), then ${d.config.rows} pending rows seeded into its local D1 with their queue messages lost (sweep_at already past), and the consumer's cron fired through the local explorer endpoint, the next tick ${d.config.tickIntervalMs} ms after the previous one returned (production fires once a minute). Settings: SWEEP_BATCH_SIZE ${d.settings.sweepBatchSize} × SWEEP_MAX_STEPS ${d.settings.sweepMaxSteps} = ${d.settings.rowsPerTickBound} rows per tick at most.`,
    table(
      [
        "delivered",
        "duplicates",
        "drain time",
        "ticks fired",
        "rows re-enqueued per tick",
        "tick wall p50 / max",
        "consumer rate",
        "projected at one tick a minute",
      ],
      [
        [
          `${d.delivered}/${d.config.rows}`,
          d.duplicates,
          `${d.drainSeconds} s`,
          d.ticks,
          d.rowsPerTick.filter((n) => n > 0).join(" ") || "0",
          `${d.tickWallMs.p50} / ${d.tickWallMs.max} ms`,
          `${d.consumerPerSecond} effects/s`,
          `${d.projectedAtProductionCadenceSeconds} s (⌈rows ÷ rows per tick⌉ ticks, a minute apart, the consumer behind them)`,
        ],
      ],
    ),
    `One full tick, metered in the probe (${d.fullTick.staleRows} stale rows, more than the bound): ${d.fullTick.taken} rows taken, ${d.fullTick.d1Statements} D1 statements, ${d.fullTick.rowsRead} rows read, ${d.fullTick.rowsWritten} rows written, ${d.fullTick.sendBatchCalls} sendBatch calls, ${d.fullTick.wallMs} ms wall inside workerd (${d.fullTick.runtimeCpuMs} ms of runtime CPU, local D1 included).`,
    table(
      ["per-tick bound", "measured", "limit", "verdict"],
      d.limits.map((l) => [l.name, l.measured, l.limit, l.within ? "✅ within" : "❌ over"]),
    ),
  ].join("\n\n");
}

function burstSection(b: BurstResult): string {
  const c = b.config;
  return [
    "## 6. Burst: Slack's rate limits are not failures",
    `Bursts of ${c.eventCounts.join(" and of ")} chat.postMessage events, each recorded at once into ${c.channelCounts.map((n) => (n === 1 ? "one channel" : `${n} channels`)).join(" and, in the same run, into ")}, against a fake Slack that allows ${c.perChannelPerSecond} call per second per channel with a burst of ${c.burst} and answers 429 + Retry-After: 1 beyond it (each call takes ${c.callLatencyMs} ms). The consumer's own modules (claim, in-batch pacing, decide, fence, cooldowns and release slots, dead letters, sweep) run over SQLite with every migration, under a virtual clock and a model of Queues (batches of 100, max_batch_timeout 1 s, max_retries 10 then the dead-letter queue; as many invocations at once as batches): times are virtual seconds, figures of the policy, not of this machine. "before" is the policy before issue 11, injected as a variant: a 429 spends an attempt and waits exactly Retry-After, no cooldown, no pacing. PACE_AHEAD on: a batch's second row for a channel takes a release slot before any 429. Ideal = events ÷ (channels × ${c.perChannelPerSecond}/s).`,
    table(
      [
        "events",
        "channels",
        "variant",
        "delivered",
        "dead",
        "unfinished",
        "Slack calls",
        "429s",
        "waited for a slot",
        "dead-lettered",
        "drain",
        "ideal",
        "drain ÷ ideal",
      ],
      b.runs.map((run) => [
        run.events,
        run.channels,
        run.variant,
        `${run.delivered}/${run.events}`,
        run.dead,
        run.unfinished,
        run.slackCalls,
        `${run.rateLimited} (${percent(run.rateLimitedShare)})`,
        run.waitedForSlot,
        run.deadLettered,
        run.drainSeconds === null ? "not drained" : `${round(run.drainSeconds, 1)} s`,
        `${run.idealSeconds} s`,
        run.drainOverIdeal === null ? "–" : `${round(run.drainOverIdeal, 2)}×`,
      ]),
    ),
  ].join("\n\n");
}

function shardsSection(x: ShardsResult): string {
  const c = x.config;
  const pct = (share: number) => `${round(share * 100, 0)} %`;
  return [
    "## 7. Shards: the outbox over N single-writer D1 databases",
    `A D1 database is one writer; locally every D1 is SQLite on this machine's CPUs, so the writer is simulated (scripts/bench/single-writer-d1.ts): each shard serves its statements one at a time, each held ${c.holdMs} ms (a batch of k statements holds k × ${c.holdMs} ms: D1 runs a batch's statements one after another in one transaction), on the database's own timeline, so a late timer on this shared machine delays an answer but never lowers a writer's capacity (${round(1000 / c.holdMs, 0)} statements/s). The product's own entries run in this process: the ingress's fetch (real signatures, the real routing by jump hash) and the consumer's queue (per-shard groups, deliverBatch), FIRST_ATTEMPT=off so every effect goes through the queue and the consumer; a Queues model (batches of 100 or 1 s, up to 250 invocations at once); a fake Slack on 127.0.0.1 (an event is delivered when its effect arrives). The same load at every N: ${c.events} events from ${c.teams} workspaces in turn, ${c.connections} concurrent senders (each sends its next event when the previous is answered), ${c.rounds} round(s), the order of N alternating by round; every database starts empty. Events/s: events delivered ÷ (first request → last effect), median of the rounds. Rows written: SQLite's total_changes() of every shard over the run (rows inserted, updated or deleted — the sum of every write's meta.changes; index entries, which D1 also bills, are not in it). CPU: this process's process.cpuUsage() ÷ wall time over the runs (1 = one CPU; the JavaScript runs on one thread, so well under 1 means the CPU is not what limits). Local SQLite's own time per statement, measured under the hold: ${x.localStatementMicros} µs.`,
    table(
      [
        "N",
        "events/s (rounds)",
        "÷ N × N = 1's",
        "best this spread allows",
        "acks/s",
        "ack p50 / p99 ms",
        "delivered / accepted",
        "statements / event",
        "rows written / event",
        "events per shard",
        "writers busy",
        "CPU share",
        "event-loop delay p99 ms",
        "load average",
      ],
      x.rows.map((r) => {
        const one = x.rows.find((o) => o.shards === 1);
        return [
          r.shards,
          `${r.deliveredPerSecond} (${r.deliveredPerSecondByRound.join(", ")})`,
          one ? round(r.deliveredPerSecond / (r.shards * one.deliveredPerSecond), 2) : "–",
          round(1 / (r.shards * Math.max(...r.shardShares)), 2),
          r.ackPerSecond,
          `${r.ackP50Ms} / ${r.ackP99Ms}`,
          `${r.delivered} / ${r.accepted}${r.duplicates > 0 ? `, ${r.duplicates} twice` : ""}`,
          r.statementsPerEvent,
          r.rowsWrittenPerEvent,
          r.shardShares.map(pct).join(" "),
          r.writerBusy.map(pct).join(" "),
          pct(r.cpuShare),
          r.eventLoopDelayP99Ms,
          r.loadAverage.join("–"),
        ];
      }),
    ),
    'The busiest shard sets the pace: with this many workspaces the jump hash gives no shard exactly 1 / N of the events (column "events per shard"), and the best N can do is N = 1\'s rate ÷ the largest share (column "best this spread allows": 1 ÷ (N × the largest share)). Writers busy: each shard\'s held time ÷ the run\'s time.',
  ].join("\n\n");
}
