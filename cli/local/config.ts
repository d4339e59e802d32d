/**
 * The two Workers' wrangler configs, rewritten for a local run.
 *
 * Why generated copies: in a multi-config `wrangler dev`, `--var` and
 * `--env-file` reach only the first Worker, and each Worker reads the
 * `.dev.vars` beside its own config (TOOLCHAIN.md, "Local run"). Writing both
 * configs into one folder with one merged `.dev.vars` gives both Workers the
 * same settings. The copies are read with wrangler's own config reader and
 * every path in them is made absolute, so they resolve from any folder.
 */
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { experimental_readRawConfig } from "wrangler";
import { parseSettings } from "../../shared/settings.ts";
import { shardBindingName } from "../../shared/shards/binding-name.ts";
import { formatDotenv } from "./dotenv.ts";

/** The two config files, relative to the project root. The ingress is first: it is the Worker on the port. */
export const WORKER_CONFIGS = { ingress: "wrangler.toml", consumer: "workers/consumer/wrangler.toml" } as const;

export type WorkerRole = keyof typeof WORKER_CONFIGS;

type RawConfig = Record<string, unknown>;

export interface GeneratedConfigs {
  readonly ingress: string;
  readonly consumer: string;
  readonly devVars: string;
  readonly names: Readonly<Record<WorkerRole, string>>;
  /** The D1 database both Workers bind as shard 0 (`DB`). */
  readonly databaseName: string;
  /** Every shard's database, in index order (shard 0 first): what the run migrates and both Workers bind. */
  readonly shards: readonly LocalShard[];
}

export interface LocalShard {
  readonly index: number;
  readonly binding: string;
  readonly databaseName: string;
}

/** Fields that hold paths relative to the config file, and that this generator knows how to move. */
const MOVABLE_FIELDS = ["main", "tsconfig", "base_dir"] as const;
/** Fields whose meaning depends on the config's folder in ways a copy cannot keep. */
const UNMOVABLE_FIELDS = ["build", "site", "assets", "wasm_modules", "text_blobs", "data_blobs", "rules", "alias"] as const;

/** Reads one Worker's config with wrangler's reader (TOML or JSON, as wrangler would). */
export function readWorkerConfig(root: string, role: WorkerRole): { readonly path: string; readonly raw: RawConfig } {
  const path = resolve(root, WORKER_CONFIGS[role]);
  const { rawConfig } = experimental_readRawConfig({ config: path }) as { rawConfig: RawConfig };
  return { path, raw: rawConfig };
}

/**
 * A copy of a config whose paths are absolute. With `bundle`, `main` is that
 * prebuilt file and wrangler does not bundle again (the deploy check starts
 * exactly what `wrangler deploy --dry-run` built).
 */
export function relocateConfig(raw: RawConfig, configPath: string, bundle?: string): RawConfig {
  const from = dirname(configPath);
  const copy: RawConfig = structuredClone(raw);
  for (const field of UNMOVABLE_FIELDS) {
    if (copy[field] !== undefined) {
      throw new Error(`${configPath}: "${field}" is set; the local runner cannot relocate it yet (cli/local/config.ts)`);
    }
  }
  for (const field of MOVABLE_FIELDS) {
    const value = copy[field];
    if (typeof value === "string" && !isAbsolute(value)) copy[field] = resolve(from, value);
  }
  if (typeof copy.main !== "string") throw new Error(`${configPath}: no "main" entry point`);
  const databases = Array.isArray(copy.d1_databases) ? (copy.d1_databases as RawConfig[]) : [];
  copy.d1_databases = databases.map((db) => ({
    ...db,
    migrations_dir: resolve(from, typeof db.migrations_dir === "string" ? db.migrations_dir : "migrations"),
  }));
  if (bundle !== undefined) {
    copy.main = resolve(bundle);
    copy.no_bundle = true;
    delete copy.tsconfig;
  }
  return copy;
}

/**
 * How many shards a local run binds: SHARD_COUNT from its settings (root
 * .dev.vars, environment, `npm start -- --shards N`), else the wrangler files'
 * [vars], which must then agree (each Worker would read its own).
 */
export function localShardCount(root: string, values: Readonly<Record<string, string>>): number {
  let text = values.SHARD_COUNT;
  if (text === undefined) {
    const of = (role: WorkerRole) => {
      const vars = readWorkerConfig(root, role).raw.vars as Record<string, unknown> | undefined;
      return typeof vars?.SHARD_COUNT === "string" ? vars.SHARD_COUNT : "1";
    };
    const [ingress, consumer] = [of("ingress"), of("consumer")];
    if (ingress !== consumer)
      throw new Error(
        `SHARD_COUNT is "${ingress}" in ${WORKER_CONFIGS.ingress} but "${consumer}" in ${WORKER_CONFIGS.consumer}: both Workers must see the same shards`,
      );
    text = ingress;
  }
  const parsed = parseSettings({ SHARD_COUNT: text });
  if (!parsed.ok) throw new Error(parsed.errors.join("; "));
  return parsed.settings.shardCount;
}

/**
 * The local id of shard `index`'s database when the wrangler file has no binding
 * for it. Local D1 keeps one SQLite file per database_id, so each shard needs
 * its own id (the same in both Workers' configs, so both see one database).
 */
export function localShardDatabaseId(index: number): string {
  return `00000000-0000-4000-8000-${String(index).padStart(12, "0")}`;
}

/** The database name of shard `index` ≥ 1: "<shard 0's name>-shard-<index>" (what `npm run setup` creates too). */
export function shardDatabaseName(base: string, index: number): string {
  return index === 0 ? base : `${base}-shard-${index}`;
}

/**
 * The config's d1_databases with a binding for every shard of `shardCount`:
 * those the wrangler file has are kept as they are; a missing `DB_<i>` is
 * added with its local name and id (a local run needs no `npm run setup`).
 */
export function withShardBindings(databases: readonly RawConfig[], shardCount: number, configPath: string): RawConfig[] {
  const home = databases.find((db) => db.binding === "DB") ?? databases[0];
  if (typeof home?.database_name !== "string") throw new Error(`${configPath}: no [[d1_databases]] with a database_name`);
  const result = [...databases];
  for (let index = 1; index < shardCount; index++) {
    const binding = shardBindingName(index);
    if (result.some((db) => db.binding === binding)) continue;
    result.push({
      binding,
      database_name: shardDatabaseName(home.database_name, index),
      database_id: localShardDatabaseId(index),
      migrations_dir: home.migrations_dir,
    });
  }
  return result;
}

/**
 * Writes both configs and the merged `.dev.vars` into `dir`. The `.dev.vars`
 * holds secrets: it is written owner-only, inside a git-ignored folder.
 */
export function writeDevConfigs(input: {
  readonly root: string;
  readonly dir: string;
  readonly vars: Readonly<Record<string, string>>;
  readonly bundles?: Readonly<Record<WorkerRole, string>>;
  /** Entries to run instead of the wrangler files' `main` (bundled by wrangler as those are): another app's. */
  readonly mains?: Readonly<Record<WorkerRole, string>>;
  /** D1 databases to bind (SHARD_COUNT): shard 0 is DB, shard i is DB_i (default 1). */
  readonly shardCount?: number;
}): GeneratedConfigs {
  const shardCount = input.shardCount ?? 1;
  mkdirSync(input.dir, { recursive: true });
  const names = {} as Record<WorkerRole, string>;
  const paths = {} as Record<WorkerRole, string>;
  let databaseName: string | undefined;
  let shards: LocalShard[] = [];
  for (const role of ["ingress", "consumer"] as const) {
    const { path, raw } = readWorkerConfig(input.root, role);
    const config = relocateConfig(raw, path, input.bundles?.[role]);
    if (input.mains && !input.bundles) config.main = resolve(input.mains[role]);
    if (typeof config.name !== "string" || config.name === "") throw new Error(`${path}: no Worker "name"`);
    names[role] = config.name;
    const databases = withShardBindings(config.d1_databases as RawConfig[], shardCount, path);
    config.d1_databases = databases;
    const own: LocalShard[] = [];
    for (let index = 0; index < shardCount; index++) {
      const binding = shardBindingName(index);
      const db = databases.find((d) => d.binding === binding) ?? (index === 0 ? databases[0] : undefined);
      if (typeof db?.database_name !== "string") throw new Error(`${path}: no [[d1_databases]] binding ${binding} with a database_name`);
      own.push({ index, binding, databaseName: db.database_name });
    }
    databaseName ??= own[0]?.databaseName;
    if (role === "ingress") shards = own;
    const differs = own.find((shard, index) => shard.databaseName !== shards[index]?.databaseName);
    if (differs)
      throw new Error(
        `the two Workers bind different D1 databases as ${differs.binding} (${shards[differs.index]?.databaseName}, ${differs.databaseName})`,
      );
    paths[role] = join(input.dir, `${role}.wrangler.jsonc`);
    const header = `// Generated by cli/local from ${WORKER_CONFIGS[role]}: edit that file, not this one.\n`;
    writeFileSync(paths[role], `${header}${JSON.stringify(config, null, 2)}\n`);
  }
  const devVars = join(input.dir, ".dev.vars");
  writeFileSync(
    devVars,
    formatDotenv(input.vars, "# Generated by cli/local: root .dev.vars + environment + local defaults. Holds secrets.\n"),
    {
      mode: 0o600,
    },
  );
  chmodSync(devVars, 0o600);
  return { ingress: paths.ingress, consumer: paths.consumer, devVars, names, databaseName: databaseName ?? "ackbox", shards };
}
