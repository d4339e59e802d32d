/**
 * Section 1, the ack path: the ingress beside three baselines, in one local
 * workerd, under the same load, interleaved round by round so that drift on
 * a shared machine falls on every variant alike.
 */
import { bundle } from "./build.ts";
import { cpuOf, selfCpuMs } from "./cpu.ts";
import { runLoad } from "./load.ts";
import { applyMigrations, ingressConfig, type Runtime, startRuntime, type WorkerSpec } from "./runtime.ts";
import { add, emptySaid, type Said, since, snapshot, tally } from "./said.ts";
import { BENCH_BOT_TOKEN, BENCH_SIGNING_SECRET, signedEvents } from "./signed-events.ts";
import { quantile, ratio, round, sum } from "./stats.ts";

export interface AckOptions {
  /** Measured requests per variant, split evenly over the rounds. */
  readonly requests: number;
  readonly connections: number;
  readonly rounds: number;
  /** Unmeasured requests per variant before the first round. */
  readonly warmup: number;
  /** Also run bench-only copies of the ingress with one part removed or changed (profiling). */
  readonly profile: boolean;
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
  /** Runs the ingress's own code: the outbox rows it wrote are checked against its 200s. */
  readonly ingressLike?: boolean;
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
   * Ingress-like variants: outbox rows in D1 after the run vs every 200 it
   * answered (warm-up and sanity check included). Each event has one effect,
   * so the two must be equal: a 200 without its row would be an ack without
   * a durable record.
   */
  readonly durable?: { readonly outboxRows: number; readonly answered200: number };
}

export interface AckResult {
  readonly config: AckOptions;
  readonly variants: readonly VariantResult[];
  readonly targets: readonly Target[];
  readonly ratios: Readonly<Record<string, { readonly throughput: number; readonly p99: number }>>;
  readonly logLines: Readonly<Record<string, number>>;
  /** Each ingress variant's own account over the measured rounds: each request's first_attempt verdict (inline, or why not). */
  readonly said: Readonly<Record<string, Said>>;
  /** ingress and ingress-off in the sustained rounds (options.sustained), with what the ingress's acks said there. */
  readonly sustained?: {
    readonly ingress: SustainedFigures;
    readonly off: SustainedFigures;
    readonly ratio: { readonly throughput: number; readonly p99: number };
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

export interface Target {
  readonly name: string;
  readonly measured: number;
  readonly target: string;
  readonly met: boolean;
}

const INGRESS_DB = "bench-ingress";

async function variants(options: AckOptions): Promise<Variant[]> {
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
  const list: Variant[] = [
    {
      name: "floor",
      meaning: "the runtime's floor: reads the body, answers 200; no signature check, no storage",
      worker: { name: "floor", scriptPath: await bundle("floor"), listen: true },
    },
    {
      name: "bare-insert",
      meaning: "the durable floor: reads the body, one bare D1 INSERT (1 row, no index), answers 200 after the commit",
      worker: { name: "bare-insert", scriptPath: await bundle("bareInsert"), listen: true, d1Databases: { DB: "bench-bare" } },
    },
    {
      name: "slack-edge",
      meaning:
        "the non-durable peer: slack-edge 1.3.17 verifies the signature, acks, and posts the reply in waitUntil (a lazy listener) with no durable record",
      worker: {
        name: "slack-edge",
        scriptPath: await bundle("slackEdgePeer"),
        listen: true,
        bindings: { SLACK_SIGNING_SECRET: BENCH_SIGNING_SECRET, SLACK_BOT_TOKEN: BENCH_BOT_TOKEN },
        outboundService: "fake-slack",
      },
    },
    {
      name: "ingress",
      meaning:
        "ackbox's ingress, exactly as built from workers/ingress: signature, parse, route, one D1 batch (receipt + outbox row), 200; then, in waitUntil, the first attempt at the ack (claim, the Slack call, the fenced finish) and the delayed backup message",
      worker: ingressWorker("ingress", await bundle("ingress")),
      ingressLike: true,
    },
    {
      // The same build with the first attempt switched off by its setting: the ack as it was before issue 14, in the same run.
      name: "ingress-off",
      meaning:
        "the same ingress with FIRST_ATTEMPT=off: signature, parse, route, one D1 batch, 200; every row enqueued in waitUntil (the ack before the first attempt)",
      worker: withVars(ingressWorker("ingress-off", await bundle("ingress")), { FIRST_ATTEMPT: "off" }),
      ingressLike: true,
    },
  ];
  if (options.profile) {
    list.push({
      name: "bare-insert+send",
      meaning: "profile baseline: bare-insert plus one queue send of the row id in waitUntil (the least a record-ack-enqueue design pays)",
      worker: {
        name: "bare-insert+send",
        scriptPath: await bundle("bareInsertSend"),
        listen: true,
        d1Databases: { DB: "bench-bare-send" },
        queueProducers: ingress.queueProducers,
      },
    });
    for (const p of PROFILES) {
      list.push({
        name: p.name,
        meaning: p.meaning,
        worker: ingressWorker(p.name, await bundle("ingress", { name: `ingress-${p.name}`, replace: p.replace })),
        ingressLike: true,
      });
    }
  }
  return list;
}

/**
 * Bench-only copies of the ingress, each with one module swapped
 * (scripts/bench/profile/*): what each part of the ack path costs, and what
 * a proposed change would buy. The product files are not touched.
 */
const PROFILES: readonly { name: string; meaning: string; replace: Record<string, string> }[] = [
  {
    name: "ingress-no-enqueue",
    meaning: "profile: the ingress without the queue send in waitUntil (the row stays for the sweep)",
    replace: { "shared/outbox/enqueue.ts": "scripts/bench/profile/enqueue-skipped.js" },
  },
  {
    name: "ingress-send-direct",
    meaning: "profile: the ingress with the queue send not wrapped in p-retry",
    replace: { "shared/outbox/enqueue.ts": "scripts/bench/profile/enqueue-direct.js" },
  },
  {
    name: "ingress-coalesced",
    meaning: "profile: concurrent requests of one isolate share one sendBatch (10 ms window, ≤ 100 ids)",
    replace: { "shared/outbox/enqueue.ts": "scripts/bench/profile/enqueue-coalesced.js" },
  },
  {
    name: "ingress-outbox-only",
    meaning:
      "profile: no receipt row on the ack path; the outbox row's unique key is the dedupe (1 statement, 3 rows written instead of 3 statements, 5 rows)",
    replace: { "shared/outbox/record.ts": "scripts/bench/profile/record-outbox-only.js" },
  },
  {
    name: "ingress-coalesced+outbox-only",
    meaning: "profile: both of the above",
    replace: {
      "shared/outbox/enqueue.ts": "scripts/bench/profile/enqueue-coalesced.js",
      "shared/outbox/record.ts": "scripts/bench/profile/record-outbox-only.js",
    },
  },
  {
    name: "ingress-no-log",
    meaning: "profile: the ingress without its JSON log line per request",
    replace: { "shared/log.ts": "scripts/bench/profile/log-quiet.js" },
  },
  {
    name: "ingress-no-hmac",
    meaning: "profile: the ingress with the HMAC check answered 'ok' (attribution only, never a proposal)",
    replace: { "shared/slack/signature.ts": "scripts/bench/profile/signature-skipped.js" },
  },
  {
    name: "ingress-returning",
    meaning: "profile: the receipt's verdict read from INSERT … RETURNING instead of a SELECT changes() statement (a 2-statement batch)",
    replace: { "shared/outbox/record.ts": "scripts/bench/profile/record-returning.js" },
  },
];

export async function benchAck(options: AckOptions, progress: (line: string) => void): Promise<AckResult> {
  const list = await variants(options);
  const fakeSlack = { name: "fake-slack", scriptPath: await bundle("fakeSlack") };
  const said = emptySaid();
  const runtime = await startRuntime([...list.map((v) => v.worker), fakeSlack], "ack", (_level, message) => tally(said, message));
  try {
    await prepare(runtime, list);
    for (const v of list) await sanityCheck(runtime, v);

    const perRound = Math.max(options.connections, Math.floor(options.requests / options.rounds));
    const samples = new Map<string, Sample[]>(list.map((v) => [v.name, []]));
    const answered200 = new Map<string, number>(list.map((v) => [v.name, 1])); // the sanity check's
    const count200 = (v: Variant, sample: Sample) =>
      answered200.set(v.name, (answered200.get(v.name) ?? 0) + (sample.statuses["200"] ?? 0));

    progress(`ack: warm-up, ${options.warmup} requests per variant`);
    for (const v of list)
      if (options.warmup > 0) count200(v, await oneRun(runtime, v, Math.max(options.warmup, options.connections), options.connections));

    // Each variant's own lines: the variants run one at a time, and an ack's line is said before its answer.
    const saidBy = new Map<string, Said>();
    for (let r = 0; r < options.rounds; r++) {
      // Rotate the order each round: no variant always runs first or last.
      const order = list.map((_, i) => list[(i + r) % list.length] as Variant);
      for (const v of order) {
        const before = snapshot(said);
        const sample = await oneRun(runtime, v, perRound, options.connections);
        saidBy.set(v.name, add(saidBy.get(v.name), since(before, said)));
        samples.get(v.name)?.push(sample);
        count200(v, sample);
        progress(
          `ack: round ${r + 1}/${options.rounds} ${v.name.padEnd(20)} ${round(sample.rps, 0)} req/s, p99 ${round(quantile(sample.latencies, 0.99))} ms`,
        );
      }
    }

    // Its 200s count toward the durability check below: every ack of these rounds must have its row too.
    const sustained = await sustainedPair(runtime, list, options, said, progress, count200);

    const results: VariantResult[] = [];
    for (const v of list) {
      const s = samples.get(v.name) ?? [];
      const { requests: responses, rps, p50Ms, p99Ms, rpsPerRound } = loadFigures(s);
      const statuses: Record<string, number> = {};
      for (const x of s) for (const [code, n] of Object.entries(x.statuses)) statuses[code] = (statuses[code] ?? 0) + n;
      const result: VariantResult = {
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
      };
      results.push(v.ingressLike ? { ...result, durable: await durableCheck(runtime, v, answered200.get(v.name) ?? 0) } : result);
    }

    const by = (name: string) => results.find((r) => r.name === name);
    const ratios: Record<string, { throughput: number; p99: number }> = {};
    const ingress = by("ingress");
    for (const r of results) {
      if (r.name === "ingress" || !ingress) continue;
      ratios[`ingress / ${r.name}`] = { throughput: round(ratio(ingress.rps, r.rps), 2), p99: round(ratio(ingress.p99Ms, r.p99Ms), 2) };
    }
    const bare = by("bare-insert");
    const peer = by("slack-edge");
    const targets: Target[] = [];
    if (ingress && bare) {
      const t = ratio(ingress.rps, bare.rps);
      const p = ratio(ingress.p99Ms, bare.p99Ms);
      targets.push({ name: "ack throughput: ingress / bare-insert", measured: round(t, 2), target: "≥ 0.80", met: t >= 0.8 });
      targets.push({ name: "ack p99: ingress / bare-insert", measured: round(p, 2), target: "≤ 1.25", met: p <= 1.25 });
    }
    const off = by("ingress-off");
    if (ingress && off) {
      // "The first attempt did not make the ack slower": the same build with and without it, side by side.
      // The tolerance is the round-to-round spread of one variant within a run (throughput ±5 %, p99 ±25 % here).
      const t = ratio(ingress.rps, off.rps);
      const p = ratio(ingress.p99Ms, off.p99Ms);
      targets.push({
        name: "first attempt's cost — throughput: ingress / ingress-off",
        measured: round(t, 2),
        target: "≥ 0.95",
        met: t >= 0.95,
      });
      targets.push({ name: "first attempt's cost — p99: ingress / ingress-off", measured: round(p, 2), target: "≤ 1.25", met: p <= 1.25 });
    }
    if (ingress && peer) {
      const t = ratio(ingress.rps, peer.rps);
      const p = ratio(ingress.p99Ms, peer.p99Ms);
      targets.push({ name: "ambition — throughput: ingress / slack-edge", measured: round(t, 2), target: "≈ 1 (parity)", met: t >= 0.95 });
      targets.push({ name: "ambition — p99: ingress / slack-edge", measured: round(p, 2), target: "≈ 1 (parity)", met: p <= 1.05 });
    }
    if (sustained) {
      const { throughput: t, p99: p } = sustained.ratio;
      const rounds = `rounds of ${options.sustained.requests}`;
      targets.push({
        name: `first attempt's cost, sustained (${rounds}) — throughput: ingress / ingress-off`,
        measured: t,
        target: "≥ 0.95",
        met: t >= 0.95,
      });
      targets.push({
        name: `first attempt's cost, sustained (${rounds}) — p99: ingress / ingress-off`,
        measured: p,
        target: "≤ 1.25",
        met: p <= 1.25,
      });
    }
    const measured = Object.fromEntries(list.filter((v) => v.ingressLike).map((v) => [v.name, saidBy.get(v.name) ?? emptySaid()]));
    for (const [name, s] of Object.entries(measured)) {
      progress(`ack: ${name}'s first attempt over the measured rounds ${JSON.stringify(s.firstAttempt)}`);
    }
    return {
      config: options,
      variants: results,
      targets,
      ratios,
      logLines: { ...runtime.logCounts },
      said: measured,
      ...(sustained ? { sustained } : {}),
    };
  } finally {
    await runtime.close();
  }
}

/**
 * ingress and ingress-off alone, alternated, in rounds of options.sustained.requests: a flood that lasts
 * seconds, not a round of ~1 s from idle.
 */
async function sustainedPair(
  runtime: Runtime,
  list: readonly Variant[],
  options: AckOptions,
  said: { firstAttempt: Record<string, number>; lines: Record<string, number> },
  progress: (line: string) => void,
  count200: (v: Variant, sample: Sample) => void,
): Promise<AckResult["sustained"]> {
  const ingress = list.find((v) => v.name === "ingress");
  const off = list.find((v) => v.name === "ingress-off");
  if (!ingress || !off || options.sustained.rounds <= 0) return undefined;
  const samples = new Map<string, Sample[]>([
    [ingress.name, []],
    [off.name, []],
  ]);
  let ingressSaid: Said = emptySaid();
  let offSaid: Said = emptySaid();
  for (let r = 0; r < options.sustained.rounds; r++) {
    const order: Variant[] = r % 2 === 0 ? [ingress, off] : [off, ingress];
    for (const v of order) {
      const before = snapshot(said);
      const sample = await oneRun(runtime, v, options.sustained.requests, options.connections);
      if (v === ingress) ingressSaid = add(ingressSaid, since(before, said));
      else offSaid = add(offSaid, since(before, said));
      samples.get(v.name)?.push(sample);
      count200(v, sample);
      progress(
        `ack: sustained round ${r + 1}/${options.sustained.rounds} ${v.name.padEnd(12)} ${round(sample.rps, 0)} req/s, p99 ${round(quantile(sample.latencies, 0.99))} ms`,
      );
    }
  }
  const figures = (name: string): SustainedFigures => {
    const { requests, rps, p99Ms, rpsPerRound } = loadFigures(samples.get(name) ?? []);
    return { requests, rps, p99Ms, rpsPerRound };
  };
  const a = figures(ingress.name);
  const b = figures(off.name);
  progress(`ack: ingress's first attempt over the sustained rounds ${JSON.stringify(ingressSaid.firstAttempt)}`);
  return {
    ingress: a,
    off: b,
    ratio: { throughput: round(ratio(a.rps, b.rps), 2), p99: round(ratio(a.p99Ms, b.p99Ms), 2) },
    said: ingressSaid,
    offSaid,
  };
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
  const requests = await signedEvents(count + connections);
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
  for (const v of list) {
    if (v.ingressLike) await applyMigrations(await runtime.db("DB", v.worker.name));
  }
  for (const bare of list.filter((v) => v.name.startsWith("bare-insert"))) {
    const db = await runtime.db("DB", bare.worker.name);
    await db.exec("CREATE TABLE IF NOT EXISTS bare_events (id INTEGER PRIMARY KEY, body TEXT NOT NULL, received_at INTEGER NOT NULL)");
  }
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
  const db = await runtime.db("DB", v.worker.name);
  const row = await db.prepare("SELECT COUNT(*) AS n FROM outbox").first<{ n: number }>();
  return { outboxRows: Number(row?.n ?? 0), answered200 };
}

function withVars(worker: WorkerSpec, vars: Readonly<Record<string, string>>): WorkerSpec {
  return { ...worker, bindings: { ...worker.bindings, ...vars } };
}
