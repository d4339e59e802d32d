/**
 * The command line of `npm run bench`, and the counts of a full run and of a
 * smoke run. Every count is bounded; every wait has a timeout.
 */
import type { AckOptions } from "./ack.ts";
import type { BurstOptions } from "./burst.ts";
import type { CostOptions } from "./cost.ts";
import type { DrainOptions } from "./drain.ts";
import type { E2eOptions } from "./e2e.ts";
import type { FlatOptions } from "./flat.ts";
import type { LatencyOptions } from "./latency.ts";
import type { PipelineOptions } from "./pipeline.ts";
import type { ShardsOptions } from "./shards.ts";

export const PARTS = ["ack", "cost", "flat", "latency", "pipeline", "e2e", "drain", "burst", "shards"] as const;
export type Part = (typeof PARTS)[number];

export interface Counts {
  readonly ack: AckOptions;
  readonly e2e: E2eOptions;
  readonly cost: CostOptions;
  readonly flat: FlatOptions;
  readonly drain: DrainOptions;
  readonly burst: BurstOptions;
  readonly latency: LatencyOptions;
  readonly pipeline: PipelineOptions;
  readonly shards: ShardsOptions;
}

export interface Options {
  readonly parts: readonly Part[];
  readonly smoke: boolean;
  readonly profile: boolean;
  readonly json: boolean;
  /** Where the JSON goes; undefined: nowhere. */
  readonly out: string | undefined;
  /** Where the markdown report goes; undefined: nowhere. */
  readonly markdown: string | undefined;
  /** Replace the generated part of docs/benchmarks.md with this run's report. */
  readonly docs: boolean;
  readonly counts: Counts;
  readonly help: boolean;
}

/** The `npm start` child of the pipeline section listens here (BENCH_PIPELINE_PORT; never npm start's 8787). */
const PIPELINE_PORT = Number(process.env.BENCH_PIPELINE_PORT ?? 8799);
/** BENCH_CPU_PROF_DIR: the pipeline section's `npm start` writes a V8 CPU profile of its Node side there. */
const CPU_PROF = process.env.BENCH_CPU_PROF_DIR ? { cpuProfileDir: process.env.BENCH_CPU_PROF_DIR } : {};

export function fullCounts(profile: boolean): Counts {
  return {
    ack: { requests: 3000, connections: 20, rounds: 6, warmup: 300, profile, sustained: { requests: 3000, rounds: 2 } },
    e2e: { events: 3000, connections: 20, warmup: 100, drainTimeoutSeconds: 90, profile, steadyShare: 0.5 },
    cost: { events: 200, lostEvents: 50, batchSize: 10 },
    flat: { levels: [0, 100_000, 1_000_000], staleRows: 200, claimRows: 10, noteClaimLimit: 25 },
    drain: { rows: 10_000, tickIntervalMs: 2000, timeoutSeconds: 240 },
    burst: { eventCounts: [300, 1000], channelCounts: [1, 10], perChannelPerSecond: 1, burst: 3, callLatencyMs: 50, capSeconds: 7200 },
    latency: { saturate: 1000, events: 400, connections: 20, lightRate: 10, rounds: 2 },
    pipeline: { requests: 1000, connections: 20, rounds: 3, port: PIPELINE_PORT, maxSeconds: 120, idleSampleMs: 3000, ...CPU_PROF },
    shards: { shardCounts: [1, 2, 4], events: 1000, connections: 32, teams: 1001, rounds: 3, holdMs: 5, maxSeconds: 120 },
  };
}

export function smokeCounts(profile: boolean): Counts {
  return {
    ack: { requests: 120, connections: 4, rounds: 2, warmup: 20, profile, sustained: { requests: 60, rounds: 2 } },
    e2e: { events: 60, connections: 4, warmup: 8, drainTimeoutSeconds: 30, profile, steadyShare: 0.5 },
    cost: { events: 10, lostEvents: 4, batchSize: 10 },
    flat: { levels: [0, 1000, 5000], staleRows: 20, claimRows: 5, noteClaimLimit: 25 },
    drain: { rows: 300, tickIntervalMs: 500, timeoutSeconds: 60 },
    burst: { eventCounts: [40], channelCounts: [1, 10], perChannelPerSecond: 1, burst: 3, callLatencyMs: 50, capSeconds: 1200 },
    latency: { saturate: 40, events: 20, connections: 4, lightRate: 10, rounds: 1 },
    pipeline: { requests: 40, connections: 4, rounds: 1, port: PIPELINE_PORT, maxSeconds: 60, idleSampleMs: 500, ...CPU_PROF },
    shards: { shardCounts: [1, 2, 4], events: 60, connections: 4, teams: 21, rounds: 1, holdMs: 1, maxSeconds: 30 },
  };
}

export const HELP = `npm run bench -- [options]

Measures ackbox on this machine, loopback only, bounded in count and time, and
prints a markdown report (docs/benchmarks.md explains every figure).

  --only <parts>   comma-separated subset of: ${PARTS.join(", ")} (default: all)
                     ack    the ack path beside a trivial Worker, a bare D1 insert and a slack-edge app; then the ingress
                            with and without its first attempt in longer rounds (a sustained flood)
                     cost   D1 rows, queue operations and dollars per event, beside the design note's statements
                     flat   rows read by a sweep tick and a claim with 0 / 100 000 / 1 000 000 done rows
                     latency ack→effect p50/p99, ackbox (ingress + consumer as built) beside slack-edge's lazy listener,
                            at a light load and at half of each one's saturation, each offered steady
                            and as per-second rushes
                     pipeline the whole local pipeline through \`npm start\` (consumer, sweeper timer, log printer):
                            signed events delivered/s (accepted and effect arrived) ÷ GET /healthz/s at concurrency 20,
                            alternated rounds, each load settled before the next; acked/s beside it; FIRST_ATTEMPT=off beside it,
                            and two floors under plain wrangler dev: queue-first with no outbox, and a minimal durable outbox
                            (BENCH_PIPELINE_PORT: its port, default 8799; BENCH_CPU_PROF_DIR: a CPU profile of npm start's Node)
                     e2e    both Workers (wrangler dev): delivered vs accepted under load, ack→effect latency
                     drain  10 000 pending rows with lost messages: sweeper + consumer drain time, per-tick bound
                     burst  300 and 1 000 events into one channel and over 10, against Slack's per-channel limit (virtual time):
                            delivered, dead, 429 share, drain ÷ ideal; the policy before issue 11 beside ackbox's
                     shards the outbox over N = 1, 2, 4 D1s, each a simulated single writer (every statement held 5 ms):
                            events delivered/s and ack p50/p99 per N under the same load, rows written per event, CPU share
  --smoke          tiny counts (about four minutes), for CI: checks the suite runs, not the figures
  --profile        also run bench-only variants (ack path and pipeline) that price each part
  --json           print the JSON result instead of the markdown (progress goes to stderr)
  --out <file>     write the JSON result there (default: docs/benchmarks.json on a full run, nothing with --smoke)
  --markdown <file> write the markdown report there too
  --docs           put the report into docs/benchmarks.md (between its "bench:begin" and "bench:end" markers)
  --no-write       write no file
  --help           this text

A full run takes a few minutes; --profile adds about as much again. Absolute
figures drift on shared machines: compare the ratios, which are measured side
by side in one run.`;

export function parseOptions(argv: readonly string[]): Options {
  let parts: Part[] = [...PARTS];
  let smoke = false;
  let profile = false;
  let json = false;
  let help = false;
  let out: string | null | undefined;
  let markdown: string | undefined;
  let noWrite = false;
  let docs = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const value = () => {
      const v = argv[++i];
      if (v === undefined || v.startsWith("--")) throw new Error(`${arg} needs a value`);
      return v;
    };
    switch (arg) {
      case "--only": {
        const wanted = value()
          .split(",")
          .map((p) => p.trim())
          .filter(Boolean);
        const unknown = wanted.filter((p) => !(PARTS as readonly string[]).includes(p));
        if (unknown.length > 0) throw new Error(`unknown part(s): ${unknown.join(", ")} (known: ${PARTS.join(", ")})`);
        parts = PARTS.filter((p) => wanted.includes(p));
        break;
      }
      case "--smoke":
        smoke = true;
        break;
      case "--profile":
        profile = true;
        break;
      case "--json":
        json = true;
        break;
      case "--out":
        out = value();
        break;
      case "--markdown":
        markdown = value();
        break;
      case "--docs":
        docs = true;
        break;
      case "--no-write":
        noWrite = true;
        break;
      case "--help":
      case "-h":
        help = true;
        break;
      default:
        throw new Error(`unknown option ${arg} (see --help)`);
    }
  }
  const defaultOut = smoke ? undefined : "docs/benchmarks.json";
  return {
    parts,
    smoke,
    profile,
    json,
    help,
    out: noWrite ? undefined : (out ?? defaultOut),
    markdown: noWrite ? undefined : markdown,
    docs: docs && !noWrite,
    counts: smoke ? smokeCounts(profile) : fullCounts(profile),
  };
}
