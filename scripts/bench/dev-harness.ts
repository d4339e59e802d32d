/**
 * A minimal local run of both Workers for the end-to-end and drain sections:
 * `wrangler dev -c <ingress> -c <consumer>`, one process, the ingress on the
 * port, the queue crossing to the consumer, one D1 (TOOLCHAIN.md, "Local
 * run"). Both configs are copied into one private folder with one .dev.vars
 * beside them, because `--var` would reach only the first Worker; the copies'
 * paths are made absolute. Wrangler's dev registry is private to the run
 * (WRANGLER_REGISTRY_PATH), so no other local run on the machine can take
 * this one's queue messages or cron calls. Offline, quiet, loopback only.
 *
 * scripts/local (the project's launcher, in progress) does the same job for
 * `npm start`; when it exposes a start function, this file should give way
 * to it.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { promisify } from "node:util";
import { experimental_readRawConfig } from "wrangler";
import { freePort } from "../local/processes.ts";
import { ROOT, WORK_DIR } from "./build.ts";
import { descendants } from "./cpu.ts";

const run = promisify(execFile);
const WRANGLER = join(ROOT, "node_modules/wrangler/bin/wrangler.js");

export interface DevRun {
  readonly url: string;
  readonly consumerName: string;
  /** Every line wrangler printed (the Workers' log lines among them). */
  readonly lines: readonly string[];
  /** Fires the consumer's cron once through the local explorer endpoint; resolves when the call returns. */
  fireCron(): Promise<{ status: number; ms: number }>;
  /** wrangler's process and its descendants (workerd), for CPU accounting. */
  pids(): number[];
  stop(): Promise<void>;
}

export interface DevOptions {
  readonly label: string;
  /** Settings both Workers get (secrets and vars): written to the shared .dev.vars. */
  readonly vars: Readonly<Record<string, string>>;
  readonly startTimeoutMs?: number;
  /**
   * Bench-only changes for profiling: a prebuilt bundle to run instead of a
   * Worker's own entry (wrangler does not bundle it again), and overrides of
   * the consumer's [[queues.consumers]] entry for the outbox queue. The
   * product's files are never edited; only the copies in the run's folder.
   */
  readonly bundles?: { readonly ingress?: string; readonly consumer?: string };
  readonly outboxConsumer?: Readonly<Record<string, number>>;
  /** wrangler's environment beyond the quiet defaults (X_LOCAL_OBSERVABILITY=false, as npm start runs it). */
  readonly env?: Readonly<Record<string, string>>;
}

type Raw = Record<string, unknown>;

function quietEnv(registry: string): NodeJS.ProcessEnv {
  return {
    ...process.env,
    WRANGLER_SEND_METRICS: "false",
    CLOUDFLARE_CF_FETCH_ENABLED: "false",
    WRANGLER_HIDE_BANNER: "true",
    WRANGLER_REGISTRY_PATH: registry,
    CI: "1",
    NO_COLOR: "1",
  };
}

function copyConfig(path: string, bundle?: string): Raw {
  const { rawConfig } = experimental_readRawConfig({ config: path }) as { rawConfig: Raw };
  const copy = structuredClone(rawConfig);
  const from = dirname(path);
  if (typeof copy.main === "string" && !isAbsolute(copy.main)) copy.main = resolve(from, copy.main);
  if (bundle !== undefined) {
    copy.main = resolve(bundle);
    copy.no_bundle = true;
  }
  const dbs = Array.isArray(copy.d1_databases) ? (copy.d1_databases as Raw[]) : [];
  copy.d1_databases = dbs.map((db) => ({
    ...db,
    migrations_dir: resolve(from, typeof db.migrations_dir === "string" ? db.migrations_dir : "migrations"),
  }));
  return copy;
}

export async function startDev(options: DevOptions): Promise<DevRun> {
  const dir = join(WORK_DIR, `dev-${options.label}-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  const state = join(dir, "state");
  const registry = join(dir, "registry");
  mkdirSync(registry, { recursive: true });
  const ingress = copyConfig(join(ROOT, "wrangler.toml"), options.bundles?.ingress);
  const consumer = copyConfig(join(ROOT, "workers/consumer/wrangler.toml"), options.bundles?.consumer);
  if (options.outboxConsumer) {
    const queues = consumer.queues as { consumers?: Raw[] } | undefined;
    const outbox = queues?.consumers?.find((c) => c.queue === "ackbox-outbox");
    if (!outbox) throw new Error("the consumer config has no ackbox-outbox consumer to override");
    Object.assign(outbox, options.outboxConsumer);
  }
  const ingressPath = join(dir, "ingress.wrangler.json");
  const consumerPath = join(dir, "consumer.wrangler.json");
  writeFileSync(ingressPath, JSON.stringify(ingress, null, 2));
  writeFileSync(consumerPath, JSON.stringify(consumer, null, 2));
  const dotenv = Object.entries(options.vars)
    .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
    .join("\n");
  writeFileSync(join(dir, ".dev.vars"), `${dotenv}\n`, { mode: 0o600 });
  const database = String((ingress.d1_databases as Raw[])[0]?.database_name ?? "ackbox");
  const env = { ...quietEnv(registry), ...options.env };
  const wrangler = (args: string[]) =>
    run(process.execPath, [WRANGLER, ...args], { cwd: dir, env, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 });

  await wrangler(["d1", "migrations", "apply", database, "--local", "--persist-to", state, "-c", ingressPath]);

  const port = await freePort();
  const inspector = await freePort();
  const child: ChildProcess = spawn(
    process.execPath,
    [
      WRANGLER,
      "dev",
      "-c",
      ingressPath,
      "-c",
      consumerPath,
      "--ip",
      "127.0.0.1",
      "--port",
      String(port),
      "--inspector-port",
      String(inspector),
      "--persist-to",
      state,
      "--show-interactive-dev-session=false",
      // "log" is the level of the Workers' console.log lines (the sweep's report among them).
      "--log-level",
      "log",
    ],
    { cwd: dir, env, detached: true, stdio: ["ignore", "pipe", "pipe"] },
  );
  const lines: string[] = [];
  const take = (chunk: Buffer) => {
    for (const line of chunk.toString("utf8").split("\n")) if (line.trim()) lines.push(line);
    if (lines.length > 200_000) lines.splice(0, lines.length - 100_000);
  };
  child.stdout?.on("data", take);
  child.stderr?.on("data", take);
  let exited = false;
  child.on("exit", () => {
    exited = true;
  });

  const stop = async () => {
    if (!exited && child.pid !== undefined) {
      try {
        process.kill(-child.pid, "SIGTERM");
      } catch {
        // already gone
      }
      for (let i = 0; i < 50 && !exited; i++) await new Promise((r) => setTimeout(r, 100));
      if (!exited) {
        try {
          process.kill(-child.pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
    }
    rmSync(dir, { recursive: true, force: true });
  };

  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + (options.startTimeoutMs ?? 90_000);
  for (;;) {
    if (exited) {
      await stop();
      throw new Error(`wrangler dev exited during start:\n${lines.slice(-30).join("\n")}`);
    }
    try {
      const response = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2000) });
      if (response.status === 200) break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`wrangler dev did not answer /healthz within the start timeout:\n${lines.slice(-30).join("\n")}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }

  const consumerName = String(consumer.name);
  return {
    url,
    consumerName,
    lines,
    async fireCron() {
      const t0 = performance.now();
      const response = await fetch(`${url}/cdn-cgi/local/explorer/api/local/scheduled?worker=${encodeURIComponent(consumerName)}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ cron: "* * * * *" }),
        signal: AbortSignal.timeout(120_000),
      });
      await response.arrayBuffer();
      return { status: response.status, ms: performance.now() - t0 };
    },
    pids: () => (child.pid === undefined ? [] : [child.pid, ...descendants(child.pid)]),
    stop,
  };
}

/** The JSON log lines the Workers printed with this `msg`. */
export function logRecords(lines: readonly string[], msg: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  const needle = `"msg":"${msg}"`;
  for (const line of lines) {
    const start = line.indexOf("{");
    if (start < 0 || !line.includes(needle)) continue;
    try {
      out.push(JSON.parse(line.slice(start)) as Record<string, unknown>);
    } catch {
      // not one JSON object
    }
  }
  return out;
}
