import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";
import { TEST_SETTINGS } from "./test/support/settings.ts";

/**
 * Test projects. Every workerd project runs against real local D1 (migrations
 * applied per file by test/support/migrations.ts) and real local Queues;
 * Slack is the only thing faked, at the network edge (test/support/fake-slack.ts).
 *
 *   unit      pure modules (decisions, parsing, signatures), in workerd
 *   ingress   the ingress Worker (root wrangler.toml)
 *   consumer  the consumer Worker (workers/consumer/wrangler.toml): queue, DLQ, cron
 *   node      wrangler configs, scripts and the CLI, in Node
 */
export default defineConfig(async () => {
  const migrations = await readD1Migrations("migrations");
  const bindings = { TEST_MIGRATIONS: migrations, ...TEST_SETTINGS };
  const workerd = (name: string, configPath: string, extra: Record<string, unknown> = {}) => ({
    plugins: [cloudflareTest({ wrangler: { configPath }, miniflare: { bindings, ...extra } })],
    test: { name, include: [`test/${name}/**/*.test.ts`], setupFiles: ["test/support/migrations.ts"] },
  });
  return {
    test: {
      projects: [
        workerd("unit", "./workers/consumer/wrangler.toml"),
        workerd("ingress", "./wrangler.toml"),
        workerd("consumer", "./workers/consumer/wrangler.toml", {
          // Real queue deliveries, quickly; one retry before the dead-letter
          // queue so its path runs in two deliveries; backoff as short as it goes.
          queueConsumers: {
            "ackbox-outbox": { maxBatchTimeout: 0.05, maxRetries: 1, deadLetterQueue: "ackbox-outbox-dlq" },
            "ackbox-outbox-dlq": { maxBatchTimeout: 0.05 },
          },
          bindings: { ...bindings, BACKOFF_BASE_SECONDS: "1" },
        }),
        { test: { name: "node", environment: "node", include: ["test/node/**/*.test.ts"] } },
      ],
    },
  };
});
