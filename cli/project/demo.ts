/**
 * `npm run demo`: signed Slack traffic against the local run, and a check of
 * every effect (cli/local/demo.ts). Run `npm run demo -- --help`.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { type DemoScenario, formatDemoResult, runDemo } from "../local/demo.ts";
import { appScenarios } from "../local/demo-apps.ts";
import { parseDotenv } from "../local/dotenv.ts";
import { appModuleOf, appModulePath, loadProjectApp } from "../local/project-app.ts";
import { DEFAULT_PORT, localAdminTokenFor, localModelKeyFor, localRunDir, localUrl, PROJECT_ROOT, readRunInfo } from "../local/run-info.ts";
import { localSigningSecret } from "../local/settings.ts";

let DEFAULT_URL: string;
try {
  DEFAULT_URL = localUrl(process.env);
} catch (error) {
  fail((error as Error).message);
}

const HELP = `npm run demo [-- options]

Sends realistic, correctly signed Slack requests to a local run (npm start in
another terminal): app mentions, messages in a watched channel, a bot's message
(ignored), concurrent deliveries of one event_id, Slack's retry of an event, a
slash command, a button click, a forged request, an outage (5 messages posted
in the channel, the middle 3 refused 401) closed by npx ackbox backfill (each
message exactly one :eyes:; it needs the run's ADMIN_TOKEN), and one labelled
failure (a mention in a channel the stand-in answers channel_not_found for: a
dead row to practise docs/operating.md on). Then it checks the stand-in's record exactly:
every call it received must be one the demo intended, and every intended call
must have come. Exit status 0 when all is as it must be. It prints the ids it
sent, and the runbook's commands with them filled in.

Against a distributed run (npm start -- --distributed, or SLACK_CLIENT_ID set)
it first installs T0DEMO through /slack/install as a browser would, requires
every Web API call of the scenarios above to carry T0DEMO's own token, then
installs T0DEMOB with a rotating token due for refresh and sends 6 mentions at
once (exactly one oauth.v2.access refresh), and uninstalls T0DEMOB (its tokens
revoked at the stand-in: a mention waits, the team is named blocked by
GET /admin/backlog; then app_uninstalled parks the row and removes the
installation). It needs the stand-in and the run's ADMIN_TOKEN for that.

With an assistant (app.assistant: the reference app's, when the run has a
model) and the stand-in's fake model (npm start sets MODEL_URL to it when it
is unset), it also runs an assistant conversation: a thread opened
(assistant_thread_started → suggested prompts), two questions, the second
while the first answer streams (answered after it, with it in its history),
then a question stopped mid-answer (the stand-in's stop button, then the
agent_session_stopped it hands back): each answer exactly one message,
complete (or, stopped, ending where it stood), its text the stand-in model's,
no overlapping call to a stream.

The scenarios above are the shipped apps' (examples/reference, examples/ask):
each is sent only if the app the run serves (app/index.ts, or the module
ACKBOX_APP names, as for npm start) answers what it drives, and the summary
names every one it skipped and why. An app adds scenarios of its own in
app/demo.ts, beside its module (export const scenarios: DemoScenario[], the
shape of cli/local/scenario.ts); they run after the built-in ones.

The signing secret is the one npm start uses: SLACK_SIGNING_SECRET from the
environment, else from the root .dev.vars, else the local default.

Options:
  --url <url>         the local ingress (default http://127.0.0.1:$PORT, PORT else ${DEFAULT_PORT}: now ${DEFAULT_URL})
  --standin <url>     the Slack stand-in (default: the one npm start published in its run folder's
                      run.json: .ackbox/local, or ACKBOX_LOCAL_DIR)
  --channel <id>      channel of the events (default: the first of WATCHED_CHANNELS, else C0DEMO)
  --mentions <n>      app mentions to send (default 3)
  --messages <n>      channel messages to send (default 3)
  --duplicates <n>    concurrent deliveries of one event_id (default 5)
  --timeout <s>       how long to wait for the effects (default 30)
  --kill              instead of the scenarios above, the assistant killed mid-answer: the demo starts a run
                      of its own beside npm start (the same app, a fresh local D1 in a temporary folder, a
                      free port, LEASE_SECONDS=10), whose Slack and model are npm start's stand-in; asks a
                      question, SIGKILLs every process of that run while the answer streams, starts it
                      again on the same state, and checks that the thread ends with exactly one complete
                      answer message, its calls at the stand-in exactly as intended (about a minute)
  --json              print the summary as JSON on stdout (progress goes to stderr)
  -h, --help          this help`;

/** The operator token the CLI would use against this run: to read back the failure's dead row. */
function adminToken(): { adminToken?: string } {
  const token = process.env.ACKBOX_ADMIN_TOKEN || localAdminTokenFor(url, runDir);
  return token ? { adminToken: token } : {};
}

function fail(message: string): never {
  console.error(`npm run demo: ${message}`);
  process.exit(2);
}

let parsed: ReturnType<typeof parse>;
function parse() {
  return parseArgs({
    options: {
      url: { type: "string", default: DEFAULT_URL },
      standin: { type: "string" },
      channel: { type: "string" },
      mentions: { type: "string", default: "3" },
      messages: { type: "string", default: "3" },
      duplicates: { type: "string", default: "5" },
      timeout: { type: "string", default: "30" },
      kill: { type: "boolean", default: false },
      json: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
}
try {
  parsed = parse();
} catch (error) {
  fail(`${(error as Error).message}\n\n${HELP}`);
}
const args = parsed.values;
if (args.help) {
  console.log(HELP);
  process.exit(0);
}

const devVarsPath = join(PROJECT_ROOT, ".dev.vars");
const devVars = existsSync(devVarsPath) ? parseDotenv(readFileSync(devVarsPath, "utf8")) : {};
const url = args.url.replace(/\/+$/, "");
const runDir = localRunDir(process.env);
const runInfo = readRunInfo(runDir);
const ours = runInfo && runInfo.url === url ? runInfo : undefined;
const standinUrl = args.standin ?? ours?.standinUrl ?? undefined;
const watched = (process.env.WATCHED_CHANNELS ?? devVars.WATCHED_CHANNELS ?? "")
  .split(",")
  .map((c) => c.trim())
  .filter(Boolean);
const progress = (line: string) => (args.json ? console.error(line) : console.log(line));

const health = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(3000) }).catch(() => undefined);
if (health?.status !== 200)
  fail(`nothing answers ${url}/healthz: start the pipeline first (npm start), or give the demo the same PORT, or pass --url`);
await health.body?.cancel();

const appModule = appModulePath(appModuleOf(process.env), PROJECT_ROOT); // the app the run serves, as npm start chose it
let app: Awaited<ReturnType<typeof loadProjectApp>>;
let extraScenarios: readonly DemoScenario[];
try {
  app = await loadProjectApp(PROJECT_ROOT, appModule);
  extraScenarios = await appScenarios(dirname(appModule)); // the app's own traffic, if it has any (app/demo.ts)
} catch (error) {
  fail(error instanceof Error ? error.message : String(error));
}

progress(`demo → ${url}/slack/events${standinUrl ? ` · effects checked at the stand-in ${standinUrl}` : ""}`);
let result: Awaited<ReturnType<typeof runDemo>>;
try {
  result = await runDemo({
    url,
    secret: localSigningSecret(devVars, process.env),
    ...adminToken(),
    ...(standinUrl ? { standinUrl } : {}),
    channel: args.channel ?? watched[0] ?? "C0DEMO",
    mentions: Number(args.mentions),
    messages: Number(args.messages),
    duplicates: Number(args.duplicates),
    timeoutMs: Number(args.timeout) * 1000,
    progress,
    app,
    extraScenarios,
    // The run says whether its assistant asks the stand-in's model (its key in the run folder); unknown: npm start's default.
    ...(ours ? { standinModel: Boolean(ours.modelKeyFile) } : {}),
    ...(args.kill ? { kill: { modelKey: localModelKeyFor(url, runDir) } } : {}),
  });
} catch (error) {
  fail(error instanceof Error ? error.message : String(error));
}
if (args.json) console.log(JSON.stringify(result, null, 2));
else {
  const prefix = [
    ...(process.env.PORT?.trim() ? [`PORT=${process.env.PORT.trim()}`] : []),
    ...(process.env.ACKBOX_LOCAL_DIR?.trim() ? [`ACKBOX_LOCAL_DIR=${process.env.ACKBOX_LOCAL_DIR.trim()}`] : []),
  ].join(" ");
  for (const line of formatDemoResult(result, { commandPrefix: prefix })) console.log(line);
}
process.exit(result.ok ? 0 : 1);
