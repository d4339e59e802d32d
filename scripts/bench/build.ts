/**
 * Bundles the Workers the bench runs in workerd: the product's two Workers
 * (exactly their entry files) and the bench's fixtures. Miniflare takes built
 * JavaScript, as the pipeline test's auxiliary Worker does
 * (test/pipeline/build-consumer.ts); these are the same esbuild settings.
 */
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { bundleWorker } from "../../cli/local/bundle.ts";

export const ROOT = resolve(import.meta.dirname, "../..");
/** This run's scratch folder (bundles, local state): per process, so two runs never share or delete each other's. */
export const WORK_DIR = join(ROOT, ".ackbox/bench", `run-${process.pid}`);
const OUT_DIR = join(WORK_DIR, "build");

export const ENTRIES = {
  ingress: "workers/ingress/index.ts",
  consumer: "workers/consumer/index.ts",
  slackEdgePeer: "scripts/bench/workers/slack-edge-peer.js",
  fakeSlack: "scripts/bench/workers/fake-slack.js",
  slackForward: "scripts/bench/workers/slack-forward.js",
} as const;

export type Entry = keyof typeof ENTRIES;

/** Bundles one entry to .ackbox/bench/run-<pid>/build/<entry>.mjs. */
export async function bundle(entry: Entry): Promise<string> {
  mkdirSync(OUT_DIR, { recursive: true });
  return bundleWorker(resolve(ROOT, ENTRIES[entry]), join(OUT_DIR, `${entry}.mjs`));
}
