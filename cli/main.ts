/**
 * `npx ackbox <noun> <verb>`: the command line, parsed and dispatched.
 * main() takes its whole world as arguments (argv, env, streams, clock), so
 * it can be driven in-process as well as spawned.
 */
import { type ParseArgsOptionsConfig, parseArgs } from "node:util";
import { BACKFILL_PAGE_MAX } from "../shared/ops/backfill-answer.ts";
import { AdminClient } from "./client.ts";
import { backfillCommand, slackTsOf } from "./commands/backfill.ts";
import { backlogCommand } from "./commands/backlog.ts";
import { deadListCommand, deadReplayCommand, filterOf } from "./commands/dead.ts";
import { eventsShowCommand } from "./commands/events.ts";
import { installationsListCommand } from "./commands/installations.ts";
import { timersListCommand } from "./commands/timers.ts";
import type { Context } from "./context.ts";
import { CliError, EXIT, EXIT_CODES_HELP, type ExitCode } from "./exit.ts";
import { localAdminTokenFor, localRunDir, localUrl } from "./local/run-info.ts";
import { printable } from "./printable.ts";

/** The local run: http://127.0.0.1:<PORT, else 8787>. */
export function defaultUrl(env: Readonly<Record<string, string | undefined>>): string {
  try {
    return localUrl(env);
  } catch (error) {
    throw new CliError(`${(error as Error).message} (it sets the default --url)`, EXIT.usage);
  }
}
const DEFAULT_TIMEOUT_SECONDS = 15;

export interface Io {
  readonly argv: readonly string[];
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly out: (text: string) => void;
  readonly err: (text: string) => void;
  readonly isTty: boolean;
  readonly now?: () => number;
  readonly sleep?: (ms: number) => Promise<void>;
  /** The local run's generated token when `url` is the local run (default: read from its run folder, ACKBOX_LOCAL_DIR). */
  readonly localAdminToken?: (url: string) => string | undefined;
}

const GLOBAL_HELP = `Usage: npx ackbox <command> [options]

Operate an ackbox deployment (or the local run) through its operator API.

Commands:
  backlog [--watch] [--check]     is it healthy, what is owed, how it is going
  dead list [filters]             dead rows, newest first: what is stuck and why
  dead replay (--id … | filters)  move dead rows back to pending and re-send them
  events show <id>                the audit trail of an event_id or operation id
  installations list              the workspaces the app is installed in, and which are blocked
  timers list [--team] [--due-before]
                                  pending timers (rows with a time of the app's) and cancelled ones
  backfill --channel <C…> | --all-channels --since <time>
                                  handle once each the messages Slack never delivered (after an outage)

Project commands (what a project's npm scripts run, docs/your-project.md):
  new <folder>                    a new project over the engine as a package (then npm install in it)
  start | demo | manifest | setup | deploy | check-deploy
                                  npm start, npm run demo, … of the project that installed the engine

Options for every command:
  --url <url>       the ingress's origin (default http://127.0.0.1:$PORT, PORT else 8787: the local run)
  --json            machine-readable output (one JSON document; one per line with --watch)
  --timeout <s>     give up on an answer after this many seconds (default ${DEFAULT_TIMEOUT_SECONDS})
  --insecure-http   allow a plain http:// --url to another machine (the token crosses the network
                    in the clear); without it only https:// and loopback (127.0.0.0/8, localhost,
                    [::1]) are used
  -h, --help        help for any command, e.g. npx ackbox dead replay --help

The token comes from ACKBOX_ADMIN_TOKEN (the ingress's ADMIN_TOKEN); never from the command line,
where other users could read it. Against the local run (npm start) it needs nothing: when --url is
the local run, the CLI reads the run's generated token from its run folder (.ackbox/local, or
ACKBOX_LOCAL_DIR). ACKBOX_ADMIN_TOKEN, when set, always wins.

Examples:
  npx ackbox backlog
  npx ackbox dead list --error channel_not_found
  npx ackbox backlog --url https://ackbox-ingress.example.workers.dev
  npx ackbox dead replay --help

${EXIT_CODES_HELP}

Runbook: docs/operating.md`;

const FILTER_HELP = `Filters (dead rows):
  --effect <name>          chat.postMessage, reactions.add, chat.update, response_url
  --error <text>           substring of the last error, any case (e.g. channel_not_found)
  --team <id>              Slack team id
  --since <time>           died at or after: epoch ms, ISO 8601, or an age (90s, 15m, 2h, 7d)
  --until <time>           died before
  --filter key=value       the same, as key=value pairs (repeatable, or comma-separated)`;

const HELP: Record<string, string> = {
  backlog: `Usage: npx ackbox backlog [--watch [--interval <s>] [--count <n>]] [--check] [--json] [--url <url>]

Outbox counts by status and effect, the oldest pending age, stale leases, rows never
enqueued, dead rows, throughput and failure rate over the last 5 min / 1 h / the alert
window, the health checks (the alert thresholds), and the queue's own backlog.

With CLOUDFLARE_ACCOUNT_ID and CLOUDFLARE_API_TOKEN set, also the queue backlog from
Cloudflare's GraphQL Analytics API (dataset queueBacklogAdaptiveGroups); CLOUDFLARE_QUEUE_ID
narrows it to one queue, CLOUDFLARE_GRAPHQL_URL overrides the endpoint.

  --watch           print a fresh snapshot every --interval seconds until interrupted
  --interval <s>    seconds between snapshots (default 5)
  --count <n>       stop after n snapshots
  --check           exit 7 when a health check is breached (for cron jobs and CI)

Examples:
  npx ackbox backlog --check
  npx ackbox backlog --watch --interval 2 --count 3`,
  dead: `Usage: npx ackbox dead <list|replay> [options]

  dead list     dead rows, newest first, with their last error
  dead replay   move dead rows back to pending and re-send them

Run npx ackbox dead list --help or npx ackbox dead replay --help for their options.`,
  "dead list": `Usage: npx ackbox dead list [filters] [--limit <n>] [--cursor <cursor>] [--json] [--url <url>]

Dead rows of every shard, newest first: the row's ref, its shard (with more than one),
when it died, effect, team, attempts, the event it belongs to, and the error it died of.
A ref is <shard>:<id> (e.g. 1:42) when SHARD_COUNT > 1, the row id with one shard:
dead replay --id takes it as printed.

${FILTER_HELP}
  --limit <n>              rows per page (default 50, at most 200)
  --cursor <cursor>        the next page, as printed after the last one

Examples:
  npx ackbox dead list --error channel_not_found --since 1h
  npx ackbox dead list --filter effect=reactions.add,team=T0DEMO --limit 20`,
  "dead replay": `Usage: npx ackbox dead replay (--id <id> … | filters | --all) [--dry-run] [--json] [--url <url>]

Moves dead rows back to pending (with a fresh attempt budget) and re-sends them through
the queue, throttled. Only dead rows move; a replay that finds nothing dead does nothing,
so running it twice never sends twice. Each call replays at most REPLAY_MAX_PER_CALL rows;
when more match it says so: run it again. Filters select from every shard; the answer
counts per shard.

  --id <ref>               a row ref as dead list prints it: <shard>:<id> (e.g. 1:42), or
                           the row id with one shard (repeatable, or comma-separated);
                           with several shards a plain id is refused (it is ambiguous)
${FILTER_HELP.split("\n").slice(1).join("\n")}
  --all                    every dead row (up to the per-call cap)
  --dry-run                show what would be replayed; change nothing
  --limit <n>              replay at most n rows this call
  --cursor <cursor>        continue a filtered replay where the last call stopped

Examples:
  npx ackbox dead replay --error channel_not_found --dry-run
  npx ackbox dead replay --id 17 --id 18
  npx ackbox dead replay --id 1:17,0:18
  npx ackbox dead replay --all --dry-run`,
  events: `Usage: npx ackbox events show <event_id or operation id> [--team <id>] [--json] [--url <url>]`,
  "events show": `Usage: npx ackbox events show <event_id or operation id> [--team <id>] [--json] [--url <url>]

The audit trail of one event: its receipt, each outbox row (effect, status, payload,
result, times) and every recorded attempt with its error and time. The id is one of:
  Ev…                                      an Events API event_id, as Slack sent it
  command:<team>:<trigger_id>              a slash command
  interaction:<team>:<trigger_id>          a button click, a view submission
  interaction:<team>:view_closed:<view id>:<hash>
                                           a closed modal (it has no trigger_id)
  alert:<kind>:<raised|resolved>:<window>  an alert message the sweeper posted
  app_mention:<team>:<channel>:<ts>        a fact: every copy of that message's mention (its rows),
                                           message:…, message_changed:…, reaction_added:… alike
  backfill:<fact>                          the receipt of a message a backfill handled
npx ackbox dead list shows the id of each dead row's event (the "event / operation" column).
An id alone does not name a team, so every shard is searched; --team <id> looks only on
the one shard that workspace lives on (an org-wide install's events: its org's id, E…).
Each row shows its ref (<shard>:<id> with more than one shard).

Examples:
  npx ackbox events show Ev0DEMOMIKQ7F2R0F0
  npx ackbox events show command:T0DEMO:MIKQ7F2R0.1.trigger --json
  npx ackbox events show alert:new_dead:raised:1764504000000`,
  backfill: `Usage: npx ackbox backfill --channel <C…> | --all-channels --since <time> [--until <time>]
                        [--team <T…> [--enterprise <E…>]] [--dry-run] [--limit <n>] [--interval <s>] [--json] [--url <url>]

Reads the channel's history (conversations.history) from --since to --until and feeds each
message through the app as the event Slack would have sent: message (of the channel's kind, as
conversations.info says it: public, private, DM or group DM), and app_mention when it
mentions the bot. Each is keyed by what happened (its channel and ts), so a message that was
delivered is skipped and one that was not is handled once; running it again over the same
window does nothing twice (an interrupted backfill is simply run again). Thread replies are
not in a channel's history and are not backfilled.

Progress on stderr, one line a page; at the end a summary: messages read, events already
handled, recorded, ignored by the app (a message that mentions the bot is two events).

  --channel <C…>     the channel (the bot must be a member)
  --all-channels     every conversation the bot is a member of (users.conversations), one
                     after another: what a delivery gap of \`npx ackbox backlog\` suggests, since
                     a gap is a workspace's; a channel it may not read is skipped and named
  --since <time>     the window's start: ISO 8601 (2026-11-30T12:00:00Z) or a Slack ts
  --until <time>     its end (default now)
  --team <T…>        a distributed app: the workspace whose installation reads the history
  --enterprise <E…>  its Enterprise Grid org, when the app is installed org-wide there: the
                     org's installation reads the workspace's history
  --dry-run          read and report what would be recorded; write nothing
  --limit <n>        messages per page, 1 to ${BACKFILL_PAGE_MAX} (default 15: the most an app outside the
                     Slack Marketplace gets; at most ${BACKFILL_PAGE_MAX}, so a page's D1 work stays bounded)
  --interval <s>     seconds between pages (default 60: such an app gets one
                     conversations.history call a minute; a Marketplace app may use 1)

A 429 from Slack waits its Retry-After and asks for the same page again. How long it takes,
and the limits: docs/operating.md, "Events Slack never delivered".

Examples:
  npx ackbox backfill --channel C0123ABC --since 2026-11-30T09:00:00Z --until 2026-11-30T10:30:00Z --dry-run
  npx ackbox backfill --channel C0123ABC --since 1764493200.000000 --team T0123ABC --json
  npx ackbox backfill --all-channels --since 2026-11-30T09:00:00Z --until 2026-11-30T10:30:00Z --dry-run`,
  timers: `Usage: npx ackbox timers list [--team <id>] [--due-before <time>] [--limit <n>] [--cursor <cursor>] [--json] [--url <url>]`,
  "timers list": `Usage: npx ackbox timers list [--team <id>] [--due-before <time>] [--limit <n>] [--cursor <cursor>] [--json] [--url <url>]

Timers of every shard, soonest first: rows an app recorded with a time ({ at } or { after }) that are
still pending, and those a cancel(name) ended (until they are pruned with the done rows). For each: its
ref, its time, its state — waiting (its time is ahead), due (its time has come; on its way, or late),
retrying (attempted, waiting for its next attempt), cancelled (never performed) —, effect, team, name
(what cancel takes), the event it belongs to (npx ackbox events show <it>) and who cancelled it.

  --team <id>              Slack team id (looks only on that team's shard)
  --due-before <time>      its time before: epoch ms, ISO 8601, or a span from now (90s, 15m, 2h, 7d)
  --limit <n>              rows per page (default 50, at most 200)
  --cursor <cursor>        the next page, as printed after the last one

How late a timer can be, and the backlog's "waiting for their time": docs/operating.md.

Examples:
  npx ackbox timers list
  npx ackbox timers list --team T0123ABCD --due-before 2h
  npx ackbox timers list --json`,
  installations: `Usage: npx ackbox installations list [--json] [--url <url>]`,
  "installations list": `Usage: npx ackbox installations list [--json] [--url <url>]

The workspaces (and org-wide Enterprise Grid installs) the app is installed in: team,
enterprise, when installed, when its token expires (rotating tokens), whether it is
blocked (an auth failure: its rows wait until it is re-installed) and its scopes.
Never a token. In single-workspace mode (SLACK_BOT_TOKEN) it says so.

Examples:
  npx ackbox installations list
  npx ackbox installations list --json`,
};

const GLOBAL_OPTIONS = {
  url: { type: "string" },
  json: { type: "boolean", default: false },
  timeout: { type: "string" },
  "insecure-http": { type: "boolean", default: false },
  help: { type: "boolean", short: "h", default: false },
} as const;

const FILTER_OPTIONS = {
  effect: { type: "string" },
  error: { type: "string" },
  team: { type: "string" },
  since: { type: "string" },
  until: { type: "string" },
  filter: { type: "string", multiple: true },
} as const;

export async function main(raw: Io): Promise<ExitCode> {
  // Every message to stderr is for a person, and may quote the server: made printable (cli/printable.ts).
  const io: Io = { ...raw, err: (text) => raw.err(printable(text)) };
  try {
    return await dispatch(io);
  } catch (error) {
    if (error instanceof CliError) {
      io.err(`ackbox: ${error.message}\n`);
      return error.code;
    }
    io.err(`ackbox: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    return EXIT.failed;
  }
}

/** Every option of every command: a lenient first pass finds the command words (positionals) without mistaking an option's value for one. */
const ALL_OPTIONS = {
  ...GLOBAL_OPTIONS,
  ...FILTER_OPTIONS,
  watch: { type: "boolean" },
  interval: { type: "string" },
  count: { type: "string" },
  check: { type: "boolean" },
  limit: { type: "string" },
  cursor: { type: "string" },
  id: { type: "string", multiple: true },
  all: { type: "boolean" },
  "dry-run": { type: "boolean" },
  channel: { type: "string" },
  "due-before": { type: "string" },
} as const;

async function dispatch(io: Io): Promise<ExitCode> {
  const words = parseArgs({ args: [...io.argv], options: ALL_OPTIONS, allowPositionals: true, strict: false }).positionals;
  const [noun, verb] = words;
  const help = (key: string) => {
    io.out(`${HELP[key] ?? GLOBAL_HELP}\n`);
    return EXIT.ok;
  };
  if (noun === undefined) {
    if (io.argv.includes("--help") || io.argv.includes("-h")) return help("");
    io.err(`${GLOBAL_HELP}\n`);
    return EXIT.usage;
  }

  switch (noun) {
    case "backlog": {
      const { values } = parse(io.argv, {
        ...GLOBAL_OPTIONS,
        watch: { type: "boolean", default: false },
        interval: { type: "string" },
        count: { type: "string" },
        check: { type: "boolean", default: false },
      });
      if (values.help) return help("backlog");
      expectWords(words, 1, "backlog");
      const intervalSeconds = number("--interval", values.interval, 5, 1, 3600);
      const count = values.count === undefined ? undefined : number("--count", values.count, 1, 1, 1_000_000);
      if (!values.watch && (values.interval !== undefined || values.count !== undefined)) {
        throw new CliError("--interval and --count go with --watch", EXIT.usage);
      }
      return backlogCommand(context(io, values), { watch: values.watch, intervalSeconds, count, check: values.check });
    }
    case "dead": {
      if (verb === undefined) {
        if (io.argv.includes("--help") || io.argv.includes("-h")) return help("dead");
        io.err(`${HELP.dead}\n`);
        return EXIT.usage;
      }
      if (verb === "list") {
        const { values } = parse(io.argv, { ...GLOBAL_OPTIONS, ...FILTER_OPTIONS, limit: { type: "string" }, cursor: { type: "string" } });
        if (values.help) return help("dead list");
        expectWords(words, 2, "dead list");
        const filter = filterOf(values, values.filter ?? []);
        return deadListCommand(context(io, values), filter, values.limit, values.cursor);
      }
      if (verb === "replay") {
        const { values } = parse(io.argv, {
          ...GLOBAL_OPTIONS,
          ...FILTER_OPTIONS,
          id: { type: "string", multiple: true },
          all: { type: "boolean", default: false },
          "dry-run": { type: "boolean", default: false },
          limit: { type: "string" },
          cursor: { type: "string" },
        });
        if (values.help) return help("dead replay");
        expectWords(words, 2, "dead replay");
        const ids = (values.id ?? []).flatMap((v) => v.split(",")).map((v) => v.trim());
        const bad = ids.find((v) => !/^(\d{1,4}:)?\d{1,15}$/.test(v) || /(^|:)0+$/.test(v));
        if (bad !== undefined)
          throw new CliError(
            `--id wants a row ref: <shard>:<id> as the dead list shows it (e.g. 1:42), or with one shard the row id; got ${JSON.stringify(bad)}`,
            EXIT.usage,
          );
        const filter = filterOf(values, values.filter ?? []);
        const hasFilter = Object.keys(filter).length > 0;
        const ways = [ids.length > 0, hasFilter, values.all].filter(Boolean).length;
        if (ways !== 1) {
          throw new CliError(
            "say which dead rows: --id …, or filters (--effect, --error, --team, --since, --until, --filter), or --all",
            EXIT.usage,
          );
        }
        if (ids.length > 0 && (values.limit !== undefined || values.cursor !== undefined)) {
          throw new CliError("--limit and --cursor go with filters or --all, not --id", EXIT.usage);
        }
        const limit = values.limit === undefined ? undefined : number("--limit", values.limit, 1, 1, 10_000);
        return deadReplayCommand(context(io, values), {
          ids,
          filter: ids.length > 0 ? undefined : filter,
          dryRun: values["dry-run"],
          limit,
          cursor: values.cursor,
        });
      }
      throw new CliError(`unknown command: dead ${verb} (want dead list or dead replay; see --help)`, EXIT.usage);
    }
    case "events": {
      const { values } = parse(io.argv, { ...GLOBAL_OPTIONS, team: { type: "string" } });
      if (values.help) return help(verb === "show" ? "events show" : "events");
      if (verb !== "show")
        throw new CliError(`${`unknown command: events ${verb ?? ""}`.trim()} (want events show <id>; see --help)`, EXIT.usage);
      const id = words[2];
      if (id === undefined || words.length > 3) throw new CliError("events show wants one id: npx ackbox events show <id>", EXIT.usage);
      return eventsShowCommand(context(io, values), id, values.team);
    }
    case "installations": {
      const { values } = parse(io.argv, GLOBAL_OPTIONS);
      if (values.help) return help(verb === "list" ? "installations list" : "installations");
      if (verb !== "list")
        throw new CliError(`${`unknown command: installations ${verb ?? ""}`.trim()} (want installations list; see --help)`, EXIT.usage);
      expectWords(words, 2, "installations list");
      return installationsListCommand(context(io, values));
    }
    case "timers": {
      const { values } = parse(io.argv, {
        ...GLOBAL_OPTIONS,
        team: { type: "string" },
        "due-before": { type: "string" },
        limit: { type: "string" },
        cursor: { type: "string" },
      });
      if (values.help) return help(verb === "list" ? "timers list" : "timers");
      if (verb !== "list")
        throw new CliError(`${`unknown command: timers ${verb ?? ""}`.trim()} (want timers list; see --help)`, EXIT.usage);
      expectWords(words, 2, "timers list");
      if (values.team !== undefined && !/^[A-Z0-9]{1,40}$/.test(values.team)) {
        throw new CliError(`--team wants a Slack team id such as T0123ABCD, got ${JSON.stringify(values.team)}`, EXIT.usage);
      }
      if (values.limit !== undefined) number("--limit", values.limit, 50, 1, 200);
      return timersListCommand(context(io, values), {
        team: values.team,
        dueBefore: values["due-before"],
        limit: values.limit,
        cursor: values.cursor,
      });
    }
    case "backfill": {
      const { values } = parse(io.argv, {
        ...GLOBAL_OPTIONS,
        channel: { type: "string" },
        "all-channels": { type: "boolean", default: false },
        team: { type: "string" },
        enterprise: { type: "string" },
        since: { type: "string" },
        until: { type: "string" },
        limit: { type: "string" },
        interval: { type: "string" },
        "dry-run": { type: "boolean", default: false },
      });
      if (values.help) return help("backfill");
      expectWords(words, 1, "backfill");
      const allChannels = values["all-channels"];
      if (allChannels && values.channel !== undefined)
        throw new CliError("backfill takes --channel or --all-channels, not both", EXIT.usage);
      if (!allChannels && (!values.channel || !/^[CGD][A-Z0-9]{2,}$/.test(values.channel))) {
        throw new CliError("backfill wants --channel <channel id> (e.g. C0123ABC) or --all-channels (see --help)", EXIT.usage);
      }
      if (values.since === undefined) throw new CliError("backfill wants --since <ISO time or Slack ts> (see --help)", EXIT.usage);
      const oldest = slackTsOf("--since", values.since);
      const latest = values.until === undefined ? undefined : slackTsOf("--until", values.until);
      if (latest !== undefined && Number(latest) < Number(oldest)) throw new CliError("--until is before --since", EXIT.usage);
      if (values.enterprise !== undefined && values.team === undefined)
        throw new CliError(
          "--enterprise wants --team too: the workspace whose channel the org's installation reads (see --help)",
          EXIT.usage,
        );
      return backfillCommand(context(io, values), {
        channel: values.channel,
        allChannels,
        team: values.team,
        enterprise: values.enterprise,
        oldest,
        latest,
        limit: number("--limit", values.limit, 15, 1, BACKFILL_PAGE_MAX),
        intervalSeconds: number("--interval", values.interval, 60, 0, 3600),
        dryRun: values["dry-run"],
      });
    }
    case "help":
      return help(words.slice(1).join(" "));
    default:
      throw new CliError(`unknown command: ${noun} (run npx ackbox --help)`, EXIT.usage);
  }
}

type Values = { url?: string | undefined; json?: boolean | undefined; timeout?: string | undefined; "insecure-http"?: boolean | undefined };

function context(io: Io, values: Values): Context {
  const timeoutMs = number("--timeout", values.timeout, DEFAULT_TIMEOUT_SECONDS, 1, 600) * 1000;
  const url = values.url ?? defaultUrl(io.env);
  const explicit = io.env.ACKBOX_ADMIN_TOKEN;
  const local = explicit ? undefined : (io.localAdminToken ?? ((u) => localAdminTokenFor(u, localRunDir(io.env))))(url);
  const client = new AdminClient({ url, token: explicit || local, timeoutMs, insecureHttp: values["insecure-http"] === true });
  return {
    client,
    json: values.json === true,
    // Human output made printable; --json stays byte-exact.
    out: values.json === true ? io.out : (text) => io.out(printable(text)),
    clearScreen: () => io.out("\x1b[2J\x1b[H"),
    err: (text) => io.err(text.endsWith("\n") ? text : `${text}\n`),
    env: io.env,
    now: io.now ?? Date.now,
    sleep: io.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms))),
    isTty: io.isTty,
    timeoutMs,
  };
}

function parse<const O extends ParseArgsOptionsConfig>(argv: readonly string[], options: O) {
  try {
    return parseArgs({ args: [...argv], options, allowPositionals: true as const, strict: true as const });
  } catch (error) {
    throw new CliError(`${error instanceof Error ? error.message : String(error)} (see --help)`, EXIT.usage);
  }
}

function expectWords(words: readonly string[], n: number, command: string) {
  if (words.length > n) throw new CliError(`${command}: unexpected argument ${JSON.stringify(words[n])} (see --help)`, EXIT.usage);
}

function number(flag: string, text: string | undefined, fallback: number, min: number, max: number): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!/^\d+$/.test(text) || value < min || value > max)
    throw new CliError(`${flag} wants a whole number from ${min} to ${max}, got ${JSON.stringify(text)}`, EXIT.usage);
  return value;
}
