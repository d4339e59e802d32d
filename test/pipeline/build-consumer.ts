/**
 * globalSetup of the `pipeline` project: bundles the consumer Worker, which
 * runs there as an auxiliary Worker (auxiliary Workers take built JavaScript,
 * not a wrangler config). The engine's consumer over the reference app as
 * shipped, as the ingress beside it (test/support/entries/reference-*.ts).
 */
import { bundleWorker } from "../../cli/local/bundle.ts";

export const CONSUMER_BUNDLE = ".ackbox/test-build/consumer.mjs";

export default async function setup(): Promise<void> {
  await bundleWorker("test/support/entries/reference-consumer.ts", CONSUMER_BUNDLE);
}
