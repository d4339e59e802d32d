/**
 * Read the local D1 database of a run with `wrangler d1 execute --local`
 * (no login, no network): the outbox table is the local truth about the
 * backlog (TOOLCHAIN.md: there is no local view of a queue's backlog).
 */

import { quietWranglerEnv, runToCompletion, wranglerArgv } from "./processes.ts";
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
  const result = await runToCompletion(node, args, { cwd: root, env: quietWranglerEnv(process.env), timeoutMs: 60_000 });
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
