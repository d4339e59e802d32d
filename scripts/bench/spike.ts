/**
 * Section "spike": the most ordinary load a Slack app meets — a message that
 * mentions it in a busy channel, a standup at 9:00 — as a new user meets it:
 * N signed app_mentions sent at once (one connection each, all concurrently)
 * to a local run that had nothing to do, ackbox through `npm start` itself
 * beside the naive design, alternated, each on its own and started afresh.
 *
 * - ackbox: cli/project/start.ts as a child (launchNpmStart), as a user runs
 *   it, the consumer's SLACK_API_URL pointed at this process's fake Slack.
 * - naive: the durable floor's Workers (workers/floor-*.js: one D1 row
 *   before the 200, its id sent to the queue in waitUntil, a consumer that
 *   claims, calls Slack and finishes fenced, 6 rows of a batch at once) with
 *   a PLAIN queue consumer: the product's wrangler files, copied into a folder
 *   of this run with the outbox consumer's max_batch_size and
 *   max_batch_timeout taken out, so the platform's defaults apply (locally
 *   Miniflare's: 5 messages, 1 s; on Cloudflare: 10 messages, 5 s). That is
 *   what a team writing `[[queues.consumers]] queue = "…"` gets. A burst
 *   whose size is a multiple of 5 (and of 10) fills whole batches, so the
 *   naive design never waits out a partial batch here: it is met at its best.
 *
 * Each burst is preceded by a warm-up burst of the same size on the same run
 * (uncounted), and everything that one caused is let finish first: its
 * effects, a quiet process tree. Per event,
 * on this process's clock: send (the request handed to its socket), ack (its
 * 200 read), effect (its chat.postMessage's arrival at the fake Slack). The
 * section hands over the samples; report.ts makes the p50s, the ratios and
 * the verdicts.
 */
import { mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readWorkerConfig, WORKER_CONFIGS } from "../../cli/local/config.ts";
import { loadProjectApp } from "../../cli/local/project-app.ts";
import { BENCH_APP, ROOT, WORK_DIR } from "./build.ts";
import { type FakeSlack, startFakeSlack } from "./fake-slack.ts";
import { runLoad } from "./load.ts";
import { acceptedKeys, type Launched, launchFloor, launchNpmStart, waitForKeys, waitQuiet, waitUntilUp } from "./pipeline.ts";
import { signedEvents } from "./signed-events.ts";
import { quantile, round } from "./stats.ts";

export interface SpikeOptions {
  /** Events per burst, all sent at once. */
  readonly events: number;
  /** Bursts per variant, alternated (which goes first alternates by pair). */
  readonly pairs: number;
  /** Port of the run under test (one at a time). */
  readonly port: number;
  /** Every wait's ceiling: start-up, one burst's effects. */
  readonly maxSeconds: number;
}

/** One burst: per event that got its 200, in ms. An event whose effect never arrived has no effect figures. */
export interface SpikeBurst {
  readonly accepted: number;
  /** Requests that got no 200 (another status, an error, a timeout). */
  readonly failed: number;
  readonly delivered: number;
  readonly ackMs: readonly number[];
  readonly ackToEffectMs: readonly number[];
  readonly sendToEffectMs: readonly number[];
  /** ackbox only: the ack's first-attempt verdicts for this burst, as npm start printed them. */
  readonly firstAttempt: Readonly<Record<string, number>>;
}

export interface SpikeVariant {
  readonly variant: string;
  readonly meaning: string;
  readonly bursts: readonly SpikeBurst[];
}

export interface SpikeResult {
  readonly config: SpikeOptions;
  readonly variants: readonly SpikeVariant[];
}

export const SPIKE_ACKBOX = "ackbox";
export const SPIKE_NAIVE = "naive";
const MEANINGS: Record<string, string> = {
  [SPIKE_ACKBOX]:
    "`npm start` as a user runs it: the ingress's one D1 batch before the 200, the first attempt at the ack, the queue, the consumer (workers/consumer/wrangler.toml's batch settings)",
  [SPIKE_NAIVE]:
    "the durable floor's Workers (scripts/bench/workers/floor-*.js) under the product's wrangler files with a plain queue consumer: no max_batch_size or max_batch_timeout, so the platform's defaults (locally 5 messages, 1 s)",
};

export async function benchSpike(options: SpikeOptions, progress: (line: string) => void): Promise<SpikeResult> {
  const plainRoot = writePlainConsumerRoot();
  const appSettings = (await loadProjectApp(ROOT, BENCH_APP)).declaredSettings;
  const bursts = new Map<string, SpikeBurst[]>([
    [SPIKE_ACKBOX, []],
    [SPIKE_NAIVE, []],
  ]);
  try {
    for (let pair = 0; pair < options.pairs; pair++) {
      const order = pair % 2 === 0 ? [SPIKE_ACKBOX, SPIKE_NAIVE] : [SPIKE_NAIVE, SPIKE_ACKBOX];
      for (const variant of order) {
        const burst = await measure(options, (slack) =>
          variant === SPIKE_ACKBOX ? launchNpmStart(options, slack, {}) : launchFloor(options, slack, { root: plainRoot, appSettings }),
        );
        bursts.get(variant)?.push(burst);
        progress(
          `spike [${variant}] pair ${pair + 1}/${options.pairs}: ${burst.delivered}/${burst.accepted} effects (${burst.failed} failed), p50 ack ${median(burst.ackMs)} ms, ack→effect ${median(burst.ackToEffectMs)} ms, send→effect ${median(burst.sendToEffectMs)} ms${verdictsText(burst.firstAttempt)}`,
        );
      }
    }
  } finally {
    rmSync(plainRoot, { recursive: true, force: true });
  }
  return {
    config: options,
    variants: [SPIKE_ACKBOX, SPIKE_NAIVE].map((variant) => ({
      variant,
      meaning: MEANINGS[variant] ?? variant,
      bursts: bursts.get(variant) ?? [],
    })),
  };
}

/** Starts the variant on its own, warms it with one burst, measures the next, stops it. */
async function measure(options: SpikeOptions, launch: (slack: FakeSlack) => Promise<Launched>): Promise<SpikeBurst> {
  const slack = await startFakeSlack();
  let launched: Launched | undefined;
  const boundMs = options.maxSeconds * 1000;
  try {
    launched = await launch(slack);
    const run = launched;
    await waitUntilUp(`${run.base}/healthz`, boundMs, run);
    const burst = async () => {
      // Twice the events: autocannon prepares one request ahead per connection.
      const requests = await signedEvents(2 * options.events, { mentionsOnly: true });
      const load = await runLoad({
        url: run.base,
        connections: options.events,
        count: options.events,
        requests,
        maxSeconds: options.maxSeconds,
      });
      const keys = acceptedKeys(load, requests);
      await waitForKeys(slack, keys, boundMs);
      return { load, requests, keys };
    };
    await burst();
    await waitQuiet(run.tree, boundMs);
    const before = { ...run.verdicts };
    const { load, requests } = await burst();
    const firstArrival = new Map<string, number>();
    for (const a of slack.arrivals) if (!firstArrival.has(a.key)) firstArrival.set(a.key, a.at);
    const ackMs: number[] = [];
    const ackToEffectMs: number[] = [];
    const sendToEffectMs: number[] = [];
    let accepted = 0;
    for (const c of load.completions) {
      if (c.status !== 200) continue;
      accepted++;
      ackMs.push(c.at - c.sentAt);
      const effect = firstArrival.get(requests[c.index]?.ts ?? "");
      if (effect === undefined) continue;
      ackToEffectMs.push(effect - c.at);
      sendToEffectMs.push(effect - c.sentAt);
    }
    return {
      accepted,
      failed: options.events - accepted,
      delivered: ackToEffectMs.length,
      ackMs: ackMs.map(ms),
      ackToEffectMs: ackToEffectMs.map(ms),
      sendToEffectMs: sendToEffectMs.map(ms),
      firstAttempt: Object.fromEntries(
        Object.entries(run.verdicts).flatMap(([k, n]) => (n - (before[k] ?? 0) > 0 ? [[k, n - (before[k] ?? 0)]] : [])),
      ),
    };
  } finally {
    await launched?.stop();
    await slack.close();
  }
}

/**
 * A folder holding the product's two wrangler files, the outbox consumer's batch settings taken out (the
 * platform's defaults then apply), with the migrations and node_modules linked: the naive design's plain
 * consumer, under the same launcher (cli/local/pipeline.ts) as every other run. Checked by reading the copy
 * back with wrangler's own reader.
 */
function writePlainConsumerRoot(): string {
  const root = join(WORK_DIR, `plain-consumer-${process.pid}`);
  rmSync(root, { recursive: true, force: true });
  mkdirSync(join(root, "workers/consumer"), { recursive: true });
  writeFileSync(join(root, WORKER_CONFIGS.ingress), readFileSync(join(ROOT, WORKER_CONFIGS.ingress), "utf8"));
  const consumer = readFileSync(join(ROOT, WORKER_CONFIGS.consumer), "utf8");
  // Only the first [[queues.consumers]] block (the outbox's); the dead-letter queue's keeps its own.
  const at = consumer.indexOf("[[queues.consumers]]");
  const next = consumer.indexOf("[[queues.consumers]]", at + 1);
  const block = consumer.slice(at, next).replace(/^max_batch_(size|timeout) = .*\n/gm, "");
  writeFileSync(join(root, WORKER_CONFIGS.consumer), `${consumer.slice(0, at)}${block}${consumer.slice(next)}`);
  symlinkSync(join(ROOT, "migrations"), join(root, "migrations"));
  symlinkSync(join(ROOT, "node_modules"), join(root, "node_modules"));
  const written = readWorkerConfig(root, "consumer").raw as { queues?: { consumers?: Record<string, unknown>[] } };
  const outbox = written.queues?.consumers?.[0];
  if (!outbox || "max_batch_size" in outbox || "max_batch_timeout" in outbox || written.queues?.consumers?.length !== 2) {
    throw new Error(`the plain consumer's config is not what spike.ts meant: ${JSON.stringify(written.queues)}`);
  }
  return root;
}

function ms(value: number): number {
  return round(value, 1);
}

function median(values: readonly number[]): number {
  return round(quantile(values, 0.5), 1);
}

function verdictsText(verdicts: Readonly<Record<string, number>>): string {
  const entries = Object.entries(verdicts);
  return entries.length === 0 ? "" : ` (first attempt: ${entries.map(([k, n]) => `${k} ${n}`).join(", ")})`;
}
