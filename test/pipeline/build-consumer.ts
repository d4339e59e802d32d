/**
 * globalSetup of the `pipeline` project: bundles the consumer Worker, which
 * runs there as an auxiliary Worker (auxiliary Workers take built JavaScript,
 * not a wrangler config).
 */
import { build } from "esbuild";

export const CONSUMER_BUNDLE = ".ackbox/test-build/consumer.mjs";

export default async function setup(): Promise<void> {
  await build({
    entryPoints: ["workers/consumer/index.ts"],
    outfile: CONSUMER_BUNDLE,
    bundle: true,
    format: "esm",
    platform: "neutral",
    mainFields: ["module", "main"],
    conditions: ["workerd", "worker", "browser"],
    target: "es2023",
    logLevel: "warning",
  });
}
