/**
 * Section "latency": ack → effect, ackbox against slack-edge's lazy listener
 * doing the same Slack call, side by side in one local runtime (Miniflare, the
 * runtime wrangler dev runs) with both Slack clients pointed at one fake Slack
 * in this process, so an effect's arrival and its event's ack are read on the
 * same clock.
 *
 * - ackbox: the ingress and the consumer exactly as built (bundled from
 *   workers/), real local D1 and Queues, the consumer's queue settings from
 *   its wrangler file. The first attempt at the ack makes the call in the
 *   ingress's waitUntil; the sweep stays the guarantee.
 * - slack-edge: scripts/bench/workers/slack-edge-peer.js, acking and calling
 *   Slack in waitUntil with no durable record.
 *
 * Two offered rates, each variant in turn (alternated): a light rate, and
 * half of the variant's own saturated rate (measured first in the same run);
 * each offered two ways: steady (one request every 1/rate s, paced-load.ts:
 * the targets) and as per-second rushes (autocannon's overallRate:
 * each second's quota at full speed at its start — saturation while a rush
 * lasts; reported beside them, with the same ratios). Latency = the fake
 * Slack's first arrival for an event − the moment its 200 reached the
 * client. The ratios and their targets are computed by report.ts.
 */
import { bundle } from "./build.ts";
import { startFakeSlack } from "./fake-slack.ts";
import { runLoad } from "./load.ts";
import { runPacedLoad } from "./paced-load.ts";
import { applyMigrations, consumerConfig, ingressConfig, type Runtime, startRuntime, type WorkerSpec } from "./runtime.ts";
import { add, emptySaid, type Said, since, snapshot, tally } from "./said.ts";
import { BENCH_BOT_TOKEN, BENCH_SIGNING_SECRET, signedEvents } from "./signed-events.ts";
import { quantile, round } from "./stats.ts";

export interface LatencyOptions {
  /** Requests of the saturating run that finds each variant's rate. */
  readonly saturate: number;
  /** Requests per measured run. */
  readonly events: number;
  readonly connections: number;
  /** The light steady load, requests/s. */
  readonly lightRate: number;
  /** Measured rounds per load (variants alternated within each). */
  readonly rounds: number;
}

export interface LatencyRun {
  readonly variant: string;
  readonly load: string;
  readonly offeredPerSecond: number;
  /** Events answered 200 per second of the runs' wall time (what the variant took of what was offered). */
  readonly achievedPerSecond: number;
  readonly accepted: number;
  /** Requests that got no 200: another status, a connection error or a timeout (each one a missing effect in the figures). */
  readonly failed: number;
  readonly delivered: number;
  readonly ackToEffectMs: { readonly p50: number; readonly p99: number; readonly max: number };
  /** Effects that took longer than SLOW_MS from the ack: the ones that took the queue's path. */
  readonly slow: number;
  /** What the Workers said during this variant's measured runs (ackbox only), counted: where each row went and why. */
  readonly said?: Said;
}

/** An effect slower than this waited somewhere (the queue's path, or an isolate's acks); an inline one takes a few ms. */
const SLOW_MS = 250;

export interface LatencyResult {
  readonly config: LatencyOptions;
  readonly saturatedPerSecond: Readonly<Record<string, number>>;
  readonly runs: readonly LatencyRun[];
  /** The loads, in the order they ran (report.ts pairs ackbox's and slack-edge's run of each). */
  readonly loads: readonly string[];
}

const DB = "bench-latency";

/**
 * How a rate is offered: "even" — one request every 1/rate s (paced-load.ts),
 * a steady load; "rush" — autocannon's overallRate, each second's quota sent
 * at full speed at its start (saturation for part of every second).
 */
type Pacing = "even" | "rush";

export async function benchLatency(options: LatencyOptions, progress: (line: string) => void): Promise<LatencyResult> {
  const slack = await startFakeSlack();
  const ingress = ingressConfig();
  const consumer = consumerConfig();
  const slackVars = { SLACK_BOT_TOKEN: BENCH_BOT_TOKEN, SLACK_API_URL: slack.apiUrl };
  const workers: WorkerSpec[] = [
    {
      name: "ackbox",
      scriptPath: await bundle("ingress"),
      listen: true,
      bindings: { ...ingress.bindings, ...slackVars, SLACK_SIGNING_SECRET: BENCH_SIGNING_SECRET },
      d1Databases: Object.fromEntries(Object.keys(ingress.d1Databases).map((binding) => [binding, DB])),
      queueProducers: ingress.queueProducers,
    },
    {
      name: "ackbox-consumer",
      scriptPath: await bundle("consumer"),
      bindings: { ...consumer.bindings, ...slackVars },
      d1Databases: Object.fromEntries(Object.keys(consumer.d1Databases).map((binding) => [binding, DB])),
      queueProducers: consumer.queueProducers,
      queueConsumers: consumer.queueConsumers,
    },
    {
      name: "slack-edge",
      scriptPath: await bundle("slackEdgePeer"),
      listen: true,
      bindings: { SLACK_SIGNING_SECRET: BENCH_SIGNING_SECRET, SLACK_BOT_TOKEN: BENCH_BOT_TOKEN },
      outboundService: "slack-forward",
    },
    { name: "slack-forward", scriptPath: await bundle("slackForward"), bindings: { TARGET: slack.apiUrl } },
  ];
  let runtime: Runtime | undefined;
  const said = emptySaid();
  try {
    runtime = await startRuntime(workers, "latency", (_level, message) => tally(said, message));
    await applyMigrations(await runtime.db("DB", "ackbox"));
    const variants = ["ackbox", "slack-edge"];
    const saturated: Record<string, number> = {};
    for (const v of variants) {
      const run = await measure(runtime, slack, v, "saturated", options.saturate, options.connections, undefined);
      saturated[v] = run.achievedPerSecond;
      progress(`latency: ${v} saturated at ${run.achievedPerSecond}/s`);
    }
    const runs: LatencyRun[] = [];
    const half = (v: string) => Math.max(1, Math.round((saturated[v] ?? 2) / 2));
    const loads: { name: string; rate: (v: string) => number; pacing: Pacing }[] = [
      { name: `light (${options.lightRate}/s)`, rate: () => options.lightRate, pacing: "even" },
      { name: `light (${options.lightRate}/s), per-second rushes`, rate: () => options.lightRate, pacing: "rush" },
      { name: "half saturation", rate: half, pacing: "even" },
      { name: "half saturation, per-second rushes", rate: half, pacing: "rush" },
    ];
    for (const load of loads) {
      const samples = new Map<string, number[]>(variants.map((v) => [v, []]));
      const saidOf = new Map<string, Said>();
      const totals = new Map<string, { accepted: number; delivered: number; offered: number; failed: number; seconds: number }>();
      for (let r = 0; r < options.rounds; r++) {
        for (const v of r % 2 === 0 ? variants : [...variants].reverse()) {
          const rate = load.rate(v);
          const before = snapshot(said);
          const run = await measure(runtime, slack, v, load.name, options.events, Math.min(options.connections, rate), rate, load.pacing);
          saidOf.set(v, add(saidOf.get(v), since(before, said)));
          samples.get(v)?.push(...run.latencies);
          const t = totals.get(v) ?? { accepted: 0, delivered: 0, offered: rate, failed: 0, seconds: 0 };
          totals.set(v, {
            accepted: t.accepted + run.accepted,
            delivered: t.delivered + run.latencies.length,
            offered: rate,
            failed: t.failed + run.failed,
            seconds: t.seconds + run.seconds,
          });
        }
      }
      for (const v of variants) {
        const l = samples.get(v) ?? [];
        const t = totals.get(v) ?? { accepted: 0, delivered: 0, offered: 0, failed: 0, seconds: 0 };
        const run: LatencyRun = {
          variant: v,
          load: load.name,
          offeredPerSecond: t.offered,
          achievedPerSecond: round(t.accepted / Math.max(0.001, t.seconds), 1),
          accepted: t.accepted,
          failed: t.failed,
          delivered: t.delivered,
          ackToEffectMs: { p50: round(quantile(l, 0.5)), p99: round(quantile(l, 0.99)), max: round(Math.max(...l)) },
          slow: l.filter((ms) => ms > SLOW_MS).length,
          ...(v === "ackbox" ? { said: saidOf.get(v) ?? { firstAttempt: {}, lines: {} } } : {}),
        };
        runs.push(run);
        progress(
          `latency [${v}, ${load.name}]: ${t.delivered}/${t.accepted} delivered, ${t.failed} failed, ack→effect p50 ${run.ackToEffectMs.p50} ms p99 ${run.ackToEffectMs.p99} ms, ${run.slow} over ${SLOW_MS} ms` +
            (run.said ? `; first attempt ${JSON.stringify(run.said.firstAttempt)}; lines ${JSON.stringify(run.said.lines)}` : ""),
        );
      }
    }
    return { config: options, saturatedPerSecond: saturated, runs, loads: loads.map((l) => l.name) };
  } finally {
    await runtime?.close();
    await slack.close();
  }
}

async function measure(
  runtime: Runtime,
  slack: Awaited<ReturnType<typeof startFakeSlack>>,
  variant: string,
  load: string,
  count: number,
  connections: number,
  rate: number | undefined,
  pacing: Pacing = "rush",
): Promise<{ achievedPerSecond: number; accepted: number; failed: number; seconds: number; latencies: number[] }> {
  const requests = await signedEvents(count + connections);
  const before = slack.distinct.size;
  const url = runtime.url(variant).href;
  const result =
    pacing === "even" && rate !== undefined
      ? await runPacedLoad({ url, connections, count, requests, rate, maxSeconds: 120 })
      : await runLoad({ url, connections, count, requests, maxSeconds: 120, ...(rate === undefined ? {} : { rate }) });
  const ackAt = new Map<string, number>();
  for (const c of result.completions) {
    const r = requests[c.index];
    if (c.status === 200 && r) ackAt.set(r.ts, c.at);
  }
  if (!(await slack.waitForDistinct(before + ackAt.size, 60_000))) {
    throw new Error(`latency [${variant}, ${load}]: ${slack.distinct.size - before} of ${ackAt.size} effects arrived`);
  }
  const first = new Map<string, number>();
  for (const a of slack.arrivals) if (ackAt.has(a.key) && !first.has(a.key)) first.set(a.key, a.at);
  const latencies = [...first].map(([key, at]) => at - (ackAt.get(key) as number));
  const seconds = result.durationMs / 1000;
  return {
    achievedPerSecond: round(ackAt.size / seconds, 1),
    accepted: ackAt.size,
    failed: count - ackAt.size,
    seconds,
    latencies,
  };
}
