/**
 * One local workerd, through Miniflare (the runtime wrangler dev runs), with
 * the bench's Workers side by side in it. Each Worker that takes load gets
 * its own socket on 127.0.0.1 (Miniflare's direct sockets), so requests go
 * straight to that Worker with no router or proxy in front: every variant
 * pays exactly the same runtime path.
 *
 * State (D1) lives in a fresh folder under .ackbox/bench, removed on close.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { convertV4MiniflareOptions, Miniflare } from "miniflare";
import { unstable_getMiniflareWorkerOptions, unstable_splitSqlQuery } from "wrangler";
import { ROOT, WORK_DIR } from "./build.ts";
import { onInterrupt } from "./cleanup.ts";
import { workerdPids } from "./cpu.ts";

export const COMPATIBILITY_DATE = "2026-11-01";

export interface WorkerSpec {
  readonly name: string;
  readonly scriptPath: string;
  /** Listen on its own 127.0.0.1 socket. */
  readonly listen?: boolean;
  readonly bindings?: Readonly<Record<string, string>>;
  readonly d1Databases?: Readonly<Record<string, string>>;
  readonly queueProducers?: Readonly<Record<string, { queueName: string }>>;
  readonly queueConsumers?: Readonly<Record<string, { maxBatchSize?: number; maxBatchTimeout?: number; maxRetries?: number }>>;
  /** Route this Worker's outbound fetches to another Worker of the runtime (a fake Slack). */
  readonly outboundService?: string;
  readonly compatibilityDate?: string;
}

export interface Runtime {
  url(worker: string): URL;
  db(binding: string, worker: string): Promise<D1Like>;
  /** The workerd processes serving this runtime (for CPU accounting). */
  readonly pids: readonly number[];
  /** Lines the Workers logged, by level. */
  readonly logCounts: Readonly<Record<string, number>>;
  /** The last few error/warn lines, for diagnostics. */
  readonly recentProblems: readonly string[];
  close(): Promise<void>;
}

/** The part of D1's API the bench calls from Node (Miniflare's proxy). */
export interface D1Like {
  prepare(sql: string): { bind(...values: unknown[]): D1StatementLike } & D1StatementLike;
  batch(statements: D1StatementLike[]): Promise<{ results: unknown[]; meta: Record<string, unknown> }[]>;
  exec(sql: string): Promise<unknown>;
}
interface D1StatementLike {
  all<T = Record<string, unknown>>(): Promise<{ results: T[]; meta: Record<string, unknown> }>;
  run(): Promise<{ meta: Record<string, unknown> }>;
  first<T = Record<string, unknown>>(column?: string): Promise<T | null>;
}

let runtimes = 0;

/** Every line a Worker logs, as Miniflare hands it over (a section that tallies what the Workers said). */
export type LogListener = (level: string, message: string) => void;

export async function startRuntime(workers: readonly WorkerSpec[], label: string, onLog?: LogListener): Promise<Runtime> {
  const state = join(WORK_DIR, `state-${label}-${process.pid}-${runtimes++}`);
  rmSync(state, { recursive: true, force: true });
  mkdirSync(state, { recursive: true });
  const before = new Set(workerdPids());
  const logCounts: Record<string, number> = {};
  const recentProblems: string[] = [];
  const mf = new Miniflare(
    convertV4MiniflareOptions({
      resourcePersistencePath: state,
      handleStructuredLogs: ({ level, message }: { level: string; message: string }) => {
        logCounts[level] = (logCounts[level] ?? 0) + 1;
        onLog?.(level, message);
        if (level === "error" || level === "warn") {
          recentProblems.push(message.slice(0, 400));
          if (recentProblems.length > 20) recentProblems.shift();
        }
      },
      workers: workers.map((w) => ({
        name: w.name,
        modules: true,
        scriptPath: w.scriptPath,
        compatibilityDate: w.compatibilityDate ?? COMPATIBILITY_DATE,
        bindings: { ...w.bindings },
        d1Databases: { ...w.d1Databases },
        queueProducers: { ...w.queueProducers },
        queueConsumers: { ...w.queueConsumers },
        ...(w.outboundService ? { outboundService: w.outboundService } : {}),
        ...(w.listen ? { unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }] } : {}),
      })),
    }),
  );
  try {
    await mf.ready;
  } catch (error) {
    rmSync(state, { recursive: true, force: true });
    throw error;
  }
  const close = async () => {
    await mf.dispose();
    rmSync(state, { recursive: true, force: true });
  };
  const unregister = onInterrupt(close);
  const urls = new Map<string, URL>();
  for (const w of workers) if (w.listen) urls.set(w.name, await mf.unsafeGetDirectURL(w.name));
  const pids = workerdPids().filter((pid) => !before.has(pid));
  return {
    url(worker) {
      const url = urls.get(worker);
      if (!url) throw new Error(`worker ${worker} has no socket`);
      return url;
    },
    async db(binding, worker) {
      return (await mf.getD1Database(binding, worker)) as unknown as D1Like;
    },
    pids,
    logCounts,
    recentProblems,
    async close() {
      unregister();
      await close();
    },
  };
}

export interface WorkerConfig {
  readonly bindings: Record<string, string>;
  readonly d1Databases: Record<string, string>;
  readonly queueProducers: Record<string, { queueName: string }>;
  readonly queueConsumers: Record<string, { maxBatchSize?: number; maxBatchTimeout?: number; maxRetries?: number }>;
}

/** The ingress's bindings as wrangler resolves them from the root wrangler.toml (bindings only). */
export function ingressConfig(): WorkerConfig {
  return workerConfig("wrangler.toml");
}

/** The consumer's bindings, from workers/consumer/wrangler.toml. */
export function consumerConfig(): WorkerConfig {
  return workerConfig("workers/consumer/wrangler.toml");
}

function workerConfig(path: string): WorkerConfig {
  const options = unstable_getMiniflareWorkerOptions(join(ROOT, path)).workerOptions as {
    bindings?: Record<string, unknown>;
    d1Databases?: Record<string, { id: string } | string>;
    queueProducers?: Record<string, { queueName: string }>;
    queueConsumers?: Record<string, { maxBatchSize?: number; maxBatchTimeout?: number; maxRetries?: number }> | string[];
  };
  return {
    bindings: Object.fromEntries(Object.entries(options.bindings ?? {}).map(([k, v]) => [k, String(v)])),
    d1Databases: Object.fromEntries(Object.entries(options.d1Databases ?? {}).map(([k, v]) => [k, typeof v === "string" ? v : v.id])),
    queueProducers: { ...options.queueProducers },
    queueConsumers: Array.isArray(options.queueConsumers) ? {} : { ...options.queueConsumers },
  };
}

/** Every statement of the project's migrations, in order (wrangler's own SQL splitter). */
export function migrationStatements(): string[] {
  const dir = join(ROOT, "migrations");
  return readdirSync(dir)
    .filter((f) => /^\d{4}_.*\.sql$/.test(f))
    .sort()
    .flatMap((f) => unstable_splitSqlQuery(readFileSync(join(dir, f), "utf8")));
}

export async function applyMigrations(db: D1Like): Promise<void> {
  const statements = migrationStatements();
  await db.batch(statements.map((sql) => db.prepare(sql)));
}
