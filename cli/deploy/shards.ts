/**
 * The shards in the two wrangler files: what SHARD_COUNT asks for, which
 * `[[d1_databases]]` binding holds each shard (shard 0 is DB, shard i is
 * DB_i: shared/shards/binding-name.ts), and the edits `npm run setup` makes
 * to them (a shard's binding added or its database_id written, SHARD_COUNT
 * set) — as text edits that keep every comment and line around them.
 *
 * `npm run setup` writes, `npm run deploy` refuses to deploy and
 * `npm run check:deploy` fails on what `shardBindingProblems` finds: a
 * binding the count needs and a file lacks is otherwise found by the Workers
 * only at their first request (docs/scaling.md).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { SHARD_COUNT_PREVIOUS_REFUSED } from "../../shared/settings.ts";
import { shardBindingName } from "../../shared/shards/binding-name.ts";
import { localShardCount, readWorkerConfig, shardDatabaseName, WORKER_CONFIGS, type WorkerRole } from "../local/config.ts";

const ROLES = ["ingress", "consumer"] as const;

/** The id both wrangler files carry until setup writes the real one; the local run and the tests use it. */
export const PLACEHOLDER_DATABASE_ID = "00000000-0000-4000-8000-000000000000";

interface RawDatabase {
  binding?: string;
  database_name?: string;
  database_id?: string;
  migrations_dir?: string;
}

export interface ShardDatabase {
  readonly index: number;
  readonly binding: string;
  /** From the wrangler files when they bind it; else the name setup gives it ("<DB's name>-shard-<i>"). */
  readonly databaseName: string;
  /** database_id of the binding in each file; undefined where the file has no such binding. */
  readonly ids: Readonly<Record<WorkerRole, string | undefined>>;
}

export class ShardFileError extends Error {
  override readonly name = "ShardFileError";
}

function databasesOf(root: string, role: WorkerRole): RawDatabase[] {
  const raw = readWorkerConfig(root, role).raw as { d1_databases?: RawDatabase[] };
  return raw.d1_databases ?? [];
}

/** SHARD_COUNT from the files' [vars] (they must agree), and every shard's database as the files bind it. */
export function shardDatabasesOf(root: string, count: number = localShardCount(root, {})): ShardDatabase[] {
  const databases = { ingress: databasesOf(root, "ingress"), consumer: databasesOf(root, "consumer") };
  const base = databases.ingress.find((db) => db.binding === "DB")?.database_name;
  if (!base) throw new ShardFileError(`${WORKER_CONFIGS.ingress}: no [[d1_databases]] binding DB with a database_name`);
  return Array.from({ length: count }, (_, index) => {
    const binding = shardBindingName(index);
    const of = (role: WorkerRole) => databases[role].find((db) => db.binding === binding);
    const names = ROLES.map((role) => of(role)?.database_name).filter((name): name is string => name !== undefined);
    if (new Set(names).size > 1)
      throw new ShardFileError(
        `the two wrangler files bind ${binding} to different databases (${names.join(", ")}); both Workers must share it`,
      );
    return {
      index,
      binding,
      databaseName: names[0] ?? shardDatabaseName(base, index),
      ids: { ingress: of("ingress")?.database_id, consumer: of("consumer")?.database_id },
    };
  });
}

/**
 * What keeps the files from serving SHARD_COUNT shards: the two files
 * disagreeing on SHARD_COUNT, a binding missing from a file, the two files
 * disagreeing on a binding's database, two shards on one database, an older
 * ackbox's shard-add window still open in them (SHARD_COUNT_PREVIOUS), and
 * (with `requireReal`, for a deploy) an id setup has not written yet. Empty
 * when the files are ready.
 */
export function shardBindingProblems(root: string, options: { requireReal: boolean }): string[] {
  let count: number;
  let shards: ShardDatabase[];
  try {
    count = localShardCount(root, {});
    shards = shardDatabasesOf(root, count);
  } catch (error) {
    return [error instanceof Error ? error.message : String(error)];
  }
  const problems: string[] = openWindowIn(root);
  const setupHint = "run `npm run setup` (it creates each shard's database and writes its binding into both wrangler files)";
  for (const shard of shards) {
    const missing = ROLES.filter((role) => shard.ids[role] === undefined).map((role) => WORKER_CONFIGS[role]);
    if (missing.length > 0) {
      problems.push(
        `SHARD_COUNT is ${count} but ${missing.join(" and ")} ${missing.length > 1 ? "have" : "has"} no [[d1_databases]] binding ${shard.binding} (shard ${shard.index}): ${setupHint}`,
      );
      continue;
    }
    const { ingress, consumer } = shard.ids;
    if (ingress !== consumer) {
      problems.push(
        `the two wrangler files bind ${shard.binding} to different database_ids (${ingress}, ${consumer}); both Workers must share it`,
      );
    } else if (options.requireReal && (!ingress || ingress === PLACEHOLDER_DATABASE_ID)) {
      problems.push(
        shard.index === 0
          ? "the wrangler files still carry the placeholder database_id: run `npm run setup` first (one time)"
          : `${shard.binding} still carries the placeholder database_id: ${setupHint}`,
      );
    }
  }
  const byId = new Map<string, string[]>();
  for (const shard of shards) {
    const id = shard.ids.ingress;
    if (id && id !== PLACEHOLDER_DATABASE_ID) byId.set(id, [...(byId.get(id) ?? []), shard.binding]);
  }
  for (const [id, bindings] of byId) {
    if (bindings.length > 1) problems.push(`${bindings.join(" and ")} bind the same database (${id}): each shard needs its own`);
  }
  return problems;
}

/** Sets a var of a file's [vars] (SHARD_COUNT): one line, edited in place. */
export function writeVar(configPath: string, name: string, value: string): { changed: boolean } {
  const text = readFileSync(configPath, "utf8");
  const pattern = new RegExp(`^(\\s*${name}\\s*=\\s*)"([^"]*)"`, "gm");
  const matches = [...text.matchAll(pattern)];
  if (matches.length !== 1) throw new ShardFileError(`${configPath}: expected exactly one ${name} line in [vars], found ${matches.length}`);
  if (matches[0]?.[2] === value) return { changed: false };
  writeFileSync(configPath, text.replace(pattern, `$1"${value}"`));
  return { changed: true };
}

/**
 * An older ackbox's shard-add window left open in the files' [vars] (SHARD_COUNT_PREVIOUS set): the Workers
 * refuse to start on it (shared/settings.ts), so setup and deploy refuse it first, with the same words.
 */
export function openWindowIn(root: string): string[] {
  const open = ROLES.filter((role) => {
    const vars = readWorkerConfig(root, role).raw.vars as Record<string, unknown> | undefined;
    return typeof vars?.SHARD_COUNT_PREVIOUS === "string" && vars.SHARD_COUNT_PREVIOUS.trim() !== "";
  });
  return open.length === 0 ? [] : [`${open.map((role) => WORKER_CONFIGS[role]).join(" and ")}: ${SHARD_COUNT_PREVIOUS_REFUSED}`];
}

/**
 * Gives `binding` the database `id` in a wrangler file: writes the id into
 * its `[[d1_databases]]` block, or adds the block after the file's last one
 * (same migrations_dir as DB's, so `wrangler d1 migrations apply` finds the
 * migrations for every shard). Everything else in the file stays as it was.
 */
export function writeShardBinding(
  configPath: string,
  shard: { readonly index: number; readonly binding: string; readonly databaseName: string; readonly id: string },
): "written" | "already set" | "added" {
  if (!/^[0-9a-f-]{36}$/i.test(shard.id)) throw new ShardFileError(`not a D1 database id: ${JSON.stringify(shard.id)}`);
  const lines = readFileSync(configPath, "utf8").split("\n");
  const headers = lines.flatMap((line, i) => (/^\s*\[/.test(line) ? [i] : []));
  const blocks = headers
    .filter((i) => /^\s*\[\[\s*d1_databases\s*\]\]/.test(lines[i] ?? ""))
    .map((start) => ({ start, end: headers.find((h) => h > start) ?? lines.length }));
  const valueIn = (block: { start: number; end: number }, key: string) => {
    for (let i = block.start + 1; i < block.end; i++) {
      const match = new RegExp(`^(\\s*${key}\\s*=\\s*)"([^"]*)"`).exec(lines[i] ?? "");
      if (match) return { line: i, prefix: match[1] ?? "", value: match[2] ?? "" };
    }
    return undefined;
  };
  const own = blocks.find((block) => valueIn(block, "binding")?.value === shard.binding);
  if (own) {
    const id = valueIn(own, "database_id");
    if (!id) throw new ShardFileError(`${configPath}: the [[d1_databases]] block of ${shard.binding} has no database_id line`);
    if (id.value === shard.id) return "already set";
    lines[id.line] = `${id.prefix}"${shard.id}"${(lines[id.line] ?? "").slice(id.prefix.length + id.value.length + 2)}`;
    writeFileSync(configPath, lines.join("\n"));
    return "written";
  }
  const home = blocks.find((block) => valueIn(block, "binding")?.value === "DB");
  const last = blocks.at(-1);
  if (!home || !last) throw new ShardFileError(`${configPath}: no [[d1_databases]] block for DB to add ${shard.binding} beside`);
  const migrations = valueIn(home, "migrations_dir")?.value;
  let after = last.start;
  for (let i = last.start; i < last.end; i++) if (/^\s*[^\s#]/.test(lines[i] ?? "")) after = i;
  lines.splice(
    after + 1,
    0,
    "",
    `# Shard ${shard.index} (docs/scaling.md), written by npm run setup: the same database_id in both wrangler files.`,
    "[[d1_databases]]",
    `binding = "${shard.binding}"`,
    `database_name = "${shard.databaseName}"`,
    `database_id = "${shard.id}"`,
    ...(migrations !== undefined ? [`migrations_dir = "${migrations}"`] : []),
  );
  writeFileSync(configPath, lines.join("\n"));
  return "added";
}

/** The highest shard binding a file has + 1: the count below which setup must not go (those shards hold rows). */
export function boundShardCount(root: string): number {
  let highest = 0;
  for (const role of ROLES) {
    for (const db of databasesOf(root, role)) {
      const match = /^DB_(\d+)$/.exec(db.binding ?? "");
      if (match) highest = Math.max(highest, Number(match[1]));
    }
  }
  return highest + 1;
}
