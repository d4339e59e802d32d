import { app as deployedApp } from "../../app/index.ts";
import type { SlackApp } from "../../shared/app/app.ts";
import { botScopesOf } from "../../shared/app/manifest.ts";
import {
  type FirstAttempt,
  firstAttemptOf,
  INLINE_MAX_IN_FLIGHT,
  INLINE_MAX_PENDING_ACKS,
  InFlightGate,
  inlineBounds,
} from "../../shared/delivery/first-attempt.ts";
import { effectContextOf, slackForOf } from "../../shared/effects/context.ts";
import type { Env } from "../../shared/env.ts";
import { tokenKeys } from "../../shared/installations/crypto.ts";
import { finishInstall, startInstall } from "../../shared/installations/install-flow.ts";
import { installationRemovedEffect, withLifecycleEffect } from "../../shared/installations/lifecycle.ts";
import { slackForRow } from "../../shared/installations/resolve.ts";
import { consoleLog, type Log } from "../../shared/log.ts";
import { newClaimToken } from "../../shared/outbox/claim.ts";
import { type OAuthSettings, type Settings, settingsOf } from "../../shared/settings.ts";
import { slackWebApi } from "../../shared/slack/web-api.ts";
import { handleSlackRequest } from "./ack.ts";
import { handleAdmin, isAdminPath } from "./admin/index.ts";

/**
 * Path dispatch of the ingress: the Slack Request URL, the health check and
 * the operator API. Everything else is a 404 with a log line.
 */
export async function handleHttp(
  request: Request,
  env: Env,
  ctx: ExecutionContext,
  now: number,
  log: Log = consoleLog,
  app: SlackApp = deployedApp,
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
    // Counted for the first attempt's gate: acks queuing in this isolate mean it is saturated.
    return inlineGate.ack(() =>
      handleSlackRequest(
        request,
        {
          db: env.DB,
          queue: env.OUTBOX_QUEUE,
          settings,
          log,
          waitUntil: (work) => ctx.waitUntil(work),
          app,
          // Both modes: single-workspace (SLACK_BOT_TOKEN) and a distributed app (the team's installation,
          // resolved as the consumer does). No token at all: the consumer logs why, as before.
          firstAttempt: settings.slackBotToken || settings.oauth ? firstAttemptFor(env, settings, app, log) : undefined,
          openView: async (triggerId, view, timeoutMs, team) => {
            // A distributed app opens it with the team's installation's token, resolved as the consumer resolves a
            // row's (refreshed under the lease when about to expire; a refused token blocks the installation), in at
            // most half of what is left of the ack's budget: the other half is views.open's.
            if (!settings.oauth) {
              const answer = await slackWebApi(settings.slackBotToken, settings.slackApiUrl).call(
                "views.open",
                { trigger_id: triggerId, view },
                timeoutMs,
              );
              if (!answer.ok) throw new Error(`views.open: ${answer.error}`);
              return;
            }
            const wall = Date.now();
            const clock = () => now + (Date.now() - wall);
            const resolved = await installationSlackFor(
              env.DB,
              settings.oauth,
              settings.slackApiUrl,
              clock,
              now + timeoutMs / 2,
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
      ),
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
    const deps = { db: env.DB, oauth, slackApiUrl, scopes: oauth.scopes.length > 0 ? oauth.scopes : botScopesOf(app), log };
    return pathname === "/slack/install" ? startInstall(deps, now) : finishInstall(request, deps, now);
  }

  if (isAdminPath(pathname)) {
    const config = settingsOf(env);
    if (!config.ok) {
      log("error", "ingress misconfigured; operator API answering 500", { errors: config.errors });
      return new Response("misconfigured", { status: 500 });
    }
    return handleAdmin(request, { db: env.DB, queue: env.OUTBOX_QUEUE, settings: config.settings, log }, now);
  }

  log("info", "not found", { path: pathname, method: request.method });
  return new Response("not found", { status: 404 });
}

/** Inline rows in flight in this isolate (shared/delivery/first-attempt.ts). */
const inlineGate = new InFlightGate(INLINE_MAX_IN_FLIGHT, INLINE_MAX_PENDING_ACKS);

/**
 * The first attempt's dependencies: the consumer's, with the inline lease and
 * timeout. FIRST_ATTEMPT=off (a benchmark's variant, an operator's switch)
 * leaves every row to the queue.
 */
function firstAttemptFor(env: Env, settings: Settings, app: SlackApp, log: Log): FirstAttempt | undefined {
  if (!settings.firstAttempt) return undefined;
  // Built once per isolate (env, settings, app and log are the same objects request after request), not per request.
  const cached = builtFirstAttempts.get(settings);
  if (cached && cached.env === env && cached.app === app && cached.log === log) return cached.firstAttempt;
  const bounds = inlineBounds(settings);
  const firstAttempt = firstAttemptOf(
    {
      db: env.DB,
      queue: env.OUTBOX_QUEUE,
      // The consumer's registry, the engine's lifecycle effect included: an uninstall's row is the engine's, never
      // taken for a Slack method (its name has a dot) and performed inline without a token.
      effects: withLifecycleEffect(app.effects, installationRemovedEffect(env.DB, Date.now)),
      context: effectContextOf(settings, bounds.timeoutMs),
      settings: { ...settings, leaseMs: bounds.leaseMs },
      log,
      clock: Date.now,
      random: Math.random,
      newToken: newClaimToken,
      sleep: (ms) => scheduler.wait(ms),
      slackFor: slackForOf(env.DB, settings),
    },
    inlineGate,
  );
  builtFirstAttempts.set(settings, { env, app, log, firstAttempt });
  return firstAttempt;
}

const builtFirstAttempts = new WeakMap<Settings, { env: Env; app: SlackApp; log: Log; firstAttempt: FirstAttempt }>();

function installationSlackFor(db: D1Database, oauth: OAuthSettings, slackApiUrl: string, clock: () => number, deadline: number) {
  return slackForRow({
    db,
    keys: () => tokenKeys(oauth.tokenKey, oauth.previousTokenKey),
    slackApiUrl,
    teamless: undefined,
    rotation: { clientId: oauth.clientId, clientSecret: oauth.clientSecret, newToken: newClaimToken },
    clock,
    sleep: (ms) => scheduler.wait(ms),
    deadline,
  });
}

function methodNotAllowed(allow: string, path: string, method: string, log: Log): Response {
  log("info", "method not allowed", { path, method });
  return new Response("method not allowed", { status: 405, headers: { allow } });
}
