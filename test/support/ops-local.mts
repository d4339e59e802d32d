/**
 * A real local ingress for the Node-side tests of the operator surfaces (the
 * CLI and the dashboard): `wrangler dev` on 127.0.0.1 on a free port, with
 * its own state directory (a copy of the run's migrated D1 state, rows
 * seeded into it before the Worker starts), its own dev registry, no .dev.vars (an
 * empty --env-file), offline. Start and stop are bounded in time, and stop
 * ends the process group it started (wrangler and its workerd), by id.
 *
 * (A .mts file: Node code. The workerd tests' tsconfig takes test/**\/*.ts,
 * and this must stay out of it; it is type-checked through the Node tests
 * that import it.)
 */
import { type ChildProcess, spawn } from "node:child_process";
import { cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { inject } from "vitest";
import { freePort } from "../../cli/local/processes.ts";

declare module "vitest" {
  export interface ProvidedContext {
    /** Where test/support/d1-template.mts makes the run's migrated D1 state (ready.json says it is done). */
    migratedD1Dir: string;
  }
}

/** ready.json: the migrated state folder (wrangler's --persist-to) and each database's SQLite file in it, relative to it. */
export interface TemplateReady {
  readonly state: string;
  readonly files: Readonly<Record<string, string>>;
}

/** The migrated template, once the global setup has made it (bounded: a failure or a hang says so). */
async function migratedTemplate(): Promise<TemplateReady> {
  const dir = inject("migratedD1Dir");
  const deadline = Date.now() + 180_000;
  for (;;) {
    const ready = await readFile(join(dir, "ready.json"), "utf8").catch(() => undefined);
    if (ready !== undefined) return JSON.parse(ready) as TemplateReady;
    const failed = await readFile(join(dir, "failed.txt"), "utf8").catch(() => undefined);
    if (failed !== undefined) throw new Error(`the migrated D1 template could not be made:\n${failed}`);
    if (Date.now() > deadline) throw new Error(`the migrated D1 template was not ready within 180 s (${dir})`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Re-exported for the tests that start their own instances. */
export { freePort };

export const ROOT = resolve(import.meta.dirname, "../..");
const WRANGLER = join(ROOT, "node_modules/wrangler/bin/wrangler.js");

/** The environment every spawned tool runs in: offline and quiet, nothing remote. */
export function offlineEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const key of Object.keys(env)) {
    if (key.startsWith("CLOUDFLARE_") || key.startsWith("ACKBOX_") || key === "NODE_OPTIONS") delete env[key];
  }
  return {
    ...env,
    WRANGLER_SEND_METRICS: "false",
    CLOUDFLARE_CF_FETCH_ENABLED: "false",
    WRANGLER_HIDE_BANNER: "true",
    NO_COLOR: "1",
    FORCE_COLOR: "0",
    ...extra,
  };
}

export interface RunResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a command to completion, bounded by `timeoutMs` (then killed: a test must never hang). */
export function run(
  command: string,
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv; timeoutMs?: number; cwd?: string } = {},
): Promise<RunResult> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd ?? ROOT,
      env: options.env ?? offlineEnv(),
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8");
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
    });
    const timer = setTimeout(() => {
      killGroup(child, "SIGKILL");
      reject(new Error(`timed out after ${options.timeoutMs ?? 60_000} ms: ${command} ${args.join(" ")}\n${stdout}\n${stderr}`));
    }, options.timeoutMs ?? 60_000);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolveRun({ code, stdout, stderr });
    });
  });
}

export function wrangler(args: readonly string[], env: NodeJS.ProcessEnv, timeoutMs = 90_000): Promise<RunResult> {
  return run(process.execPath, [WRANGLER, ...args], { env, timeoutMs });
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals) {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, signal); // the group this test started (detached: its own group), by id
  } catch {
    // already gone
  }
}

/**
 * A copy of the run's migrated D1 state (test/support/d1-template.mts) at
 * `stateDir`: what `wrangler d1 migrations apply` would leave there, in
 * milliseconds instead of seconds. `seed` SQL goes into shard 0 (`ackbox`)
 * before any Worker opens it.
 */
export async function copyMigratedState(stateDir: string, seed?: string): Promise<void> {
  const template = await migratedTemplate();
  await cp(template.state, stateDir, { recursive: true });
  if (seed === undefined) return;
  const { DatabaseSync } = await import("node:sqlite"); // only when seeding: Node warns that it is experimental
  const db = new DatabaseSync(join(stateDir, template.files.ackbox as string));
  try {
    db.exec(`BEGIN;\n${seed}\nCOMMIT;`);
  } finally {
    db.close();
  }
}

export interface LocalIngress {
  readonly url: string;
  readonly token: string | undefined;
  readonly stateDir: string;
  /** Runs SQL against the instance's local D1 (while it runs: local D1 is one SQLite file). */
  sql(text: string): Promise<RunResult>;
  /** What wrangler printed so far (for failure messages). */
  output(): string;
  stop(): Promise<void>;
}

export interface StartOptions {
  /** ADMIN_TOKEN of the instance; undefined = the operator API is off. */
  readonly adminToken?: string | undefined;
  /** SQL run after the migrations, before the Worker starts. */
  readonly seed?: string | undefined;
  readonly startTimeoutMs?: number;
}

export async function startLocalIngress(options: StartOptions = {}): Promise<LocalIngress> {
  const dir = await mkdtemp(join(tmpdir(), "ackbox-ops-"));
  const stateDir = join(dir, "state");
  const env = offlineEnv({ WRANGLER_REGISTRY_PATH: join(dir, "registry"), XDG_CONFIG_HOME: join(dir, "config") });
  const emptyEnvFile = join(dir, "empty.env");
  await writeFile(emptyEnvFile, "");
  const sql = async (text: string) => {
    const file = join(dir, `sql-${Date.now()}-${Math.random().toString(36).slice(2)}.sql`);
    await writeFile(file, text);
    return wrangler(["d1", "execute", "ackbox", "--local", "--persist-to", stateDir, "-c", "wrangler.toml", "--file", file], env);
  };

  await copyMigratedState(stateDir, options.seed);

  const port = await freePort();
  const inspectorPort = await freePort();
  const args = [
    WRANGLER,
    "dev",
    // The engine's test ingress (test/support/entries/ingress.ts), not wrangler.toml's main over the team's app/index.ts.
    "test/support/entries/ingress.ts",
    "-c",
    "wrangler.toml",
    "--ip",
    "127.0.0.1",
    "--port",
    String(port),
    "--inspector-port",
    String(inspectorPort),
    "--persist-to",
    stateDir,
    "--env-file",
    emptyEnvFile,
    "--show-interactive-dev-session=false",
    ...(options.adminToken ? ["--var", `ADMIN_TOKEN:${options.adminToken}`] : []),
  ];
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  const exited = new Promise<void>((resolveExit) => child.once("exit", () => resolveExit()));

  const stop = async () => {
    killGroup(child, "SIGTERM");
    const gone = await Promise.race([exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 5_000))]);
    if (!gone) {
      killGroup(child, "SIGKILL");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000))]);
    }
    await rm(dir, { recursive: true, force: true });
  };

  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + (options.startTimeoutMs ?? 90_000);
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`wrangler dev exited (${child.exitCode}) before it served:\n${output}`);
    }
    try {
      const response = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2_000) });
      if (response.status === 200) break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`wrangler dev did not serve ${url}/healthz within ${options.startTimeoutMs ?? 90_000} ms:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return { url, token: options.adminToken, stateDir, sql, output: () => output, stop };
}

/** SQL text for one value (numbers as they are, strings quoted, null as NULL). */
function lit(value: string | number | null): string {
  if (value === null) return "NULL";
  if (typeof value === "number") return String(value);
  return `'${value.replace(/'/g, "''")}'`;
}

export const SEED_IDS = {
  /** Dead: chat.postMessage, channel_not_found, 10 min ago. Event EvOPS0DEAD1. */
  deadChannel: 101,
  /** Dead: reactions.add, attempts exhausted, 5 min ago. Event EvOPS0DEAD2. */
  deadExhausted: 102,
  /** Pending for 700 s, never enqueued: the oldest pending row (over the 600 s threshold). */
  oldPending: 103,
  /** Done a minute ago after one failed attempt. Event EvOPS0DONE. */
  done: 104,
  /** Leased, lease expired a minute ago. */
  staleLease: 105,
  /** Dead: chat.postMessage, channel_not_found, 3 min ago, another team. Event EvOPS0DEAD3. */
  deadChannelOtherTeam: 106,
} as const;

/**
 * A small deployment's worth of state at `now` (ms): one row of each kind
 * the runbook talks about, their receipts and audit rows, and `samples`
 * backlog samples a minute apart ending at `now` (the dashboard's history).
 */
export function seedSql(now: number, samples = 60): string {
  const m = 60_000;
  const receipts: [string, string, string, string, number][] = [
    ["EvOPS0DEAD1", "event", "app_mention", "T0OPS", now - 12 * m],
    ["EvOPS0DEAD2", "event", "message", "T0OPS", now - 40 * m],
    ["EvOPS0PEND", "event", "message", "T0OPS", now - 700_000],
    ["EvOPS0DONE", "event", "app_mention", "T0OPS", now - 3 * m],
    ["EvOPS0LEASE", "event", "message", "T0OPS", now - 4 * m],
    ["EvOPS0DEAD3", "event", "app_mention", "T0OTHER", now - 4 * m],
  ];
  type Row = {
    id: number;
    receipt: string;
    key: string;
    team: string;
    effect: string;
    payload: unknown;
    status: string;
    attempts: number;
    claimToken: string | null;
    claimExpiresAt: number | null;
    nextAttemptAt: number;
    enqueuedAt: number | null;
    sweepAt: number | null;
    lastError: string | null;
    result: string | null;
    createdAt: number;
    completedAt: number | null;
  };
  const post = { channel: "C0OPS", thread_ts: "1764504000.000100", text: "Hi there, ackbox heard you." };
  const eyes = { channel: "C0OPS", timestamp: "1764504000.000200", name: "eyes" };
  const rows: Row[] = [
    {
      id: SEED_IDS.deadChannel,
      receipt: "EvOPS0DEAD1",
      key: "reply",
      team: "T0OPS",
      effect: "chat.postMessage",
      payload: post,
      status: "dead",
      attempts: 1,
      claimToken: "claim-ops-1",
      claimExpiresAt: null,
      nextAttemptAt: now - 12 * m,
      enqueuedAt: now - 12 * m,
      sweepAt: null,
      lastError: "chat.postMessage: channel_not_found",
      result: null,
      createdAt: now - 12 * m,
      completedAt: now - 10 * m,
    },
    {
      id: SEED_IDS.deadExhausted,
      receipt: "EvOPS0DEAD2",
      key: "eyes",
      team: "T0OPS",
      effect: "reactions.add",
      payload: eyes,
      status: "dead",
      attempts: 8,
      claimToken: "claim-ops-2",
      claimExpiresAt: null,
      nextAttemptAt: now - 6 * m,
      enqueuedAt: now - 6 * m,
      sweepAt: null,
      lastError: "attempts exhausted (8 of 8): reactions.add: HTTP 503",
      result: null,
      createdAt: now - 40 * m,
      completedAt: now - 5 * m,
    },
    {
      id: SEED_IDS.oldPending,
      receipt: "EvOPS0PEND",
      key: "eyes",
      team: "T0OPS",
      effect: "reactions.add",
      payload: eyes,
      status: "pending",
      attempts: 0,
      claimToken: null,
      claimExpiresAt: null,
      nextAttemptAt: now - 700_000,
      enqueuedAt: null,
      sweepAt: now + 10 * m,
      lastError: null,
      result: null,
      createdAt: now - 700_000,
      completedAt: null,
    },
    {
      id: SEED_IDS.done,
      receipt: "EvOPS0DONE",
      key: "reply",
      team: "T0OPS",
      effect: "chat.postMessage",
      payload: post,
      status: "done",
      attempts: 2,
      claimToken: "claim-ops-4",
      claimExpiresAt: null,
      nextAttemptAt: now - 2 * m,
      enqueuedAt: now - 2 * m,
      sweepAt: null,
      lastError: "chat.postMessage: internal_error",
      result: JSON.stringify({ channel: "C0OPS", ts: "1764504001.000100" }),
      createdAt: now - 3 * m,
      completedAt: now - m,
    },
    {
      id: SEED_IDS.staleLease,
      receipt: "EvOPS0LEASE",
      key: "eyes",
      team: "T0OPS",
      effect: "reactions.add",
      payload: eyes,
      status: "leased",
      attempts: 1,
      claimToken: "claim-ops-5",
      claimExpiresAt: now - m,
      nextAttemptAt: now - 4 * m,
      enqueuedAt: now - 4 * m,
      sweepAt: now - m,
      lastError: null,
      result: null,
      createdAt: now - 4 * m,
      completedAt: null,
    },
    {
      id: SEED_IDS.deadChannelOtherTeam,
      receipt: "EvOPS0DEAD3",
      key: "reply",
      team: "T0OTHER",
      effect: "chat.postMessage",
      payload: post,
      status: "dead",
      attempts: 1,
      claimToken: "claim-ops-6",
      claimExpiresAt: null,
      nextAttemptAt: now - 4 * m,
      enqueuedAt: now - 4 * m,
      sweepAt: null,
      lastError: "chat.postMessage: channel_not_found",
      result: null,
      createdAt: now - 4 * m,
      completedAt: now - 3 * m,
    },
  ];
  const statements = [
    ...receipts.map(
      ([id, kind, type, team, at]) =>
        `INSERT INTO receipts (id, kind, type, team_id, retry_num, delivery_id, received_at) VALUES (${lit(id)}, ${lit(kind)}, ${lit(type)}, ${lit(team)}, NULL, 'seed', ${at});`,
    ),
    ...rows.map(
      (r) =>
        `INSERT INTO outbox (id, idempotency_key, receipt_id, team_id, effect, payload, status, attempts, claim_token, claim_expires_at, next_attempt_at, expires_at, enqueued_at, sweeps, sweep_at, last_error, result, created_at, updated_at, completed_at) VALUES (${[
          r.id,
          lit(`${r.receipt}:${r.key}`),
          lit(r.receipt),
          lit(r.team),
          lit(r.effect),
          lit(JSON.stringify(r.payload)),
          lit(r.status),
          r.attempts,
          lit(r.claimToken),
          lit(r.claimExpiresAt),
          r.nextAttemptAt,
          "NULL",
          lit(r.enqueuedAt),
          0,
          lit(r.sweepAt),
          lit(r.lastError),
          lit(r.result),
          r.createdAt,
          r.completedAt ?? r.createdAt,
          lit(r.completedAt),
        ].join(", ")});`,
    ),
    `INSERT INTO outbox_attempts (outbox_id, attempt, outcome, error, claim_token, started_at, finished_at) VALUES (${SEED_IDS.deadChannel}, 1, 'dead', 'chat.postMessage: channel_not_found', 'claim-ops-1', ${now - 10 * m - 300}, ${now - 10 * m});`,
    `INSERT INTO outbox_attempts (outbox_id, attempt, outcome, error, claim_token, started_at, finished_at) VALUES (${SEED_IDS.deadExhausted}, 7, 'retry', 'reactions.add: HTTP 503', 'claim-ops-2', ${now - 20 * m - 300}, ${now - 20 * m});`,
    `INSERT INTO outbox_attempts (outbox_id, attempt, outcome, error, claim_token, started_at, finished_at) VALUES (${SEED_IDS.deadExhausted}, 8, 'dead', 'attempts exhausted (8 of 8): reactions.add: HTTP 503', 'claim-ops-2', ${now - 5 * m - 300}, ${now - 5 * m});`,
    `INSERT INTO outbox_attempts (outbox_id, attempt, outcome, error, claim_token, started_at, finished_at) VALUES (${SEED_IDS.done}, 1, 'retry', 'chat.postMessage: internal_error', 'claim-ops-4', ${now - 3 * m}, ${now - 3 * m + 200});`,
    `INSERT INTO outbox_attempts (outbox_id, attempt, outcome, error, claim_token, started_at, finished_at) VALUES (${SEED_IDS.deadChannelOtherTeam}, 1, 'dead', 'chat.postMessage: channel_not_found', 'claim-ops-6', ${now - 3 * m - 300}, ${now - 3 * m});`,
  ];
  // A backlog that built up and drained: a bump of pending rows, a few leases, dead rows appearing late.
  for (let i = samples - 1; i >= 0; i--) {
    const at = now - i * m;
    const t = (samples - 1 - i) / Math.max(1, samples - 1);
    const pending = Math.round(40 * Math.exp(-(((t - 0.45) / 0.15) ** 2)) + 1);
    const leased = Math.round(6 * Math.exp(-(((t - 0.5) / 0.2) ** 2)));
    const dead = t > 0.8 ? 3 : t > 0.6 ? 1 : 0;
    statements.push(
      `INSERT INTO backlog_samples (at, pending, leased, dead, stale_leases, never_enqueued, oldest_pending_age_ms, done_in_window, failed_in_window, window_ms, queue_backlog, counts_capped) VALUES (${at}, ${pending}, ${leased}, ${dead}, 0, 0, ${pending * 9000}, ${Math.round(100 * t)}, ${dead}, 900000, 0, 0);`,
    );
  }
  return `${statements.join("\n")}\n`;
}
