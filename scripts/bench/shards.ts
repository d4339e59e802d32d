/**
 * Section "shards": does splitting the outbox over N D1 databases multiply
 * what ackbox delivers? In production each D1 is one writer that processes
 * queries one at a time; locally every D1 is SQLite on this machine's 2 CPUs,
 * so the property is put back by simulation (single-writer-d1.ts): each
 * shard's statements are served one at a time, each held `holdMs`. The hold
 * is chosen so that the databases, not the CPUs, are the bottleneck at N = 4;
 * the process's CPU share during each run is reported to show it.
 *
 * The product's own code runs (shards-sim.ts): the ingress's fetch entry
 * (real signature, the real routing by jump hash) and the consumer's queue
 * entry (per-shard groups, deliverBatch), every effect through the queue
 * (FIRST_ATTEMPT=off: the consumer's delivery is what is measured). Slack is
 * a fake on 127.0.0.1 (fake-slack.ts); an event is delivered when its effect
 * arrives there.
 *
 * The same load at every N: the same teams (an odd count, so each team sends
 * both kinds of event), the same number of events, the same number of
 * concurrent senders; the shard counts alternate their order round by round.
 * Every database starts empty (migrations only) in every run.
 */

import { loadavg } from "node:os";
import { resolve } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import { routingKeyOf, shardIndexOf } from "../../shared/shards/route.ts";
import { ROOT } from "./build.ts";
import { startFakeSlack } from "./fake-slack.ts";
import { BENCH_BOT_TOKEN, BENCH_CHANNEL, BENCH_SIGNING_SECRET, signedEvents } from "./signed-events.ts";
import { sqliteD1 } from "./sqlite-d1.ts";
import { quantile, round, sum } from "./stats.ts";

export interface ShardsOptions {
  readonly shardCounts: readonly number[];
  /** Events per run (every N, every round). */
  readonly events: number;
  /** Concurrent senders: each sends its next event when its previous one is answered. */
  readonly connections: number;
  /** Distinct workspaces the events come from, in turn (odd: see above). */
  readonly teams: number;
  readonly rounds: number;
  /** The simulated writer's time per statement, ms. */
  readonly holdMs: number;
  /** Ceiling of one run's load and of its drain, s. */
  readonly maxSeconds: number;
}

/** The consumer's wrangler.toml (max_batch_size, max_batch_timeout) and Cloudflare's default ceiling of concurrent consumer invocations. */
const QUEUE = { maxBatchSize: 100, maxBatchTimeoutMs: 1000, maxConcurrency: 250 } as const;

interface Sample {
  readonly shards: number;
  readonly round: number;
  readonly events: number;
  readonly accepted: number;
  readonly delivered: number;
  /** Effects that arrived at the fake Slack more than once. */
  readonly duplicates: number;
  /** Events delivered ÷ (first request → last delivery): the whole run, every writer's last statement included. */
  readonly deliveredPerSecond: number;
  readonly ackPerSecond: number;
  readonly ackMs: readonly number[];
  readonly statements: number;
  readonly calls: number;
  readonly rowsWritten: number;
  readonly executeMs: number;
  /** Each shard's statements ÷ (its hold capacity over the run): how busy each writer was. */
  readonly writerBusy: readonly number[];
  readonly cpuShare: number;
  readonly eventLoopDelayP99Ms: number;
  readonly loadAverage: number;
  readonly invocations: number;
  readonly retried: number;
  readonly wallSeconds: number;
}

export interface ShardsRow {
  readonly shards: number;
  readonly deliveredPerSecond: number;
  readonly deliveredPerSecondByRound: readonly number[];
  readonly ackPerSecond: number;
  readonly ackP50Ms: number;
  readonly ackP99Ms: number;
  readonly delivered: number;
  readonly duplicates: number;
  readonly accepted: number;
  readonly statementsPerEvent: number;
  readonly rowsWrittenPerEvent: number;
  /** Share of the events routed to each shard. */
  readonly shardShares: readonly number[];
  /** Mean writer busy share over the runs, per shard. */
  readonly writerBusy: readonly number[];
  /** process.cpuUsage() ÷ wall over the runs: 1 = one CPU fully used (the JS thread's ceiling). */
  readonly cpuShare: number;
  readonly eventLoopDelayP99Ms: number;
  readonly loadAverage: readonly number[];
  readonly retried: number;
}

export interface ShardsResult {
  readonly config: ShardsOptions;
  readonly rows: readonly ShardsRow[];
  /** What the local SQLite (in memory) took per statement, measured under the hold, µs. */
  readonly localStatementMicros: number;
  readonly logLines: Readonly<Record<string, number>>;
  readonly targets: readonly { readonly name: string; readonly measured: string; readonly target: string; readonly met: boolean }[];
}

interface Simulation {
  runShards(input: {
    databases: readonly unknown[];
    holdMs: number;
    vars: Readonly<Record<string, string>>;
    requests: readonly { path: string; headers: Readonly<Record<string, string>>; body: string }[];
    connections: number;
    maxSeconds: number;
    queue: typeof QUEUE;
  }): Promise<{
    readonly ackMs: readonly number[];
    readonly statuses: Readonly<Record<string, number>>;
    readonly firstRequestAt: number;
    readonly lastAnswerAt: number;
    readonly writers: readonly { calls: number; statements: number; heldMs: number; executeMs: number }[];
    readonly queue: { readonly invocations: number; readonly retried: number; readonly failedInvocations: number };
    idle(timeoutMs: number): Promise<boolean>;
    stop(): void;
  }>;
}

export async function benchShards(options: ShardsOptions, progress: (line: string) => void): Promise<ShardsResult> {
  // Imported by path: shards-sim.ts is type-checked with the Workers' types, like the Worker entries it runs.
  const sim = (await import(pathToFileURL(resolve(ROOT, "scripts/bench/shards-sim.ts")).href)) as Simulation;
  const teams = Array.from({ length: options.teams }, (_, i) => `T0SHARD${String(i).padStart(4, "0")}`);
  const slack = await startFakeSlack();
  const logLines: Record<string, number> = {};
  const samples: Sample[] = [];
  try {
    for (let r = 0; r < options.rounds; r++) {
      const order = r % 2 === 0 ? options.shardCounts : [...options.shardCounts].reverse();
      for (const shards of order) {
        const sample = await oneRun(sim, options, shards, r, teams, slack, logLines);
        samples.push(sample);
        progress(
          `shards: round ${r + 1}/${options.rounds} N=${shards}: ${sample.delivered}/${sample.events} delivered, ` +
            `${round(sample.deliveredPerSecond, 1)} events/s, ack p99 ${round(quantile(sample.ackMs, 0.99), 1)} ms, ` +
            `CPU ${round(sample.cpuShare * 100, 0)} %, writers busy ${sample.writerBusy.map((b) => `${round(b * 100, 0)} %`).join(" ")}`,
        );
      }
    }
  } finally {
    await slack.close();
  }

  const rows = options.shardCounts.map((shards) =>
    rowOf(
      shards,
      samples.filter((s) => s.shards === shards),
      teams,
    ),
  );
  const statements = sum(samples.map((s) => s.statements));
  const localStatementMicros = round((sum(samples.map((s) => s.executeMs)) / Math.max(1, statements)) * 1000, 1);
  return { config: options, rows, localStatementMicros, logLines, targets: targetsOf(rows) };
}

function targetsOf(rows: readonly ShardsRow[]): ShardsResult["targets"] {
  const one = rows.find((r) => r.shards === 1);
  const targets: { name: string; measured: string; target: string; met: boolean }[] = [];
  if (!one) return targets;
  // The simulation's premise, checked rather than assumed: at the largest N the writers limit, not this process's CPU.
  const widest = rows.reduce((a, b) => (b.shards > a.shards ? b : a), one);
  const busiest = Math.max(...widest.writerBusy);
  targets.push({
    name: `premise at N = ${widest.shards}: the busiest writer busy, the process's CPU (share of one CPU)`,
    measured: `${round(busiest * 100, 0)} %, CPU ${round(widest.cpuShare * 100, 0)} %`,
    target: "writer ≥ 95 %, CPU ≤ 50 %",
    met: busiest >= 0.95 && widest.cpuShare <= 0.5,
  });
  for (const r of rows.filter((r) => r.shards > 1)) {
    const scaling = r.deliveredPerSecond / (r.shards * one.deliveredPerSecond);
    if (r.shards === 4) {
      targets.push({
        name: "events delivered/s at N = 4 ÷ (4 × N = 1's)",
        measured: String(round(scaling, 2)),
        target: "≥ 0.90",
        met: scaling >= 0.9,
      });
    }
    const p99 = r.ackP99Ms / one.ackP99Ms;
    targets.push({
      name: `ack p99 at N = ${r.shards} ÷ N = 1's (flat or lower)`,
      measured: String(round(p99, 2)),
      target: "≤ 1.10",
      met: p99 <= 1.1,
    });
    const rows4 = r.rowsWrittenPerEvent / one.rowsWrittenPerEvent;
    targets.push({
      name: `rows written per event at N = ${r.shards} ÷ N = 1's`,
      measured: `${r.rowsWrittenPerEvent} ÷ ${one.rowsWrittenPerEvent}`,
      target: "= 1 (no dearer)",
      met: rows4 <= 1,
    });
  }
  return targets;
}

function rowOf(shards: number, runs: readonly Sample[], teams: readonly string[]): ShardsRow {
  const acks = runs.flatMap((s) => s.ackMs);
  const accepted = sum(runs.map((s) => s.accepted));
  const shares = Array.from({ length: shards }, () => 0);
  for (const team of teams) {
    const index = shardIndexOf(routingKeyOf({ teamId: team }), shards);
    shares[index] = (shares[index] ?? 0) + 1 / teams.length;
  }
  const loads = runs.map((s) => s.loadAverage);
  return {
    shards,
    // Median of the rounds: one disturbed round on a shared machine does not decide it.
    deliveredPerSecond: round(
      quantile(
        runs.map((s) => s.deliveredPerSecond),
        0.5,
      ),
      1,
    ),
    deliveredPerSecondByRound: runs.map((s) => round(s.deliveredPerSecond, 1)),
    ackPerSecond: round(
      quantile(
        runs.map((s) => s.ackPerSecond),
        0.5,
      ),
      1,
    ),
    ackP50Ms: round(quantile(acks, 0.5), 1),
    ackP99Ms: round(quantile(acks, 0.99), 1),
    delivered: sum(runs.map((s) => s.delivered)),
    duplicates: sum(runs.map((s) => s.duplicates)),
    accepted,
    statementsPerEvent: round(sum(runs.map((s) => s.statements)) / Math.max(1, accepted), 2),
    rowsWrittenPerEvent: round(sum(runs.map((s) => s.rowsWritten)) / Math.max(1, accepted), 2),
    shardShares: shares.map((s) => round(s, 3)),
    writerBusy: shares.map((_, i) => round(sum(runs.map((s) => s.writerBusy[i] ?? 0)) / Math.max(1, runs.length), 2)),
    cpuShare: round(sum(runs.map((s) => s.cpuShare * s.wallSeconds)) / Math.max(0.001, sum(runs.map((s) => s.wallSeconds))), 2),
    eventLoopDelayP99Ms: round(Math.max(...runs.map((s) => s.eventLoopDelayP99Ms)), 1),
    loadAverage: [round(Math.min(...loads), 2), round(Math.max(...loads), 2)],
    retried: sum(runs.map((s) => s.retried)),
  };
}

async function oneRun(
  sim: Simulation,
  options: ShardsOptions,
  shards: number,
  roundIndex: number,
  teams: readonly string[],
  slack: Awaited<ReturnType<typeof startFakeSlack>>,
  logLines: Record<string, number>,
): Promise<Sample> {
  const databases = Array.from({ length: shards }, () => sqliteD1(resolve(ROOT, "migrations")));
  const changesBefore = databases.map(totalChanges);
  const requests = await signedEvents(options.events, { teams });
  const keys = new Set(requests.map((r) => r.ts));
  const arrivalsBefore = slack.arrivals.length;
  const vars = {
    SLACK_SIGNING_SECRET: BENCH_SIGNING_SECRET,
    SLACK_BOT_TOKEN: BENCH_BOT_TOKEN,
    SLACK_API_URL: slack.apiUrl,
    WATCHED_CHANNELS: BENCH_CHANNEL,
    // Every effect through the queue: the consumer's per-shard delivery is what is measured.
    FIRST_ATTEMPT: "off",
  };
  const delay = monitorEventLoopDelay({ resolution: 10 });
  const restore = silenceConsole(logLines);
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  delay.enable();
  let handle: Awaited<ReturnType<Simulation["runShards"]>> | undefined;
  try {
    handle = await sim.runShards({
      databases,
      holdMs: options.holdMs,
      vars,
      requests,
      connections: options.connections,
      maxSeconds: options.maxSeconds,
      queue: QUEUE,
    });
    const accepted = handle.statuses["200"] ?? 0;
    await waitForKeys(slack, keys, arrivalsBefore, accepted, options.maxSeconds * 1000);
    await handle.idle(options.maxSeconds * 1000);
  } finally {
    handle?.stop();
    delay.disable();
    restore();
  }
  const wallMs = performance.now() - wall0;
  const cpu = process.cpuUsage(cpu0);
  const first = new Map<string, number>();
  let arrivals = 0;
  for (const a of slack.arrivals.slice(arrivalsBefore)) {
    if (!keys.has(a.key)) continue;
    arrivals += 1;
    if (!first.has(a.key)) first.set(a.key, a.at);
  }
  const times = [...first.values()].sort((a, b) => a - b);
  const accepted = handle.statuses["200"] ?? 0;
  const rowsWritten = sum(databases.map((db, i) => totalChanges(db) - (changesBefore[i] ?? 0)));
  const runMs = Math.max(1, (times.at(-1) ?? handle.lastAnswerAt) - handle.firstRequestAt);
  return {
    shards,
    round: roundIndex,
    events: options.events,
    accepted,
    delivered: first.size,
    duplicates: arrivals - first.size,
    deliveredPerSecond: first.size / (runMs / 1000),
    ackPerSecond: accepted / ((handle.lastAnswerAt - handle.firstRequestAt) / 1000),
    ackMs: handle.ackMs,
    statements: sum(handle.writers.map((w) => w.statements)),
    calls: sum(handle.writers.map((w) => w.calls)),
    rowsWritten,
    executeMs: sum(handle.writers.map((w) => w.executeMs)),
    writerBusy: handle.writers.map((w) => w.heldMs / runMs),
    cpuShare: (cpu.user + cpu.system) / 1000 / wallMs,
    eventLoopDelayP99Ms: delay.percentile(99) / 1e6,
    loadAverage: loadavg()[0] ?? 0,
    invocations: handle.queue.invocations,
    retried: handle.queue.retried,
    wallSeconds: wallMs / 1000,
  };
}

/** Rows inserted, updated or deleted on this connection since it opened: SQLite's total_changes(), the sum of every write's meta.changes. */
function totalChanges(db: unknown): number {
  const row = (db as { prepare(sql: string): { execute(): { results: { n: number }[] } } }).prepare("SELECT total_changes() AS n").execute()
    .results[0];
  return Number(row?.n ?? 0);
}

async function waitForKeys(
  slack: Awaited<ReturnType<typeof startFakeSlack>>,
  keys: ReadonlySet<string>,
  from: number,
  wanted: number,
  timeoutMs: number,
): Promise<void> {
  const until = performance.now() + timeoutMs;
  while (performance.now() < until) {
    const seen = new Set(
      slack.arrivals
        .slice(from)
        .filter((a) => keys.has(a.key))
        .map((a) => a.key),
    );
    if (seen.size >= wanted) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** The Workers log a JSON line per request; during a run they are counted by level, not printed (stdout is the report). */
function silenceConsole(counts: Record<string, number>): () => void {
  const saved = { log: console.log, info: console.info, warn: console.warn, error: console.error, debug: console.debug };
  for (const level of ["log", "info", "warn", "error", "debug"] as const) {
    console[level] = () => {
      counts[level] = (counts[level] ?? 0) + 1;
    };
  }
  // The Workers' sleep (pacing) is scheduler.wait, which Node lacks.
  const g = globalThis as { scheduler?: unknown };
  const hadScheduler = "scheduler" in g;
  if (!hadScheduler) g.scheduler = { wait: (ms: number) => new Promise((r) => setTimeout(r, ms)) };
  return () => {
    Object.assign(console, saved);
    if (!hadScheduler) delete g.scheduler;
  };
}
