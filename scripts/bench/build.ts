/**
 * Bundles the Workers the bench runs in workerd: the product's two Workers
 * (exactly their entry files) and the bench's fixtures. Miniflare takes built
 * JavaScript, as the pipeline test's auxiliary Worker does
 * (test/pipeline/build-consumer.ts); these are the same esbuild settings.
 */
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Plugin } from "esbuild";
import { bundleWorker } from "../local/bundle.ts";

export const ROOT = resolve(import.meta.dirname, "../..");
/** This run's scratch folder (bundles, local state): per process, so two runs never share or delete each other's. */
export const WORK_DIR = join(ROOT, ".ackbox/bench", `run-${process.pid}`);
const OUT_DIR = join(WORK_DIR, "build");

export const ENTRIES = {
  ingress: "workers/ingress/index.ts",
  consumer: "workers/consumer/index.ts",
  floor: "scripts/bench/workers/floor.js",
  bareInsert: "scripts/bench/workers/bare-insert.js",
  bareInsertSend: "scripts/bench/workers/bare-insert-send.js",
  slackEdgePeer: "scripts/bench/workers/slack-edge-peer.js",
  fakeSlack: "scripts/bench/workers/fake-slack.js",
  slackForward: "scripts/bench/workers/slack-forward.js",
  probe: "scripts/bench/workers/probe.js",
} as const;

export type Entry = keyof typeof ENTRIES;

/**
 * Bundles one entry to .ackbox/bench/build/<name>.mjs. `replace` swaps a
 * module for another (a bench-only variant of the product, for profiling
 * which part of the ack path costs what); the product files are never edited.
 */
export async function bundle(entry: Entry, options: { name?: string; replace?: Readonly<Record<string, string>> } = {}): Promise<string> {
  mkdirSync(OUT_DIR, { recursive: true });
  const outfile = join(OUT_DIR, `${options.name ?? entry}.mjs`);
  const plugins: Plugin[] = [];
  const replace = options.replace;
  if (replace && Object.keys(replace).length > 0) {
    const targets = new Map(Object.entries(replace).map(([from, to]) => [resolve(ROOT, from), resolve(ROOT, to)]));
    plugins.push({
      name: "bench-replace",
      setup(b) {
        b.onResolve({ filter: /\.ts$/ }, (args) => {
          const target = targets.get(resolve(args.resolveDir, args.path));
          // The replacement may build on the module it replaces: its own import is not redirected.
          return target && target !== args.importer ? { path: target } : undefined;
        });
      },
    });
  }
  return bundleWorker(resolve(ROOT, ENTRIES[entry]), outfile, { plugins });
}
