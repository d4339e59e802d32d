/**
 * One Worker entry to one ESM file that workerd runs as it is: what an
 * auxiliary Worker in the pipeline test project, a prebuilt bundle given to
 * the launcher (the chaos suite's faulty ingress) and the benchmark's
 * fixtures need. The same settings for all of them.
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { type BuildOptions, build } from "esbuild";

export const WORKER_BUILD_OPTIONS = {
  bundle: true,
  format: "esm",
  platform: "neutral",
  mainFields: ["module", "main"],
  conditions: ["workerd", "worker", "browser"],
  target: "es2023",
  logLevel: "warning",
} as const satisfies BuildOptions;

/** Bundles `entry` to `outfile` (extra esbuild options on top: define, plugins); returns `outfile`. */
export async function bundleWorker(entry: string, outfile: string, extra: BuildOptions = {}): Promise<string> {
  mkdirSync(dirname(outfile), { recursive: true });
  await build({ ...WORKER_BUILD_OPTIONS, ...extra, entryPoints: [entry], outfile });
  return outfile;
}
