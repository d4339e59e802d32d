/**
 * Where a local run lives and what it publishes, without loading wrangler:
 * the demo and other tools read this to find a running `npm start`.
 */
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The project root: two folders up from this file. */
export const PROJECT_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const DEFAULT_PORT = 8787;
/** Production's cron is every minute. */
export const DEFAULT_CRON_INTERVAL_MS = 60_000;
/** The run folder of `npm start`: generated configs, merged .dev.vars, private registry, wrangler.log, run.json. */
export const DEFAULT_RUN_DIR = ".ackbox/local";
/** Local D1 and queue state; wrangler's own default, so `wrangler d1 execute ackbox --local` reads the same database. */
export const DEFAULT_PERSIST_TO = ".wrangler/state";

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
}

/** The run.json of a live run in `dir` (default: npm start's), or undefined. */
export function readRunInfo(dir: string = join(PROJECT_ROOT, DEFAULT_RUN_DIR)): RunInfo | undefined {
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
