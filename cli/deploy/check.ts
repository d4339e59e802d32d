/**
 * What CI can prove about a deploy without reaching Cloudflare:
 *
 * 0. The wrangler files bind every shard SHARD_COUNT needs, the same database
 *    in both (cli/deploy/shards.ts): a missing DB_<i> is otherwise
 *    found only by the deployed Workers, at their first request.
 * 1. `wrangler deploy --dry-run --outdir` builds each Worker from its real
 *    wrangler file: the exact bundle a deploy would upload.
 * 2. Those bundles start, together, in workerd (`wrangler dev --no-bundle`
 *    on the built files): this is what catches a Worker that workerd refuses
 *    to start — e.g. a non-function named export in an entry, which a
 *    single-Worker test never notices (TOOLCHAIN.md).
 * 3. They work: a signed mention, a slash command and a button click are
 *    acked and their effects reach a local Slack stand-in; the cron runs.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { writeAppEntries } from "../local/app-entries.ts";
import { WORKER_CONFIGS, type WorkerRole } from "../local/config.ts";
import { PROJECT_ROOT, startPipeline } from "../local/pipeline.ts";
import { quietWranglerEnv, runToCompletion, sleep, wranglerArgv } from "../local/processes.ts";
import { appModulePath } from "../local/project-app.ts";
import { LOCAL_SIGNING_SECRET } from "../local/settings.ts";
import { teamsOnEveryShard } from "../local/shard-teams.ts";
import { appMention, buttonClick, eventCallback, postSigned, slashCommand } from "../local/slack-payloads.ts";
import type { StandinCall } from "../local/slack-standin.ts";
import { shardBindingProblems } from "./shards.ts";

export interface Bundle {
  readonly path: string;
  readonly bytes: number;
  readonly buildMs: number;
}

export type Bundles = Readonly<Record<WorkerRole, Bundle>>;

export class DeployCheckError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DeployCheckError";
  }
}

/**
 * `wrangler deploy --dry-run --outdir <outdir>/<role>` for both Workers, in parallel. With `app` (a module relative
 * to the root, as ACKBOX_APP names one), each Worker is built from an entry over it instead of its wrangler file's
 * `main` over app/index.ts: the engine's test builds the reference app as shipped, whatever app/index.ts composes.
 */
export async function buildBundles(outdir: string, root: string = PROJECT_ROOT, app?: string): Promise<Bundles> {
  const env = quietWranglerEnv(process.env, { logs: join(outdir, "logs") });
  const entries = app === undefined ? undefined : writeAppEntries(join(outdir, "entries"), appModulePath(app, root));
  const build = async (role: WorkerRole): Promise<[WorkerRole, Bundle]> => {
    const dir = join(outdir, role);
    const started = performance.now();
    const [node, args] = wranglerArgv(root, [
      "deploy",
      ...(entries ? [entries[role]] : []),
      "--dry-run",
      "--outdir",
      dir,
      "-c",
      WORKER_CONFIGS[role],
    ]);
    const result = await runToCompletion(node, args, { cwd: root, env, timeoutMs: 120_000 });
    if (result.code !== 0 || !/--dry-run: exiting now/.test(result.output)) {
      throw new DeployCheckError(
        `wrangler deploy --dry-run of the ${role} (${WORKER_CONFIGS[role]}) failed:\n${result.output.trim().split("\n").slice(-25).join("\n")}`,
      );
    }
    const modules = readdirSync(dir).filter((file) => /\.(m?js)$/.test(file));
    const main = modules.includes("index.js") ? "index.js" : modules[0];
    if (main === undefined || modules.length !== 1) {
      throw new DeployCheckError(
        `the ${role}'s bundle in ${dir} is not one module (${modules.join(", ") || "none"}); teach cli/deploy/check.ts about it`,
      );
    }
    const path = join(dir, main);
    return [role, { path, bytes: statSync(path).size, buildMs: Math.round(performance.now() - started) }];
  };
  return Object.fromEntries(await Promise.all([build("ingress"), build("consumer")])) as Record<WorkerRole, Bundle>;
}

export interface StartCheck {
  readonly startupMs: number;
  /** Each smoke step and what it saw. */
  readonly steps: readonly string[];
}

/**
 * Starts the built bundles (both Workers, one local process, a stand-in for
 * Slack), drives one request of each surface through them, and stops them.
 * Rejects with the workerd error if either refuses to start.
 */
export async function startBundles(
  bundles: Readonly<Record<WorkerRole, string>>,
  options: {
    workDir: string;
    root?: string;
    timeoutMs?: number;
    /** Local D1 databases to run them with (default: the wrangler files' SHARD_COUNT); above 1, a mention per shard too. */
    shardCount?: number;
    /** The app module the bundles were built over (buildBundles' `app`): its settings are the ones checked. */
    app?: string;
  },
): Promise<StartCheck> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  let run: Awaited<ReturnType<typeof startPipeline>>;
  try {
    run = await startPipeline({
      ...(options.root ? { root: options.root } : {}),
      port: 0,
      env: options.shardCount !== undefined ? { SHARD_COUNT: String(options.shardCount) } : {},
      devVarsFile: null,
      dir: join(options.workDir, "run"),
      persistTo: join(options.workDir, "state"),
      cronIntervalMs: 0,
      bundles,
      ...(options.app !== undefined ? { app: options.app } : {}),
      readyTimeoutMs: 60_000,
    });
  } catch (error) {
    throw new DeployCheckError(`the built bundles did not start: ${error instanceof Error ? error.message : String(error)}`);
  }
  const steps: string[] = [`started both bundles in ${run.startupMs} ms`];
  try {
    const standin = run.standin;
    if (!standin) throw new DeployCheckError("no stand-in: the check runs without Slack settings");
    const channel = "C0CHECK";
    const ts = `${Math.floor(Date.now() / 1000)}.000001`;
    const messageTs = `${Math.floor(Date.now() / 1000)}.000002`;
    const id = Date.now().toString(36).toUpperCase();
    const answers = [
      await postSigned(run.url, LOCAL_SIGNING_SECRET, eventCallback(appMention({ channel, ts }), `Ev0CHECK${id}`)),
      await postSigned(
        run.url,
        LOCAL_SIGNING_SECRET,
        slashCommand({ channel, responseUrl: standin.responseUrl(`commands/T0CHECK/${id}/1`), triggerId: `${id}.1` }),
      ),
      await postSigned(
        run.url,
        LOCAL_SIGNING_SECRET,
        buttonClick({ channel, messageTs, triggerId: `${id}.2`, responseUrl: standin.responseUrl(`actions/T0CHECK/${id}/2`) }),
      ),
    ];
    // With several shards, a mention from a team of each shard as well: every shard's binding is used end to end.
    const shards = run.configs.shards.length;
    const perShard = shards > 1 ? teamsOnEveryShard(shards, "T0CHECK") : [];
    for (const [shard, team] of perShard.entries()) {
      const shardTs = `${Math.floor(Date.now() / 1000)}.1000${String(shard).padStart(2, "0")}`;
      const request = eventCallback(appMention({ channel, ts: shardTs, team: team.teamId }), `Ev0CHECK${id}S${shard}`, team);
      answers.push(await postSigned(run.url, LOCAL_SIGNING_SECRET, request));
    }
    const statuses = answers.map((a) => a.status);
    if (statuses.some((s) => s !== 200)) throw new DeployCheckError(`the ingress bundle answered ${statuses.join(", ")} (want 200s)`);
    steps.push(
      `ingress bundle acked a mention, a slash command and a button click${shards > 1 ? `, and a mention from a team of each of ${shards} shards` : ""} (200)`,
    );

    const wanted: Array<[string, (c: StandinCall) => boolean]> = [
      ["chat.postMessage", (c) => c.method === "chat.postMessage" && c.params.thread_ts === ts],
      ["response_url", (c) => c.method === "response_url" && c.path === `/commands/T0CHECK/${id}/1`],
      ["chat.update", (c) => c.method === "chat.update" && c.params.ts === messageTs],
      ...perShard.map((team, shard): [string, (c: StandinCall) => boolean] => [
        `chat.postMessage for ${team.teamId} (shard ${shard})`,
        (c) =>
          c.method === "chat.postMessage" &&
          c.params.channel === channel &&
          String(c.params.thread_ts ?? "").endsWith(`.1000${String(shard).padStart(2, "0")}`),
      ]),
    ];
    const deadline = Date.now() + timeoutMs;
    let missing = wanted;
    while (missing.length > 0 && Date.now() < deadline) {
      await sleep(100);
      const { calls } = standin.snapshot();
      missing = wanted.filter(([, matches]) => !calls.some(matches));
    }
    if (missing.length > 0) {
      throw new DeployCheckError(
        `the consumer bundle did not deliver ${missing.map(([name]) => name).join(", ")} within ${timeoutMs / 1000} s`,
      );
    }
    steps.push(
      `consumer bundle delivered chat.postMessage, response_url and chat.update${shards > 1 ? `, and each shard's reply` : ""} to the stand-in`,
    );

    const sweep = await run.sweep();
    if (!sweep.ok) throw new DeployCheckError(`the consumer bundle's cron failed (${sweep.status}: ${sweep.detail})`);
    steps.push("consumer bundle ran its cron (scheduled) cleanly");
    return { startupMs: run.startupMs, steps };
  } catch (error) {
    const output = run.recentOutput().slice(-20).join("\n");
    throw error instanceof DeployCheckError ? new DeployCheckError(`${error.message}\nlast wrangler output:\n${output}`) : error;
  } finally {
    await run.stop();
  }
}

export interface DeployCheckResult {
  readonly bundles: Bundles;
  readonly start: StartCheck;
  readonly outdir: string;
}

/** Build, start, smoke. `outdir` defaults to a temporary folder, removed unless `keep`. */
export async function checkDeploy(
  options: { outdir?: string; keep?: boolean; root?: string; shardCount?: number } = {},
): Promise<DeployCheckResult> {
  const problems = shardBindingProblems(options.root ?? PROJECT_ROOT, { requireReal: false });
  if (problems.length > 0) throw new DeployCheckError(`the wrangler files do not bind the shards:\n${problems.join("\n")}`);
  const outdir = options.outdir ? resolve(options.outdir) : mkdtempSync(join(tmpdir(), "ackbox-deploy-check-"));
  try {
    const bundles = await buildBundles(outdir, options.root);
    const start = await startBundles(
      { ingress: bundles.ingress.path, consumer: bundles.consumer.path },
      {
        workDir: outdir,
        ...(options.root ? { root: options.root } : {}),
        ...(options.shardCount !== undefined ? { shardCount: options.shardCount } : {}),
      },
    );
    return { bundles, start, outdir };
  } finally {
    if (!options.keep && !options.outdir) rmSync(outdir, { recursive: true, force: true });
  }
}
