/**
 * `npm run build:package` (npm pack's prepack): the JavaScript the package runs, in dist/. Node strips no types
 * under node_modules (ERR_UNSUPPORTED_NODE_MODULES_TYPE_STRIPPING), so a project that depends on the engine runs
 * this build: its `ackbox` commands (bin/ackbox.js) in Node, and its Workers' imports (ackbox, ackbox/ingress,
 * ackbox/consumer, ackbox/testing), which wrangler and the vitest plugin bundle. One esbuild run with code
 * splitting, so the entries share one copy of each module (an EffectError an app throws is the class the
 * consumer checks). Packages stay imports (the project's node_modules has them); `types` in package.json's
 * exports point at the TypeScript sources, which ship too.
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";
import { ENGINE_ROOT } from "../cli/local/run-info.ts";

/** dist/<name>.js ← source: what package.json's exports and bin/ackbox.js name. */
export const PACKAGE_ENTRIES = {
  index: "shared/app/index.ts",
  ingress: "workers/ingress/worker.ts",
  consumer: "workers/consumer/worker.ts",
  testing: "shared/app/testing.ts",
  ackbox: "cli/ackbox.ts",
} as const;

export async function buildPackage(root: string = ENGINE_ROOT): Promise<string> {
  const outdir = join(root, "dist");
  rmSync(outdir, { recursive: true, force: true });
  await build({
    absWorkingDir: root,
    entryPoints: Object.entries(PACKAGE_ENTRIES).map(([out, source]) => ({ in: source, out })),
    outdir,
    bundle: true,
    splitting: true,
    format: "esm",
    // Neutral: the same chunks run in workerd and in Node; Node's built-ins are the Node side's imports only.
    platform: "neutral",
    packages: "external",
    external: ["node:*"],
    target: "es2023",
    chunkNames: "chunks/[name]-[hash]",
    logLevel: "warning",
  });
  return outdir;
}

// On stderr: `npm pack --json` prints its answer on stdout after this prepack.
if (import.meta.main) console.error(`built ${await buildPackage()}`);
