import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";
import { unstable_getMiniflareWorkerOptions } from "wrangler";
import { CONSUMER_BUNDLE } from "./test/pipeline/build-consumer.ts";
import { TEST_SETTINGS, TEST_SHARD_BINDINGS } from "./test/support/settings.ts";

type PoolOptions = Exclude<Parameters<typeof cloudflareTest>[0], (...args: never[]) => unknown>;
type AuxiliaryWorker = NonNullable<NonNullable<PoolOptions["miniflare"]>["workers"]>[number];

/** The consumer's bindings as wrangler resolves them from its config (bindings only: auxiliary Workers take no config path). */
function consumerBindings(): Partial<AuxiliaryWorker> {
  const options = unstable_getMiniflareWorkerOptions("workers/consumer/wrangler.toml").workerOptions as Partial<AuxiliaryWorker>;
  return {
    compatibilityDate: options.compatibilityDate,
    compatibilityFlags: options.compatibilityFlags,
    bindings: options.bindings ?? {},
    d1Databases: options.d1Databases,
    queueProducers: options.queueProducers,
    queueConsumers: Object.fromEntries(
      Object.entries(options.queueConsumers ?? {}).map(([queue, consumer]) => [queue, { ...consumer, maxBatchTimeout: 0.05 }]),
    ),
  };
}

/**
 * The files that start local runs (wrangler dev, npm start) and take half a
 * minute or more, longest first. They start first, so the other files run in
 * the slots beside them instead of the run waiting on them at its end (vitest
 * would order by project name, node after app, consumer and ingress).
 */
const LONGEST = [
  "chaos",
  "bench-smoke",
  "remind",
  "local-run",
  "deploy-check",
  "runbook",
  "demo",
  "restart-recovery",
  "start-leftover",
  "cli",
].map((name) => `/test/node/${name}.test.ts`);

class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (file: TestSpecification) => {
      const index = LONGEST.findIndex((suffix) => file.moduleId.endsWith(suffix));
      return index === -1 ? LONGEST.length : index;
    };
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b)); // stable: the rest keep vitest's order
  }
}

/** `ackbox` and its subpaths → the sources package.json's exports give as their types (the built files' sources). */
const PACKAGE_SOURCES = Object.entries(
  (JSON.parse(readFileSync("package.json", "utf8")) as { exports: Record<string, string | { types?: string }> }).exports,
).flatMap(([subpath, target]) =>
  typeof target === "object" && target.types
    ? [{ find: new RegExp(`^ackbox${subpath.slice(1).replace("/", "\\/")}$`), replacement: resolve(target.types) }]
    : [],
);

/**
 * Test projects. Every workerd project runs against real local D1 (migrations
 * applied per file by test/support/migrations.ts) and real local Queues;
 * Slack is the only thing faked, at the network edge (test/support/fake-slack.ts).
 *
 *   unit      pure modules (decisions, parsing, signatures), in workerd
 *   ingress   the ingress Worker (root wrangler.toml's bindings, TEST_ENTRIES' Worker)
 *   consumer  the consumer Worker (workers/consumer/wrangler.toml's): queue, DLQ, cron
 *   pipeline  both Workers at once: the ingress under test, the consumer as an
 *             auxiliary Worker (bundled by test/pipeline/build-consumer.ts),
 *             with its outbound fetches routed to a fake Slack Worker
 *   node      wrangler configs, scripts and the CLI, in Node; the local runs
 *             start from one migrated D1 state (test/support/d1-template.mts)
 *   app       the app's own tests, beside it (app/, files ending .test.ts), and the
 *             shipped examples' (examples/): the reference, /ask, /standup and the guide's app
 */
/**
 * The Workers the engine's projects run (their SELF, their real queue deliveries): the factories over the engine's
 * test app (test/support/entries/), or the pipeline's over the reference app as shipped; never the wrangler files'
 * `main`, which is over the team's app/index.ts. The `app` project alone keeps that `main`: its tests are the
 * team's, about the team's app.
 */
const TEST_ENTRIES = { ingress: "./test/support/entries/ingress.ts", consumer: "./test/support/entries/consumer.ts" } as const;
/** The pipeline project's: the reference app as shipped (examples/reference/index.ts), whose chains it follows. */
const REFERENCE_ENTRIES = { ingress: "./test/support/entries/reference-ingress.ts" } as const;

export default defineConfig(async () => {
  const migrations = await readD1Migrations("migrations");
  const bindings = { TEST_MIGRATIONS: migrations, ...TEST_SETTINGS };
  const workerd = (
    name: string,
    configPath: string,
    main: string | undefined,
    extra: Record<string, unknown> = {},
    include = [`test/${name}/**/*.test.ts`],
  ) => ({
    plugins: [
      cloudflareTest({
        ...(main ? { main } : {}),
        wrangler: { configPath },
        miniflare: { bindings, d1Databases: TEST_SHARD_BINDINGS, ...extra },
      }),
    ],
    test: { name, include, setupFiles: ["test/support/migrations.ts"] },
  });
  return {
    test: {
      // Three files at a time, whatever the project: no two share state (each workerd file has its own
      // workerd and storage; node files use free ports and their own folders), and the node files mostly
      // wait on the processes they start. (The default, CPUs − 1, is one file at a time on two cores.)
      maxWorkers: 3,
      sequence: { sequencer: LongestFirst },
      projects: [
        workerd("unit", "./workers/consumer/wrangler.toml", TEST_ENTRIES.consumer),
        workerd("ingress", "./wrangler.toml", TEST_ENTRIES.ingress),
        workerd("consumer", "./workers/consumer/wrangler.toml", TEST_ENTRIES.consumer, {
          // Real queue deliveries, quickly; one retry before the dead-letter
          // queue so its path runs in two deliveries; backoff as short as it goes.
          queueConsumers: {
            "ackbox-outbox": { maxBatchTimeout: 0.05, maxRetries: 1, deadLetterQueue: "ackbox-outbox-dlq" },
            "ackbox-outbox-dlq": { maxBatchTimeout: 0.05 },
          },
          bindings: { ...bindings, BACKOFF_BASE_SECONDS: "1" },
        }),
        {
          plugins: [
            cloudflareTest({
              main: REFERENCE_ENTRIES.ingress,
              wrangler: { configPath: "./wrangler.toml" },
              miniflare: {
                bindings,
                d1Databases: TEST_SHARD_BINDINGS,
                serviceBindings: { FAKE_SLACK: "fake-slack" },
                // The ingress calls Slack too (its first attempt at the ack): the same fake answers it.
                outboundService: "fake-slack",
                workers: [
                  {
                    ...consumerBindings(),
                    name: "ackbox-consumer",
                    modules: true,
                    scriptPath: CONSUMER_BUNDLE,
                    bindings: { ...consumerBindings().bindings, ...TEST_SETTINGS },
                    d1Databases: TEST_SHARD_BINDINGS,
                    outboundService: "fake-slack",
                  },
                  { name: "fake-slack", modules: true, scriptPath: "test/pipeline/fake-slack-worker.mjs", compatibilityDate: "2026-11-01" },
                ],
              },
            }),
          ],
          test: {
            name: "pipeline",
            include: ["test/pipeline/**/*.test.ts"],
            setupFiles: ["test/support/migrations.ts"],
            globalSetup: ["test/pipeline/build-consumer.ts"],
          },
        },
        {
          test: {
            name: "node",
            environment: "node",
            include: ["test/node/**/*.test.ts"],
            globalSetup: ["test/support/d1-template.mts"],
          },
        },
        {
          // The template's tests (what `npx ackbox new` writes) too, their `ackbox` imports read from the sources
          // as the package's exports name them (the package itself runs dist/, its build: test/node/package.test.ts).
          ...workerd("app", "./wrangler.toml", undefined, {}, ["app/**/*.test.ts", "examples/**/*.test.ts", "template/app/**/*.test.ts"]),
          resolve: { alias: PACKAGE_SOURCES },
        },
      ],
    },
  };
});
