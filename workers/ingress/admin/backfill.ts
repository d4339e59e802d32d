/**
 * POST /admin/backfill: one page of a channel's history, each message handled
 * once (shared/ops/backfill.ts). The CLI (`ackbox backfill`) calls it page by
 * page with the cursor it answered, pacing itself within Slack's limit for
 * conversations.history, so every request does a bounded amount of work.
 *
 * Body: {"channel":"C…","oldest":"<ts>","latest"?:"<ts>","cursor"?:"…","limit"?:15,"dryRun"?:false,"team"?:"T…"}
 * (team: whose installation reads the history, in a distributed app).
 * Answers: 200 the page's tally and nextCursor, or, when Slack rate-limits
 * the history, 200 {"retryAfterSeconds"}: nothing was read, ask for the same
 * page again after that long (the request itself did not fail). 400 when
 * Slack refuses the read (not_in_channel, channel_not_found, missing_scope:
 * `slackError`), `error` saying what to do; 409 when the ingress cannot call
 * Slack for that team (no token, no installation); 502 Slack unreachable.
 */
import type { SlackApp } from "../../../shared/app/app.ts";
import type { AppSettingsResult } from "../../../shared/app/settings.ts";
import { slackForOf } from "../../../shared/effects/context.ts";
import type { Log } from "../../../shared/log.ts";
import { BACKFILL_PAGE_MAX, type BackfillDeps, backfillPage } from "../../../shared/ops/backfill.ts";
import type { BackfillAnswer } from "../../../shared/ops/backfill-answer.ts";
import { earliestBackfillMs } from "../../../shared/ops/backfill-gaps.ts";
import type { OutboxQueue } from "../../../shared/outbox/enqueue.ts";
import type { ClaimedRow } from "../../../shared/outbox/model.ts";
import type { Settings } from "../../../shared/settings.ts";
import { shardQueue } from "../../../shared/shards/queue.ts";
import { routingKeyOf, shardIndexOf } from "../../../shared/shards/route.ts";
import { slackWebApi } from "../../../shared/slack/web-api.ts";
import type { AdminDeps } from "./deps.ts";
import { badRequest, json, readJsonFields } from "./params.ts";

/** The backfill's dependencies for a team (its shard, its token), or why there are none. */
export type BackfillFor = (
  teamId: string | undefined,
) => Promise<{ readonly ok: true; readonly deps: BackfillDeps } | { readonly ok: false; readonly reason: string }>;

/**
 * The deployment's BackfillFor: the team's shard and queue, and Slack with its
 * installation's token (distributed), or SLACK_BOT_TOKEN (single workspace).
 */
export function backfillForOf(
  settings: Settings,
  app: SlackApp,
  appSettings: AppSettingsResult,
  shards: readonly D1Database[],
  queue: OutboxQueue,
  log: Log,
): BackfillFor {
  const shardIndex = (teamId: string | undefined) => (teamId ? shardIndexOf(routingKeyOf({ teamId }), shards.length) : 0);
  const shardOf = (teamId: string | undefined) => {
    const index = shardIndex(teamId);
    return { db: shards[index] as D1Database, queue: shardQueue(queue, index) };
  };
  return async (teamId) => {
    // The handlers read the app's settings: without them nothing can be routed (the names are in the answer, never a value).
    if (!appSettings.ok) return { ok: false, reason: `the app's settings are not usable: ${appSettings.errors.join("; ")}` };
    const base = { app, settings, appSettings: appSettings.settings, shardOf, log };
    if (!settings.oauth) {
      if (!settings.slackBotToken) return { ok: false, reason: "SLACK_BOT_TOKEN is not set: nothing to read the history with" };
      return { ok: true, deps: { ...base, slack: slackWebApi(settings.slackBotToken, settings.slackApiUrl) } };
    }
    if (!teamId)
      return { ok: false, reason: "a distributed app reads each workspace's history with its own token: give the team (--team T…)" };
    const index = shardIndex(teamId);
    // Resolved as a row's is (slackForRow reads only the team, and the org if any, of what it is given); like
    // everything on the ingress it never spends a refresh token: an expired one waits for the consumer or the cron.
    const resolved = await slackForOf(shards[0] as D1Database, settings, shards[index] as D1Database, { refresh: false })({
      teamId,
    } as ClaimedRow);
    if (!resolved.ok) return { ok: false, reason: `no usable installation for ${teamId}: ${resolved.reason}` };
    return { ok: true, deps: { ...base, slack: resolved.slack, teamId } };
  };
}

const BODY_MAX_BYTES = 4 * 1024;
const FIELDS = ["channel", "team", "oldest", "latest", "cursor", "limit", "dryRun"];
const TS = /^\d{1,12}(\.\d{1,6})?$/;

export async function postBackfill(request: Request, deps: AdminDeps, now: number): Promise<Response> {
  if (!deps.backfillFor) return json({ error: "this ingress was built without the app's handlers: no backfill" }, 501);
  const body = await readJsonFields(request, BODY_MAX_BYTES, FIELDS, '{"channel":"C0123","oldest":"1764500000"}');
  if (!body.ok) return body.answer;
  const fields = body.fields;
  const { channel, team, oldest, latest, cursor, limit, dryRun } = fields;
  if (typeof channel !== "string" || !/^[CGD][A-Z0-9]{2,}$/.test(channel)) return badRequest("channel: want a channel id, e.g. C0123ABC");
  if (team !== undefined && (typeof team !== "string" || !/^[TE][A-Z0-9]{2,}$/.test(team)))
    return badRequest("team: want a team id, e.g. T0123");
  if (typeof oldest !== "string" || !TS.test(oldest)) return badRequest("oldest: want a Slack ts, e.g. 1764500000.000000");
  if (latest !== undefined && (typeof latest !== "string" || !TS.test(latest))) return badRequest("latest: want a Slack ts");
  if (latest !== undefined && Number(latest) < Number(oldest)) return badRequest("latest must not be before oldest");
  if (cursor !== undefined && (typeof cursor !== "string" || cursor === "" || cursor.length > 512))
    return badRequest("cursor: want the previous page's nextCursor");
  if (limit !== undefined && (!Number.isInteger(limit) || (limit as number) < 1 || (limit as number) > BACKFILL_PAGE_MAX)) {
    return badRequest(`limit: want 1 to ${BACKFILL_PAGE_MAX}`);
  }
  if (dryRun !== undefined && typeof dryRun !== "boolean") return badRequest("dryRun: want true or false");
  const earliestMs = earliestBackfillMs(now, deps.settings);
  if (Number(oldest) * 1000 < earliestMs) {
    const earliest = new Date(earliestMs).toISOString();
    deps.log("warn", "backfill refused: oldest is past row retention", { channel, oldest, earliest });
    return badRequest(
      `oldest: before ${earliest} (DONE_RETENTION_HOURS / RECEIPT_RETENTION_HOURS, less 1 h): rows that say a message was handled are pruned by then, so a backfill would deliver it again`,
    );
  }

  const resolved = await deps.backfillFor(team as string | undefined);
  if (!resolved.ok) return json({ error: resolved.reason }, 409);
  const outcome = await backfillPage(
    resolved.deps,
    { channel, oldest, latest, cursor: cursor as string | undefined, limit: (limit as number | undefined) ?? 15, dryRun: dryRun === true },
    now,
  );
  if (outcome.ok) {
    const answer: BackfillAnswer =
      "page" in outcome
        ? { channel, dryRun: dryRun === true, ...outcome.page, refused: [...outcome.page.refused] }
        : { channel, dryRun: dryRun === true, retryAfterSeconds: outcome.retryAfterSeconds };
    return json(answer);
  }
  return json({ error: outcome.message, slackError: outcome.slackError }, outcome.status);
}
