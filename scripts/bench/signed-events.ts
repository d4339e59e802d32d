/**
 * Signed, unique Slack Events API deliveries for the load runs: each request
 * is a fresh event (its own event_id and message ts), alternately an
 * app_mention (→ chat.postMessage in a thread) and a plain channel message
 * (→ reactions.add), shaped like what Slack sends and signed the way Slack
 * signs, with the project's own signatureFor.
 *
 * They are built just before each run, so their timestamps are well inside
 * the ±300 s window the ingress enforces.
 */
import { signatureFor } from "../../shared/slack/signature.ts";

export interface PreparedRequest {
  readonly method: "POST" | "GET";
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  readonly eventId: string;
  /** The message ts: the effect of this event names it (thread_ts or timestamp), so a fake Slack can match the two. */
  readonly ts: string;
}

export const BENCH_SIGNING_SECRET = "ackbox-bench-signing-secret-5d1e";
export const BENCH_BOT_TOKEN = "xoxb-ackbox-bench";
export const BENCH_CHANNEL = "C0BENCH";
const BENCH_TEAM = "T0BENCH";

let sequence = 0;
const runTag = Date.now().toString(36).toUpperCase();

/** n signed deliveries, each a new event; `teams`: the workspaces they come from, in turn (default: T0BENCH alone). */
export async function signedEvents(
  n: number,
  options: { secret?: string; path?: string; now?: number; teams?: readonly string[] } = {},
): Promise<PreparedRequest[]> {
  const secret = options.secret ?? BENCH_SIGNING_SECRET;
  const now = options.now ?? Date.now();
  const timestamp = Math.floor(now / 1000);
  const out: Promise<PreparedRequest>[] = [];
  for (let i = 0; i < n; i++) {
    const seq = sequence++;
    const eventId = `Ev${runTag}${seq.toString(36).toUpperCase().padStart(6, "0")}`;
    const ts = `${timestamp + Math.floor(seq / 1_000_000)}.${String(seq % 1_000_000).padStart(6, "0")}`;
    const team = options.teams?.[i % options.teams.length] ?? BENCH_TEAM;
    const body = JSON.stringify(envelope(seq % 2 === 0 ? mention(ts, team) : channelMessage(ts, team), eventId, timestamp, team));
    out.push(
      signatureFor(secret, timestamp, body).then((signature) => ({
        method: "POST" as const,
        path: options.path ?? "/slack/events",
        headers: {
          "content-type": "application/json",
          "x-slack-request-timestamp": String(timestamp),
          "x-slack-signature": signature,
        },
        body,
        eventId,
        ts,
      })),
    );
  }
  return Promise.all(out);
}

function envelope(event: Record<string, unknown>, eventId: string, eventTime: number, team: string): Record<string, unknown> {
  return {
    token: "legacy-verification-token",
    team_id: team,
    context_team_id: team,
    api_app_id: "A0BENCH",
    event,
    type: "event_callback",
    event_id: eventId,
    event_time: eventTime,
    authorizations: [{ enterprise_id: null, team_id: team, user_id: "U0ACKBOXBOT", is_bot: true, is_enterprise_install: false }],
    is_ext_shared_channel: false,
    event_context: `4-eyJldCI6ImFwcF9tZW50aW9uIiwidGlkIjoiVDBCRU5DSCIsImFpZCI6IkEwQkVOQ0giLCJjaWQiOiJDMEJFTkNIIn0-${eventId}`,
  };
}

function blocks(text: string): unknown[] {
  return [{ type: "rich_text", block_id: "b0", elements: [{ type: "rich_text_section", elements: [{ type: "text", text }] }] }];
}

function mention(ts: string, team: string): Record<string, unknown> {
  const text = "<@U0ACKBOXBOT> how is the deploy going?";
  return {
    type: "app_mention",
    user: "U0HUMAN",
    text,
    ts,
    client_msg_id: `c-${ts}`,
    team,
    blocks: blocks(text),
    channel: BENCH_CHANNEL,
    event_ts: ts,
  };
}

function channelMessage(ts: string, team: string): Record<string, unknown> {
  const text = "the deploy is green, shipping now";
  return {
    type: "message",
    channel_type: "channel",
    user: "U0HUMAN",
    text,
    ts,
    client_msg_id: `c-${ts}`,
    team,
    blocks: blocks(text),
    channel: BENCH_CHANNEL,
    event_ts: ts,
  };
}
