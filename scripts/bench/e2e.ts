/**
 * Section 2, end to end: signed POSTs into the ingress of a local run of both
 * Workers (scripts/bench/dev-harness.ts: one `wrangler dev`, real local D1 and
 * Queues), effects received by a fake Slack on 127.0.0.1. While the ingress
 * is under load: how fast events are accepted, how fast their effects are
 * delivered, and how long each took from its ack to its effect.
 */
import { bundle } from "./build.ts";
import { cpuOf, selfCpuMs } from "./cpu.ts";
import { startFakeSlack } from "./fake-slack.ts";
import { runLoad } from "./load.ts";
import { type LocalRunOptions, startLocalRun } from "./local-run.ts";
import { BENCH_BOT_TOKEN, BENCH_SIGNING_SECRET, signedEvents } from "./signed-events.ts";
import { quantile, ratio, round } from "./stats.ts";

export interface E2eOptions {
  readonly events: number;
  readonly connections: number;
  readonly warmup: number;
  /** How long to wait, after the load, for the last effects. */
  readonly drainTimeoutSeconds: number;
  /** Also run bench-only variants of the pipeline (profiling the consumer's throughput). */
  readonly profile: boolean;
  /**
   * The second as-built pass offers this share of the first pass's accepted
   * rate, steadily: load the ingress without saturating a machine that also
   * runs the consumer, the local D1, the queue and the load generator.
   */
  readonly steadyShare: number;
}

export interface E2eResult {
  readonly config: E2eOptions;
  /** The pipeline as built, the ingress saturated. */
  readonly run: E2eRun;
  /** The pipeline as built, at a steady offered rate (steadyShare of the saturated accepted rate). */
  readonly steady: E2eRun;
  readonly target: { readonly name: string; readonly measured: number; readonly target: string; readonly met: boolean };
  readonly steadyTarget: { readonly name: string; readonly measured: number; readonly target: string; readonly met: boolean };
  /** With --profile: the same load through bench-only variants. */
  readonly profiles: readonly E2eRun[];
}

interface Variant {
  readonly name: string;
  readonly meaning: string;
  readonly run: Pick<LocalRunOptions, "harness" | "consumerBundle" | "outboxConsumer">;
  /** Offered requests per second (none: as fast as the ingress answers). */
  readonly rate?: number;
}

export interface E2eRun {
  readonly name: string;
  readonly meaning: string;
  readonly launcher: string;
  readonly accepted: number;
  readonly statuses: Readonly<Record<string, number>>;
  readonly delivered: number;
  readonly duplicates: number;
  readonly loadSeconds: number;
  readonly acceptedPerSecond: number;
  /** Steady window (from 1 s after the start to the end of the load): effects delivered per second while the ingress is loaded. */
  readonly window: {
    readonly seconds: number;
    readonly acceptedPerSecond: number;
    readonly deliveredPerSecond: number;
    readonly ratio: number;
  };
  /** From the first request to the last effect. */
  readonly allDeliveredSeconds: number;
  /** After the load ended, until the last effect arrived. */
  readonly tailSeconds: number;
  /**
   * From the moment the load generator handed the request to its socket to
   * the fake Slack's first arrival of its effect, both on this process's
   * clock: never negative. (Measured from the 200's arrival at the client it
   * read below zero: under load this process reads the 200 after the fake
   * Slack, in the same process, has already taken the effect.)
   */
  readonly sendToEffectMs: { readonly p50: number; readonly p99: number; readonly max: number };
  readonly ackMs: { readonly p50: number; readonly p99: number };
  /** wrangler + workerd CPU per delivered event (both Workers, local D1, queue, dev proxy): an upper bound. */
  readonly runtimeCpuMsPerEvent: number;
  readonly clientCpuMsPerEvent: number;
}

async function variants(options: E2eOptions): Promise<Variant[]> {
  const list: Variant[] = [
    { name: "as built", meaning: "both Workers and both wrangler files as committed; the ingress saturated", run: { harness: "launcher" } },
  ];
  if (!options.profile) return list;
  const coalescedFinish = await bundle("consumer", {
    name: "consumer-finish-batched",
    replace: { "shared/outbox/fence.ts": "scripts/bench/profile/fence-coalesced.js" },
  });
  list.push(
    {
      name: "as built (bench harness)",
      meaning: "profile baseline: as built, through the same launcher as the variants below",
      run: { harness: "bench" },
    },
    {
      name: "finishes in one D1 batch",
      meaning: "profile: the fenced finishes of rows that complete together share one D1 batch (bench-only fence.ts)",
      run: { harness: "bench", consumerBundle: coalescedFinish },
    },
  );
  return list;
}

export async function benchE2e(options: E2eOptions, progress: (line: string) => void): Promise<E2eResult> {
  const runs: E2eRun[] = [];
  for (const v of await variants(options)) runs.push(await runPipeline(options, v, progress));
  const run = runs[0] as E2eRun;
  const rate = Math.max(1, Math.round(run.acceptedPerSecond * options.steadyShare));
  const steady = await runPipeline(
    options,
    {
      name: `as built, ${rate}/s offered`,
      meaning: `as built; a steady ${rate} requests/s (${Math.round(options.steadyShare * 100)} % of the saturated accepted rate)`,
      run: { harness: "launcher" },
      rate,
    },
    progress,
  );
  return {
    config: options,
    run,
    steady,
    target: {
      name: "delivered / accepted while the ingress is saturated",
      measured: run.window.ratio,
      target: "≥ 0.80",
      met: run.window.ratio >= 0.8,
    },
    steadyTarget: {
      name: `delivered / accepted at a steady ${rate}/s (${Math.round(options.steadyShare * 100)} % of saturation)`,
      measured: steady.window.ratio,
      target: "≥ 0.80",
      met: steady.window.ratio >= 0.8,
    },
    profiles: runs.slice(1),
  };
}

async function runPipeline(options: E2eOptions, variant: Variant, progress: (line: string) => void): Promise<E2eRun> {
  const slack = await startFakeSlack();
  progress(`e2e [${variant.name}]: starting both Workers (wrangler dev, two configs)`);
  const dev = await startLocalRun({
    label: "e2e",
    vars: { SLACK_SIGNING_SECRET: BENCH_SIGNING_SECRET, SLACK_BOT_TOKEN: BENCH_BOT_TOKEN, SLACK_API_URL: slack.apiUrl },
    ...variant.run,
  }).catch(async (error: unknown) => {
    await slack.close();
    throw error;
  });
  try {
    if (options.warmup > 0) {
      const warm = await signedEvents(options.warmup + options.connections);
      const w = await runLoad({
        url: dev.url,
        connections: Math.min(options.connections, options.warmup),
        count: options.warmup,
        requests: warm,
      });
      const ok = w.statuses["200"] ?? 0;
      if (ok !== options.warmup)
        throw new Error(`e2e warm-up: ${JSON.stringify(w.statuses)}; last lines:\n${dev.recentOutput().slice(-10).join("\n")}`);
      if (!(await slack.waitForDistinct(ok, 30_000))) throw new Error(`e2e warm-up: only ${slack.distinct.size} of ${ok} effects arrived`);
    }
    const before = slack.distinct.size;
    const requests = await signedEvents(options.events + options.connections);
    const cpu0 = cpuOf(dev.pids());
    const self0 = selfCpuMs();
    progress(`e2e [${variant.name}]: ${options.events} signed events, ${options.connections} connections`);
    const start = performance.now();
    const load = await runLoad({
      url: dev.url,
      connections: options.connections,
      count: options.events,
      requests,
      maxSeconds: 300,
      ...(variant.rate === undefined ? {} : { rate: variant.rate }),
    });
    const loadEnd = start + load.durationMs;
    const ackAt = new Map<string, number>();
    const sentAt = new Map<string, number>();
    for (const c of load.completions) {
      const r = requests[c.index];
      if (c.status === 200 && r) {
        ackAt.set(r.ts, c.at);
        sentAt.set(r.ts, c.sentAt);
      }
    }
    const accepted = ackAt.size;
    await slack.waitForDistinct(before + accepted, options.drainTimeoutSeconds * 1000);
    const runtimeCpuMs = cpuOf(dev.pids()) - cpu0;
    const clientCpuMs = selfCpuMs() - self0;

    const firstArrival = new Map<string, number>();
    let arrivalsForLoad = 0;
    for (const a of slack.arrivals) {
      if (!ackAt.has(a.key)) continue;
      arrivalsForLoad += 1;
      if (!firstArrival.has(a.key)) firstArrival.set(a.key, a.at);
    }
    const latencies = [...firstArrival].map(([key, at]) => at - (sentAt.get(key) as number));
    // The loaded window skips the start-up (1 s, or a fifth of a short run), when nothing can have been delivered yet.
    const windowStart = start + Math.min(1000, load.durationMs / 5);
    const inWindow = (t: number) => t >= windowStart && t <= loadEnd;
    const windowSeconds = Math.max(0.001, (loadEnd - windowStart) / 1000);
    const acceptedInWindow = [...ackAt.values()].filter(inWindow).length;
    const deliveredInWindow = [...firstArrival.values()].filter(inWindow).length;
    const lastArrival = Math.max(...firstArrival.values());
    const w = {
      seconds: round(windowSeconds, 2),
      acceptedPerSecond: round(acceptedInWindow / windowSeconds, 1),
      deliveredPerSecond: round(deliveredInWindow / windowSeconds, 1),
      ratio: round(ratio(deliveredInWindow, acceptedInWindow), 2),
    };
    const result: E2eRun = {
      name: variant.name,
      meaning: variant.meaning,
      launcher: dev.launcher,
      accepted,
      statuses: load.statuses,
      delivered: firstArrival.size,
      duplicates: arrivalsForLoad - firstArrival.size,
      loadSeconds: round(load.durationMs / 1000, 2),
      acceptedPerSecond: round(accepted / (load.durationMs / 1000), 1),
      window: w,
      allDeliveredSeconds: round((lastArrival - start) / 1000, 2),
      tailSeconds: round((lastArrival - loadEnd) / 1000, 2),
      sendToEffectMs: { p50: round(quantile(latencies, 0.5)), p99: round(quantile(latencies, 0.99)), max: round(Math.max(...latencies)) },
      ackMs: { p50: round(quantile(load.latenciesMs, 0.5)), p99: round(quantile(load.latenciesMs, 0.99)) },
      runtimeCpuMsPerEvent: round(runtimeCpuMs / Math.max(1, firstArrival.size), 2),
      clientCpuMsPerEvent: round(clientCpuMs / Math.max(1, firstArrival.size), 2),
    };
    progress(
      `e2e [${variant.name}]: ${result.delivered}/${accepted} delivered; accepted ${result.acceptedPerSecond}/s, delivered ${w.deliveredPerSecond}/s in the loaded window (×${w.ratio}), send→effect p50 ${result.sendToEffectMs.p50} ms p99 ${result.sendToEffectMs.p99} ms`,
    );
    return result;
  } finally {
    await dev.stop();
    await slack.close();
  }
}
