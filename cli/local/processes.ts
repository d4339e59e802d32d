/**
 * Child processes of the local tools: wrangler under this Node (so it runs
 * on Node 22 whatever the PATH says), each long-lived child in a process
 * group of its own so that stopping it stops workerd and esbuild with it.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";

/** Environment that keeps wrangler offline-friendly and quiet (TOOLCHAIN.md, "Local run"). */
export function quietWranglerEnv(
  base: Readonly<Record<string, string | undefined>>,
  paths?: { registry?: string; logs?: string },
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(base)) if (value !== undefined) env[key] = value;
  env.WRANGLER_SEND_METRICS = "false";
  env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
  env.WRANGLER_HIDE_BANNER = "true";
  // The merged .dev.vars is the one source of settings; never leak the process environment into the Workers.
  env.CLOUDFLARE_INCLUDE_PROCESS_ENV = "false";
  // A private dev registry: see pipeline.ts. Private debug logs: nothing of a run lands in ~/.config.
  if (paths?.registry !== undefined) env.WRANGLER_REGISTRY_PATH = paths.registry;
  if (paths?.logs !== undefined) env.WRANGLER_LOG_PATH = paths.logs;
  return env;
}

/**
 * The environment of the long-running `wrangler dev` (cli/local/pipeline.ts):
 * quietWranglerEnv, and wrangler's local trace collector off unless asked for
 * (X_LOCAL_OBSERVABILITY=true npm start). That collector, on by default in
 * wrangler 4, is one more Worker in the Workers' workerd: every invocation
 * streams its spans there and they are written to SQLite for wrangler's local
 * explorer, which nothing of ackbox reads (npm start prints each request and
 * delivery itself). Measured through npm start with 1 000 signed events at
 * concurrency 20: the Workers' workerd 5.0 → 3.6 ms CPU an event, 0.67 →
 * 0.30 ms a GET /healthz (docs/benchmarks.md). The local explorer's API (the
 * cron trigger the launcher calls) is a separate switch and stays on.
 *
 * And wrangler's debug log file off (WRANGLER_WRITE_LOGS=true npm start
 * keeps it, in the run's logs/ folder): wrangler appends every line it logs
 * to it, debug lines included, a mkdir and an append under a lock per line.
 * What it prints npm start keeps in the run's wrangler.log
 * (cli/local/pipeline.ts); the one-off commands before it (the migrations)
 * still write theirs. Measured through npm start, one run each way
 * (docs/benchmarks.md): wrangler's Node 2.2 → 1.6 ms CPU an accepted event.
 */
export function devWranglerEnv(
  base: Readonly<Record<string, string | undefined>>,
  paths?: { registry?: string; logs?: string },
): Record<string, string> {
  const env = quietWranglerEnv(base, paths);
  env.X_LOCAL_OBSERVABILITY = base.X_LOCAL_OBSERVABILITY ?? "false";
  env.WRANGLER_WRITE_LOGS = base.WRANGLER_WRITE_LOGS ?? "false";
  return env;
}

/** `node <root>/node_modules/wrangler/bin/wrangler.js …`, with this Node. */
export function wranglerArgv(root: string, args: readonly string[]): [string, string[]] {
  return [process.execPath, [join(root, "node_modules", "wrangler", "bin", "wrangler.js"), ...args]];
}

export interface RunResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly output: string;
  readonly timedOut: boolean;
}

/**
 * Runs a command to completion in its own process group and returns its
 * combined output. On timeout the whole group is killed. `input` is written
 * to stdin (secrets go there, never into argv).
 */
export function runToCompletion(
  command: string,
  args: readonly string[],
  options: { cwd: string; env: Record<string, string>; timeoutMs: number; input?: string },
): Promise<RunResult> {
  return new Promise((resolveRun, rejectRun) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env, detached: true, stdio: ["pipe", "pipe", "pipe"] });
    let output = "";
    let timedOut = false;
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8");
    });
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8");
    });
    child.stdin.end(options.input ?? "");
    const timer = setTimeout(() => {
      timedOut = true;
      if (child.pid !== undefined) signalGroup(child.pid, "SIGKILL");
    }, options.timeoutMs);
    child.once("error", (error) => {
      clearTimeout(timer);
      rejectRun(error);
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      // A finished command leaves nothing behind (esbuild's service, for one).
      if (child.pid !== undefined) signalGroup(child.pid, "SIGKILL");
      resolveRun({ code, signal, output, timedOut });
    });
  });
}

/** Starts a long-lived child as the leader of a new process group. */
export function spawnGroup(command: string, args: readonly string[], options: { cwd: string; env: Record<string, string> }): ChildProcess {
  return spawn(command, args, { cwd: options.cwd, env: options.env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
}

/** Sends a signal to every process of a group; false if the group is gone. */
export function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

/** Pids of the live (not zombie) processes in a group, read from /proc. Linux only; empty elsewhere. */
export function processesInGroup(pgid: number): number[] {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  const pids: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // pid (comm) state ppid pgrp …: comm may hold spaces and parentheses, so split after the last ')'.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (fields[0] !== "Z" && Number(fields[2]) === pgid) pids.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return pids;
}

/** Waits until no live process is left in a group. */
export async function waitGroupGone(pgid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!signalGroup(pgid, 0) || (process.platform === "linux" && processesInGroup(pgid).length === 0)) return true;
    await sleep(50);
  }
  return false;
}

export const sleep = (ms: number) => new Promise<void>((resolveSleep) => setTimeout(resolveSleep, ms));

/** Waits for `promise`, at most `ms`; the timer is cleared either way, so it never holds the process open. */
export async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | number | undefined;
  try {
    return await Promise.race([promise, new Promise<undefined>((resolveLater) => (timer = setTimeout(resolveLater, ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** Fails with a clear message if 127.0.0.1:port is taken. */
export function assertPortFree(port: number): Promise<void> {
  return new Promise((resolvePort, rejectPort) => {
    const server = createServer();
    server.once("error", (error: NodeJS.ErrnoException) => {
      rejectPort(
        error.code === "EADDRINUSE"
          ? new Error(`port ${port} on 127.0.0.1 is already in use (another npm start?); stop it or choose another with PORT=<port>`)
          : error,
      );
    });
    server.listen(port, "127.0.0.1", () => server.close(() => resolvePort()));
  });
}

/** A port that was free a moment ago (the usual small race: fine for loopback tools and tests). */
export function freePort(): Promise<number> {
  return new Promise((resolvePort, rejectPort) => {
    const server = createServer();
    server.once("error", rejectPort);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

/** The command line of a process, or undefined if it is gone (Linux). */
export function commandLineOf(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
  } catch {
    return undefined;
  }
}

/** Pids of live processes whose command line contains `text` (Linux; empty elsewhere): "is anything of this run left?" */
export function processesMentioning(text: string): number[] {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  return entries
    .filter((entry) => /^\d+$/.test(entry) && Number(entry) !== process.pid && commandLineOf(Number(entry))?.includes(text))
    .map(Number);
}
