/**
 * The whole pipeline on this machine: both Workers in one `wrangler dev`
 * process, local D1 with migrations applied, the sweeper's cron fired on a
 * timer, and (when no Slack is configured) a local Slack stand-in, whose fake
 * model an app's assistant asks when no MODEL_URL is set.
 *
 *   const run = await startPipeline({ port: 0, env: { SLACK_API_URL: fake } });
 *   await fetch(`${run.url}/slack/events`, …);
 *   await run.stop();        // or run.kill(): a crash, for fault tests
 *
 * `npm start` (cli/project/start.ts) is a thin CLI over this; the benchmark, the
 * fault-injection suite and the tests import it. Why it is built this way is
 * in TOOLCHAIN.md, "Local run": one process for both Workers (two processes on
 * one state dir fail under load), one merged .dev.vars beside generated
 * configs (--var reaches only the first Worker), a private dev registry
 * emptied at each start (a killed run otherwise owns the Worker names for
 * ~90 s), and a timer for the cron (local crons never fire by themselves).
 */
import type { ChildProcess } from "node:child_process";
import { createWriteStream, existsSync, mkdirSync, readFileSync, rmSync, type WriteStream, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { createInterface } from "node:readline";
import type { SettingsDeclaration } from "../../shared/app/settings.ts";
import { writeAppEntries } from "./app-entries.ts";
import { type GeneratedConfigs, localShardCount, type WorkerRole, writeDevConfigs } from "./config.ts";
import { parseDotenv } from "./dotenv.ts";
import { clock, formatRecord, PLAIN, parseOutputLine, type Style, stripAnsi, type WorkerRecord } from "./pretty.ts";
import {
  assertPortFree,
  commandLineOf,
  devWranglerEnv,
  freePort,
  quietWranglerEnv,
  runToCompletion,
  signalGroup,
  sleep,
  spawnGroup,
  waitGroupGone,
  within,
  wranglerArgv,
} from "./processes.ts";
import { appModuleOf, appModulePath, loadProjectApp, PROJECT_APP } from "./project-app.ts";
import {
  ADMIN_TOKEN_FILE,
  DEFAULT_CRON_INTERVAL_MS,
  DEFAULT_PERSIST_TO,
  DEFAULT_PORT,
  DEFAULT_RUN_DIR,
  ensureLocalAdminToken,
  ensureLocalModelKey,
  ensureLocalTokenKey,
  isAlive,
  MODEL_KEY_FILE,
  PROJECT_ROOT,
  type RunInfo,
} from "./run-info.ts";
import { type LocalSettings, resolveLocalSettings, wantsStandin, wantsStandinModel } from "./settings.ts";
import { type SlackStandin, startSlackStandin } from "./slack-standin.ts";

export {
  DEFAULT_CRON_INTERVAL_MS,
  DEFAULT_PERSIST_TO,
  DEFAULT_PORT,
  DEFAULT_RUN_DIR,
  PROJECT_ROOT,
  type RunInfo,
  readRunInfo,
} from "./run-info.ts";

const CRON = "* * * * *";

export interface PipelineOptions {
  /** Project root (default: this repository). */
  readonly root?: string;
  /** Port of the ingress on 127.0.0.1 (default 8787; 0 picks a free one). */
  readonly port?: number;
  /** Where settings are read from, over the root .dev.vars (default process.env). Only the engine's and the app's setting names are taken. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /**
   * The app module both Workers run, relative to the root (default: ACKBOX_APP, else app/index.ts, which the
   * wrangler files' entries import). Another module gets entries of its own in the run folder (app-entries.ts).
   */
  readonly app?: string;
  /** The settings the app declares (default: the app module's). */
  readonly appSettings?: SettingsDeclaration;
  /** The root .dev.vars (default <root>/.dev.vars; null reads none). */
  readonly devVarsFile?: string | null;
  /** The run folder (default <root>/.ackbox/local). One run per folder at a time. */
  readonly dir?: string;
  /** Local state: D1 and queues (default <root>/.wrangler/state). Kept across runs. */
  readonly persistTo?: string;
  /** How often the sweeper's cron fires (default 60 000 ms; 0 never: call sweep() yourself). */
  readonly cronIntervalMs?: number;
  /** Port of the stand-in, when it is used (default: a free one). */
  readonly standinPort?: number;
  /** Run these prebuilt bundles instead of the sources (wrangler does not bundle them again). */
  readonly bundles?: Readonly<Record<WorkerRole, string>>;
  /** How long wrangler may take to be ready (default 90 s). */
  readonly readyTimeoutMs?: number;
  /** Human-readable output, one line per call (default: none). */
  readonly print?: (line: string) => void;
  readonly style?: Style;
  /** Also print debug records and every wrangler line. */
  readonly verbose?: boolean;
  /** Print wrangler's output as it comes, without summaries. */
  readonly raw?: boolean;
  /** Every Worker log record, parsed (for tools that count deliveries, …). */
  readonly onRecord?: (record: WorkerRecord) => void;
}

export interface SweepResult {
  readonly ok: boolean;
  readonly status: number;
  readonly detail: string;
}

export interface Pipeline {
  /** http://127.0.0.1:<port>: the ingress. Slack's Request URL is `${url}/slack/events`. */
  readonly url: string;
  readonly port: number;
  /** The stand-in, when no SLACK_BOT_TOKEN / SLACK_API_URL was set. */
  readonly standin: SlackStandin | undefined;
  readonly settings: LocalSettings;
  readonly configs: GeneratedConfigs;
  readonly dir: string;
  readonly persistTo: string;
  /** Process group of wrangler, workerd and esbuild. */
  readonly pgid: number;
  /** Migrations applied by this start to any shard (empty when every database was up to date). */
  readonly migrationsApplied: readonly string[];
  /** From the call to ready (workers answering, first sweep done), in ms. */
  readonly startupMs: number;
  /** Resolves when wrangler has exited, for whatever reason. */
  readonly exited: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>;
  /** Fires the consumer's cron once, now. */
  sweep(): Promise<SweepResult>;
  /** Stops everything (SIGTERM, then SIGKILL after 5 s) and waits until no process of the run is left. */
  stop(): Promise<void>;
  /** SIGKILL to every process of the run at once, no shutdown: a crash. Queue messages in memory are lost. */
  kill(): Promise<void>;
  /** The last lines wrangler printed (ANSI stripped). */
  recentOutput(): string[];
}

export class PipelineError extends Error {
  /** wrangler lost a race for one of its own ports to another process starting at the same moment: worth another try. */
  readonly retryable: boolean;
  constructor(message: string, retryable = false) {
    super(message);
    this.name = "PipelineError";
    this.retryable = retryable;
  }
}

export async function startPipeline(options: PipelineOptions = {}): Promise<Pipeline> {
  const started = performance.now();
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await startOnce(options, started);
    } catch (error) {
      if (!(error instanceof PipelineError && error.retryable) || attempt >= 3) throw error;
      options.print?.(`wrangler lost a port to another process starting at the same time; starting again (attempt ${attempt + 1})`);
    }
  }
}

async function startOnce(options: PipelineOptions, started: number): Promise<Pipeline> {
  const root = resolve(options.root ?? PROJECT_ROOT);
  const dir = resolve(root, options.dir ?? DEFAULT_RUN_DIR);
  const persistTo = resolve(root, options.persistTo ?? DEFAULT_PERSIST_TO);
  const print = options.print ?? (() => {});
  const style = options.style ?? PLAIN;
  const env = options.env ?? process.env;
  const cronIntervalMs = options.cronIntervalMs ?? DEFAULT_CRON_INTERVAL_MS;
  if (!Number.isFinite(cronIntervalMs) || cronIntervalMs < 0) throw new PipelineError(`cronIntervalMs must be ≥ 0, got ${cronIntervalMs}`);

  const devVarsPath = options.devVarsFile === undefined ? join(root, ".dev.vars") : options.devVarsFile;
  const devVars = devVarsPath !== null && existsSync(devVarsPath) ? parseDotenv(readFileSync(devVarsPath, "utf8")) : {};

  mkdirSync(dir, { recursive: true });
  await cleanUpLeftoverRun(dir, print);
  const port = options.port === 0 ? await freePort() : (options.port ?? DEFAULT_PORT);
  await assertPortFree(port).catch((error: Error) => {
    throw new PipelineError(error.message);
  });

  const appModule = options.app ?? appModuleOf(process.env);
  const appSettings = options.appSettings ?? (await loadProjectApp(root, appModule)).declaredSettings;
  // The stand-in starts first: its URL is a setting. An assistant with no MODEL_URL asks its fake model, which
  // takes only the run's own key (generated once into the run folder, as the ADMIN_TOKEN is).
  let standin: SlackStandin | undefined;
  const modelKey = wantsStandinModel(devVars, env, appSettings) ? ensureLocalModelKey(dir) : undefined;
  if (wantsStandin(devVars, env)) {
    standin = await startSlackStandin({
      ...(options.standinPort !== undefined ? { port: options.standinPort } : {}),
      ...(modelKey !== undefined ? { model: { apiKey: modelKey } } : {}),
      print: (line) => print(`${style.dim(clock())} ${style.bold("slack ◂")} ${line}`),
    });
  }
  const cleanups: Array<() => Promise<void> | void> = [];
  if (standin) cleanups.push(() => standin.close());
  const failStart = async (error: unknown): Promise<never> => {
    for (const cleanup of cleanups.reverse()) await cleanup();
    throw error;
  };

  let settings: LocalSettings;
  let configs: GeneratedConfigs;
  try {
    // The wrangler files' entries run app/index.ts; another app module runs through entries written for it.
    const mains = appModule === PROJECT_APP || options.bundles ? undefined : writeAppEntries(dir, appModulePath(appModule, root));
    settings = resolveLocalSettings({
      devVars,
      env,
      ...(standin ? { standinApiUrl: standin.apiUrl } : {}),
      localAdminToken: () => ensureLocalAdminToken(dir),
      localTokenKey: () => ensureLocalTokenKey(dir),
      ...(modelKey !== undefined ? { localModelKey: () => modelKey } : {}),
      ingressUrl: `http://127.0.0.1:${port}`,
      appSettings,
    });
    configs = writeDevConfigs({
      root,
      dir,
      vars: settings.values,
      shardCount: localShardCount(root, settings.values),
      ...(options.bundles ? { bundles: options.bundles } : {}),
      ...(mains ? { mains } : {}),
    });
  } catch (error) {
    return failStart(error);
  }

  const registry = join(dir, "registry");
  rmSync(registry, { recursive: true, force: true });
  mkdirSync(registry, { recursive: true });
  const paths = { registry, logs: join(dir, "logs") };
  const childEnv = devWranglerEnv(process.env, paths);

  // Migrations first, to every shard's database, on the same state folder the dev run uses.
  const migrationsApplied: string[] = [];
  for (const shard of configs.shards) {
    const [node, migrateArgs] = wranglerArgv(root, [
      "d1",
      "migrations",
      "apply",
      shard.databaseName,
      "--local",
      "-c",
      configs.ingress,
      "--persist-to",
      persistTo,
    ]);
    const migrate = await runToCompletion(node, migrateArgs, {
      cwd: root,
      env: quietWranglerEnv(process.env, paths),
      timeoutMs: 120_000,
    }).catch(failStart);
    if (migrate.code !== 0) {
      return failStart(
        new PipelineError(
          `applying migrations to local D1 ${shard.databaseName} (shard ${shard.index}, ${shard.binding}) failed (${migrate.timedOut ? "timed out" : `exit ${migrate.code}`}):\n${tail(migrate.output, 30)}`,
        ),
      );
    }
    for (const match of stripAnsi(migrate.output).matchAll(/│[ \t]*(\S+\.sql)[ \t]*│[ \t]*✅/g)) {
      const name = match[1] ?? "";
      if (!migrationsApplied.includes(name)) migrationsApplied.push(name);
    }
  }

  // Both Workers, one process, the ingress first (it is the one on the port).
  const logPath = join(dir, "wrangler.log");
  const logFile: WriteStream = createWriteStream(logPath, { flags: "w" });
  cleanups.push(() => new Promise<void>((done) => logFile.end(done)));
  const [node, devArgs] = wranglerArgv(root, [
    "dev",
    "-c",
    configs.ingress,
    "-c",
    configs.consumer,
    "--ip",
    "127.0.0.1",
    "--port",
    String(port),
    "--persist-to",
    persistTo,
    "--show-interactive-dev-session=false",
    ...(options.bundles ? ["--no-bundle"] : []),
  ]);
  const child: ChildProcess = spawnGroup(node, devArgs, { cwd: root, env: childEnv });
  const pgid = child.pid;
  if (pgid === undefined) return failStart(new PipelineError("could not start wrangler dev"));
  // If this process exits without stop() (an uncaught error), take the run down with it.
  const onExit = () => signalGroup(pgid, "SIGKILL");
  process.on("exit", onExit);
  cleanups.push(() => {
    process.off("exit", onExit);
  });

  let exitedState: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolveExit) => {
    child.once("exit", (code, signal) => {
      exitedState = { code, signal };
      resolveExit(exitedState);
    });
  });

  const recent: string[] = [];
  let stopping = false;
  const onLine = (line: string) => {
    const text = stripAnsi(line);
    logFile.write(`${text}\n`);
    recent.push(text);
    if (recent.length > 80) recent.shift();
    if (options.raw) return print(line);
    const parsed = parseOutputLine(line);
    if (parsed.kind === "record") {
      options.onRecord?.(parsed.record);
      const formatted = formatRecord(parsed.record, style, options.verbose);
      if (formatted !== undefined) print(`${style.dim(clock())} ${formatted}`);
    } else if (options.verbose || !parsed.noise) {
      print(`${style.dim(clock())} ${style.dim(`wrangler │ ${parsed.text}`)}`);
    }
  };
  if (child.stdout) createInterface({ input: child.stdout }).on("line", onLine);
  if (child.stderr) createInterface({ input: child.stderr }).on("line", onLine);

  const url = `http://127.0.0.1:${port}`;
  // Published at once: if this launcher dies before it is ready, the next start still finds and stops this wrangler.
  const runInfo: RunInfo = {
    pid: process.pid,
    pgid,
    url,
    standinUrl: standin?.url ?? null,
    persistTo,
    startedAt: new Date().toISOString(),
    adminTokenFile: settings.sources.ADMIN_TOKEN === "local default" ? join(dir, ADMIN_TOKEN_FILE) : null,
    modelKeyFile: settings.sources.MODEL_API_KEY === "local default" ? join(dir, MODEL_KEY_FILE) : null,
  };
  writeFileSync(join(dir, "run.json"), `${JSON.stringify(runInfo, null, 2)}\n`);
  cleanups.push(() => rmSync(join(dir, "run.json"), { force: true }));

  const sweep = async (): Promise<SweepResult> => {
    try {
      const response = await fetch(
        `${url}/cdn-cgi/local/explorer/api/local/scheduled?worker=${encodeURIComponent(configs.names.consumer)}`,
        {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ cron: CRON }),
          signal: AbortSignal.timeout(30_000),
        },
      );
      const text = await response.text();
      let outcome = "";
      try {
        outcome = String((JSON.parse(text) as { result?: { outcome?: string } }).result?.outcome ?? "");
      } catch {
        // Not JSON: reported as is.
      }
      return { ok: response.status === 200 && outcome === "ok", status: response.status, detail: outcome || text.slice(0, 300) };
    } catch (error) {
      return { ok: false, status: 0, detail: error instanceof Error ? error.message : String(error) };
    }
  };

  const stopGroup = async (graceMs: number) => {
    signalGroup(pgid, graceMs > 0 ? "SIGTERM" : "SIGKILL");
    if (graceMs > 0 && !exitedState) {
      await within(exited, graceMs);
      if (!exitedState) signalGroup(pgid, "SIGKILL");
    }
    await within(exited, 5000);
    // workerd may outlive wrangler by a moment: nothing of the run stays behind.
    signalGroup(pgid, "SIGKILL");
    if (!(await waitGroupGone(pgid, 5000)))
      print(style.red(`some processes of process group ${pgid} did not exit; check with: ps -o pid,cmd -g ${pgid}`));
  };

  // Ready: the ingress answers /healthz and the consumer takes a cron (which also sweeps what a previous run left).
  const deadline = Date.now() + (options.readyTimeoutMs ?? 90_000);
  let ready = false;
  let lastSweep: SweepResult = { ok: false, status: 0, detail: "not tried" };
  while (Date.now() < deadline && !exitedState) {
    if (!ready) {
      const health = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2000) }).catch(() => undefined);
      ready = health?.status === 200;
      await health?.body?.cancel();
    }
    if (ready) {
      lastSweep = await sweep();
      if (lastSweep.ok) break;
    }
    await sleep(200);
  }
  if (!lastSweep.ok) {
    if (exitedState) await sleep(300); // the last lines of a wrangler that died may still be in the pipe
    const why = exitedState
      ? `wrangler dev exited (${exitedState.code ?? exitedState.signal}) before it was ready`
      : !ready
        ? `the ingress did not answer ${url}/healthz within ${Math.round((options.readyTimeoutMs ?? 90_000) / 1000)} s`
        : `the consumer did not take its cron (${lastSweep.status}: ${lastSweep.detail})`;
    await stopGroup(0);
    // wrangler picks some ports of its own (inspector, direct sockets) by probing: two runs starting at once can collide.
    // (Our own --port taken is not a race to retry: that message names it.)
    const lostPortRace =
      exitedState !== undefined && recent.some((line) => line.includes("Address already in use") && !line.includes(`:${port})`));
    return failStart(
      new PipelineError(
        `${why}. Last lines of ${relative(process.cwd(), logPath) || logPath}:\n${recent.slice(-25).join("\n")}`,
        lostPortRace,
      ),
    );
  }

  let timer: NodeJS.Timeout | undefined;
  if (cronIntervalMs > 0) {
    let inFlight = false;
    let failing = false;
    timer = setInterval(() => {
      if (inFlight || stopping) return;
      inFlight = true;
      void sweep().then((result) => {
        inFlight = false;
        if (!result.ok && !failing && !stopping) print(style.yellow(`${clock()} cron trigger failed (${result.status}): ${result.detail}`));
        if (result.ok && failing) print(`${clock()} cron trigger works again`);
        failing = !result.ok;
      });
    }, cronIntervalMs);
    timer.unref();
  }

  const finish = async () => {
    if (timer) clearInterval(timer);
    for (const cleanup of cleanups.reverse()) await cleanup();
    cleanups.length = 0;
  };
  let stopped: Promise<void> | undefined;
  void exited.then(() => {
    if (!stopping)
      print(style.red(`${clock()} wrangler dev exited unexpectedly (${exitedState?.code ?? exitedState?.signal}); see ${logPath}`));
  });

  return {
    url,
    port,
    standin,
    settings,
    configs,
    dir,
    persistTo,
    pgid,
    migrationsApplied,
    startupMs: Math.round(performance.now() - started),
    exited,
    sweep,
    recentOutput: () => [...recent],
    stop() {
      stopping = true;
      stopped ??= stopGroup(5000).then(finish);
      return stopped;
    },
    kill() {
      stopping = true;
      stopped ??= stopGroup(0).then(finish);
      return stopped;
    },
  };
}

/**
 * The checks a start makes before it does anything: the run folder is not
 * another live run's, and the port is free. `npm start` calls this before it
 * prints a word about migrations, so a second start refuses first.
 *
 * A previous run whose launcher was killed outright (SIGKILL: no handler ran)
 * leaves its wrangler behind, detached in a group of its own, still holding
 * the port with no cron and no stand-in: that group is stopped first (one
 * line says so, through `print`), so the port check that follows finds the
 * port free instead of refusing the start.
 */
export async function preflight(options: {
  readonly root?: string;
  readonly dir?: string;
  readonly port: number;
  readonly print?: (line: string) => void;
}): Promise<void> {
  const root = resolve(options.root ?? PROJECT_ROOT);
  const dir = resolve(root, options.dir ?? DEFAULT_RUN_DIR);
  await cleanUpLeftoverRun(dir, options.print ?? (() => {}));
  if (options.port !== 0)
    await assertPortFree(options.port).catch((error: Error) => {
      throw new PipelineError(error.message);
    });
}

function anotherRun(info: RunInfo, dir: string): PipelineError {
  return new PipelineError(
    `another local run (pid ${info.pid}, ${info.url}) is using ${dir}; stop it first (or remove ${join(dir, "run.json")} if that pid is not ours)`,
  );
}

/** How long a leftover wrangler gets to stop on SIGTERM (it stops workerd with it) before its group is killed. */
const LEFTOVER_GRACE_MS = 5000;

/**
 * A run folder whose run.json names a live launcher belongs to another run:
 * refuse. One whose launcher is gone but whose wrangler group lives on was a
 * crash: stop that group (only if it is verifiably ours: its leader's command
 * line names this folder, so a recycled pgid is never signalled) — SIGTERM,
 * then SIGKILL after LEFTOVER_GRACE_MS — and say so in one line.
 */
async function cleanUpLeftoverRun(dir: string, print: (line: string) => void): Promise<void> {
  let info: RunInfo;
  try {
    info = JSON.parse(readFileSync(join(dir, "run.json"), "utf8")) as RunInfo;
  } catch {
    return;
  }
  if (info.pid !== process.pid && isAlive(info.pid)) throw anotherRun(info, dir);
  const leader = commandLineOf(info.pgid);
  if (leader?.includes(dir)) {
    signalGroup(info.pgid, "SIGTERM");
    const how = (await waitGroupGone(info.pgid, LEFTOVER_GRACE_MS)) ? "SIGTERM" : "SIGKILL";
    if (how === "SIGKILL") {
      signalGroup(info.pgid, "SIGKILL");
      await waitGroupGone(info.pgid, 5000);
    }
    print(`stopped wrangler (process group ${info.pgid}, ${how}) left running by a previous run whose launcher (pid ${info.pid}) is gone`);
  }
  rmSync(join(dir, "run.json"), { force: true });
}

function tail(text: string, lines: number): string {
  return stripAnsi(text).trimEnd().split("\n").slice(-lines).join("\n");
}
