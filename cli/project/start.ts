/**
 * `npm start`: the whole pipeline on this machine (cli/local/pipeline.ts).
 * Run `npm start -- --help` for the options.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { banner } from "../local/banner.ts";
import {
  DEFAULT_CRON_INTERVAL_MS,
  DEFAULT_PERSIST_TO,
  DEFAULT_PORT,
  DEFAULT_RUN_DIR,
  type Pipeline,
  preflight,
  startPipeline,
} from "../local/pipeline.ts";
import { styleFor } from "../local/pretty.ts";
import { commandLineOf } from "../local/processes.ts";
import { isAlive, localRunDir } from "../local/run-info.ts";
import { LOCAL_CLIENT_ID, LOCAL_MODEL_NAME, LOCAL_SIGNING_SECRET, SettingsError } from "../local/settings.ts";

const HELP = `npm start [-- options]

Runs both Workers in one local wrangler process on http://127.0.0.1:${DEFAULT_PORT}:
applies migrations to local D1, fires the sweeper's cron on a timer, and, when
neither SLACK_BOT_TOKEN nor SLACK_API_URL is set, sends effects to a local Slack
stand-in that prints what it receives. No Cloudflare account, no network.

Settings: the root .dev.vars, each overridable from the environment
(SLACK_API_URL=http://127.0.0.1:9000 npm start). Unset: SLACK_SIGNING_SECRET
is the local default "${LOCAL_SIGNING_SECRET}" (what npm run demo signs with),
RESPONSE_URL_HOSTS adds 127.0.0.1 and localhost, and ADMIN_TOKEN (the operator
API) is generated once into the run folder, where npx ackbox finds it by itself.
An app with an assistant (app.assistant) and no MODEL_URL asks the stand-in's
fake model (MODEL_NAME ${LOCAL_MODEL_NAME}, a MODEL_API_KEY generated once into
the run folder); set MODEL_URL, MODEL_API_KEY and MODEL_NAME to ask yours.
With SLACK_CLIENT_ID set (or --distributed) it is a distributed app; without,
it serves one workspace with SLACK_BOT_TOKEN. See .dev.vars.example.

Every local command honours PORT and ACKBOX_LOCAL_DIR: PORT=8788 npm start, then
PORT=8788 npm run demo and PORT=8788 npx ackbox backlog.

Options (environment variable in brackets):
  --port <n>          ingress port on 127.0.0.1 [PORT] (default ${DEFAULT_PORT})
  --sweep-every <s>   seconds between cron triggers, 0 = never [SWEEP_EVERY_SECONDS] (default ${DEFAULT_CRON_INTERVAL_MS / 1000})
  --dir <path>        run folder: generated configs, merged .dev.vars, the local ADMIN_TOKEN, wrangler.log
                      [ACKBOX_LOCAL_DIR] (default ${DEFAULT_RUN_DIR})
  --persist-to <path> local D1/queue state, kept across runs (default ${DEFAULT_PERSIST_TO})
  --distributed       a distributed app: installs per workspace through OAuth (/slack/install), each team
                      with its own token (SLACK_CLIENT_ID=${LOCAL_CLIENT_ID} unless set; against the stand-in,
                      SLACK_CLIENT_SECRET and SLACK_REDIRECT_URL get local defaults; TOKEN_ENCRYPTION_KEY is
                      generated once into the run folder). npm run demo then installs two workspaces.
  --shards <n>        split the workspaces over n local D1 databases (1-16) [SHARD_COUNT] (default: the
                      wrangler files' SHARD_COUNT, 1): shard 0 is DB, shard i is DB_i, each migrated at start.
                      Keep one count per --persist-to: a new count moves some teams to another shard.
  --verbose           also debug records and all of wrangler's output
  --raw               wrangler's output as is, no summaries
  -h, --help          this help

Ctrl-C (or SIGTERM) stops wrangler, workerd and the stand-in; nothing is left running.`;

function fail(message: string): never {
  console.error(`npm start: ${message}`);
  process.exit(1);
}

function parseSeconds(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined || text === "") return fallback;
  const value = Number(text);
  if (!Number.isFinite(value) || value < 0) fail(`${name} must be a number of seconds ≥ 0, got ${JSON.stringify(text)}`);
  return value * 1000;
}

let args: ReturnType<typeof parse>;
function parse() {
  return parseArgs({
    options: {
      port: { type: "string" },
      "sweep-every": { type: "string" },
      dir: { type: "string" },
      "persist-to": { type: "string" },
      distributed: { type: "boolean", default: false },
      shards: { type: "string" },
      verbose: { type: "boolean", default: false },
      raw: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
}
try {
  args = parse();
} catch (error) {
  fail(`${(error as Error).message}\n\n${HELP}`);
}
if (args.values.help) {
  console.log(HELP);
  process.exit(0);
}

const portText = args.values.port ?? process.env.PORT;
const port = portText === undefined || portText === "" ? DEFAULT_PORT : Number(portText);
if (!Number.isInteger(port) || port < 0 || port > 65_535) fail(`PORT must be a port number, got ${JSON.stringify(portText)}`);
const cronIntervalMs = parseSeconds(
  "SWEEP_EVERY_SECONDS",
  args.values["sweep-every"] ?? process.env.SWEEP_EVERY_SECONDS,
  DEFAULT_CRON_INTERVAL_MS,
);
const style = styleFor(process.stdout);
const print = (line: string) => console.log(line);

// Signals are handled from the start: a Ctrl-C during start-up stops the run as soon as it is up.
let run: Pipeline | undefined;
let signals = 0;
const shutdown = (reason: string) => {
  signals += 1;
  if (!run) {
    if (signals === 1) console.log(`\n${reason}: stopping as soon as start-up has finished…`);
    return;
  }
  const current = run;
  if (signals > 1) {
    console.log(`\n${reason} again: killing now`);
    void current.kill().then(() => process.exit(1));
    return;
  }
  console.log(`\n${reason}: stopping (wrangler, workerd${current.standin ? ", the stand-in" : ""})…`);
  void current.stop().then(() => {
    console.log(`stopped; no process of the run is left (process group ${current.pgid})`);
    process.exit(0);
  });
};
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, () => shutdown(signal));

// Killing only `npm` (a test's child.kill(), a supervisor) does not reach this process: npm dies, and its
// `sh -c` either dies too (SIGTERM) or stays, orphaned (SIGKILL). Watch the parent and, under npm's
// `sh -c`, npm itself; stop the run when either goes, and when stdout closes.
const parent = process.ppid;
const npm = parentOfShell(parent);
setInterval(() => {
  if (signals > 0) return;
  if (process.ppid !== parent) shutdown(`parent process ${parent} exited`);
  else if (npm !== undefined && !isAlive(npm)) shutdown(`npm (pid ${npm}) exited`);
}, 500).unref();
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE" && signals === 0) shutdown("stdout closed");
});

const dir = args.values.dir ?? localRunDir();
// Refuse (another run in this folder, the port taken) before announcing anything; stop a killed run's leftover wrangler.
try {
  await preflight({ dir, port, print });
} catch (error) {
  fail(error instanceof Error ? error.message : String(error));
}
console.log(style.dim("ackbox: applying migrations to local D1 and starting both Workers…"));
try {
  run = await startPipeline({
    port,
    cronIntervalMs,
    print,
    style,
    verbose: args.values.verbose,
    raw: args.values.raw,
    dir,
    env: {
      ...process.env,
      // --distributed: an app installed per workspace (OAuth), as SLACK_CLIENT_ID set by hand would make it.
      ...(args.values.distributed && !(process.env.SLACK_CLIENT_ID ?? "").trim() ? { SLACK_CLIENT_ID: LOCAL_CLIENT_ID } : {}),
      // --shards: SHARD_COUNT for both Workers (validated with the other settings: 1 to 16).
      ...(args.values.shards !== undefined ? { SHARD_COUNT: args.values.shards } : {}),
    },
    ...(args.values["persist-to"] !== undefined ? { persistTo: args.values["persist-to"] } : {}),
  });
} catch (error) {
  fail(error instanceof SettingsError || error instanceof Error ? error.message : String(error));
}

if (signals > 0) {
  signals = 0;
  shutdown("stopping as asked during start-up");
} else {
  for (const line of banner(run, { cronIntervalMs, style })) console.log(line);
}

const { code, signal } = await run.exited;
if (signals === 0) {
  await run.stop();
  fail(`wrangler dev exited unexpectedly (${code ?? signal}); its output is in ${run.dir}/wrangler.log`);
}

/** The parent of `pid` when `pid` is a `sh -c …` (how npm runs a script), else undefined. Linux only. */
function parentOfShell(pid: number): number | undefined {
  const command = commandLineOf(pid);
  if (command === undefined || !/^(\/bin\/|\/usr\/bin\/)?(sh|dash|bash) -c /.test(command)) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    return ppid > 1 ? ppid : undefined;
  } catch {
    return undefined;
  }
}
