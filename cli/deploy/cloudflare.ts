/**
 * `npm run setup` and `npm run deploy`, as functions over a wrangler runner
 * (the real one, or a scripted one in tests).
 *
 * setup, one time and idempotent: checks the login, creates a D1 database per
 * shard (SHARD_COUNT; `--shards N` sets it), the outbox queue and its
 * dead-letter queue if they are missing, writes each database's real id (and
 * each shard's DB_<i> binding) into both wrangler files, applies the
 * migrations to every shard, and uploads the secrets from the environment.
 *
 * deploy: remote migrations to every shard, then the consumer, then the ingress.
 *
 * Resource names come from the wrangler files, never from here.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { adminTokenWeakness, generateAdminToken } from "../../shared/admin-token.ts";
import { parseAppSettings, type SettingsDeclaration } from "../../shared/app/settings.ts";
import { MAX_SHARDS } from "../../shared/settings.ts";
import { localShardCount, readWorkerConfig, WORKER_CONFIGS, type WorkerRole } from "../local/config.ts";
import { PROJECT_ROOT } from "../local/pipeline.ts";
import { stripAnsi } from "../local/pretty.ts";
import { quietWranglerEnv, runToCompletion, wranglerArgv } from "../local/processes.ts";
import {
  boundShardCount,
  openWindowIn,
  PLACEHOLDER_DATABASE_ID,
  type ShardDatabase,
  ShardFileError,
  shardBindingProblems,
  shardDatabasesOf,
  writeShardBinding,
  writeVar,
} from "./shards.ts";

export { PLACEHOLDER_DATABASE_ID } from "./shards.ts";

export interface WranglerResult {
  readonly code: number | null;
  readonly output: string;
}

/** Runs `wrangler <args>`: captured (with optional stdin), or streamed to the terminal. */
export type WranglerRunner = (args: readonly string[], options?: { input?: string; stream?: boolean }) => Promise<WranglerResult>;

/** wrangler itself, in `root`, with `base` as its environment (default this process's: its login, its token). */
export function realWrangler(
  root: string = PROJECT_ROOT,
  base: Readonly<Record<string, string | undefined>> = process.env,
): WranglerRunner {
  const env = quietWranglerEnv(base);
  return async (args, options = {}) => {
    const [node, argv] = wranglerArgv(root, args);
    if (options.stream) {
      return new Promise((resolveRun, rejectRun) => {
        const child = spawn(node, argv, { cwd: root, env, stdio: ["inherit", "inherit", "inherit"] });
        child.once("error", rejectRun);
        child.once("close", (code) => resolveRun({ code, output: "" }));
      });
    }
    const result = await runToCompletion(node, argv, {
      cwd: root,
      env,
      timeoutMs: 300_000,
      ...(options.input !== undefined ? { input: options.input } : {}),
    });
    return { code: result.timedOut ? null : result.code, output: stripAnsi(result.output) };
  };
}

export class CloudflareError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CloudflareError";
  }
}

const NOT_LOGGED_IN =
  /You are not authenticated|not logged in|necessary to set a CLOUDFLARE_API_TOKEN|Authentication error|Invalid API Token|code: 10000|code: 9109/i;
const OFFLINE =
  /Unable to resolve Cloudflare's API hostname|ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ECONNRESET|fetch failed|network connection/i;

/** Turns a failed wrangler call into the error a person can act on. */
export function explainFailure(what: string, result: WranglerResult): CloudflareError {
  if (NOT_LOGGED_IN.test(result.output)) {
    return new CloudflareError(
      `${what}: not logged in to Cloudflare. Run \`npx wrangler login\` (or set CLOUDFLARE_API_TOKEN, and CLOUDFLARE_ACCOUNT_ID if the token sees several accounts), then run this again.`,
    );
  }
  if (OFFLINE.test(result.output)) {
    return new CloudflareError(`${what}: cannot reach the Cloudflare API (api.cloudflare.com). Check the network, then run this again.`);
  }
  const tail = result.output.trim().split("\n").slice(-15).join("\n");
  return new CloudflareError(`${what} failed (exit ${result.code ?? "timeout"}):\n${tail}`);
}

/** `wrangler whoami`: exits 0 even when not logged in, so its text decides. */
export async function requireLogin(wrangler: WranglerRunner): Promise<string> {
  const result = await wrangler(["whoami"]);
  if (result.code !== 0 || NOT_LOGGED_IN.test(result.output) || OFFLINE.test(result.output))
    throw explainFailure("checking the Cloudflare login", result);
  const account =
    /associated with the email (\S+?)\.?(?:\s|$)/.exec(result.output)?.[1] ?? /You are logged in/.exec(result.output)?.[0] ?? "logged in";
  return account;
}

export interface Resources {
  readonly databaseName: string;
  readonly queue: string;
  readonly deadLetterQueue: string;
  /** database_id in each wrangler file. */
  readonly databaseIds: Readonly<Record<WorkerRole, string>>;
  /** Every shard of SHARD_COUNT (shard 0 is the DB binding above), as the files bind it. */
  readonly shards: readonly ShardDatabase[];
}

/** The names setup must create, read from the two wrangler files. */
export function resourcesOf(root: string = PROJECT_ROOT): Resources {
  const ingress = readWorkerConfig(root, "ingress").raw as Config;
  const consumer = readWorkerConfig(root, "consumer").raw as Config;
  const databaseName = ingress.d1_databases?.[0]?.database_name;
  const queue = ingress.queues?.producers?.[0]?.queue;
  const deadLetterQueue = consumer.queues?.consumers?.find((c) => c.queue === queue)?.dead_letter_queue;
  if (!databaseName || !queue || !deadLetterQueue) {
    throw new CloudflareError("the wrangler files do not name a D1 database, an outbox queue and its dead_letter_queue");
  }
  let shards: ShardDatabase[];
  try {
    shards = shardDatabasesOf(root);
  } catch (error) {
    throw new CloudflareError(error instanceof Error ? error.message : String(error));
  }
  return {
    databaseName,
    queue,
    deadLetterQueue,
    databaseIds: { ingress: ingress.d1_databases?.[0]?.database_id ?? "", consumer: consumer.d1_databases?.[0]?.database_id ?? "" },
    shards,
  };
}

interface Config {
  d1_databases?: Array<{ database_name?: string; database_id?: string }>;
  queues?: { producers?: Array<{ queue?: string }>; consumers?: Array<{ queue?: string; dead_letter_queue?: string }> };
}

/** Finds the database by name (`wrangler d1 list --json`), creating it if missing. */
export async function ensureDatabase(wrangler: WranglerRunner, name: string): Promise<{ id: string; created: boolean }> {
  const find = async () => {
    const list = await wrangler(["d1", "list", "--json"]);
    if (list.code !== 0) throw explainFailure("listing D1 databases", list);
    let databases: Array<{ uuid?: string; name?: string }>;
    try {
      databases = JSON.parse(list.output.slice(list.output.indexOf("[")));
    } catch {
      throw new CloudflareError(`could not read \`wrangler d1 list --json\`:\n${list.output.slice(0, 500)}`);
    }
    return databases.find((db) => db.name === name)?.uuid;
  };
  const existing = await find();
  if (existing) return { id: existing, created: false };
  const create = await wrangler(["d1", "create", name]);
  if (create.code !== 0) throw explainFailure(`creating the D1 database ${name}`, create);
  const id = await find();
  if (!id) throw new CloudflareError(`created the D1 database ${name}, but it is not in \`wrangler d1 list\``);
  return { id, created: true };
}

/** Creates a queue unless it exists. */
export async function ensureQueue(wrangler: WranglerRunner, name: string): Promise<{ created: boolean }> {
  const info = await wrangler(["queues", "info", name]);
  if (info.code === 0) return { created: false };
  if (NOT_LOGGED_IN.test(info.output) || OFFLINE.test(info.output)) throw explainFailure(`looking up the queue ${name}`, info);
  const create = await wrangler(["queues", "create", name]);
  if (create.code === 0) return { created: true };
  if (/already exists|already taken|11009/i.test(create.output)) return { created: false };
  throw explainFailure(`creating the queue ${name}`, create);
}

export interface SecretSpec {
  readonly name: string;
  readonly workers: readonly WorkerRole[];
  readonly required: boolean;
}

/** Which Worker needs which of the engine's secrets. Required ones must be in the environment (or setup is told to skip secrets). */
export const SECRETS: readonly SecretSpec[] = [
  { name: "SLACK_SIGNING_SECRET", workers: ["ingress"], required: true },
  { name: "SLACK_SIGNING_SECRET_PREVIOUS", workers: ["ingress"], required: false },
  // The consumer performs the effects; the ingress opens modals inline (views.open).
  { name: "SLACK_BOT_TOKEN", workers: ["ingress", "consumer"], required: true },
  { name: "ADMIN_TOKEN", workers: ["ingress"], required: false },
  // A custom step's workflow token is sealed at the ack and opened where its rows are performed (both Workers).
  { name: "TOKEN_ENCRYPTION_KEY", workers: ["ingress", "consumer"], required: false },
];

/**
 * Where `npm run setup` keeps the ADMIN_TOKEN it generates: a file at the
 * project root, readable by its owner only and ignored by git, so the token
 * is never printed (terminals and CI logs keep what is printed) and a second
 * run uploads the same token instead of rotating it.
 */
export const ADMIN_TOKEN_FILE = ".admin-token";

/**
 * The ADMIN_TOKEN setup uploads: the environment's, if it is strong enough
 * (shared/admin-token.ts; a weak one is refused before the account is
 * touched); else the one in ADMIN_TOKEN_FILE; else a fresh one, written there.
 */
export function adminTokenForSetup(
  root: string,
  env: Readonly<Record<string, string | undefined>>,
): { token: string; source: "environment" | "file" | "generated" } {
  const given = env.ADMIN_TOKEN?.trim();
  if (given) {
    const weakness = adminTokenWeakness(given);
    if (weakness !== undefined) throw new CloudflareError(`${weakness} (or unset ADMIN_TOKEN and setup makes one)`);
    return { token: given, source: "environment" };
  }
  const path = resolve(root, ADMIN_TOKEN_FILE);
  if (existsSync(path)) {
    const kept = readFileSync(path, "utf8").trim();
    const weakness = adminTokenWeakness(kept);
    if (weakness !== undefined) throw new CloudflareError(`${ADMIN_TOKEN_FILE}: ${weakness}`);
    return { token: kept, source: "file" };
  }
  const token = generateAdminToken();
  writeFileSync(path, `${token}\n`, { mode: 0o600, flag: "wx" });
  return { token, source: "generated" };
}

/** The engine's secrets, then the app's (shared/app/settings.ts): each of the app's goes to both Workers, where its effects run. */
export function secretsOf(declared: SettingsDeclaration): SecretSpec[] {
  const own = Object.entries(declared).filter(([, spec]) => spec.kind === "secret");
  return [...SECRETS, ...own.map(([name, spec]) => ({ name, workers: ["ingress", "consumer"] as const, required: spec.required }))];
}

/** A wrangler file's [vars], as wrangler reads them (a value may be a TOML number, array or table). */
const varsOf = (root: string, role: WorkerRole): Record<string, unknown> =>
  (readWorkerConfig(root, role).raw.vars ?? {}) as Record<string, unknown>;

/**
 * Not given: absent, or a blank string (the Workers read one as unset). A value of another type (a TOML number) is
 * given, and badAppValues says it must be a string.
 */
const isBlank = (value: unknown): boolean => value === undefined || (typeof value === "string" && value.trim() === "");

/**
 * The app's required settings that are not secrets and that a wrangler file's [vars] leaves empty: both
 * Workers read them, so both files must give one (a deploy without would answer 500 at the first request).
 */
export function missingAppVars(root: string, declared: SettingsDeclaration): string[] {
  const files = [varsOf(root, "ingress"), varsOf(root, "consumer")];
  return Object.entries(declared)
    .filter(([, spec]) => spec.kind !== "secret" && spec.required)
    .filter(([name]) => files.some((vars) => isBlank(vars[name])))
    .map(([name]) => name);
}

/**
 * What is wrong with the app's settings' values that setup would deploy, each problem with where the value is: a
 * [vars] entry of either wrangler file, or (unless the secrets are skipped) a secret in the environment. Only
 * values given are read (an empty one is missingAppVars' or missingSecrets'); the problems never quote a value.
 */
export function badAppValues(
  root: string,
  declared: SettingsDeclaration,
  env: Readonly<Record<string, string | undefined>>,
  skipSecrets: boolean,
): string[] {
  const given = (values: Readonly<Record<string, unknown>>, secret: boolean): SettingsDeclaration =>
    Object.fromEntries(Object.entries(declared).filter(([name, spec]) => (spec.kind === "secret") === secret && !isBlank(values[name])));
  const problems: string[] = [];
  for (const role of ["ingress", "consumer"] as const) {
    const vars = varsOf(root, role);
    const parsed = parseAppSettings(given(vars, false), vars);
    if (!parsed.ok) problems.push(...parsed.errors.map((error) => `${error} ([vars] of ${WORKER_CONFIGS[role]})`));
  }
  if (!skipSecrets) {
    const parsed = parseAppSettings(given(env, true), env);
    if (!parsed.ok) problems.push(...parsed.errors.map((error) => `${error}, in the environment`));
  }
  return problems;
}

export function missingSecrets(env: Readonly<Record<string, string | undefined>>, secrets: readonly SecretSpec[] = SECRETS): string[] {
  return secrets.filter((s) => s.required && isBlank(env[s.name])).map((s) => s.name);
}

/** Uploads the secrets set in `env` (JSON on stdin: never in argv, never in a file). Returns what went where. */
export async function putSecrets(
  wrangler: WranglerRunner,
  env: Readonly<Record<string, string | undefined>>,
  secrets: readonly SecretSpec[] = SECRETS,
): Promise<Record<WorkerRole, string[]>> {
  const uploaded: Record<WorkerRole, string[]> = { ingress: [], consumer: [] };
  for (const role of ["ingress", "consumer"] as const) {
    const values = Object.fromEntries(
      secrets.filter((s) => s.workers.includes(role) && !isBlank(env[s.name])).map((s) => [s.name, env[s.name] as string]),
    );
    if (Object.keys(values).length === 0) continue;
    const result = await wrangler(["secret", "bulk", "-c", WORKER_CONFIGS[role]], { input: JSON.stringify(values) });
    if (result.code !== 0) throw explainFailure(`uploading the ${role}'s secrets`, result);
    uploaded[role] = Object.keys(values);
  }
  return uploaded;
}

export interface SetupReport {
  readonly account: string;
  readonly steps: readonly string[];
}

/** A wrangler file setup cannot edit safely is a message for a person, like any other setup failure. */
function editing<T>(edit: () => T): T {
  try {
    return edit();
  } catch (error) {
    throw error instanceof ShardFileError ? new CloudflareError(error.message) : error;
  }
}

export async function setup(options: {
  wrangler: WranglerRunner;
  root?: string;
  env?: Readonly<Record<string, string | undefined>>;
  skipSecrets?: boolean;
  /** SHARD_COUNT to set in both wrangler files first (default: keep theirs). */
  shards?: number;
  /** The settings the app declares (app.declaredSettings): its secrets are uploaded too, its required vars checked. */
  appSettings?: SettingsDeclaration;
  print?: (line: string) => void;
}): Promise<SetupReport> {
  const root = options.root ?? PROJECT_ROOT;
  const env = options.env ?? process.env;
  const print = options.print ?? (() => {});
  const steps: string[] = [];
  const step = (line: string) => {
    steps.push(line);
    print(`✓ ${line}`);
  };

  // Everything that can be checked before touching the account is checked first.
  const secrets = secretsOf(options.appSettings ?? {});
  const missing = options.skipSecrets ? [] : missingSecrets(env, secrets);
  if (missing.length > 0) {
    throw new CloudflareError(
      `missing in the environment: ${missing.join(", ")}. Set them (e.g. \`read -rs SLACK_SIGNING_SECRET && export SLACK_SIGNING_SECRET\`), or run with --skip-secrets and set them later with \`npx wrangler secret put <NAME> -c <wrangler file>\`.`,
    );
  }
  const missingVars = missingAppVars(root, options.appSettings ?? {});
  if (missingVars.length > 0) {
    throw new CloudflareError(
      `the app's required settings ${missingVars.join(", ")} have no value in [vars] of ${WORKER_CONFIGS.ingress} and ${WORKER_CONFIGS.consumer}: set them in both (both Workers read them)`,
    );
  }
  const badValues = badAppValues(root, options.appSettings ?? {}, env, options.skipSecrets ?? false);
  if (badValues.length > 0) {
    throw new CloudflareError(
      `the app's settings hold values the Workers would refuse: ${badValues.join("; ")}. Fix them, then run setup again.`,
    );
  }
  // The token is settled before the account is touched: a weak one stops here.
  const admin = options.skipSecrets ? undefined : adminTokenForSetup(root, env);
  // Raising the count moves no workspace (each has one home: shared/shards/placement.ts), once an older ackbox's
  // workspaces are all placed (shared/shards/upgrade.ts): else those not seen since the upgrade would move.
  let raisesDeployed: readonly ShardDatabase[] = [];
  if (options.shards !== undefined) {
    // Fewer shards than bound would strand the rows of the teams on the dropped ones: refused before anything changes.
    const bound = boundShardCount(root);
    if (!Number.isInteger(options.shards) || options.shards < 1 || options.shards > MAX_SHARDS)
      throw new CloudflareError(`--shards wants a whole number from 1 to ${MAX_SHARDS}, got ${options.shards}`);
    if (options.shards < bound)
      throw new CloudflareError(
        `the wrangler files bind ${bound} shards; going down to ${options.shards} would strand the rows of every team on the others (docs/scaling.md)`,
      );
    const current = editing(() => localShardCount(root, {}));
    const deployed = resourcesOf(root).shards;
    if (options.shards > current && deployed[0]?.ids.ingress !== PLACEHOLDER_DATABASE_ID) raisesDeployed = deployed;
  }
  const window = editing(() => openWindowIn(root));
  if (window.length > 0) throw new CloudflareError(window.join("\n"));
  resourcesOf(root); // the files name what setup needs, before the account is touched
  const account = await requireLogin(options.wrangler);
  step(`logged in (${account})`);
  for (const shard of raisesDeployed) await requireEveryWorkspacePlaced(options.wrangler, shard);

  if (options.shards !== undefined) {
    for (const role of ["ingress", "consumer"] as const) {
      const path = resolve(root, WORKER_CONFIGS[role]);
      const count = String(options.shards);
      const { changed } = editing(() => writeVar(path, "SHARD_COUNT", count));
      step(
        `${WORKER_CONFIGS[role]}: SHARD_COUNT = "${count}" ${changed ? "written" : "already set"}${raisesDeployed.length > 0 ? NO_MOVE : ""}`,
      );
    }
  }
  const resources = resourcesOf(root);
  const several = resources.shards.length > 1;
  const ids: string[] = [];
  for (const shard of resources.shards) {
    const db = await ensureDatabase(options.wrangler, shard.databaseName);
    ids.push(db.id);
    step(
      `D1 database ${shard.databaseName}${several ? ` (shard ${shard.index}, ${shard.binding})` : ""}: ${db.created ? "created" : "exists"} (${db.id})`,
    );
  }
  for (const role of ["ingress", "consumer"] as const) {
    const path = resolve(root, WORKER_CONFIGS[role]);
    const outcomes = resources.shards.map((shard, index) => {
      const outcome = editing(() => writeShardBinding(path, { ...shard, id: ids[index] as string }));
      return `${shard.binding} ${outcome === "already set" ? "already set" : outcome === "added" ? "binding added" : "database_id written"}`;
    });
    step(`${WORKER_CONFIGS[role]}: ${outcomes.join(", ")}`);
  }
  for (const queue of [resources.queue, resources.deadLetterQueue]) {
    const { created } = await ensureQueue(options.wrangler, queue);
    step(`queue ${queue}: ${created ? "created" : "exists"}`);
  }
  // Every shard gets the schema now: a shard added by a later setup is ready before a deploy routes a team to it.
  for (const shard of resources.shards) {
    await migrateRemote(options.wrangler, shard, print);
    step(`D1 migrations applied to ${shard.databaseName}${several ? ` (shard ${shard.index})` : ""}`);
  }
  if (options.skipSecrets) {
    step("secrets skipped (--skip-secrets)");
  } else {
    const uploaded = await putSecrets(options.wrangler, { ...env, ADMIN_TOKEN: admin?.token }, secrets);
    for (const role of ["ingress", "consumer"] as const) step(`${role} secrets set: ${uploaded[role].join(", ") || "none"}`);
    if (admin?.source === "generated") {
      step(
        `ADMIN_TOKEN generated and kept in ${ADMIN_TOKEN_FILE} (owner-only, git-ignored): export ACKBOX_ADMIN_TOKEN="$(cat ${ADMIN_TOKEN_FILE})"`,
      );
    } else if (admin?.source === "file") {
      step(`ADMIN_TOKEN: the one kept in ${ADMIN_TOKEN_FILE}`);
    }
  }
  return { account, steps };
}

/** What setup says when it raises the count: nothing moves, and the one step left. */
const NO_MOVE = " (no workspace moves: new ones start landing on the new shard once this is deployed: npm run deploy)";

/**
 * Before the count of a deployed database is raised: every workspace an older ackbox left without a placement is
 * placed (the cron drains legacy_keys, shared/shards/upgrade.ts). One read of the shard's table, remote.
 */
async function requireEveryWorkspacePlaced(wrangler: WranglerRunner, shard: ShardDatabase): Promise<void> {
  const where = `shard ${shard.index} (${shard.databaseName})`;
  const read = await wrangler([
    "d1",
    "execute",
    shard.databaseName,
    "--remote",
    "--json",
    "--command",
    "SELECT COUNT(*) AS n FROM legacy_keys",
    "-c",
    WORKER_CONFIGS.ingress,
  ]);
  if (read.code !== 0 && /no such table: legacy_keys/.test(read.output))
    throw new CloudflareError(
      `${where} is not on this version's schema yet (no legacy_keys: migration 0013): deploy this version first (npm run deploy), let the cron run a minute, then add the shard; nothing was changed`,
    );
  if (read.code !== 0) throw explainFailure(`reading ${where}'s unplaced workspaces`, read);
  let left: number | undefined;
  try {
    const answer = JSON.parse(read.output.slice(read.output.indexOf("["))) as { results?: { n?: number }[] }[];
    left = answer[0]?.results?.[0]?.n;
  } catch {
    left = undefined;
  }
  if (typeof left !== "number")
    throw new CloudflareError(`could not read \`wrangler d1 execute --json\` for ${where}:\n${read.output.slice(0, 500)}`);
  if (left > 0)
    throw new CloudflareError(
      `${where} still has ${left} workspace${left === 1 ? "" : "s"} an older ackbox left without a placement (legacy_keys): adding a shard now would move those not seen since the upgrade. The cron places them, a few hundred a shard each minute (shared/shards/upgrade.ts): run this again after the next tick; nothing was changed`,
    );
}

/**
 * Refuses to deploy while a shard SHARD_COUNT needs has no binding, carries
 * the placeholder id, or is bound differently by the two files.
 */
export function requireRealDatabaseIds(root: string): void {
  const problems = shardBindingProblems(root, { requireReal: true });
  if (problems.length > 0) throw new CloudflareError(problems.join("\n"));
}

/** `wrangler d1 migrations apply <shard's database> --remote` (forward-only, additive; safe to run again). */
async function migrateRemote(wrangler: WranglerRunner, shard: ShardDatabase, print: (line: string) => void): Promise<void> {
  print(`→ applying D1 migrations to ${shard.databaseName} (shard ${shard.index}, ${shard.binding}, remote)`);
  const migrate = await wrangler(["d1", "migrations", "apply", shard.databaseName, "--remote", "-c", WORKER_CONFIGS.ingress], {
    stream: true,
  });
  if (migrate.code !== 0)
    throw new CloudflareError(
      `remote migrations of ${shard.databaseName} (shard ${shard.index}) failed (exit ${migrate.code}); nothing was deployed`,
    );
}

export async function deploy(options: {
  wrangler: WranglerRunner;
  root?: string;
  skipMigrations?: boolean;
  print?: (line: string) => void;
}): Promise<void> {
  const print = options.print ?? (() => {});
  const root = options.root ?? PROJECT_ROOT;
  const resources = resourcesOf(root);
  requireRealDatabaseIds(root);
  print(`✓ logged in (${await requireLogin(options.wrangler)})`);
  if (!options.skipMigrations) {
    // Before the code, every shard: migrations are forward-only and additive, so the running code keeps working on
    // the new schema, and no shard is left behind the code that reads it.
    for (const shard of resources.shards) await migrateRemote(options.wrangler, shard, print);
  }
  // The consumer first: the queue has its consumer before the new ingress sends to it.
  for (const role of ["consumer", "ingress"] as const) {
    print(`→ deploying the ${role} (${WORKER_CONFIGS[role]})`);
    const result = await options.wrangler(["deploy", "-c", WORKER_CONFIGS[role]], { stream: true });
    if (result.code !== 0) throw new CloudflareError(`deploying the ${role} failed (exit ${result.code})`);
  }
}
