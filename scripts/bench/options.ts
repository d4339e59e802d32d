/**
 * The command line of `npm run bench`, and the counts of a full run and of a
 * smoke run. Every count is bounded; every wait has a timeout.
 */
import type { AckOptions } from "./ack.ts";
import type { AssistantOptions } from "./assistant.ts";
import type { BurstOptions } from "./burst.ts";
import type { LatencyOptions } from "./latency.ts";
import type { PipelineOptions } from "./pipeline.ts";
import type { SpikeOptions } from "./spike.ts";
import type { TimersOptions } from "./timers.ts";

export const PARTS = ["ack", "latency", "pipeline", "spike", "burst", "timers", "assistant"] as const;
export type Part = (typeof PARTS)[number];

export interface Counts {
  readonly ack: AckOptions;
  readonly latency: LatencyOptions;
  readonly pipeline: PipelineOptions;
  readonly spike: SpikeOptions;
  readonly burst: BurstOptions;
  readonly timers: TimersOptions;
  readonly assistant: AssistantOptions;
}

export interface Options {
  readonly parts: readonly Part[];
  readonly smoke: boolean;
  readonly json: boolean;
  /** Where the JSON goes; undefined: nowhere. */
  readonly out: string | undefined;
  /** Replace the generated part of docs/benchmarks.md with this run's report. */
  readonly docs: boolean;
  readonly counts: Counts;
  readonly help: boolean;
}

/** The `npm start` child of the pipeline and spike sections listens here (BENCH_PIPELINE_PORT; never npm start's 8787). */
const PIPELINE_PORT = Number(process.env.BENCH_PIPELINE_PORT ?? 8799);
/** BENCH_CPU_PROF_DIR: the pipeline section's `npm start` writes a V8 CPU profile of its Node side there. */
const CPU_PROF = process.env.BENCH_CPU_PROF_DIR ? { cpuProfileDir: process.env.BENCH_CPU_PROF_DIR } : {};

export function fullCounts(): Counts {
  return {
    ack: { requests: 3000, connections: 20, rounds: 6, warmup: 300, sustained: { requests: 3000, rounds: 2 } },
    latency: { saturate: 1000, events: 400, connections: 20, lightRate: 10, rounds: 2 },
    pipeline: { requests: 1000, connections: 20, rounds: 3, port: PIPELINE_PORT, maxSeconds: 120, idleSampleMs: 3000, ...CPU_PROF },
    // 40 mentions at once, a multiple of the plain consumer's batch (5 locally, 10 on Cloudflare): no partial batch to wait out.
    spike: { events: 40, pairs: 3, port: PIPELINE_PORT, maxSeconds: 120 },
    burst: { eventCounts: [300, 1000], channelCounts: [1, 10], perChannelPerSecond: 1, burst: 3, callLatencyMs: 50, capSeconds: 7200 },
    // 1 min within a 90 s queue delay (queued), 2 and 3 min beyond it (the sweep's): 20 each, over one cron minute.
    timers: {
      horizonsMinutes: [1, 2, 3],
      perHorizon: 20,
      spreadSeconds: 60,
      queueDelayMaxSeconds: 90,
      cronSeconds: 60,
      maxStartSeconds: 120,
    },
    // 5 alone, then 10 a second apart (each answer about 4 s: several streaming at once).
    assistant: { alone: 5, questions: 10, spreadSeconds: 10, maxStartSeconds: 120, maxSeconds: 120 },
  };
}

export function smokeCounts(): Counts {
  return {
    ack: { requests: 40, connections: 4, rounds: 1, warmup: 0, sustained: { requests: 40, rounds: 1 } },
    latency: { saturate: 40, events: 20, connections: 4, lightRate: 10, rounds: 1 },
    pipeline: { requests: 40, connections: 4, rounds: 1, port: PIPELINE_PORT, maxSeconds: 60, idleSampleMs: 500, ...CPU_PROF },
    spike: { events: 5, pairs: 1, port: PIPELINE_PORT, maxSeconds: 60 },
    burst: { eventCounts: [40], channelCounts: [1, 10], perChannelPerSecond: 1, burst: 3, callLatencyMs: 50, capSeconds: 1200 },
    timers: { horizonsMinutes: [1], perHorizon: 4, spreadSeconds: 8, queueDelayMaxSeconds: 90, cronSeconds: 60, maxStartSeconds: 90 },
    assistant: { alone: 1, questions: 2, spreadSeconds: 1, maxStartSeconds: 90, maxSeconds: 60 },
  };
}

export const HELP = `npm run bench -- [options]

Measures ackbox on this machine, loopback only, bounded in count and time, and
prints a markdown report (docs/benchmarks.md explains every figure).

  --only <parts>   comma-separated subset of: ${PARTS.join(", ")} (default: all)
                     ack      the ingress as built beside the same build with FIRST_ATTEMPT=off, in interleaved
                              rounds and in a sustained flood: the first attempt's cost in throughput and p99
                     latency  ack→effect p50/p99, ackbox (ingress + consumer as built) beside slack-edge's lazy
                              listener, at a light load and at half of each one's saturation, steady and in rushes
                     pipeline the whole local pipeline through \`npm start\`: delivered events/s ÷ GET /healthz/s,
                              beside the durable floor (a row before the ack, a claim, a fenced finish) under
                              plain wrangler dev (BENCH_PIPELINE_PORT: its port, default 8799;
                              BENCH_CPU_PROF_DIR: a CPU profile of npm start's Node)
                     spike    40 signed app_mentions sent at once, through \`npm start\` and through the naive
                              design (the durable floor's Workers with a plain queue consumer: the platform's
                              batch defaults), alternated, 3 pairs, each run started afresh and warmed with one
                              burst: ack, ack→effect and send→effect p50, ackbox ÷ naive (about 4 minutes)
                     burst    300 and 1 000 events into one channel and over 10, against Slack's per-channel
                              limit (virtual time): delivered, dead, 429 share, drain ÷ ideal
                     timers   /remind reminders 1, 2 and 3 min ahead through \`npm start\` (cron every 60 s,
                              QUEUE_DELAY_MAX_SECONDS=90: 1 min queued, 2 and 3 min the sweep's): lateness
                              p50/p99 per path (about 5 minutes)
                     assistant through \`npm start\` with its stand-in and the stand-in's fake model (first
                              token after 400 ms), each question in an assistant thread of its own: 5 one at a
                              time, then 10 a second apart while earlier answers stream; per answer the time
                              from the question's ack to its first streamed text ÷ the model's own time to
                              first token (p50/p99 per phase), model calls and Slack calls by method (about
                              two minutes)
  --smoke          tiny counts, for a quick check that the suite runs (not the figures)
  --json           print the JSON result instead of the markdown (progress goes to stderr, so \`> file\` keeps either)
  --out <file>     write the JSON result there (default: docs/benchmarks.json on a full run, nothing with --smoke)
  --docs           put the report into docs/benchmarks.md (between its "bench:begin" and "bench:end" markers)
  --no-write       write no file
  --help           this text

A full run takes a few minutes. Absolute
figures drift on shared machines: compare the ratios, which are measured side
by side in one run.`;

export function parseOptions(argv: readonly string[]): Options {
  let parts: Part[] = [...PARTS];
  let smoke = false;
  let json = false;
  let help = false;
  let out: string | null | undefined;
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
      case "--json":
        json = true;
        break;
      case "--out":
        out = value();
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
    json,
    help,
    out: noWrite ? undefined : (out ?? defaultOut),
    docs: docs && !noWrite,
    counts: smoke ? smokeCounts() : fullCounts(),
  };
}
