/**
 * Section "pipeline": the whole local pipeline under load, through `npm start`
 * itself (cli/project/start.ts as a child: its launcher, its pretty printer, its
 * sweeper timer), the consumer's SLACK_API_URL pointed at this process's fake
 * Slack; beside it the durable floor (workers/floor-*.js, run by
 * cli/local/pipeline.ts with the product's configs): the least any outbox
 * pays on its happy path.
 *
 * Per round, alternated: GET /healthz, and signed watched-channel events (a
 * threaded reply or a reaction each), at the same concurrency. After each
 * load the bench waits, uncounted and bounded, for every accepted event's
 * effect and for a quiet process tree, so no load's deferred work lands in
 * the next one. An events
 * load's figure is the whole pipeline's: effects arrived ÷ the time from its
 * first request to the later of its last ack and its last effect; the
 * acked-only rate is kept beside it. CPU is every process of the tree per
 * accepted event, gross and net of the tree's idle burn (sampled before and
 * after the rounds, the lower kept). The ack's first-attempt verdicts are
 * counted from what npm start prints (said.ts).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { startPipeline } from "../../cli/local/pipeline.ts";
import { processesInGroup } from "../../cli/local/processes.ts";
import { slackSignature } from "../../cli/local/slack-payloads.ts";
import type { SettingsDeclaration } from "../../shared/app/settings.ts";
import { BENCH_APP, ROOT, WORK_DIR } from "./build.ts";
import { onInterrupt } from "./cleanup.ts";
import { commandOf, cpuOf, descendants, processCpuMs } from "./cpu.ts";
import { type FakeSlack, startFakeSlack } from "./fake-slack.ts";
import { type LoadResult, runLoad } from "./load.ts";
import { verdictOfPrinted } from "./said.ts";
import { BENCH_BOT_TOKEN, BENCH_CHANNEL, BENCH_SIGNING_SECRET, type PreparedRequest, signedEvents } from "./signed-events.ts";
import { quantile, round } from "./stats.ts";

export interface PipelineOptions {
  /** Requests per load of each kind per round. */
  readonly requests: number;
  readonly connections: number;
  readonly rounds: number;
  /** Port of the `npm start` child (the bench's own, never 8787). */
  readonly port: number;
  /** Every wait's ceiling: start-up, one load, the last effects. */
  readonly maxSeconds: number;
  /**
   * How long the settled tree is watched for its idle CPU, before the rounds and again after them; the lower of
   * the two is the idle rate (a sweeper tick of npm start's timer, once a minute, falling into one sample would
   * otherwise be subtracted as if it ran all along).
   */
  readonly idleSampleMs: number;
  /** Write a V8 CPU profile of the Node side (cli/project/start.ts) into this folder. */
  readonly cpuProfileDir?: string;
}

export interface PipelineRun {
  readonly variant: string;
  readonly healthzPerSecond: readonly number[];
  /** Per round: events acked with 200 ÷ the time from the first request to the last ack. */
  readonly eventsAckedPerSecond: readonly number[];
  /** Per round: events whose effect reached the fake Slack ÷ the time from the first request to the later of the last ack and the last effect. */
  readonly eventsPerSecond: readonly number[];
  /** Per round: delivered events/s ÷ healthz/s (the target's figure). */
  readonly ratios: readonly number[];
  readonly ratio: number;
  /** Per round: acked events/s ÷ healthz/s, for comparison with runs before the delivered figure. */
  readonly ackRatios: readonly number[];
  readonly ackRatio: number;
  readonly accepted: number;
  readonly delivered: number;
  /** CPU of the whole run (npm start's Node, wrangler, workerd) per accepted event, ms (healthz included in the time). */
  readonly cpuMsPerEvent: number;
  /** The same, less what the tree burns idle over the same wall time (the lower of its rates before and after the rounds): the events' own work. */
  readonly cpuNetOfIdleMsPerEvent: number;
  /** cpuMsPerEvent by process (cli/project/start.ts, wrangler's Node, the workerd running the Workers with D1 and Queues, …). */
  readonly cpuMsPerEventByProcess: Readonly<Record<string, number>>;
  /** The ack's first-attempt verdicts over the rounds, from npm start's lines ("inline", the gate's reason, "queue"); empty for the floor. */
  readonly firstAttempt: Readonly<Record<string, number>>;
}

export interface PipelineResult {
  readonly config: PipelineOptions;
  readonly runs: readonly PipelineRun[];
}

export const BUILT = "ackbox as built";
/** The same npm start with the first attempt off: every row through the queue to the consumer. */
export const BUILT_QUEUE_ONLY = "ackbox, FIRST_ATTEMPT=off";
/** The floor's Workers: one D1 row before the ack, a claim and a fenced finish; no log line. */
export const DURABLE_FLOOR = "durable floor: a row before the ack, claim, fenced finish, no log line (wrangler dev, the product's configs)";

/** ackbox through `npm start`, or the floor's Workers under plain `wrangler dev`. */
const VARIANTS = [BUILT, BUILT_QUEUE_ONLY, DURABLE_FLOOR] as const;
type Variant = (typeof VARIANTS)[number];
const VARIANT_KEYS: Record<Variant, string> = { [BUILT]: "built", [BUILT_QUEUE_ONLY]: "off", [DURABLE_FLOOR]: "floor" };

/** The process tree counts as quiet below this share of one core, over QUIET_WINDOW_MS. */
const QUIET_CORE_SHARE = 0.05;
const QUIET_WINDOW_MS = 500;

export async function benchPipeline(options: PipelineOptions, progress: (line: string) => void): Promise<PipelineResult> {
  const runs: PipelineRun[] = [];
  // BENCH_PIPELINE_ONLY=built,off,floor (any of them): fewer variants, e.g. ackbox as built alone to measure a change to it.
  const only = process.env.BENCH_PIPELINE_ONLY?.split(",");
  for (const variant of VARIANTS) if (!only || only.includes(VARIANT_KEYS[variant])) runs.push(await measure(options, variant, progress));
  return { config: options, runs };
}

/** A running variant: where it answers, the processes whose CPU is its own, and how to stop it. */
export interface Launched {
  readonly base: string;
  /** Its run folder (npm start's --dir: the generated admin token is there); the floor's has none. */
  readonly dir?: string;
  /** Every process of the run (CPU accounting, the quiet wait). */
  tree(): number[];
  /** The ack's first-attempt verdicts so far, from what npm start printed (empty for the floor). */
  readonly verdicts: Readonly<Record<string, number>>;
  /** What it printed last, for an error. */
  recent(): string;
  exitCode(): number | null;
  stop(): Promise<void>;
}

async function launch(options: PipelineOptions, variant: Variant, slack: FakeSlack): Promise<Launched> {
  if (variant === DURABLE_FLOOR) return launchFloor(options, slack);
  return launchNpmStart(options, slack, variant === BUILT_QUEUE_ONLY ? { FIRST_ATTEMPT: "off" } : {});
}

/**
 * cli/project/start.ts as a child, as a user runs it; its output read (so its pretty printer runs as in a terminal)
 * and tallied. Its Slack is `slack`, or with null its own stand-in (no SLACK_BOT_TOKEN or SLACK_API_URL, as a plain
 * `npm start`: the stand-in's fake model then answers an assistant), whose address its run folder's run.json holds.
 */
export async function launchNpmStart(
  options: Pick<PipelineOptions, "port" | "cpuProfileDir">,
  slack: Pick<FakeSlack, "apiUrl"> | null,
  settings: Readonly<Record<string, string>>,
): Promise<Launched> {
  const dir = join(WORK_DIR, `npm-start-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const child = spawn(
    process.execPath,
    [
      ...(options.cpuProfileDir ? ["--cpu-prof", `--cpu-prof-dir=${options.cpuProfileDir}`] : []),
      "cli/project/start.ts",
      "--dir",
      dir,
      "--persist-to",
      join(dir, "state"),
    ],
    {
      cwd: ROOT,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        ...process.env,
        PORT: String(options.port),
        SLACK_SIGNING_SECRET: BENCH_SIGNING_SECRET,
        // Set empty, not left out: a SLACK_BOT_TOKEN in the bench's own environment must not send effects elsewhere.
        SLACK_BOT_TOKEN: slack ? BENCH_BOT_TOKEN : "",
        SLACK_API_URL: slack ? slack.apiUrl : "",
        WATCHED_CHANNELS: BENCH_CHANNEL,
        NO_COLOR: "1",
        ...settings,
      },
    },
  );
  const tail: string[] = [];
  const verdicts: Record<string, number> = {};
  for (const stream of [child.stdout, child.stderr]) {
    if (!stream) continue;
    stream.on("data", (chunk: Buffer) => {
      tail.push(chunk.toString());
      if (tail.length > 50) tail.shift();
    });
    createInterface({ input: stream }).on("line", (line) => {
      const verdict = verdictOfPrinted(line);
      if (verdict !== undefined) verdicts[verdict] = (verdicts[verdict] ?? 0) + 1;
    });
  }
  const stop = () => stopChild(child);
  const unregister = onInterrupt(stop);
  return {
    base: `http://127.0.0.1:${options.port}`,
    dir,
    tree: () => (child.pid === undefined ? [] : [child.pid, ...descendants(child.pid)]),
    verdicts,
    recent: () => tail.join("").slice(-2000),
    exitCode: () => child.exitCode,
    stop: async () => {
      unregister();
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The floor's two Workers under the product's own configs (cli/local/pipeline.ts with prebuilt bundles), as npm
 * start runs wrangler dev; or, with `configs`, under the wrangler files of another folder (spike.ts: the same
 * files with a plain queue consumer).
 */
export async function launchFloor(
  options: Pick<PipelineOptions, "port" | "maxSeconds">,
  slack: Pick<FakeSlack, "apiUrl">,
  configs?: { readonly root: string; readonly appSettings: SettingsDeclaration },
): Promise<Launched> {
  const dir = join(WORK_DIR, `floor-${process.pid}`);
  const run = await startPipeline({
    port: options.port,
    dir,
    persistTo: join(dir, "state"),
    devVarsFile: null,
    cronIntervalMs: 0,
    readyTimeoutMs: options.maxSeconds * 1000,
    env: { SLACK_SIGNING_SECRET: BENCH_SIGNING_SECRET, SLACK_BOT_TOKEN: BENCH_BOT_TOKEN, SLACK_API_URL: slack.apiUrl },
    app: BENCH_APP, // its settings: the floor's Workers run no app
    ...(configs ?? {}),
    bundles: {
      ingress: join(ROOT, "scripts/bench/workers/floor-ingress.js"),
      consumer: join(ROOT, "scripts/bench/workers/floor-consumer.js"),
    },
  });
  const stop = async () => {
    await run.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  const unregister = onInterrupt(stop);
  try {
    await floorSanityCheck(run.url);
  } catch (error) {
    unregister();
    await stop();
    throw error;
  }
  return {
    base: run.url,
    tree: () => processesInGroup(run.pgid),
    verdicts: {},
    recent: () => run.recentOutput().slice(-30).join("\n"),
    exitCode: () => null,
    stop: async () => {
      unregister();
      await stop();
    },
  };
}

/** A floor must do the work it is credited with: refuse a bad signature, answer a signed challenge. */
async function floorSanityCheck(base: string): Promise<void> {
  const timestamp = String(Math.floor(Date.now() / 1000));
  const body = JSON.stringify({ type: "url_verification", challenge: "floor-check" });
  const headers = { "content-type": "application/json", "x-slack-request-timestamp": timestamp };
  const signature = slackSignature(BENCH_SIGNING_SECRET, Number(timestamp), body);
  const forged = await fetch(`${base}/slack/events`, {
    method: "POST",
    headers: { ...headers, "x-slack-signature": `v0=${"0".repeat(64)}` },
    body,
  });
  await forged.arrayBuffer();
  if (forged.status !== 401) throw new Error(`the floor answered ${forged.status} to a forged signature, not 401`);
  const signed = await fetch(`${base}/slack/events`, { method: "POST", headers: { ...headers, "x-slack-signature": signature }, body });
  const answer = (await signed.json().catch(() => ({}))) as { challenge?: unknown };
  if (signed.status !== 200 || answer.challenge !== "floor-check") {
    throw new Error(`the floor answered ${signed.status} ${JSON.stringify(answer)} to a signed challenge`);
  }
}

async function measure(options: PipelineOptions, variant: Variant, progress: (line: string) => void): Promise<PipelineRun> {
  const slack = await startFakeSlack();
  let launched: Launched | undefined;
  try {
    launched = await launch(options, variant, slack);
    const { base, tree } = launched;
    const boundMs = options.maxSeconds * 1000;
    // Between loads, uncounted: every accepted effect arrived, the tree quiet.
    const settle = async (keys: ReadonlySet<string>) => {
      await waitForKeys(slack, keys, boundMs);
      await waitQuiet(tree, boundMs);
    };
    await waitUntilUp(`${base}/healthz`, boundMs, launched);
    const healthz: PreparedRequest[] = Array.from({ length: options.requests + options.connections }, () => ({
      method: "GET",
      path: "/healthz",
      headers: {},
      body: "",
      eventId: "",
      ts: "",
    }));
    // A warm-up of each kind, not counted, and settled like a round's load. The healthz one is a
    // round's size (about a second): with 100 requests round 1's healthz read 460–760/s against
    // 820–1 150 in rounds 2 and 3 of the same runs, the runtime's JIT still warming on that path.
    await runLoad({
      url: base,
      connections: options.connections,
      count: options.requests,
      requests: healthz,
      maxSeconds: options.maxSeconds,
    });
    const warm = await signedEvents(options.connections * 6);
    const warmLoad = await runLoad({
      url: base,
      connections: options.connections,
      count: options.connections * 5,
      requests: warm,
      maxSeconds: options.maxSeconds,
    });
    await settle(acceptedKeys(warmLoad, warm));
    // CPU from here to the end of the last round's settling: the rounds' loads and everything they caused.
    const processes = tree();
    // What the tree burns doing nothing (esbuild's watcher, timers), per ms of wall time, so CPU per event can be
    // given net of it, whatever the variants' waits between loads.
    // Sampled here and again after the rounds (options.idleSampleMs).
    const idleBefore = await idleRates(processes, options.idleSampleMs);
    const verdicts0 = { ...launched.verdicts };
    const cpu0 = new Map(processes.map((pid) => [pid, processCpuMs(pid) ?? 0]));
    const wall0 = performance.now();
    const healthzPerSecond: number[] = [];
    const eventsPerSecond: number[] = [];
    const eventsAckedPerSecond: number[] = [];
    let accepted = 0;
    let delivered = 0;
    for (let r = 0; r < options.rounds; r++) {
      const order = r % 2 === 0 ? (["healthz", "events"] as const) : (["events", "healthz"] as const);
      for (const kind of order) {
        const requests = kind === "healthz" ? healthz : await signedEvents(options.requests + options.connections);
        const started = performance.now();
        const load = await runLoad({
          url: base,
          connections: options.connections,
          count: options.requests,
          requests,
          maxSeconds: options.maxSeconds,
        });
        const ok = load.statuses["200"] ?? 0;
        if (kind === "healthz") {
          healthzPerSecond.push(round(ok / (load.durationMs / 1000), 1));
          await settle(new Set());
          continue;
        }
        const keys = acceptedKeys(load, requests);
        const lastAck = lastAckOf(load);
        await settle(keys);
        // The effects of this load: the first arrival of each accepted event's key.
        const firstArrival = new Map<string, number>();
        for (const a of slack.arrivals) if (keys.has(a.key) && !firstArrival.has(a.key)) firstArrival.set(a.key, a.at);
        const end = Math.max(lastAck, ...firstArrival.values());
        accepted += ok;
        delivered += firstArrival.size;
        eventsAckedPerSecond.push(round(ok / (load.durationMs / 1000), 1));
        eventsPerSecond.push(round(firstArrival.size / ((end - started) / 1000), 1));
      }
      progress(
        `pipeline [${variant}] round ${r + 1}/${options.rounds}: healthz ${healthzPerSecond.at(-1)}/s, events ${eventsPerSecond.at(-1)}/s delivered (${eventsAckedPerSecond.at(-1)}/s acked)`,
      );
    }
    const wallMs = performance.now() - wall0;
    const cpuByPid = processes.map((pid) => ({ pid, ms: (processCpuMs(pid) ?? 0) - (cpu0.get(pid) ?? 0) }));
    const cpuMs = cpuByPid.reduce((sum, p) => sum + p.ms, 0);
    const idleAfter = await idleRates(processes, options.idleSampleMs);
    const idleMs = processes.reduce((sum, pid) => sum + Math.min(idleBefore.get(pid) ?? 0, idleAfter.get(pid) ?? 0) * wallMs, 0);
    const perEvent = (ms: number) => round(ms / Math.max(1, accepted), 2);
    const ratioOf = (perSecond: readonly number[]) => perSecond.map((e, i) => round(e / Math.max(0.001, healthzPerSecond[i] ?? 0), 2));
    const ratios = ratioOf(eventsPerSecond);
    const ackRatios = ratioOf(eventsAckedPerSecond);
    const run: PipelineRun = {
      variant,
      healthzPerSecond,
      eventsAckedPerSecond,
      eventsPerSecond,
      ratios,
      ratio: round(quantile(ratios, 0.5), 2),
      ackRatios,
      ackRatio: round(quantile(ackRatios, 0.5), 2),
      accepted,
      delivered,
      cpuMsPerEvent: perEvent(cpuMs),
      cpuNetOfIdleMsPerEvent: perEvent(Math.max(0, cpuMs - idleMs)),
      cpuMsPerEventByProcess: byRole(cpuByPid, perEvent),
      firstAttempt: Object.fromEntries(
        Object.entries(launched.verdicts).flatMap(([k, n]) => (n - (verdicts0[k] ?? 0) > 0 ? [[k, n - (verdicts0[k] ?? 0)]] : [])),
      ),
    };
    progress(
      `pipeline [${variant}]: delivered events ÷ healthz ${run.ratio} (rounds ${ratios.join(", ")}); acked ÷ healthz ${run.ackRatio} (${ackRatios.join(", ")}); ${run.delivered}/${accepted} delivered${verdictsText(run.firstAttempt)}; CPU ${run.cpuMsPerEvent} ms/event, ${run.cpuNetOfIdleMsPerEvent} net of idle (${Object.entries(
        run.cpuMsPerEventByProcess,
      )
        .map(([role, ms]) => `${role} ${ms}`)
        .join(", ")})`,
    );
    return run;
  } finally {
    await launched?.stop();
    await slack.close();
  }
}

/** CPU ms summed by each process's role, then `per` (per event). */
function byRole(cpu: readonly { pid: number; ms: number }[], per: (ms: number) => number): Record<string, number> {
  const sums: Record<string, number> = {};
  for (const { pid, ms } of cpu) sums[roleOf(pid)] = (sums[roleOf(pid)] ?? 0) + ms;
  return Object.fromEntries(Object.entries(sums).map(([role, ms]) => [role, per(ms)]));
}

/** Which process of a run's tree this is, for the CPU split. */
function roleOf(pid: number): string {
  let args = "";
  try {
    args = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
  } catch {
    return "gone";
  }
  if (args.includes("cli/project/start.ts")) return "npm start";
  if (args.includes("workerd")) return args.includes("--inspector-addr") ? "workerd (Workers, D1, Queues)" : "workerd (wrangler's proxy)";
  if (args.includes("wrangler")) return "wrangler";
  return commandOf(pid) || "other";
}

/** The message ts of every event the load got a 200 for: its effect names it. */
export function acceptedKeys(load: LoadResult, requests: readonly PreparedRequest[]): Set<string> {
  const keys = new Set<string>();
  for (const c of load.completions) {
    const ts = requests[c.index]?.ts;
    if (c.status === 200 && ts) keys.add(ts);
  }
  return keys;
}

export function lastAckOf(load: LoadResult): number {
  return load.completions.reduce((last, c) => Math.max(last, c.at), 0);
}

/** Until every key has reached the fake Slack, or the bound (the missing ones then count as not delivered). */
export async function waitForKeys(slack: FakeSlack, keys: ReadonlySet<string>, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  const missing = new Set(keys);
  while (performance.now() < deadline) {
    for (const key of missing) if (slack.distinct.has(key)) missing.delete(key);
    if (missing.size === 0) return;
    await sleep(25);
  }
}

/** Until the tree's CPU stays under QUIET_CORE_SHARE of a core for QUIET_WINDOW_MS, or the bound. */
export async function waitQuiet(tree: () => number[], timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let from = performance.now();
  let cpu = cpuOf(tree());
  while (performance.now() < deadline) {
    await sleep(QUIET_WINDOW_MS);
    const now = performance.now();
    const next = cpuOf(tree());
    if (next - cpu < QUIET_CORE_SHARE * (now - from)) return;
    from = now;
    cpu = next;
  }
}

/** Each process's CPU ms per wall ms over `ms`, the tree doing nothing. */
async function idleRates(pids: readonly number[], ms: number): Promise<Map<number, number>> {
  const before = new Map(pids.map((pid) => [pid, processCpuMs(pid) ?? 0]));
  const from = performance.now();
  await sleep(ms);
  const elapsed = performance.now() - from;
  return new Map(pids.map((pid) => [pid, Math.max(0, (processCpuMs(pid) ?? 0) - (before.get(pid) ?? 0)) / elapsed]));
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function verdictsText(verdicts: Readonly<Record<string, number>>): string {
  const entries = Object.entries(verdicts);
  return entries.length === 0 ? "" : ` (first attempt: ${entries.map(([k, n]) => `${k} ${n}`).join(", ")})`;
}

export async function waitUntilUp(url: string, timeoutMs: number, run: Launched): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (run.exitCode() !== null) throw new Error(`the run exited (${run.exitCode()}) before answering: ${run.recent()}`);
    try {
      const response = await fetch(url);
      if (response.ok) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`the run did not answer ${url} within ${timeoutMs} ms: ${run.recent()}`);
}

/** SIGINT to the run's process group (what Ctrl-C does), then SIGKILL if it lingers; resolves when it has exited. */
async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.pid === undefined) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  try {
    process.kill(-child.pid, "SIGINT");
  } catch {
    return;
  }
  const timer = setTimeout(() => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
    } catch {
      // Gone already.
    }
  }, 15_000);
  await exited;
  clearTimeout(timer);
}
