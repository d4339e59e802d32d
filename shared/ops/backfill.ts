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
 * What a backfill cannot see: thread replies (conversations.history returns
 * a channel's top-level messages and thread broadcasts only), edits and
 * deletions, and messages older than the channel's history retention.
 */
import type { SlackApp } from "../app/app.ts";
import type { AppSettings } from "../app/settings.ts";
import { EffectError } from "../delivery/failure.ts";
import type { Log } from "../log.ts";
import { enqueueRows, type OutboxQueue } from "../outbox/enqueue.ts";
import { idempotencyKey } from "../outbox/model.ts";
import { recordIntent } from "../outbox/record.ts";
import type { RoutingInput } from "../shards/route.ts";
import { factOf } from "../slack/facts.ts";
import { type EventInput, isObject, type JsonObject, type SlackEvent } from "../slack/inputs.ts";
import type { SlackWebApi } from "../slack/web-api.ts";

/**
 * Most messages a page: each of its events (two for a message that mentions
 * the bot) is one D1 batch, as the ack writes it, so a page is at most 200
 * batches, well inside D1's 1 000 queries per invocation. The CLI's default
 * is 15, the most an app outside the Slack Marketplace gets.
 */
export const BACKFILL_PAGE_MAX = 100;
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
  // The workspace the events happened in, as live events name it: an org-wide token's is the one asked for.
  const teamId = isEnterpriseInstall ? (deps.teamId ?? tokenTeam) : tokenTeam;
  const botUserId = typeof who.body.user_id === "string" ? who.body.user_id : undefined;
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
  const tally = { alreadyHandled: 0, recorded: 0, ignored: 0 };
  const refused: { ts: string; type: string; reason: string }[] = [];
  const recordedIds: number[] = [];
  for (const message of messages) {
    for (const event of eventsOf(message, request.channel, botUserId)) {
      const outcome = await handle(deps, shard.db, { teamId, enterpriseId, event }, request.dryRun, now);
      if (outcome.kind === "refused") refused.push({ ts: String(event.ts), type: event.type, reason: outcome.reason });
      else tally[outcome.kind] += 1;
      if (outcome.kind === "recorded") recordedIds.push(...outcome.ids);
    }
  }
  if (recordedIds.length > 0) await enqueueRows(shard.queue, shard.db, recordedIds, now, deps.log);
  deps.log("info", "backfill page", {
    channel: request.channel,
    dry_run: request.dryRun,
    read: messages.length,
    ...tally,
    refused: refused.length,
    more: next !== null,
  });
  return { ok: true, page: { read: messages.length, ...tally, refused, nextCursor: next } };
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
 * message.channels family carries it), and `app_mention` when its text
 * mentions the bot user.
 */
export function eventsOf(message: JsonObject, channel: string, botUserId: string | undefined): SlackEvent[] {
  if (typeof message.ts !== "string" || message.ts === "") return [];
  const base = { channel_type: channelTypeOf(channel), ...message, channel, event_ts: message.ts };
  const events: SlackEvent[] = [{ ...base, type: "message" } as SlackEvent];
  const text = typeof message.text === "string" ? message.text : "";
  const mentioned = botUserId !== undefined && (text.includes(`<@${botUserId}>`) || text.includes(`<@${botUserId}|`));
  if (mentioned && MENTION_SUBTYPES.has(typeof message.subtype === "string" ? message.subtype : undefined)) {
    events.push({ ...base, type: "app_mention" } as SlackEvent);
  }
  return events;
}

/**
 * The channel_type every live message event carries, from the channel id's
 * prefix (a history message does not say it). A `G` id reads as `group`,
 * though an old-style mpim has a `G` id too.
 */
function channelTypeOf(channel: string): string | undefined {
  if (channel.startsWith("D")) return "im";
  if (channel.startsWith("C")) return "channel";
  if (channel.startsWith("G")) return "group";
  return undefined;
}

type Handled =
  | { readonly kind: "alreadyHandled" | "ignored" }
  | { readonly kind: "recorded"; readonly ids: readonly number[] }
  | { readonly kind: "refused"; readonly reason: string };

async function handle(
  deps: BackfillDeps,
  db: D1Database,
  found: { readonly teamId: string | undefined; readonly enterpriseId: string | undefined; readonly event: SlackEvent },
  dryRun: boolean,
  now: number,
): Promise<Handled> {
  const probe: EventInput = { surface: "event", id: "-", teamId: found.teamId, event: found.event };
  const { fact } = factOf(probe);
  // The receipt of a backfilled event: its fact, so the same window run again is a duplicate by receipt too.
  const input: EventInput = { ...probe, id: `backfill:${fact}` };
  const routing = deps.app.route(input, { now, settings: deps.appSettings });
  if (routing.action === "ignore") return { kind: "ignored" };
  if (routing.action === "refuse") return { kind: "refused", reason: routing.reason };
  if (routing.effects.length === 0) return { kind: "ignored" };
  if (dryRun) {
    const keys = routing.effects.map((effect) => idempotencyKey(fact, effect.key));
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
  );
  if (!verdict.firstDelivery || verdict.outboxIds.length === 0) return { kind: "alreadyHandled" };
  return { kind: "recorded", ids: verdict.outboxIds };
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
      return refused(`${method} needs a scope the app lacks (channels:history, groups:history, …)`);
    case "invalid_cursor":
    case "invalid_ts_oldest":
    case "invalid_ts_latest":
      return refused(`${method}: ${error}`);
  }
  return { ok: false, status: 502, slackError: error, message: `${method}: ${error}` };
}
