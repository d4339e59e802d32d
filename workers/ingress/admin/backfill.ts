/**
 * POST /admin/backfill: one page of a channel's history, each message handled
 * once (shared/ops/backfill.ts). The CLI (`ackbox backfill`) calls it page by
 * page with the cursor it answered, pacing itself within Slack's limit for
 * conversations.history, so every request does a bounded amount of work.
 *
 * Body: {"channel":"C…","oldest":"<ts>","latest"?:"<ts>","cursor"?:"…","limit"?:15,"dryRun"?:false,"team"?:"T…","enterprise"?:"E…",
 * "channelType"?:"group"} (team: the workspace whose installation reads the history, in a distributed app;
 * enterprise: its org, when that installation is the org's org-wide one; channelType: what the first page
 * answered, so a run asks Slack for the channel's type once). The rows are recorded on the shard the
 * installation's live events are (its placement, by its routing key: `E:<org>` for an org-wide install).
 * Answers: 200 the page's tally and nextCursor, or, when Slack rate-limits
 * the history, 200 {"retryAfterSeconds"}: nothing was read, ask for the same
 * page again after that long (the request itself did not fail). 400 when
 * Slack refuses the read (not_in_channel, channel_not_found, missing_scope:
 * `slackError`), `error` saying what to do; 409 when the ingress cannot call
 * Slack for that team (no token, no installation); 502 Slack unreachable; 503
 * where the workspace lives could not be read (nothing written: run it again).
 *
 * POST /admin/backfill/channels: one page of the conversations the bot is a
 * member of, each with its type (`ackbox backfill --all-channels` walks them:
 * a delivery gap is a workspace's). Body: {"team"?:"T…","enterprise"?:"E…","cursor"?:"…"}.
 * Answers: 200 {"channels":[{"id","channelType"}],"unknown":[…],"nextCursor"},
 * or {"retryAfterSeconds"}; 400, 409 and 502 as above.
 */
import type { SlackApp } from "../../../shared/app/app.ts";
import type { AppSettingsResult } from "../../../shared/app/settings.ts";
import { slackForOf } from "../../../shared/effects/context.ts";
import type { Log } from "../../../shared/log.ts";
import { BACKFILL_PAGE_MAX, type BackfillDeps, backfillPage, listChannels } from "../../../shared/ops/backfill.ts";
import {
  BACKFILL_CHANNEL_TYPES,
  type BackfillAnswer,
  type BackfillChannelsAnswer,
  type BackfillChannelType,
} from "../../../shared/ops/backfill-answer.ts";
import { earliestBackfillMs } from "../../../shared/ops/backfill-gaps.ts";
import type { OutboxQueue } from "../../../shared/outbox/enqueue.ts";
import type { ClaimedRow } from "../../../shared/outbox/model.ts";
import type { Settings } from "../../../shared/settings.ts";
import { placedOn, placementsOn } from "../../../shared/shards/placement.ts";
import { shardQueue } from "../../../shared/shards/queue.ts";
import { type RoutingInput, routingKeyOf } from "../../../shared/shards/route.ts";
import { slackWebApi } from "../../../shared/slack/web-api.ts";
import type { AdminDeps } from "./deps.ts";
import { badRequest, json, readJsonFields } from "./params.ts";

/** The backfill's dependencies for a workspace (its shard, its token), or why there are none. */
export type BackfillFor = (who: {
  readonly teamId?: string | undefined;
  readonly enterpriseId?: string | undefined;
}) => Promise<{ readonly ok: true; readonly deps: BackfillDeps } | { readonly ok: false; readonly reason: string }>;

/**
 * The deployment's BackfillFor: Slack with the workspace's installation's token (distributed: its own, or its
 * org's org-wide install), or SLACK_BOT_TOKEN (single workspace); and the rows recorded where that installation's
 * live events are, its placement by its own routing key (`E:<org>` for an org-wide install). `edge`: the fetch its
 * reads of Slack go out through (the ingress's).
 */
export function backfillForOf(
  settings: Settings,
  app: SlackApp,
  appSettings: AppSettingsResult,
  shards: readonly D1Database[],
  queue: OutboxQueue,
  log: Log,
  edge: typeof fetch,
): BackfillFor {
  const placements = placementsOn(shards[0] as D1Database, shards.length);
  const shardOf = async (installation: RoutingInput) => {
    // A backfill is an input of its workspace like any: it may be the first sight of its key.
    const index = await placements.place(routingKeyOf(installation), Date.now());
    return { db: placedOn(shards, index), queue: shardQueue(queue, index) };
  };
  return async ({ teamId, enterpriseId }) => {
    // The handlers read the app's settings: without them nothing can be routed (the names are in the answer, never a value).
    if (!appSettings.ok) return { ok: false, reason: `the app's settings are not usable: ${appSettings.errors.join("; ")}` };
    const base = { app, settings, appSettings: appSettings.settings, shardOf, log };
    if (!settings.oauth) {
      if (!settings.slackBotToken) return { ok: false, reason: "SLACK_BOT_TOKEN is not set: nothing to read the history with" };
      return { ok: true, deps: { ...base, slack: slackWebApi(settings.slackBotToken, settings.slackApiUrl, edge) } };
    }
    if (!teamId)
      return { ok: false, reason: "a distributed app reads each workspace's history with its own token: give the team (--team T…)" };
    // Resolved as a row's is: the workspace's own installation, else its org's org-wide one (given the org); like
    // everything on the ingress it never spends a refresh token: an expired one waits for the consumer or the cron.
    const resolved = await slackForOf(shards[0] as D1Database, settings, shards[0] as D1Database, { edge, refresh: false })({
      teamId,
      enterpriseId,
    } as ClaimedRow & { enterpriseId?: string });
    if (!resolved.ok) {
      const orgHint = enterpriseId === undefined ? " (a workspace of an org-wide install: give its org too, --enterprise E…)" : "";
      return { ok: false, reason: `no usable installation for ${teamId}: ${resolved.reason}${orgHint}` };
    }
    return { ok: true, deps: { ...base, slack: resolved.slack, teamId, enterpriseId } };
  };
}

const BODY_MAX_BYTES = 4 * 1024;
const FIELDS = ["channel", "team", "enterprise", "oldest", "latest", "cursor", "limit", "dryRun", "channelType"];
const TS = /^\d{1,12}(\.\d{1,6})?$/;

export async function postBackfill(request: Request, deps: AdminDeps, now: number): Promise<Response> {
  if (!deps.backfillFor) return json({ error: "this ingress was built without the app's handlers: no backfill" }, 501);
  const body = await readJsonFields(request, BODY_MAX_BYTES, FIELDS, '{"channel":"C0123","oldest":"1764500000"}');
  if (!body.ok) return body.answer;
  const fields = body.fields;
  const { channel, team, enterprise, oldest, latest, cursor, limit, dryRun, channelType } = fields;
  if (typeof channel !== "string" || !/^[CGD][A-Z0-9]{2,}$/.test(channel)) return badRequest("channel: want a channel id, e.g. C0123ABC");
  const whose = whoseInstallation(team, enterprise, "reads that workspace's channel");
  if (whose) return whose;
  if (typeof oldest !== "string" || !TS.test(oldest)) return badRequest("oldest: want a Slack ts, e.g. 1764500000.000000");
  if (latest !== undefined && (typeof latest !== "string" || !TS.test(latest))) return badRequest("latest: want a Slack ts");
  if (latest !== undefined && Number(latest) < Number(oldest)) return badRequest("latest must not be before oldest");
  if (cursor !== undefined && (typeof cursor !== "string" || cursor === "" || cursor.length > 512))
    return badRequest("cursor: want the previous page's nextCursor");
  if (limit !== undefined && (!Number.isInteger(limit) || (limit as number) < 1 || (limit as number) > BACKFILL_PAGE_MAX)) {
    return badRequest(`limit: want 1 to ${BACKFILL_PAGE_MAX}`);
  }
  if (dryRun !== undefined && typeof dryRun !== "boolean") return badRequest("dryRun: want true or false");
  if (channelType !== undefined && !BACKFILL_CHANNEL_TYPES.includes(channelType as BackfillChannelType)) {
    return badRequest(`channelType: want one of ${BACKFILL_CHANNEL_TYPES.join(", ")} (the first page's answer), or none`);
  }
  const earliestMs = earliestBackfillMs(now, deps.settings);
  if (Number(oldest) * 1000 < earliestMs) {
    const earliest = new Date(earliestMs).toISOString();
    deps.log("warn", "backfill refused: oldest is past row retention", { channel, oldest, earliest });
    return badRequest(
      `oldest: before ${earliest} (DONE_RETENTION_HOURS / RECEIPT_RETENTION_HOURS, less 1 h): rows that say a message was handled are pruned by then, so a backfill would deliver it again`,
    );
  }

  const resolved = await deps.backfillFor({ teamId: team as string | undefined, enterpriseId: enterprise as string | undefined });
  if (!resolved.ok) return json({ error: resolved.reason }, 409);
  const outcome = await backfillPage(
    resolved.deps,
    {
      channel,
      oldest,
      latest,
      cursor: cursor as string | undefined,
      limit: (limit as number | undefined) ?? 15,
      dryRun: dryRun === true,
      channelType: channelType as BackfillChannelType | undefined,
    },
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

const CHANNELS_FIELDS = ["team", "enterprise", "cursor"];

/** The body's team and org, checked: a refusal saying what is wrong, or undefined when they are usable. */
function whoseInstallation(team: unknown, enterprise: unknown, what: string): Response | undefined {
  if (team !== undefined && (typeof team !== "string" || !/^T[A-Z0-9]{2,}$/.test(team)))
    return badRequest("team: want a team id, e.g. T0123");
  if (enterprise !== undefined && (typeof enterprise !== "string" || !/^E[A-Z0-9]{2,}$/.test(enterprise)))
    return badRequest("enterprise: want an Enterprise Grid org id, e.g. E0123");
  if (enterprise !== undefined && team === undefined)
    return badRequest(`enterprise: give the workspace too (team): the org's install ${what}`);
  return undefined;
}

export async function postBackfillChannels(request: Request, deps: AdminDeps): Promise<Response> {
  if (!deps.backfillFor) return json({ error: "this ingress was built without the app's handlers: no backfill" }, 501);
  const body = await readJsonFields(request, BODY_MAX_BYTES, CHANNELS_FIELDS, '{"team":"T0123"}');
  if (!body.ok) return body.answer;
  const { team, enterprise, cursor } = body.fields;
  const whose = whoseInstallation(team, enterprise, "lists that workspace's conversations");
  if (whose) return whose;
  if (cursor !== undefined && (typeof cursor !== "string" || cursor === "" || cursor.length > 512))
    return badRequest("cursor: want the previous page's nextCursor");
  const resolved = await deps.backfillFor({ teamId: team as string | undefined, enterpriseId: enterprise as string | undefined });
  if (!resolved.ok) return json({ error: resolved.reason }, 409);
  const outcome = await listChannels(resolved.deps, cursor as string | undefined);
  if (!outcome.ok) return json({ error: outcome.message, slackError: outcome.slackError }, outcome.status);
  const answer: BackfillChannelsAnswer = "page" in outcome ? outcome.page : { retryAfterSeconds: outcome.retryAfterSeconds };
  return json(answer);
}
