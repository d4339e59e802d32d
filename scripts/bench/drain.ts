/**
 * Section 5, drain: 10 000 pending rows whose queue messages were all lost.
 * Nothing but the sweeper knows about them: its cron (fired on a timer
 * through the local explorer endpoint, since local crons never fire by
 * themselves) re-enqueues at most SWEEP_BATCH_SIZE × SWEEP_MAX_STEPS rows per
 * tick, and the consumer delivers them to a fake Slack. Measured: the time
 * until every row's effect has arrived, the rows and wall time of each tick,
 * and (through the cost probe) what one full tick spends against the
 * Workers limits.
 */
import { parseSettings } from "../../shared/settings.ts";
import { startFakeSlack } from "./fake-slack.ts";
import { startLocalRun } from "./local-run.ts";
import { type StatementRecord, startProbe } from "./probe-host.ts";
import { consumerConfig } from "./runtime.ts";
import { BENCH_BOT_TOKEN, BENCH_SIGNING_SECRET } from "./signed-events.ts";
import { totals } from "./statements.ts";
import { quantile, round } from "./stats.ts";

export interface DrainOptions {
  readonly rows: number;
  /** Time between the end of one tick and the start of the next (production: 60 s). */
  readonly tickIntervalMs: number;
  readonly timeoutSeconds: number;
}

export interface DrainResult {
  readonly config: DrainOptions;
  readonly launcher: string;
  readonly settings: { readonly sweepBatchSize: number; readonly sweepMaxSteps: number; readonly rowsPerTickBound: number };
  readonly delivered: number;
  readonly duplicates: number;
  readonly drained: boolean;
  /** First tick fired → last effect arrived. */
  readonly drainSeconds: number;
  readonly ticks: number;
  /** Rows each tick re-enqueued (the sweep's own log line), in order. */
  readonly rowsPerTick: readonly number[];
  readonly tickWallMs: { readonly p50: number; readonly max: number };
  /** Effects per second, first to last arrival. */
  readonly consumerPerSecond: number;
  /** At one tick a minute: ⌈rows ÷ rows per tick⌉ ticks, the consumer delivering behind them (derived from the measured figures). */
  readonly projectedAtProductionCadenceSeconds: number;
  /** One tick with more stale rows than its bound, through the cost probe (real code, metered D1, counting queue). */
  readonly fullTick: {
    readonly staleRows: number;
    readonly taken: number;
    readonly d1Statements: number;
    readonly rowsRead: number;
    readonly rowsWritten: number;
    readonly sendBatchCalls: number;
    readonly wallMs: number;
    readonly runtimeCpuMs: number;
  };
  readonly limits: readonly { readonly name: string; readonly measured: string; readonly limit: string; readonly within: boolean }[];
}

/** Workers Paid limits (https://developers.cloudflare.com/d1/platform/limits/, https://developers.cloudflare.com/workers/platform/limits/). */
const D1_QUERIES_PER_INVOCATION = 1000;
const CRON_CPU_DEFAULT_MS = 30_000;

function seedSql(rows: number, now: number): string {
  // Lost messages: enqueued two minutes ago, their sweep_at a minute ago, so the sweep owes every one of them.
  return `WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < ${rows})
INSERT INTO outbox (idempotency_key, receipt_id, team_id, effect, payload, status, attempts,
                    next_attempt_at, enqueued_at, sweep_at, created_at, updated_at)
SELECT 'drain' || i || ':eyes', 'drain' || i, 'T0DRAIN', 'reactions.add',
       '{"channel":"C0DRAIN","timestamp":"1764500000.' || printf('%06d', i) || '","name":"eyes"}',
       'pending', 0, ${now - 120_000}, ${now - 120_000}, ${now - 60_000}, ${now - 120_000}, ${now - 120_000}
  FROM seq;
`;
}

export async function benchDrain(options: DrainOptions, progress: (line: string) => void): Promise<DrainResult> {
  const parsed = parseSettings(consumerConfig().bindings);
  if (!parsed.ok) throw new Error(`consumer settings: ${parsed.errors.join("; ")}`);
  const { sweepBatchSize, sweepMaxSteps } = parsed.settings;
  const bound = sweepBatchSize * sweepMaxSteps;

  const fullTick = await measureFullTick(bound + sweepBatchSize, progress);

  const slack = await startFakeSlack();
  progress("drain: starting both Workers (scripts/local's startPipeline, no cron timer)");
  const dev = await startLocalRun({
    label: "drain",
    vars: { SLACK_SIGNING_SECRET: BENCH_SIGNING_SECRET, SLACK_BOT_TOKEN: BENCH_BOT_TOKEN, SLACK_API_URL: slack.apiUrl },
  }).catch(async (error: unknown) => {
    await slack.close();
    throw error;
  });
  try {
    progress(`drain: seeding ${options.rows} pending rows whose queue messages were lost`);
    await dev.execute(seedSql(options.rows, Date.now()));
    const tickMs: number[] = [];
    const started = performance.now();
    const deadline = started + options.timeoutSeconds * 1000;
    let drained = false;
    while (performance.now() < deadline) {
      const tick = await dev.fireCron();
      if (!tick.ok)
        throw new Error(`drain: the cron call failed (${tick.status}); last lines:\n${dev.recentOutput().slice(-10).join("\n")}`);
      tickMs.push(tick.ms);
      drained = await slack.waitForDistinct(options.rows, options.tickIntervalMs);
      if (drained) break;
      progress(`drain: ${tickMs.length} ticks, ${slack.distinct.size}/${options.rows} delivered`);
    }
    // The sweep logs its report when the tick ends; give the last lines a moment to be printed.
    await new Promise((r) => setTimeout(r, 500));
    const sweeps = dev.records("sweep").map((r) => Number(r.reenqueued ?? 0));
    const arrivals = slack.arrivals.filter((a) => a.key.startsWith("1764500000."));
    const first = Math.min(...arrivals.map((a) => a.at));
    const last = Math.max(...arrivals.map((a) => a.at));
    const delivered = new Set(arrivals.map((a) => a.key)).size;
    const consumerPerSecond = delivered / Math.max(0.001, (last - first) / 1000);
    const perTick = Math.max(1, ...sweeps);
    const ticksNeeded = Math.ceil(options.rows / perTick);
    const projected = Math.max((ticksNeeded - 1) * 60 + perTick / consumerPerSecond, options.rows / consumerPerSecond);
    progress(`drain: ${delivered}/${options.rows} delivered in ${round((last - started) / 1000, 1)} s over ${tickMs.length} ticks`);
    return {
      config: options,
      launcher: dev.launcher,
      settings: { sweepBatchSize, sweepMaxSteps, rowsPerTickBound: bound },
      delivered,
      duplicates: arrivals.length - delivered,
      drained,
      drainSeconds: round((last - started) / 1000, 1),
      ticks: tickMs.length,
      rowsPerTick: sweeps,
      tickWallMs: { p50: round(quantile(tickMs, 0.5)), max: round(Math.max(...tickMs)) },
      consumerPerSecond: round(consumerPerSecond, 1),
      projectedAtProductionCadenceSeconds: round(projected, 0),
      fullTick,
      limits: [
        {
          name: "rows re-enqueued per tick",
          measured: `max ${Math.max(0, ...sweeps)} (drain run), ${fullTick.taken} (probe, ${fullTick.staleRows} stale)`,
          limit: `SWEEP_BATCH_SIZE × SWEEP_MAX_STEPS = ${bound}`,
          within: Math.max(0, ...sweeps) <= bound && fullTick.taken <= bound,
        },
        {
          name: "D1 queries in one full tick",
          measured: String(fullTick.d1Statements),
          limit: `${D1_QUERIES_PER_INVOCATION} per invocation (Workers Paid)`,
          within: fullTick.d1Statements <= D1_QUERIES_PER_INVOCATION,
        },
        {
          name: "wall time of one full tick (local; includes local D1 — CPU is less)",
          measured: `${fullTick.wallMs} ms in the probe, ${round(Math.max(...tickMs))} ms max through wrangler dev`,
          limit: `${CRON_CPU_DEFAULT_MS / 1000} s CPU per cron invocation (default)`,
          within: fullTick.wallMs < CRON_CPU_DEFAULT_MS && Math.max(...tickMs) < CRON_CPU_DEFAULT_MS,
        },
      ],
    };
  } finally {
    await dev.stop();
    await slack.close();
  }
}

async function measureFullTick(staleRows: number, progress: (line: string) => void): Promise<DrainResult["fullTick"]> {
  progress(`drain: one tick over ${staleRows} stale rows, metered (probe)`);
  const probe = await startProbe("drain");
  try {
    const now = Date.now();
    await probe.call("/seed", { db: "ackbox", status: "pending", count: staleRows, at: now, from: 0 });
    const tick = await probe.call<{ records: StatementRecord[]; ids: number[]; sendCalls: { sendBatch: number }; wallMs: number }>(
      "/ackbox/tick",
      {
        at: now,
      },
    );
    const t = totals(tick.records);
    return {
      staleRows,
      taken: tick.ids.length,
      d1Statements: t.statements,
      rowsRead: t.rowsRead,
      rowsWritten: t.rowsWritten,
      sendBatchCalls: tick.sendCalls.sendBatch,
      wallMs: tick.wallMs,
      runtimeCpuMs: round(tick.cpuMs, 0),
    };
  } finally {
    await probe.close();
  }
}
