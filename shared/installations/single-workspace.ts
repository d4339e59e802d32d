/**
 * Single-workspace mode's answer to a broken SLACK_BOT_TOKEN: the same as a
 * distributed app's blocked installation — rows wait, no attempt spent —
 * without any D1 read. The token is known by its fingerprint (8 hex digits of
 * its SHA-256): once Slack refuses it (invalid_auth, token_revoked, …), this
 * isolate lets every row wait without calling Slack; a deploy with a new
 * SLACK_BOT_TOKEN has another fingerprint, so its rows go out at once and
 * the waiting ones resume when they come back. Another isolate learns the
 * same from its own first refused call (one call each, then none).
 */
import type { ClaimedRow } from "../outbox/model.ts";
import { slackWebApi } from "../slack/web-api.ts";
import { type SlackForRow, watchAuthErrors } from "./resolve.ts";

/** This isolate's refused tokens: fingerprint → Slack's error. */
const refusedInIsolate = new Map<string, string>();

export async function tokenFingerprint(token: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(token)));
  return [...digest.slice(0, 4)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

export function singleWorkspaceSlack(
  token: string,
  slackApiUrl: string,
  edge: typeof fetch,
  refused: Map<string, string> = refusedInIsolate,
): (row: Pick<ClaimedRow, "teamId">) => Promise<SlackForRow> {
  const fingerprint = tokenFingerprint(token);
  const inner = slackWebApi(token, slackApiUrl, edge);
  const waiting = (id: string, error: string) =>
    `SLACK_BOT_TOKEN (fingerprint ${id}) was refused by Slack (${error}); rows wait, no attempt spent, until a new SLACK_BOT_TOKEN is deployed`;
  return async () => {
    const id = await fingerprint;
    const known = refused.get(id);
    if (known !== undefined) return { ok: false, reason: waiting(id, known) };
    const { slack, authFailure } = watchAuthErrors(inner);
    return {
      ok: true,
      slack,
      authFailure,
      block: async (reason) => {
        refused.set(id, reason);
        return waiting(id, reason);
      },
    };
  };
}
