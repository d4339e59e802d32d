/**
 * globalSetup of the `pipeline` project: bundles the consumer Worker, which
 * runs there as an auxiliary Worker (auxiliary Workers take built JavaScript,
 * not a wrangler config).
 */
import { bundleWorker } from "../../cli/local/bundle.ts";

export const CONSUMER_BUNDLE = ".ackbox/test-build/consumer.mjs";

export default async function setup(): Promise<void> {
  await bundleWorker("workers/consumer/index.ts", CONSUMER_BUNDLE);
}
