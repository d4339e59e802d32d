/**
 * Section "ack": the first attempt's cost at the ack. The ingress exactly as
 * built beside the same build with FIRST_ATTEMPT=off (the variant is the
 * product's own setting), in one local workerd, under the same load,
 * interleaved round by round so that drift on a shared machine falls on both
 * alike; then both alone in longer rounds, a flood that lasts. The ratios and
 * their targets are computed by report.ts.
 */
import { bundle } from "./build.ts";
import { cpuOf, selfCpuMs } from "./cpu.ts";
import { runLoad } from "./load.ts";
import { applyMigrations, ingressConfig, type Runtime, startRuntime, type WorkerSpec } from "./runtime.ts";
import { add, emptySaid, type Said, since, snapshot, tally } from "./said.ts";
import { BENCH_BOT_TOKEN, BENCH_SIGNING_SECRET, signedEvents } from "./signed-events.ts";
import { quantile, round, sum } from "./stats.ts";

export interface AckOptions {
  /** Measured requests per variant, split evenly over the rounds. */
  readonly requests: number;
  readonly connections: number;
  readonly rounds: number;
  /** Unmeasured requests per variant before the first round. */
  readonly warmup: number;
  /**
   * After the rounds, ingress and ingress-off alone in longer rounds of this many requests each, alternated:
   * the first attempt's cost under a sustained flood rather than in ~1 s rounds from idle.
   */
  readonly sustained: { readonly requests: number; readonly rounds: number };
}

interface Variant {
  readonly name: string;
  readonly meaning: string;
  readonly worker: WorkerSpec;
  /** Every request a new workspace's first input (its placement), not one workspace's. */
  readonly newTeams?: boolean;
}

export interface VariantResult {
  readonly name: string;
  readonly meaning: string;
  readonly requests: number;
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly rpsPerRound: readonly number[];
  readonly p99PerRound: readonly number[];
  readonly statuses: Readonly<Record<string, number>>;
  readonly errors: number;
  /** workerd process CPU per request (ms): the Worker plus the local runtime and local D1, an upper bound on billed CPU. */
  readonly runtimeCpuMsPerRequest: number;
  /** The load generator's own CPU per request (ms), to show it is not the bottleneck. */
  readonly clientCpuMsPerRequest: number;
  /**
   * Outbox rows in D1 after the run vs every 200 it answered (warm-up and
   * sanity check included). Each event has one effect, so the two must be
   * equal: a 200 without its row would be an ack without a durable record.
   */
  readonly durable: { readonly outboxRows: number; readonly answered200: number };
}

export interface AckResult {
  readonly config: AckOptions;
  readonly variants: readonly VariantResult[];
  readonly logLines: Readonly<Record<string, number>>;
  /** Each ingress variant's own account over the measured rounds: each request's first_attempt verdict (inline, or why not). */
  readonly said: Readonly<Record<string, Said>>;
  /** ingress and ingress-off in the sustained rounds (options.sustained), with what the ingress's acks said there. */
  readonly sustained?: {
    readonly ingress: SustainedFigures;
    readonly off: SustainedFigures;
    /** What each one's acks said there (ingress: inline or why not; ingress-off: off). */
    readonly said: Said;
    readonly offSaid: Said;
  };
}

export interface SustainedFigures {
  /** Responses over the sustained rounds. */
  readonly requests: number;
  readonly rps: number;
  readonly p99Ms: number;
  readonly rpsPerRound: readonly number[];
}

const INGRESS_DB = "bench-ingress";

async function variants(): Promise<Variant[]> {
  const ingress = ingressConfig();
  const ingressWorker = (name: string, scriptPath: string): WorkerSpec => ({
    name,
    scriptPath,
    listen: true,
    // With a bot token, as deployed: the first attempt at the ack runs in waitUntil, its Slack calls routed to the fake.
    bindings: { ...ingress.bindings, SLACK_SIGNING_SECRET: BENCH_SIGNING_SECRET, SLACK_BOT_TOKEN: BENCH_BOT_TOKEN },
    outboundService: "fake-slack",
    // Same binding names as production; each ingress variant has its own database.
    d1Databases: Object.fromEntries(Object.keys(ingress.d1Databases).map((binding) => [binding, `${INGRESS_DB}-${name}`])),
    queueProducers: ingress.queueProducers,
  });
  return [
    {
      name: "ingress",
      meaning:
        "ackbox's ingress, exactly as built from workers/ingress: signature, parse, route, one D1 batch (receipt + outbox row), 200; then, in waitUntil, the first attempt at the ack (the Slack call and the fenced finish of the row the batch claimed)",
      worker: ingressWorker("ingress", await bundle("ingress")),
    },
    {
      name: "ingress-off",
      meaning: "the same build with FIRST_ATTEMPT=off: signature, parse, route, one D1 batch, 200; every row enqueued in waitUntil",
      worker: withVars(ingressWorker("ingress-off", await bundle("ingress")), { FIRST_ATTEMPT: "off" }),
    },
    {
      name: "first-sight",
      meaning:
        "ingress-off with every request a workspace's first input, one shard: its placement rides in the ack's own batch (one statement more, no round trip)",
      worker: withVars(ingressWorker("first-sight", await bundle("ingress")), { FIRST_ATTEMPT: "off" }),
      newTeams: true,
    },
    {
      name: "first-sight-2",
      meaning:
        "the same over two shards: the workspaces the rule places on shard 1 (about half) take one round trip to shard 0 (the placement's insert and read, one batch) before their batch on shard 1",
      worker: twoShards(withVars(ingressWorker("first-sight-2", await bundle("ingress")), { FIRST_ATTEMPT: "off", SHARD_COUNT: "2" })),
      newTeams: true,
    },
  ];
}

/** The worker with a second D1 (DB_1), a database of its own like its DB. */
function twoShards(worker: WorkerSpec): WorkerSpec {
  return { ...worker, d1Databases: { ...worker.d1Databases, DB_1: `${INGRESS_DB}-${worker.name}-shard-1` } };
}

export async function benchAck(options: AckOptions, progress: (line: string) => void): Promise<AckResult> {
  const list = await variants();
  const fakeSlack = { name: "fake-slack", scriptPath: await bundle("fakeSlack") };
  const said = emptySaid();
  const runtime = await startRuntime([...list.map((v) => v.worker), fakeSlack], "ack", (_level, message) => tally(said, message));
  try {
    await prepare(runtime, list);
    for (const v of list) await sanityCheck(runtime, v);

    const answered200 = new Map<string, number>(list.map((v) => [v.name, 1])); // the sanity check's
    // The variants alternate, one at a time (an ack's line is said before its answer, so each one's lines are its own),
    // the order flipping each round; every 200 counts toward the durability check below.
    const alternate = async (label: string, perRound: number, rounds: number, among: readonly Variant[] = list) => {
      const runs = new Map(among.map((v) => [v.name, { samples: [] as Sample[], said: emptySaid() as Said }]));
      for (let r = 0; r < rounds; r++) {
        for (const v of r % 2 === 0 ? among : [...among].reverse()) {
          const before = snapshot(said);
          const sample = await oneRun(runtime, v, perRound, options.connections);
          const run = runs.get(v.name) as { samples: Sample[]; said: Said };
          run.said = add(run.said, since(before, said));
          run.samples.push(sample);
          answered200.set(v.name, (answered200.get(v.name) ?? 0) + (sample.statuses["200"] ?? 0));
          progress(
            `ack: ${label} ${r + 1}/${rounds} ${v.name.padEnd(12)} ${round(sample.rps, 0)} req/s, p99 ${round(quantile(sample.latencies, 0.99))} ms`,
          );
        }
      }
      return runs;
    };
    if (options.warmup > 0) await alternate("warm-up", Math.max(options.warmup, options.connections), 1);
    const measured = await alternate("round", Math.max(options.connections, Math.floor(options.requests / options.rounds)), options.rounds);
    // The flood is the first attempt's: ingress and ingress-off alone.
    const flood =
      options.sustained.rounds > 0
        ? await alternate("sustained round", options.sustained.requests, options.sustained.rounds, list.slice(0, 2))
        : undefined;

    const results: VariantResult[] = [];
    for (const v of list) {
      const s = measured.get(v.name)?.samples ?? [];
      const { requests: responses, rps, p50Ms, p99Ms, rpsPerRound } = loadFigures(s);
      const statuses: Record<string, number> = {};
      for (const x of s) for (const [code, n] of Object.entries(x.statuses)) statuses[code] = (statuses[code] ?? 0) + n;
      results.push({
        name: v.name,
        meaning: v.meaning,
        requests: responses,
        rps,
        p50Ms,
        p99Ms,
        rpsPerRound,
        p99PerRound: s.map((x) => round(quantile(x.latencies, 0.99), 1)),
        statuses,
        errors: sum(s.map((x) => x.errors)),
        runtimeCpuMsPerRequest: round(sum(s.map((x) => x.runtimeCpuMs)) / responses, 2),
        clientCpuMsPerRequest: round(sum(s.map((x) => x.clientCpuMs)) / responses, 2),
        durable: await durableCheck(runtime, v, answered200.get(v.name) ?? 0),
      });
    }

    const saidBy = Object.fromEntries(list.map((v) => [v.name, measured.get(v.name)?.said ?? emptySaid()]));
    const figures = (name: string): SustainedFigures => {
      const { requests, rps, p99Ms, rpsPerRound } = loadFigures(flood?.get(name)?.samples ?? []);
      return { requests, rps, p99Ms, rpsPerRound };
    };
    return {
      config: options,
      variants: results,
      logLines: { ...runtime.logCounts },
      said: saidBy,
      ...(flood
        ? {
            sustained: {
              ingress: figures("ingress"),
              off: figures("ingress-off"),
              said: flood.get("ingress")?.said ?? emptySaid(),
              offSaid: flood.get("ingress-off")?.said ?? emptySaid(),
            },
          }
        : {}),
    };
  } finally {
    await runtime.close();
  }
}

/** One variant's samples as one load: responses, req/s over the summed durations, pooled percentiles, req/s by round. */
function loadFigures(s: readonly Sample[]): SustainedFigures & { readonly p50Ms: number } {
  const latencies = s.flatMap((x) => x.latencies);
  const requests = sum(s.map((x) => x.latencies.length));
  return {
    requests,
    rps: round(requests / (sum(s.map((x) => x.durationMs)) / 1000), 1),
    p50Ms: round(quantile(latencies, 0.5), 1),
    p99Ms: round(quantile(latencies, 0.99), 1),
    rpsPerRound: s.map((x) => round(x.rps, 0)),
  };
}

interface Sample {
  readonly latencies: readonly number[];
  readonly statuses: Readonly<Record<string, number>>;
  readonly errors: number;
  readonly durationMs: number;
  readonly rps: number;
  readonly runtimeCpuMs: number;
  readonly clientCpuMs: number;
}

async function oneRun(runtime: Runtime, v: Variant, count: number, connections: number): Promise<Sample> {
  const requests = await signedEvents(count + connections, { newTeams: v.newTeams === true });
  const cpu0 = cpuOf(runtime.pids);
  const self0 = selfCpuMs();
  const result = await runLoad({ url: runtime.url(v.worker.name).href, connections, count, requests, maxSeconds: 120 });
  const runtimeCpuMs = cpuOf(runtime.pids) - cpu0;
  const clientCpuMs = selfCpuMs() - self0;
  // Let this variant's waitUntil work (queue sends, the peer's Slack calls) finish before the next one is measured.
  await settle(runtime);
  return {
    latencies: result.latenciesMs,
    statuses: result.statuses,
    errors: result.errors,
    durationMs: result.durationMs,
    rps: result.responses / (result.durationMs / 1000),
    runtimeCpuMs,
    clientCpuMs,
  };
}

/** Waits (bounded) until the runtime's CPU goes quiet. */
async function settle(runtime: Runtime): Promise<void> {
  let last = cpuOf(runtime.pids);
  for (let i = 0; i < 20; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const now = cpuOf(runtime.pids);
    if (now - last < 5) return;
    last = now;
  }
}

async function prepare(runtime: Runtime, list: readonly Variant[]): Promise<void> {
  for (const v of list)
    for (const binding of Object.keys(v.worker.d1Databases ?? {})) await applyMigrations(await runtime.db(binding, v.worker.name));
}

/** One signed event per variant before anything is measured: it must be a 200, or the run would measure an error path. */
async function sanityCheck(runtime: Runtime, v: Variant): Promise<void> {
  const [request] = await signedEvents(1);
  if (!request) throw new Error("no request prepared");
  const response = await fetch(new URL(request.path, runtime.url(v.worker.name)), {
    method: "POST",
    headers: request.headers,
    body: request.body,
  });
  const text = await response.text();
  if (response.status !== 200) {
    throw new Error(
      `${v.name} answered ${response.status} to a signed event (${text.slice(0, 200)}); problems: ${runtime.recentProblems.join(" | ")}`,
    );
  }
}

async function durableCheck(runtime: Runtime, v: Variant, answered200: number): Promise<{ outboxRows: number; answered200: number }> {
  let outboxRows = 0;
  for (const binding of Object.keys(v.worker.d1Databases ?? {})) {
    const row = await (await runtime.db(binding, v.worker.name)).prepare("SELECT COUNT(*) AS n FROM outbox").first<{ n: number }>();
    outboxRows += Number(row?.n ?? 0);
  }
  return { outboxRows, answered200 };
}

function withVars(worker: WorkerSpec, vars: Readonly<Record<string, string>>): WorkerSpec {
  return { ...worker, bindings: { ...worker.bindings, ...vars } };
}
