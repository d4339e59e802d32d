/**
 * Read the local D1 database of a run with `wrangler d1 execute --local`
 * (no login, no network): the outbox table is the local truth about the
 * backlog (TOOLCHAIN.md: there is no local view of a queue's backlog).
 *
 * The run's Workers write the same SQLite file while it is read, and a write
 * in progress can fail the command with "database is locked: SQLITE_BUSY"
 * (seen when the chaos run's checks read under its load). That failure, and
 * only that one, is tried again (retryWhileLocked), a bounded number of times
 * with a short backoff. Safe for a read, which is all the callers make; safe
 * for a write too: wrangler runs the command's statements as one D1 batch,
 * one transaction, and a transaction that could not take the lock committed
 * nothing (its process then exits, and with it anything uncommitted).
 */

import pRetry from "p-retry";
import { quietWranglerEnv, type RunResult, runToCompletion, wranglerArgv } from "./processes.ts";
import { PROJECT_ROOT } from "./run-info.ts";

export async function queryLocalD1<Row = Record<string, unknown>>(options: {
  /** A wrangler config that binds the database (a run's generated ingress config will do). */
  readonly config: string;
  readonly persistTo: string;
  readonly sql: string;
  readonly database?: string;
  readonly root?: string;
}): Promise<Row[]> {
  const root = options.root ?? PROJECT_ROOT;
  const [node, args] = wranglerArgv(root, [
    "d1",
    "execute",
    options.database ?? "ackbox",
    "--local",
    "--persist-to",
    options.persistTo,
    "-c",
    options.config,
    "--json",
    "--command",
    options.sql,
  ]);
  const result = await retryWhileLocked(() =>
    runToCompletion(node, args, { cwd: root, env: quietWranglerEnv(process.env), timeoutMs: 60_000 }),
  );
  if (result.code !== 0) throw new Error(`wrangler d1 execute failed (${result.code}):\n${result.output.slice(-1500)}`);
  const json = JSON.parse(result.output.slice(result.output.indexOf("["))) as Array<{ results: Row[] }>;
  return json.flatMap((statement) => statement.results);
}

/** The same query on every shard's local database, one after another; each row tagged with its shard's index. */
export async function queryEveryShard<Row = Record<string, unknown>>(options: {
  readonly config: string;
  readonly persistTo: string;
  readonly shards: readonly { readonly index: number; readonly databaseName: string }[];
  readonly sql: string;
  readonly root?: string;
}): Promise<Array<Row & { readonly shard: number }>> {
  const rows: Array<Row & { shard: number }> = [];
  for (const shard of options.shards) {
    const own = await queryLocalD1<Row>({ ...options, database: shard.databaseName });
    for (const row of own) rows.push({ ...row, shard: shard.index });
  }
  return rows;
}

/**
 * How a command that found the database locked is tried again: at most `tries` times in all, `minDelayMs` before
 * the second, doubling up to `maxDelayMs`, and no more waiting once `maxMs` have passed since the first (each try
 * itself ends within its own 60 s). The Workers' writes are short statements and batches: five tries over about four seconds of waits outlast a
 * burst of them, and a lock still held after that is a problem to report (the last try's output), not to wait out.
 */
export const LOCKED_RETRY: LockedRetry = { tries: 5, minDelayMs: 250, maxDelayMs: 2_000, maxMs: 30_000 };

export interface LockedRetry {
  readonly tries: number;
  readonly minDelayMs: number;
  readonly maxDelayMs: number;
  readonly maxMs: number;
}

/** Whether a finished `wrangler d1 execute` failed because another process held the database's lock. */
export function databaseLocked(result: RunResult): boolean {
  return result.code !== 0 && !result.timedOut && /SQLITE_BUSY|database is locked/i.test(result.output);
}

class DatabaseLocked extends Error {
  readonly result: RunResult;
  constructor(result: RunResult) {
    super("database is locked");
    this.name = "DatabaseLocked";
    this.result = result;
  }
}

/** `run`, tried again while its result is databaseLocked (within `retry`); its last result, whatever it was. */
export async function retryWhileLocked(run: () => Promise<RunResult>, retry: LockedRetry = LOCKED_RETRY): Promise<RunResult> {
  try {
    return await pRetry(
      async () => {
        const result = await run();
        if (databaseLocked(result)) throw new DatabaseLocked(result);
        return result;
      },
      {
        retries: retry.tries - 1,
        minTimeout: retry.minDelayMs,
        maxTimeout: retry.maxDelayMs,
        maxRetryTime: retry.maxMs,
        shouldRetry: ({ error }) => error instanceof DatabaseLocked,
      },
    );
  } catch (error) {
    if (error instanceof DatabaseLocked) return error.result;
    throw error;
  }
}
