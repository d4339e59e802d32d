/**
 * A local run of both Workers for the end-to-end and drain sections.
 *
 * The product's own launcher, scripts/local/pipeline.ts (`startPipeline`, what
 * `npm start` runs), starts the pipeline as built: here in a private run
 * folder and a fresh state folder (never npm start's), on a free port, with
 * no cron timer (the bench fires the cron itself, to time each tick).
 *
 * Profiling variants that change the consumer's queue settings need
 * something startPipeline does not offer yet (an override of the generated
 * config's [[queues.consumers]] entry); those, and the baseline they are
 * compared with, run through the bench's own minimal harness
 * (dev-harness.ts), so that every run of one comparison goes through the same
 * launcher.
 */
import { join } from "node:path";
import { queryLocalD1 } from "../local/d1.ts";
import { startPipeline } from "../local/pipeline.ts";
import { processesInGroup } from "../local/processes.ts";
import { bundle, WORK_DIR } from "./build.ts";
import { onInterrupt } from "./cleanup.ts";
import { type DevOptions, logRecords, startDev } from "./dev-harness.ts";

export interface LocalRun {
  readonly url: string;
  readonly launcher: "scripts/local (startPipeline)" | "scripts/bench/dev-harness.ts";
  /** Fires the consumer's cron once; resolves when the call returns. */
  fireCron(): Promise<{ readonly ok: boolean; readonly status: number; readonly ms: number }>;
  /** The Workers' log records with this msg, so far. */
  records(msg: string): Record<string, unknown>[];
  /** Runs SQL against the run's local D1 (wrangler d1 execute). */
  execute(sql: string): Promise<void>;
  /** wrangler and workerd, for CPU accounting. */
  pids(): number[];
  recentOutput(): string[];
  stop(): Promise<void>;
}

export interface LocalRunOptions {
  readonly label: string;
  readonly vars: Readonly<Record<string, string>>;
  /** Use the bench's harness (needed for outboxConsumer overrides; used for every run of a profile comparison). */
  readonly harness?: "launcher" | "bench";
  readonly consumerBundle?: string;
  readonly outboxConsumer?: DevOptions["outboxConsumer"];
}

export async function startLocalRun(options: LocalRunOptions): Promise<LocalRun> {
  const run = options.harness === "bench" || options.outboxConsumer ? await viaBenchHarness(options) : await viaLauncher(options);
  const unregister = onInterrupt(() => run.stop());
  return {
    ...run,
    async stop() {
      unregister();
      await run.stop();
    },
  };
}

async function viaLauncher(options: LocalRunOptions): Promise<LocalRun> {
  const records: { msg: string; fields: Record<string, unknown> }[] = [];
  const dir = join(WORK_DIR, `pipeline-${options.label}-${process.pid}`);
  const bundles = options.consumerBundle ? { ingress: await bundle("ingress"), consumer: options.consumerBundle } : undefined;
  const run = await startPipeline({
    port: 0,
    env: options.vars,
    devVarsFile: null,
    dir,
    persistTo: join(dir, "state"),
    cronIntervalMs: 0,
    ...(bundles ? { bundles } : {}),
    onRecord: (record) => {
      records.push({ msg: record.msg, fields: { ...record.fields } });
      if (records.length > 200_000) records.splice(0, 100_000);
    },
  });
  return {
    url: run.url,
    launcher: "scripts/local (startPipeline)",
    async fireCron() {
      const t0 = performance.now();
      const result = await run.sweep();
      return { ok: result.ok, status: result.status, ms: performance.now() - t0 };
    },
    records: (msg) => records.filter((r) => r.msg === msg).map((r) => r.fields),
    async execute(sql) {
      await queryLocalD1({ config: run.configs.ingress, persistTo: run.persistTo, sql, database: run.configs.databaseName });
    },
    pids: () => processesInGroup(run.pgid),
    recentOutput: () => run.recentOutput(),
    stop: () => run.stop(),
  };
}

async function viaBenchHarness(options: LocalRunOptions): Promise<LocalRun> {
  const dev = await startDev({
    label: options.label,
    vars: options.vars,
    ...(options.consumerBundle ? { bundles: { consumer: options.consumerBundle } } : {}),
    ...(options.outboxConsumer ? { outboxConsumer: options.outboxConsumer } : {}),
  });
  return {
    url: dev.url,
    launcher: "scripts/bench/dev-harness.ts",
    async fireCron() {
      const r = await dev.fireCron();
      return { ok: r.status === 200, status: r.status, ms: r.ms };
    },
    records: (msg) => logRecords(dev.lines, msg),
    execute: () => Promise.reject(new Error("the bench harness runs no SQL; the drain section uses the launcher")),
    pids: () => dev.pids(),
    recentOutput: () => dev.lines.slice(-30),
    stop: () => dev.stop(),
  };
}
