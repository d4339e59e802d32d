/**
 * `npm run demo`: signed Slack traffic against the local run, and a check of
 * every effect (scripts/local/demo.ts). Run `npm run demo -- --help`.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { formatDemoResult, runDemo } from "./local/demo.ts";
import { parseDotenv } from "./local/dotenv.ts";
import { DEFAULT_PORT, PROJECT_ROOT, readRunInfo } from "./local/run-info.ts";
import { localSigningSecret } from "./local/settings.ts";

const DEFAULT_URL = `http://127.0.0.1:${DEFAULT_PORT}`;

const HELP = `npm run demo [-- options]

Sends realistic, correctly signed Slack requests to a local run (npm start in
another terminal): app mentions, messages in a watched channel, a bot's message
(ignored), concurrent deliveries of one event_id, Slack's retry of an event, a
slash command, a button click and a forged request; waits for the effects at the
local Slack stand-in and checks each one. Exit status 0 when all is as it must be.

The signing secret is the one npm start uses: SLACK_SIGNING_SECRET from the
environment, else from the root .dev.vars, else the local default.

Options:
  --url <url>         the local ingress (default ${DEFAULT_URL})
  --standin <url>     the Slack stand-in (default: the one npm start published in .ackbox/local/run.json)
  --channel <id>      channel of the events (default: the first of WATCHED_CHANNELS, else C0DEMO)
  --mentions <n>      app mentions to send (default 3)
  --messages <n>      channel messages to send (default 3)
  --duplicates <n>    concurrent deliveries of one event_id (default 5)
  --timeout <s>       how long to wait for the effects (default 30)
  --json              print the summary as JSON on stdout (progress goes to stderr)
  -h, --help          this help`;

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
const runInfo = readRunInfo();
const standinUrl = args.standin ?? (runInfo && runInfo.url === url ? (runInfo.standinUrl ?? undefined) : undefined);
const watched = (process.env.WATCHED_CHANNELS ?? devVars.WATCHED_CHANNELS ?? "")
  .split(",")
  .map((c) => c.trim())
  .filter(Boolean);
const progress = (line: string) => (args.json ? console.error(line) : console.log(line));

const health = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(3000) }).catch(() => undefined);
if (health?.status !== 200) fail(`nothing answers ${url}/healthz: start the pipeline first (npm start), or pass --url`);
await health.body?.cancel();

progress(`demo → ${url}/slack/events${standinUrl ? ` · effects checked at the stand-in ${standinUrl}` : ""}`);
let result: Awaited<ReturnType<typeof runDemo>>;
try {
  result = await runDemo({
    url,
    secret: localSigningSecret(devVars, process.env),
    ...(standinUrl ? { standinUrl } : {}),
    channel: args.channel ?? watched[0] ?? "C0DEMO",
    mentions: Number(args.mentions),
    messages: Number(args.messages),
    duplicates: Number(args.duplicates),
    timeoutMs: Number(args.timeout) * 1000,
    progress,
  });
} catch (error) {
  fail(error instanceof Error ? error.message : String(error));
}
if (args.json) console.log(JSON.stringify(result, null, 2));
else for (const line of formatDemoResult(result)) console.log(line);
process.exit(result.ok ? 0 : 1);
