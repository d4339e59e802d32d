/**
 * Where a local run lives and what it publishes, without loading wrangler:
 * the demo, the CLI and other tools read this to find a running `npm start`.
 *
 * Every local command takes the same two hints from the environment: `PORT`
 * (the ingress's port) and `ACKBOX_LOCAL_DIR` (the run folder), so
 * `PORT=8788 npm start` and `PORT=8788 npm run demo` / `PORT=8788 npx ackbox
 * backlog` meet without a --url.
 */
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

/** The engine's root: the nearest folder up from this file whose package.json names "ackbox" (this file's own, or its build's, dist/). */
export const ENGINE_ROOT = engineRootOf(dirname(fileURLToPath(import.meta.url)));
/**
 * The project root: the app's repository, whose wrangler files, app/ and .dev.vars a local command reads. In this
 * repository it is the engine's root; when the engine is installed as a package (…/node_modules/ackbox), the
 * folder that holds that node_modules.
 */
export const PROJECT_ROOT = projectRootOf(ENGINE_ROOT);
export const DEFAULT_PORT = 8787;
/** Production's cron is every minute. */
export const DEFAULT_CRON_INTERVAL_MS = 60_000;
/** The run folder of `npm start`: generated configs, merged .dev.vars, private registry, wrangler.log, run.json. */
export const DEFAULT_RUN_DIR = ".ackbox/local";
/** Local D1 and queue state; wrangler's own default, so `wrangler d1 execute ackbox --local` reads the same database. */
export const DEFAULT_PERSIST_TO = ".wrangler/state";

/** The file in the run folder that holds the local run's generated ADMIN_TOKEN (owner-only, git-ignored). */
export const ADMIN_TOKEN_FILE = "admin-token";

/** The file in the run folder that holds the local run's generated TOKEN_ENCRYPTION_KEY (owner-only, git-ignored). */
export const TOKEN_KEY_FILE = "token-encryption-key";

/** The file in the run folder that holds the MODEL_API_KEY of the stand-in's fake model (owner-only, git-ignored). */
export const MODEL_KEY_FILE = "model-api-key";

/** The run folder the environment names (ACKBOX_LOCAL_DIR, relative to the project root), else npm start's default. */
export function localRunDir(env: Readonly<Record<string, string | undefined>> = process.env): string {
  const dir = env.ACKBOX_LOCAL_DIR?.trim();
  return resolve(PROJECT_ROOT, dir ? dir : DEFAULT_RUN_DIR);
}

/** The port the environment names (PORT), else 8787; throws on a value that is not a port. */
export function localPort(env: Readonly<Record<string, string | undefined>> = process.env): number {
  const text = env.PORT?.trim();
  if (text === undefined || text === "") return DEFAULT_PORT;
  const port = Number(text);
  if (!/^\d+$/.test(text) || port < 1 || port > 65_535)
    throw new Error(`PORT must be a port number (1–65535), got ${JSON.stringify(env.PORT)}`);
  return port;
}

/** http://127.0.0.1:<PORT>: where the local run's ingress is, as every local command defaults it. */
export function localUrl(env: Readonly<Record<string, string | undefined>> = process.env): string {
  return `http://127.0.0.1:${localPort(env)}`;
}

/**
 * The local run's ADMIN_TOKEN: read from the run folder, or generated there
 * once (32 random bytes, hex: 64 characters) and kept for later runs. It is
 * used only by the local run; a deployment sets its own secret.
 */
export function ensureLocalAdminToken(dir: string): string {
  return ensureLocalSecret(join(dir, ADMIN_TOKEN_FILE));
}

/**
 * A local run's TOKEN_ENCRYPTION_KEY (what `openssl rand -hex 32` prints),
 * generated once into the run folder and kept: the installations in local D1
 * stay readable across runs (lost, they must be installed again), and custom
 * steps' workflow tokens are sealed with it.
 */
export function ensureLocalTokenKey(dir: string): string {
  return ensureLocalSecret(join(dir, TOKEN_KEY_FILE));
}

/**
 * The MODEL_API_KEY of a local run whose assistant asks the stand-in's fake model (MODEL_URL unset): generated
 * once into the run folder, like the ADMIN_TOKEN, handed to the stand-in (which answers 401 to any other key)
 * and to both Workers. A secret like any model key, so the local run treats it as one: never printed, never in a
 * generated wrangler config, only in the owner-only merged .dev.vars and this file. Kept across runs, so a run
 * restarted on the same folder (npm run demo -- --kill does) meets a stand-in that takes it.
 */
export function ensureLocalModelKey(dir: string): string {
  return ensureLocalSecret(join(dir, MODEL_KEY_FILE));
}

function ensureLocalSecret(path: string): string {
  if (existsSync(path)) {
    const kept = readFileSync(path, "utf8").trim();
    if (/^[0-9a-f]{64}$/.test(kept)) return kept;
  }
  const token = randomBytes(32).toString("hex");
  writeFileSync(path, `${token}\n`, { mode: 0o600 });
  chmodSync(path, 0o600);
  return token;
}

/**
 * The token of the live local run whose ingress is `url`, when that run uses
 * its generated token; else undefined (another server, a run with an
 * ADMIN_TOKEN of your own, or no run at all). 127.0.0.1 and localhost are
 * the same host here.
 */
export function localAdminTokenFor(url: string, dir: string = localRunDir()): string | undefined {
  const info = readRunInfo(dir);
  if (!info?.adminTokenFile) return undefined;
  if (!sameLocalOrigin(url, info.url)) return undefined;
  try {
    const token = readFileSync(info.adminTokenFile, "utf8").trim();
    return token === "" ? undefined : token;
  } catch {
    return undefined;
  }
}

/**
 * The stand-in model's key of the live local run whose ingress is `url`, when its assistant asks the stand-in's
 * model; else undefined (a MODEL_URL of your own, no assistant, another server, no run). What `npm run demo -- --kill`
 * gives the run it starts beside npm start, so that run's answers are asked of the same stand-in's model.
 */
export function localModelKeyFor(url: string, dir: string = localRunDir()): string | undefined {
  const info = readRunInfo(dir);
  if (!info?.modelKeyFile || !sameLocalOrigin(url, info.url)) return undefined;
  try {
    const key = readFileSync(info.modelKeyFile, "utf8").trim();
    return key === "" ? undefined : key;
  } catch {
    return undefined;
  }
}

function sameLocalOrigin(a: string, b: string): boolean {
  try {
    const [x, y] = [new URL(a), new URL(b)];
    const host = (h: string) => (h === "localhost" || h === "[::1]" ? "127.0.0.1" : h);
    return host(x.hostname) === host(y.hostname) && x.port === y.port;
  } catch {
    return false;
  }
}

/** What a running local run publishes in `<run folder>/run.json`. */
export interface RunInfo {
  /** The launcher's pid. */
  readonly pid: number;
  /** wrangler's process group. */
  readonly pgid: number;
  readonly url: string;
  readonly standinUrl: string | null;
  readonly persistTo: string;
  readonly startedAt: string;
  /** The file holding the generated ADMIN_TOKEN, when the run uses it (null: an ADMIN_TOKEN of your own, from .dev.vars or the environment). */
  readonly adminTokenFile?: string | null;
  /**
   * The file holding the generated MODEL_API_KEY, when the run's assistant asks the stand-in's fake model
   * (`<standinUrl>/model/v1`); null: a MODEL_URL of your own, or an app without an assistant.
   */
  readonly modelKeyFile?: string | null;
}

/** The run.json of a live run in `dir` (default: npm start's), or undefined. */
export function readRunInfo(dir: string = localRunDir()): RunInfo | undefined {
  try {
    const info = JSON.parse(readFileSync(join(dir, "run.json"), "utf8")) as RunInfo;
    return isAlive(info.pid) ? info : undefined;
  } catch {
    return undefined;
  }
}

/** Is the process running? A zombie (killed, not yet reaped: common in containers without an init) is not. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return true; // no /proc (not Linux): kill(0) is all we know
  }
}

export function engineRootOf(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const manifest = join(dir, "package.json");
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, "utf8")) as { name?: unknown }).name === "ackbox") return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json named "ackbox" above ${from}`);
  }
}

/**
 * The folder that holds the node_modules the engine is installed in (the outermost: pnpm nests the package in
 * node_modules/.pnpm/…/node_modules), else the engine's own root (this repository).
 */
export function projectRootOf(engineRoot: string): string {
  const parts = engineRoot.split(sep);
  const at = parts.indexOf("node_modules");
  return at > 0 ? parts.slice(0, at).join(sep) : engineRoot;
}
