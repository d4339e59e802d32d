/**
 * Signed, unique Slack Events API deliveries for the load runs: each request
 * is a fresh event (its own event_id and message ts), alternately an
 * app_mention (→ chat.postMessage in a thread) and a plain channel message
 * (→ reactions.add), built and signed by the local tools' own Slack payloads
 * (cli/local/slack-payloads.ts). They are built just before each run, so
 * their timestamps are well inside the ±300 s window the ingress enforces.
 */
import { appMention, channelMessage, eventCallback, slackSignature } from "../../cli/local/slack-payloads.ts";

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
const BENCH_TEAM = { teamId: "T0BENCH", appId: "A0BENCH" };

let sequence = 0;
const runTag = Date.now().toString(36).toUpperCase();

/**
 * n signed deliveries, each a new event; all of one workspace, or (`newTeams`) each of a workspace never seen
 * before — every one a first sight, which places it (shared/shards/placement.ts). Mentions and channel messages
 * alternate, or (`mentionsOnly`) every one is an app_mention.
 */
export async function signedEvents(
  n: number,
  options: { readonly newTeams?: boolean; readonly mentionsOnly?: boolean } = {},
): Promise<PreparedRequest[]> {
  const timestamp = Math.floor(Date.now() / 1000);
  return Array.from({ length: n }, () => {
    const seq = sequence++;
    const eventId = `Ev${runTag}${seq.toString(36).toUpperCase().padStart(6, "0")}`;
    const ts = `${timestamp + Math.floor(seq / 1_000_000)}.${String(seq % 1_000_000).padStart(6, "0")}`;
    const team = options.newTeams ? { ...BENCH_TEAM, teamId: `T0B${runTag}${seq.toString(36).toUpperCase()}` } : BENCH_TEAM;
    const fields = { channel: BENCH_CHANNEL, ts, team: team.teamId };
    const { body } = eventCallback(options.mentionsOnly || seq % 2 === 0 ? appMention(fields) : channelMessage(fields), eventId, team);
    return {
      method: "POST",
      path: "/slack/events",
      headers: {
        "content-type": "application/json",
        "x-slack-request-timestamp": String(timestamp),
        "x-slack-signature": slackSignature(BENCH_SIGNING_SECRET, timestamp, body),
      },
      body,
      eventId,
      ts,
    };
  });
}
