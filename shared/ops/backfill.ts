/**
 * Backfill: the events Slack never delivered, recovered from the channel's
 * history. Slack retries a failed delivery for about five minutes and then
 * drops it; after a longer outage every message of the window is gone from
 * the Events API. conversations.history still has them.
 *
 * One call reads one history page and feeds each message through the app's
 * handlers as the event Slack would have sent: `message`, and `app_mention`
 * too when it mentions the bot user. Each is recorded under its fact
 * (shared/slack/facts.ts), so a message that was delivered finds its rows
 * already there (already handled), and one that was not is recorded once.
 * Its receipt is "backfill:<fact>", so running the same window again finds
 * it too. The operator API answers one page per request (bounded work); the
 * CLI (cli/commands/backfill.ts) pages, paces and reports.
 *
 * A history message does not say what kind of conversation it is in, and a
 * channel id does not either (a private channel created since 2021 has a C
 * id, as a public one does): the channel_type every live message event
 * carries is asked of Slack (conversations.info: is_im, is_mpim, is_private,
 * is_channel / is_group), once per channel per run — the first page asks, its
 * answer says it, and the CLI passes it with every next page. A type Slack
 * does not say is a refusal for that channel, never a guess: a handler for
 * private channels would miss what a guess routed as public.
 *
 * What a backfill cannot see: thread replies (conversations.history returns
 * a channel's top-level messages and thread broadcasts only), edits and
 * deletions, and messages older than the channel's history retention.
 */
import type { Routing, SlackApp } from "../app/app.ts";
import { MAX_INTENTS } from "../app/intents.ts";
import type { AppSettings } from "../app/settings.ts";
import { EffectError } from "../delivery/failure.ts";
import { D1_QUERIES_PER_INVOCATION } from "../delivery/query-budget.ts";
import { INSTALLATION_WORST_QUERIES } from "../installations/resolve.ts";
import type { Log } from "../log.ts";
import { enqueueRows, type OutboxQueue, SEND_BATCH_LIMIT } from "../outbox/enqueue.ts";
import { inputRowKey, recordIntent } from "../outbox/record.ts";
import type { RoutingInput } from "../shards/route.ts";
import { factOf } from "../slack/facts.ts";
import { type EventInput, isObject, type JsonObject, type SlackEvent } from "../slack/inputs.ts";
import type { SlackWebApi } from "../slack/web-api.ts";
import type { BackfillChannelsPage, BackfillChannelType } from "./backfill-answer.ts";

export { BACKFILL_PAGE_MAX } from "./backfill-answer.ts";

/**
 * The most D1 statements a page of `messages` can send, counted as the
 * consumer counts them (shared/delivery/query-budget.ts: every statement of a
 * batch): each message is at most two events (message and app_mention), each
 * event one batch of 2 + its intents (the receipt, its verdict, a row per
 * intent, at most MAX_INTENTS); before them a distributed app resolves the
 * team's installation (INSTALLATION_WORST_QUERIES), and after them every 100
 * ids whose enqueue failed cost one mark. BACKFILL_PAGE_MAX is the most
 * messages for which this stays PAGE_QUERY_MARGIN under D1's 1 000 queries per
 * invocation: 17 + 16 × 54 + 8 = 889 (test/ingress/admin.backfill.test.ts). A
 * cancel is three statements, not one: a page is counted exactly before it
 * writes (overBudget), and one whose handlers cancel too much is refused.
 */
export function pageWorstQueries(messages: number): number {
  const events = 2 * messages;
  return INSTALLATION_WORST_QUERIES + events * (2 + MAX_INTENTS) + Math.ceil((events * MAX_INTENTS) / SEND_BATCH_LIMIT);
}
/** Left for what the request sends besides (a placement read, the operator API's own): D1 counts failed calls too. */
export const PAGE_QUERY_MARGIN = 100;
export const PAGE_QUERY_BUDGET = D1_QUERIES_PER_INVOCATION - PAGE_QUERY_MARGIN;
/** One Slack call's time limit here: the operator waits, Slack does not. */
const CALL_TIMEOUT_MS = 10_000;

export interface BackfillRequest {
  readonly channel: string;
  /** Slack ts: the window's start (inclusive). */
  readonly oldest: string;
  /** Slack ts: its end (inclusive); absent = now. */
  readonly latest?: string | undefined;
  /** The previous page's next_cursor. */
  readonly cursor?: string | undefined;
  readonly limit: number;
  /** Read and route, write nothing. */
  readonly dryRun: boolean;
  /** The channel's type as an earlier page answered it; absent: asked of Slack (conversations.info). */
  readonly channelType?: BackfillChannelType | undefined;
}

/** One page's tally. Events, not messages: a message that mentions the bot is two (message and app_mention). */
export interface BackfillPage {
  /** Messages on this page. */
  readonly read: number;
  /** Events whose rows were there already: delivered live, or by an earlier backfill. */
  readonly alreadyHandled: number;
  /** Events recorded now (in a dry run: that would be). */
  readonly recorded: number;
  /** Events the app has no handler for, or chose to ignore (a bot's message, say). */
  readonly ignored: number;
  /** Events whose handler refused (threw, asked for what cannot be recorded): nothing written; each says why. */
  readonly refused: readonly { readonly ts: string; readonly type: string; readonly reason: string }[];
  /** Slack's next_cursor, or null on the last page. */
  readonly nextCursor: string | null;
  /** The channel's type the events were routed as. */
  readonly channelType: BackfillChannelType;
}

export type BackfillOutcome =
  | { readonly ok: true; readonly page: BackfillPage }
  /** Slack rate-limited the read: nothing was read or written; ask for the same page after this long. */
  | { readonly ok: true; readonly retryAfterSeconds: number }
  /** Slack refused (not_in_channel, channel_not_found, …: `slackError`) or could not be reached; `message` says what to do. */
  | { readonly ok: false; readonly status: 400 | 502 | 503; readonly slackError: string; readonly message: string };

export interface BackfillDeps {
  readonly app: SlackApp;
  readonly settings: { readonly sweepGraceMs: number };
  /** The app's own settings, which its handlers read (shared/app/settings.ts). */
  readonly appSettings: AppSettings;
  /** The Web API with the team's token (the bot token in single-workspace mode). */
  readonly slack: SlackWebApi;
  /**
   * In a distributed app, the workspace whose channel is read: its token's (an auth.test naming another, or none,
   * is refused), or, with `enterpriseId`, a workspace of the org whose org-wide install's token `slack` carries.
   */
  readonly teamId?: string | undefined;
  /** The org of an org-wide install whose token `slack` carries: an auth.test naming another org is refused. */
  readonly enterpriseId?: string | undefined;
  /**
   * Where the token's installation keeps its workspace's rows (its live events are recorded there) and its queue:
   * found by the installation's own routing key, read from auth.test (shared/shards/placement.ts).
   */
  readonly shardOf: (installation: RoutingInput) => Promise<{ readonly db: D1Database; readonly queue: OutboxQueue }>;
  readonly log: Log;
}

/** Reads one history page and handles each of its messages once. */
export async function backfillPage(deps: BackfillDeps, request: BackfillRequest, now: number): Promise<BackfillOutcome> {
  const who = await whoseToken(deps);
  if (!who.ok || !who.body) return who;
  const { teamId, enterpriseId, isEnterpriseInstall } = who;
  const botUserId = typeof who.body.user_id === "string" ? who.body.user_id : undefined;
  let channelType = request.channelType;
  if (channelType === undefined) {
    const info = await call(deps.slack, "conversations.info", { channel: request.channel });
    if (!info.ok || !info.body) return info;
    channelType = isObject(info.body.channel) ? channelTypeOf(info.body.channel) : undefined;
    if (channelType === undefined) {
      return {
        ok: false,
        status: 502,
        slackError: "channel_type_unknown",
        message: `conversations.info did not say what kind of conversation ${request.channel} is (is_im, is_mpim, is_private, is_channel): nothing read, nothing routed`,
      };
    }
  }
  const history = await call(deps.slack, "conversations.history", {
    channel: request.channel,
    oldest: request.oldest,
    latest: request.latest,
    inclusive: true,
    limit: request.limit,
    cursor: request.cursor,
  });
  if (!history.ok || !history.body) return history;
  const answered = (Array.isArray(history.body.messages) ? history.body.messages : []).filter(isObject);
  // A page is at most what was asked for: a longer answer is not Slack's, and would be unbounded work.
  if (answered.length > request.limit) {
    return {
      ok: false,
      status: 502,
      slackError: "page_too_long",
      message: `conversations.history answered ${answered.length} messages for a limit of ${request.limit}`,
    };
  }
  // Only well-formed ts inside the window asked for (a message before it could be past the rows' retention).
  const messages = answered.filter((m) => typeof m.ts === "string" && MESSAGE_TS.test(m.ts) && inWindow(m.ts, request));
  const meta = isObject(history.body.response_metadata) ? history.body.response_metadata : undefined;
  const next = typeof meta?.next_cursor === "string" && meta.next_cursor !== "" ? meta.next_cursor : null;

  let shard: Awaited<ReturnType<BackfillDeps["shardOf"]>>;
  try {
    shard = await deps.shardOf({ teamId, enterpriseId, isEnterpriseInstall });
  } catch (error) {
    const message = `where the workspace lives could not be read (${error instanceof Error ? error.message : String(error)}): nothing was written; run it again`;
    return { ok: false, status: 503, slackError: "placement_unreadable", message };
  }
  // Every event routed before anything is written: what the page's batches will send is then known exactly.
  const routed = messages.map((message) =>
    eventsOf(message, request.channel, channelType, botUserId).map((event) => routeFound(deps, { teamId, enterpriseId, event }, now)),
  );
  const tooCostly = overBudget(routed, request.dryRun);
  if (tooCostly) return tooCostly;
  const tally = { alreadyHandled: 0, recorded: 0, ignored: 0 };
  const refused: { ts: string; type: string; reason: string }[] = [];
  const recordedIds: number[] = [];
  for (const event of routed.flat()) {
    const outcome = await handle(deps, shard.db, event, request.dryRun, now);
    if (outcome.kind === "refused")
      refused.push({ ts: String(event.found.event.ts), type: event.found.event.type, reason: outcome.reason });
    else tally[outcome.kind] += 1;
    if (outcome.kind === "recorded") recordedIds.push(...outcome.ids);
  }
  if (recordedIds.length > 0) await enqueueRows(shard.queue, shard.db, recordedIds, now, deps.log);
  deps.log("info", "backfill page", {
    channel: request.channel,
    channel_type: channelType,
    dry_run: request.dryRun,
    read: messages.length,
    ...tally,
    refused: refused.length,
    more: next !== null,
  });
  return { ok: true, page: { read: messages.length, ...tally, refused, nextCursor: next, channelType } };
}

/** Conversations a listing page asks for: users.conversations' most. */
export const CHANNELS_PAGE_LIMIT = 200;

export type ChannelsOutcome =
  | { readonly ok: true; readonly page: BackfillChannelsPage }
  | { readonly ok: true; readonly retryAfterSeconds: number }
  | Extract<BackfillOutcome, { ok: false }>;

/**
 * One page of the conversations the bot is a member of (users.conversations:
 * public and private channels, group DMs and DMs, archived ones left out),
 * each with the channel_type its messages carry: what `ackbox backfill
 * --all-channels` walks, since a delivery gap is a workspace's, not a
 * channel's. The same calls' rules as a history page: auth.test names the
 * token's team, a 429 is a wait, a refusal says what to do.
 */
export async function listChannels(
  deps: Pick<BackfillDeps, "slack" | "teamId" | "enterpriseId">,
  cursor: string | undefined,
): Promise<ChannelsOutcome> {
  const who = await whoseToken(deps);
  if (!who.ok || !who.body) return who;
  const listed = await call(deps.slack, "users.conversations", {
    types: "public_channel,private_channel,mpim,im",
    exclude_archived: true,
    limit: CHANNELS_PAGE_LIMIT,
    cursor,
  });
  if (!listed.ok || !listed.body) return listed;
  const conversations = (Array.isArray(listed.body.channels) ? listed.body.channels : []).filter(isObject);
  if (conversations.length > CHANNELS_PAGE_LIMIT) {
    return {
      ok: false,
      status: 502,
      slackError: "page_too_long",
      message: `users.conversations answered ${conversations.length} conversations for a limit of ${CHANNELS_PAGE_LIMIT}`,
    };
  }
  const channels: { id: string; channelType: BackfillChannelType }[] = [];
  const unknown: string[] = [];
  for (const conversation of conversations) {
    const id = typeof conversation.id === "string" && /^[CGD][A-Z0-9]{2,}$/.test(conversation.id) ? conversation.id : undefined;
    if (!id) continue;
    const channelType = channelTypeOf(conversation);
    if (channelType) channels.push({ id, channelType });
    else unknown.push(id);
  }
  const meta = isObject(listed.body.response_metadata) ? listed.body.response_metadata : undefined;
  const next = typeof meta?.next_cursor === "string" && meta.next_cursor !== "" ? meta.next_cursor : null;
  return { ok: true, page: { channels, unknown, nextCursor: next } };
}

const MESSAGE_TS = /^\d{1,12}\.\d{1,6}$/;

function inWindow(ts: string, request: Pick<BackfillRequest, "oldest" | "latest">): boolean {
  const at = Number(ts);
  return at >= Number(request.oldest) && (request.latest === undefined || at <= Number(request.latest));
}

/** Subtypes a live app_mention is sent for (a plain message has none); never edits, deletes or joins. */
const MENTION_SUBTYPES: ReadonlySet<string | undefined> = new Set([undefined, "file_share", "thread_broadcast", "me_message"]);

/**
 * The events Slack would have sent for a history message: `message` (as the
 * message.* event of the channel's type carries it: channel_type as Slack
 * answered it for the channel), and `app_mention` when its text mentions the
 * bot user.
 */
export function eventsOf(
  message: JsonObject,
  channel: string,
  channelType: BackfillChannelType,
  botUserId: string | undefined,
): SlackEvent[] {
  if (typeof message.ts !== "string" || message.ts === "") return [];
  const base = { ...message, channel, channel_type: channelType, event_ts: message.ts };
  const events: SlackEvent[] = [{ ...base, type: "message" } as SlackEvent];
  const text = typeof message.text === "string" ? message.text : "";
  const mentioned = botUserId !== undefined && (text.includes(`<@${botUserId}>`) || text.includes(`<@${botUserId}|`));
  if (mentioned && MENTION_SUBTYPES.has(typeof message.subtype === "string" ? message.subtype : undefined)) {
    events.push({ ...base, type: "app_mention" } as SlackEvent);
  }
  return events;
}

/**
 * The channel_type a live message event carries (message.im → "im",
 * message.mpim → "mpim", message.groups → "group", message.channels →
 * "channel"), from a conversation object as conversations.info and
 * users.conversations answer it; undefined when it says none of them. An
 * old-style mpim is is_group and is_mpim: an mpim; a private channel is
 * is_private (or, created before 2021, is_group).
 */
export function channelTypeOf(conversation: JsonObject): BackfillChannelType | undefined {
  if (conversation.is_im === true) return "im";
  if (conversation.is_mpim === true) return "mpim";
  if (conversation.is_private === true || conversation.is_group === true) return "group";
  if (conversation.is_channel === true) return "channel";
  return undefined;
}

type Handled =
  | { readonly kind: "alreadyHandled" | "ignored" }
  | { readonly kind: "recorded"; readonly ids: readonly number[] }
  | { readonly kind: "refused"; readonly reason: string };

interface Found {
  readonly teamId: string | undefined;
  readonly enterpriseId: string | undefined;
  readonly event: SlackEvent;
}

/** A history message's event as the app routes it: pure, so the page can count its statements before writing. */
interface Routed {
  readonly found: Found;
  readonly input: EventInput;
  readonly fact: string;
  readonly routing: Routing;
}

function routeFound(deps: BackfillDeps, found: Found, now: number): Routed {
  const probe: EventInput = { surface: "event", id: "-", teamId: found.teamId, event: found.event };
  const { fact } = factOf(probe);
  // The receipt of a backfilled event: its fact, so the same window run again is a duplicate by receipt too.
  const input: EventInput = { ...probe, id: `backfill:${fact}` };
  return { found, input, fact, routing: deps.app.route(input, { now, settings: deps.appSettings }) };
}

/** What an event records: its rows and its cancels (none when the app ignores or refuses it). */
function recordsOf(routing: Routing): { readonly rows: number; readonly cancels: number } {
  if (routing.action !== "record") return { rows: 0, cancels: 0 };
  return { rows: routing.effects.length, cancels: routing.cancels?.length ?? 0 };
}

/**
 * The page's D1 statements, counted before anything is written (as pageWorstQueries counts them): per event that
 * records, one batch of 2 + a statement per row + three per cancel (shared/outbox/cancel-named.ts), or one read in
 * a dry run. pageWorstQueries bounds a page of rows; cancels cost three times a row, so a page whose handlers cancel
 * much can pass D1's limit — refused here with the limit that fits, rather than failing half-written, and the same
 * way on every rerun.
 */
function overBudget(routed: readonly (readonly Routed[])[], dryRun: boolean): Extract<BackfillOutcome, { ok: false }> | undefined {
  const statementsOf = (event: Routed) => {
    const { rows, cancels } = recordsOf(event.routing);
    if (rows + cancels === 0) return 0;
    return dryRun ? 1 : 2 + rows + 3 * cancels;
  };
  let statements = INSTALLATION_WORST_QUERIES;
  let rows = 0;
  let fits = 0;
  for (const message of routed) {
    for (const event of message) {
      statements += statementsOf(event);
      rows += dryRun ? 0 : recordsOf(event.routing).rows;
    }
    if (statements + Math.ceil(rows / SEND_BATCH_LIMIT) > PAGE_QUERY_BUDGET) {
      return {
        ok: false,
        status: 400,
        slackError: "page_too_costly",
        message: `the handlers of these ${routed.length} messages ask for more D1 statements than one request may send (${PAGE_QUERY_BUDGET}; a cancel is three): nothing was written; run it again with --limit ${Math.max(1, fits)}`,
      };
    }
    fits += 1;
  }
  return undefined;
}

async function handle(deps: BackfillDeps, db: D1Database, routed: Routed, dryRun: boolean, now: number): Promise<Handled> {
  const { found, input, fact, routing } = routed;
  if (routing.action === "ignore") return { kind: "ignored" };
  if (routing.action === "refuse") return { kind: "refused", reason: routing.reason };
  const cancels = routing.cancels ?? [];
  if (routing.effects.length === 0 && cancels.length === 0) return { kind: "ignored" };
  if (dryRun) {
    // A message that only cancels has no row to find: its backfill's own receipt says whether a run handled it.
    if (routing.effects.length === 0) {
      const handled = await db.prepare("SELECT 1 AS found FROM receipts WHERE id = ?1").bind(input.id).first("found");
      return handled === 1 ? { kind: "alreadyHandled" } : { kind: "recorded", ids: [] };
    }
    // The keys the rows are written under: a named row's is its name's (per workspace), not the fact's.
    const keys = routing.effects.map((effect) => inputRowKey(effect, fact, found.teamId));
    const { results } = await db
      .prepare("SELECT COUNT(*) AS n FROM outbox WHERE idempotency_key IN (SELECT value FROM json_each(?1))")
      .bind(JSON.stringify(keys))
      .all<{ n: number }>();
    return (results[0]?.n ?? 0) === keys.length ? { kind: "alreadyHandled" } : { kind: "recorded", ids: [] };
  }
  const verdict = await recordIntent(
    db,
    // The org on the receipt, as a live event's: a row of an org-wide install finds its installation by it.
    { id: input.id, kind: "event", type: found.event.type, teamId: found.teamId, enterpriseId: found.enterpriseId, fact },
    routing.effects,
    now,
    deps.settings.sweepGraceMs,
    undefined,
    undefined,
    // Its cancels end what existed when the message was sent, as its live delivery's would have: not a row another
    // input recorded since (a message delivered live and found again here must not end it).
    { cancels, cancelsRecordedBy: sentAt(found.event.ts) },
  );
  if (!verdict.firstDelivery) return { kind: "alreadyHandled" };
  // Rows all there already (its live delivery's): handled. A message that only cancels has no row to tell.
  if (routing.effects.length > 0 && verdict.outboxIds.length === 0) return { kind: "alreadyHandled" };
  return { kind: "recorded", ids: verdict.outboxIds };
}

/** A message's ts (seconds, with microseconds) as the outbox's times (ms). */
function sentAt(ts: unknown): number {
  return Math.floor(Number(ts) * 1000);
}

/**
 * auth.test: whose token `slack` carries — refused when it names another team than the one asked for (or none),
 * or, for an org-wide install's token, another org. The team is the one the events happened in, as live events
 * name it: an org-wide token's is the workspace asked for.
 */
async function whoseToken(deps: Pick<BackfillDeps, "slack" | "teamId" | "enterpriseId">): Promise<
  | Exclude<Called, { body: JsonObject }>
  | {
      readonly ok: true;
      readonly body: JsonObject;
      readonly teamId: string | undefined;
      readonly enterpriseId: string | undefined;
      readonly isEnterpriseInstall: boolean;
    }
> {
  const who = await call(deps.slack, "auth.test", {});
  if (!who.ok || !who.body) return who;
  const tokenTeam = typeof who.body.team_id === "string" ? who.body.team_id : undefined;
  const enterpriseId = typeof who.body.enterprise_id === "string" && who.body.enterprise_id !== "" ? who.body.enterprise_id : undefined;
  const isEnterpriseInstall = who.body.is_enterprise_install === true;
  const mismatch =
    deps.enterpriseId !== undefined && isEnterpriseInstall
      ? enterpriseId !== deps.enterpriseId && `auth.test answered for org ${enterpriseId ?? "none"}, not ${deps.enterpriseId}`
      : deps.teamId !== undefined && tokenTeam !== deps.teamId && `auth.test answered for ${tokenTeam ?? "no team"}, not ${deps.teamId}`;
  if (mismatch) return { ok: false, status: 502, slackError: "team_mismatch", message: mismatch };
  const teamId = isEnterpriseInstall ? (deps.teamId ?? tokenTeam) : tokenTeam;
  return { ...who, teamId, enterpriseId, isEnterpriseInstall };
}

type Called =
  | { readonly ok: true; readonly body: JsonObject }
  | { readonly ok: true; readonly retryAfterSeconds: number; readonly body?: undefined }
  | Extract<BackfillOutcome, { ok: false }>;

/** One Slack call, its failures as the operator's answers: a 429 to wait out, a channel the bot cannot read, the rest. */
async function call(slack: SlackWebApi, method: string, params: Record<string, unknown>): Promise<Called> {
  try {
    const answer = await slack.call(method, params, CALL_TIMEOUT_MS);
    if (answer.ok) return answer;
    return refusalOf(method, answer.error, typeof params.channel === "string" ? params.channel : undefined);
  } catch (error) {
    if (error instanceof EffectError && error.failure.kind === "rate_limited") {
      return { ok: true, retryAfterSeconds: Math.max(1, Math.ceil(error.failure.retryAfterMs / 1000)) };
    }
    return { ok: false, status: 502, slackError: "slack_unreachable", message: error instanceof Error ? error.message : String(error) };
  }
}

function refusalOf(method: string, error: string, channel: string | undefined): Extract<BackfillOutcome, { ok: false }> {
  const refused = (message: string) => ({ ok: false as const, status: 400 as const, slackError: error, message });
  switch (error) {
    case "not_in_channel":
      return refused(`the bot is not a member of ${channel}: invite it (/invite @your-app in the channel) and run the backfill again`);
    case "channel_not_found":
      return refused(`channel ${channel} not found, or the bot cannot see it (a private channel it is not in, another workspace's)`);
    case "missing_scope":
      return refused(
        `${method} needs a scope the app lacks (${method === "conversations.history" ? "channels:history, groups:history, im:history or mpim:history" : "channels:read, groups:read, im:read or mpim:read"}: the one for the ${method === "users.conversations" ? "kinds of conversation it lists" : "channel's kind"})`,
      );
    case "invalid_cursor":
    case "invalid_ts_oldest":
    case "invalid_ts_latest":
      return refused(`${method}: ${error}`);
  }
  return { ok: false, status: 502, slackError: error, message: `${method}: ${error}` };
}
