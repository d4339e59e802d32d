/**
 * Bundles the Workers the bench runs in workerd: the product's two Workers
 * (the engine's factories over the app the bench's traffic is written for,
 * BENCH_APP, whatever app/index.ts is) and the bench's fixtures. Miniflare takes built
 * JavaScript, as the pipeline test's auxiliary Worker does
 * (test/pipeline/build-consumer.ts); these are the same esbuild settings.
 */
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { writeAppEntries } from "../../cli/local/app-entries.ts";
import { bundleWorker } from "../../cli/local/bundle.ts";

export const ROOT = resolve(import.meta.dirname, "../..");
/** This run's scratch folder (bundles, local state): per process, so two runs never share or delete each other's. */
export const WORK_DIR = join(ROOT, ".ackbox/bench", `run-${process.pid}`);
const OUT_DIR = join(WORK_DIR, "build");

/** The app the bench drives (mentions answered in the thread): the reference app as shipped. */
export const BENCH_APP = "examples/reference/index.ts";

/** The fixtures; the product's two Workers (ingress, consumer) are entries written over BENCH_APP when bundled. */
export const ENTRIES = {
  slackEdgePeer: "scripts/bench/workers/slack-edge-peer.js",
  fakeSlack: "scripts/bench/workers/fake-slack.js",
  slackForward: "scripts/bench/workers/slack-forward.js",
} as const;

export type Entry = keyof typeof ENTRIES | "ingress" | "consumer";

/** Bundles one entry to .ackbox/bench/run-<pid>/build/<entry>.mjs. */
export async function bundle(entry: Entry): Promise<string> {
  mkdirSync(OUT_DIR, { recursive: true });
  const path =
    entry === "ingress" || entry === "consumer"
      ? writeAppEntries(join(OUT_DIR, "entries"), resolve(ROOT, BENCH_APP))[entry]
      : resolve(ROOT, ENTRIES[entry]);
  return bundleWorker(path, join(OUT_DIR, `${entry}.mjs`));
}
