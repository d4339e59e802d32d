import type { SlackApp } from "../../shared/app/app.ts";
import { botScopesOf } from "../../shared/app/manifest.ts";
import { type AppSettings, appSettingsOf } from "../../shared/app/settings.ts";
import { type FirstAttempt, firstAttemptOf, inlineBounds } from "../../shared/delivery/first-attempt.ts";
import { effectContextOf, slackForOf } from "../../shared/effects/context.ts";
import type { Env } from "../../shared/env.ts";
import { tokenKeys } from "../../shared/installations/crypto.ts";
import { finishInstall, startInstall } from "../../shared/installations/install-flow.ts";
import { installationRemovedEffect, withLifecycleEffect } from "../../shared/installations/lifecycle.ts";
import { slackForRow } from "../../shared/installations/resolve.ts";
import type { Installation } from "../../shared/installations/store.ts";
import { wakeWaitingRows } from "../../shared/installations/wake.ts";
import { consoleLog, type Log } from "../../shared/log.ts";
import { recordActivity } from "../../shared/ops/activity.ts";
import { newClaimToken } from "../../shared/outbox/claim.ts";
import { type OAuthSettings, type Settings, settingsOf } from "../../shared/settings.ts";
import { shardsOf } from "../../shared/shards/bindings.ts";
import { placedOn, placementsOn } from "../../shared/shards/placement.ts";
import { shardQueue } from "../../shared/shards/queue.ts";
import { routingKeyOf } from "../../shared/shards/route.ts";
import { slackWebApi } from "../../shared/slack/web-api.ts";
import { handleSlackRequest, type ShardDeps } from "./ack.ts";
import { backfillForOf } from "./admin/backfill.ts";
import { handleAdmin, isAdminPath } from "./admin/index.ts";
import { activityMeter, inlineGate } from "./isolate.ts";

/**
 * Path dispatch of the ingress: the Slack Request URL, the health check and
 * the operator API. Everything else is a 404 with a log line. `edge`: the
 * fetch every call to Slack goes out through (views.open, the first attempt,
 * OAuth, the backfill's reads).
 */
export async function handleHttp(
  request: Request,
  env: Env,
  ctx: ExecutionContext,
  now: number,
  log: Log = consoleLog,
  app: SlackApp,
  edge: typeof fetch,
): Promise<Response> {
  const { pathname } = new URL(request.url);

  if (pathname === "/healthz") {
    if (request.method !== "GET" && request.method !== "HEAD") return methodNotAllowed("GET, HEAD", pathname, request.method, log);
    return Response.json({ ok: true, service: "ackbox-ingress" });
  }

  if (pathname === "/slack/events") {
    if (request.method !== "POST") return methodNotAllowed("POST", pathname, request.method, log);
    const config = settingsOf(env);
    if (!config.ok) {
      // Slack will retry; the fix is a deploy, and this line says which.
      log("error", "ingress misconfigured; answering 500", { errors: config.errors });
      return new Response("misconfigured", { status: 500 });
    }
    const settings = config.settings;
    if (settings.signingSecrets.length === 0) {
      log("error", "SLACK_SIGNING_SECRET is not set; answering 500");
      return new Response("misconfigured", { status: 500 });
    }
    const appConfig = appSettingsOf(app.declaredSettings, env);
    if (!appConfig.ok) {
      // The app's own settings (shared/app/settings.ts): the errors name each one and its rule, never a secret's value.
      log("error", "app misconfigured; answering 500", { errors: appConfig.errors });
      return new Response("misconfigured", { status: 500 });
    }
    const appSettings = appConfig.settings;
    const shards = shardDbsOf(env, settings, log);
    if (!shards) return new Response("misconfigured", { status: 500 });
    const withFirstAttempt = settings.slackBotToken || settings.oauth;
    const placements = placementsOn(shards[0] as D1Database, shards.length);
    return handleSlackRequest(
      request,
      {
        db: env.DB,
        queue: env.OUTBOX_QUEUE,
        settings,
        appSettings,
        log,
        waitUntil: (work) => ctx.waitUntil(work),
        app,
        // What the ingress saw of each team, for the delivery gaps: on shard 0, as the installations.
        activity: { meter: activityMeter, write: (kind, who, at) => recordActivity(env.DB, kind, who, at, log) },
        shardOf: async (input, at): Promise<ShardDeps> => {
          const home = await placements.homeForBatch(routingKeyOf(input), at);
          const index = home.shard;
          return {
            index,
            db: placedOn(shards, index),
            queue: shardQueue(env.OUTBOX_QUEUE, index),
            placing: home.placing,
            // Both modes: single-workspace (SLACK_BOT_TOKEN) and a distributed app (the team's installation,
            // resolved as the consumer does). No token at all: the consumer logs why, as before.
            firstAttempt: withFirstAttempt ? firstAttemptFor(env, settings, appSettings, app, log, index, shards, edge) : undefined,
          };
        },
        openView: async (triggerId, view, timeoutMs, team) => {
          // A distributed app opens it with the team's installation's token as it stands: the ingress never spends
          // a refresh token (an answer given up on at the ack's budget would lose the only valid pair). A token inside
          // its refresh window is still valid; an expired one opens nothing. The consumer and the cron refresh.
          if (!settings.oauth) {
            const answer = await slackWebApi(settings.slackBotToken, settings.slackApiUrl, edge).call(
              "views.open",
              { trigger_id: triggerId, view },
              timeoutMs,
            );
            if (!answer.ok) throw new Error(`views.open: ${answer.error}`);
            return;
          }
          const wall = Date.now();
          const clock = () => now + (Date.now() - wall);
          // The installation is on shard 0, and the org (of an org-wide install) is the input's: no other shard is read.
          const resolved = await installationSlackFor(
            shards[0] as D1Database,
            settings.oauth,
            settings.slackApiUrl,
            edge,
            clock,
          )({
            teamId: team.teamId ?? null,
            enterpriseId: team.enterpriseId,
          });
          if (!resolved.ok) throw new Error(`views.open not called: ${resolved.reason}`);
          const answer = await resolved.slack.call("views.open", { trigger_id: triggerId, view }, Math.max(1, now + timeoutMs - clock()));
          if (!answer.ok) {
            const authError = resolved.authFailure();
            throw new Error(authError ? await resolved.block(authError, clock()) : `views.open: ${answer.error}`);
          }
        },
      },
      now,
    );
  }

  if (pathname === "/slack/install" || pathname === "/slack/oauth_redirect") {
    // GET only: both routes write (a state; the install), so a HEAD (a link prefetch) must not run them.
    if (request.method !== "GET") return methodNotAllowed("GET", pathname, request.method, log);
    const config = settingsOf(env);
    if (!config.ok) {
      log("error", "ingress misconfigured; install answering 500", { errors: config.errors });
      return new Response("misconfigured", { status: 500 });
    }
    const { oauth, slackApiUrl } = config.settings;
    if (!oauth) {
      // Single-workspace mode (SLACK_BOT_TOKEN): there is nothing to install into.
      log("info", "install asked for, but SLACK_CLIENT_ID is not set (single-workspace mode)", { path: pathname });
      return new Response("not found", { status: 404 });
    }
    const shards = shardDbsOf(env, config.settings, log);
    if (!shards) return new Response("misconfigured", { status: 500 });
    // Every installation lives on shard 0, env.DB (docs/scaling.md, "Where installations live"). An install is a
    // workspace's first sight (it is placed then, if it was not), and its waiting rows are on its one home.
    const placements = placementsOn(shards[0] as D1Database, shards.length);
    const deps = {
      db: env.DB,
      oauth,
      slackApiUrl,
      edge,
      scopes: oauth.scopes.length > 0 ? oauth.scopes : botScopesOf(app),
      log,
      installed: async (install: Installation, at: number) => {
        const index = await placements.place(routingKeyOf(install), at);
        const home = { index, db: placedOn(shards, index), queue: shardQueue(env.OUTBOX_QUEUE, index) };
        return wakeWaitingRows([home], install, at, config.settings.sweepGraceMs, log);
      },
    };
    return pathname === "/slack/install" ? startInstall(deps, now) : finishInstall(request, deps, now);
  }

  if (isAdminPath(pathname)) {
    const config = settingsOf(env);
    if (!config.ok) {
      log("error", "ingress misconfigured; operator API answering 500", { errors: config.errors });
      return new Response("misconfigured", { status: 500 });
    }
    const shards = shardDbsOf(env, config.settings, log);
    if (!shards) return new Response("misconfigured", { status: 500 });
    // The app's settings only for the backfill (which routes through the handlers): the rest of the operator API
    // stays up while they are wrong, which is when an operator needs it.
    const backfillFor = backfillForOf(config.settings, app, appSettingsOf(app.declaredSettings, env), shards, env.OUTBOX_QUEUE, log, edge);
    return handleAdmin(request, { shards, queue: env.OUTBOX_QUEUE, settings: config.settings, log, backfillFor }, now);
  }

  log("info", "not found", { path: pathname, method: request.method });
  return new Response("not found", { status: 404 });
}

/**
 * The first attempt's dependencies: the consumer's, with the inline lease and
 * timeout. FIRST_ATTEMPT=off (a benchmark's variant, an operator's switch)
 * leaves every row to the queue.
 */
function firstAttemptFor(
  env: Env,
  settings: Settings,
  appSettings: AppSettings,
  app: SlackApp,
  log: Log,
  shard: number,
  shards: readonly D1Database[],
  edge: typeof fetch,
): FirstAttempt | undefined {
  if (!settings.firstAttempt) return undefined;
  const db = shards[shard] as D1Database;
  // Built once per isolate and shard (env, settings, app and log are the same objects request after request), not per request.
  const built = builtFirstAttempts.get(settings);
  const cached = built?.[shard];
  if (cached && cached.env === env && cached.app === app && cached.log === log && cached.edge === edge) return cached.firstAttempt;
  const bounds = inlineBounds(settings);
  const firstAttempt = firstAttemptOf(
    {
      db,
      queue: shardQueue(env.OUTBOX_QUEUE, shard),
      // The consumer's registry, the engine's lifecycle effect included: an uninstall's row is the engine's, never
      // taken for a Slack method (its name has a dot) and performed inline without a token.
      effects: withLifecycleEffect(app.effects, installationRemovedEffect(db, Date.now, shards[0])),
      context: effectContextOf(settings, bounds.timeoutMs, appSettings, edge),
      settings: { ...settings, leaseMs: bounds.leaseMs },
      log,
      clock: Date.now,
      random: Math.random,
      newToken: newClaimToken,
      sleep: (ms) => scheduler.wait(ms),
      // Never a refresh at the ack (see openView): a token inside its refresh window is used, an expired one leaves the row to the queue.
      slackFor: slackForOf(shards[0] as D1Database, settings, db, { edge, refresh: false, log }),
    },
    inlineGate,
  );
  const perShard = built ?? [];
  perShard[shard] = { env, app, log, edge, firstAttempt };
  if (!built) builtFirstAttempts.set(settings, perShard);
  return firstAttempt;
}

const builtFirstAttempts = new WeakMap<Settings, { env: Env; app: SlackApp; log: Log; edge: typeof fetch; firstAttempt: FirstAttempt }[]>();

/**
 * The shards' D1s, index order (shared/shards/bindings.ts); undefined, with a
 * log line naming the missing bindings, when SHARD_COUNT asks for more than
 * the wrangler file binds: every team's shard would be wrong, so nothing is written.
 */
function shardDbsOf(env: Env, settings: Settings, log: Log): readonly D1Database[] | undefined {
  try {
    return shardsOf(env as unknown as Readonly<Record<string, unknown>>, settings.shardCount).map((shard) => shard.db);
  } catch (error) {
    log("error", "ingress misconfigured; answering 500", { error: error instanceof Error ? error.message : String(error) });
    return undefined;
  }
}

function installationSlackFor(home: D1Database, oauth: OAuthSettings, slackApiUrl: string, edge: typeof fetch, clock: () => number) {
  // No `rotation`: nothing here refreshes a token.
  return slackForRow({
    db: home,
    keys: () => tokenKeys(oauth.tokenKey, oauth.previousTokenKey),
    slackApiUrl,
    edge,
    teamless: undefined,
    clock,
  });
}

function methodNotAllowed(allow: string, path: string, method: string, log: Log): Response {
  log("info", "method not allowed", { path, method });
  return new Response("method not allowed", { status: 405, headers: { allow } });
}
