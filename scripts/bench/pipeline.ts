/**
 * Section "pipeline": the whole local pipeline under load, through `npm start`
 * itself — scripts/start.ts as a child process (its launcher, its pretty
 * printer of the Workers' log lines, its sweeper timer), both Workers running,
 * the consumer's SLACK_API_URL pointed at this process's fake Slack.
 *
 * Per round, alternated (which goes first flips each round): GET /healthz
 * and signed watched-channel events (an app_mention or a channel message in
 * WATCHED_CHANNELS: a threaded reply or a reaction each), both at the same
 * concurrency. The figure is events/s ÷ healthz/s, per round, and its median:
 * how much of what the local runtime can answer at all is left once an
 * event's whole pipeline (ack, first attempt or queue, consumer, sweep) runs.
 *
 * Variants are settings of the same product (FIRST_ATTEMPT=off leaves every
 * effect to the consumer), each its own `npm start`, one after the other.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { ROOT, WORK_DIR } from "./build.ts";
import { onInterrupt } from "./cleanup.ts";
import { cpuOf } from "./cpu.ts";
import { startFakeSlack } from "./fake-slack.ts";
import { runLoad } from "./load.ts";
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
  /** Write a V8 CPU profile of the Node side (scripts/start.ts) into this folder. */
  readonly cpuProfileDir?: string;
}

export interface PipelineRun {
  readonly variant: string;
  readonly healthzPerSecond: readonly number[];
  readonly eventsPerSecond: readonly number[];
  readonly ratios: readonly number[];
  readonly ratio: number;
  readonly accepted: number;
  readonly delivered: number;
  /** CPU of the whole run (npm start's Node, wrangler, workerd) per accepted event, ms (healthz included in the time). */
  readonly cpuMsPerEvent: number;
}

export interface PipelineResult {
  readonly config: PipelineOptions;
  readonly runs: readonly PipelineRun[];
  readonly target: { readonly name: string; readonly measured: number; readonly target: string; readonly met: boolean };
}

const VARIANTS = [
  { name: "ackbox as built", vars: {} },
  { name: "ackbox, FIRST_ATTEMPT=off (every effect via the queue)", vars: { FIRST_ATTEMPT: "off" } },
] as const;

export async function benchPipeline(options: PipelineOptions, progress: (line: string) => void): Promise<PipelineResult> {
  const runs: PipelineRun[] = [];
  for (const variant of VARIANTS) runs.push(await measure(options, variant, progress));
  const built = runs[0];
  const measured = built?.ratio ?? 0;
  return {
    config: options,
    runs,
    target: { name: "whole pipeline: events/s ÷ GET /healthz/s (npm start, c=20)", measured, target: "≥ 0.5", met: measured >= 0.5 },
  };
}

async function measure(
  options: PipelineOptions,
  variant: (typeof VARIANTS)[number],
  progress: (line: string) => void,
): Promise<PipelineRun> {
  const slack = await startFakeSlack();
  const dir = join(WORK_DIR, `npm-start-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const child = spawn(
    process.execPath,
    [
      ...(options.cpuProfileDir ? ["--cpu-prof", `--cpu-prof-dir=${options.cpuProfileDir}`] : []),
      "scripts/start.ts",
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
        SLACK_BOT_TOKEN: BENCH_BOT_TOKEN,
        SLACK_API_URL: slack.apiUrl,
        WATCHED_CHANNELS: BENCH_CHANNEL,
        NO_COLOR: "1",
        ...variant.vars,
      },
    },
  );
  // npm start's output is read (so its pretty printer runs as it does in a terminal) and dropped.
  const tail: string[] = [];
  const keep = (chunk: Buffer) => {
    tail.push(chunk.toString());
    if (tail.length > 50) tail.shift();
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const stop = () => stopChild(child);
  const unregister = onInterrupt(stop);
  const base = `http://127.0.0.1:${options.port}`;
  try {
    await waitUntilUp(`${base}/healthz`, options.maxSeconds * 1000, child, tail);
    const healthz: PreparedRequest[] = Array.from({ length: options.requests + options.connections }, () => ({
      method: "GET",
      path: "/healthz",
      headers: {},
      body: "",
      eventId: "",
      ts: "",
    }));
    // A warm-up of each kind, not counted.
    await runLoad({
      url: base,
      connections: options.connections,
      count: options.connections * 5,
      requests: healthz,
      maxSeconds: options.maxSeconds,
    });
    const warm = await signedEvents(options.connections * 6);
    await runLoad({
      url: base,
      connections: options.connections,
      count: options.connections * 5,
      requests: warm,
      maxSeconds: options.maxSeconds,
    });
    const cpu0 = cpuOf(descendantsOf(child.pid ?? 0));
    const healthzPerSecond: number[] = [];
    const eventsPerSecond: number[] = [];
    let accepted = 0;
    const before = slack.distinct.size;
    for (let r = 0; r < options.rounds; r++) {
      const order = r % 2 === 0 ? (["healthz", "events"] as const) : (["events", "healthz"] as const);
      for (const kind of order) {
        const requests = kind === "healthz" ? healthz : await signedEvents(options.requests + options.connections);
        const load = await runLoad({
          url: base,
          connections: options.connections,
          count: options.requests,
          requests,
          maxSeconds: options.maxSeconds,
        });
        const ok = load.statuses["200"] ?? 0;
        const perSecond = round(ok / (load.durationMs / 1000), 1);
        if (kind === "healthz") healthzPerSecond.push(perSecond);
        else {
          eventsPerSecond.push(perSecond);
          accepted += ok;
        }
      }
      progress(
        `pipeline [${variant.name}] round ${r + 1}/${options.rounds}: healthz ${healthzPerSecond.at(-1)}/s, events ${eventsPerSecond.at(-1)}/s`,
      );
    }
    await slack.waitForDistinct(before + accepted, options.maxSeconds * 1000);
    const cpuMs = cpuOf(descendantsOf(child.pid ?? 0)) - cpu0;
    const ratios = eventsPerSecond.map((e, i) => round(e / Math.max(0.001, healthzPerSecond[i] ?? 0), 2));
    const run: PipelineRun = {
      variant: variant.name,
      healthzPerSecond,
      eventsPerSecond,
      ratios,
      ratio: round(quantile(ratios, 0.5), 2),
      accepted,
      delivered: slack.distinct.size - before,
      cpuMsPerEvent: round(cpuMs / Math.max(1, accepted), 2),
    };
    progress(
      `pipeline [${variant.name}]: events ÷ healthz ${run.ratio} (rounds ${ratios.join(", ")}), ${run.delivered}/${accepted} delivered`,
    );
    return run;
  } finally {
    unregister();
    await stop();
    await slack.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function waitUntilUp(url: string, timeoutMs: number, child: ChildProcess, tail: readonly string[]): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`npm start exited (${child.exitCode}): ${tail.join("").slice(-2000)}`);
    try {
      const response = await fetch(url);
      if (response.ok) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`npm start did not answer ${url} within ${timeoutMs} ms: ${tail.join("").slice(-2000)}`);
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

/** `pid` and every process below it (npm start's Node, wrangler, workerd: they sit in their own process groups). */
function descendantsOf(pid: number): number[] {
  const parentOf = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      parentOf.set(Number(entry), Number(fields[1]));
    } catch {
      // Gone meanwhile.
    }
  }
  const found = [pid];
  for (let i = 0; i < found.length; i++) {
    for (const [child, parent] of parentOf) if (parent === found[i]) found.push(child);
  }
  return found;
}
