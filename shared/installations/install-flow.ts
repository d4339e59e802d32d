/**
 * The OAuth install, both halves (Slack's "Installing with OAuth",
 * https://docs.slack.dev/authentication/installing-with-oauth):
 *
 * - `startInstall` (GET /slack/install): a fresh state, signed with a 10-minute
 *   expiry in it (oauth-state.ts) and set in a cookie of the browser that asked;
 *   a redirect to Slack's authorize URL with the client id, the scopes, the
 *   state and the redirect URL. It writes nothing: a public route that wrote a
 *   row per request needed a bound on those rows, and a global bound let
 *   anyone's loop of requests refuse every real install.
 * - `finishInstall` (GET /slack/oauth_redirect): the state must match the
 *   browser's cookie (else it came from another flow: refused, and its cookie
 *   left alone, so a forged link cannot end the real one), carry this app's
 *   signature and not have expired — all checked before D1 is touched; then it
 *   is spent in one `INSERT … ON CONFLICT DO NOTHING` into `oauth_states`
 *   (which now holds spent states until they expire: a replay, or the second of
 *   two concurrent redirects, finds it there and is refused before Slack is
 *   called); then `oauth.v2.access` (on SLACK_API_URL) trades the code for the
 *   tokens, and the installation is written in one statement. Every refusal
 *   answers before that write, so none leaves a partial installation.
 *
 * Neither the code, the state nor a token is ever logged.
 */

import { describeError, type Log } from "../log.ts";
import type { OAuthSettings } from "../settings.ts";
import { slackWebApi } from "../slack/web-api.ts";
import { tokenKeys } from "./crypto.ts";
import { checkState, issueState, stateKeys } from "./oauth-state.ts";
import { type Installation, installationFromAccess, saveInstallation } from "./store.ts";

export const STATE_TTL_MS = 10 * 60 * 1000;
export const STATE_COOKIE = "ackbox_oauth_state";
/** Expired spent states removed per finished install: bounded, and enough to outpace the ones it adds (one). */
const EXPIRED_STATES_PER_FINISH = 50;
const ACCESS_TIMEOUT_MS = 10_000;

export interface InstallDeps {
  readonly db: D1Database;
  readonly oauth: OAuthSettings;
  /** SLACK_API_URL; Slack's authorize page is its sibling (https://slack.com/api/ → https://slack.com/oauth/v2/authorize). */
  readonly slackApiUrl: string;
  /** The fetch oauth.v2.access goes out through (the ingress's edge). */
  readonly edge: typeof fetch;
  /** Bot scopes to ask for (SLACK_SCOPES, or the app manifest's). */
  readonly scopes: readonly string[];
  readonly log: Log;
  /**
   * Runs once the installation is written: the team's rows that waited for it are made due and enqueued
   * (wake.ts). Its failure is logged, never the install's: those rows keep their own wait.
   */
  readonly installed?: (install: Installation, now: number) => Promise<unknown>;
}

export async function startInstall(deps: InstallDeps, now: number): Promise<Response> {
  const keys = await stateKeys(deps.oauth.tokenKey, deps.oauth.previousTokenKey);
  const state = await issueState(keys, now + STATE_TTL_MS);
  const authorize = new URL("../oauth/v2/authorize", deps.slackApiUrl);
  authorize.searchParams.set("client_id", deps.oauth.clientId);
  authorize.searchParams.set("scope", deps.scopes.join(","));
  authorize.searchParams.set("state", state);
  authorize.searchParams.set("redirect_uri", deps.oauth.redirectUrl);
  deps.log("info", "install started; redirecting to Slack's authorize page", { scopes: deps.scopes.join(",") });
  return new Response(null, {
    status: 302,
    headers: {
      location: authorize.toString(),
      "set-cookie": `${STATE_COOKIE}=${state}; Max-Age=${STATE_TTL_MS / 1000}; Path=/slack/oauth_redirect; HttpOnly; Secure; SameSite=Lax`,
      "cache-control": "no-store",
    },
  });
}

export async function finishInstall(request: Request, deps: InstallDeps, now: number): Promise<Response> {
  const params = new URL(request.url).searchParams;
  // Until the state is consumed, a refusal leaves the browser's cookie alone: a forged link (another state, no
  // code, ?error=) must not end the install this browser has under way.
  let spent = false;
  const refuse = (status: number, why: string, fields: Record<string, unknown> = {}) => {
    deps.log("warn", `install refused: ${why}`, fields);
    return page(status, "ackbox was not installed", `${why}. Start again from /slack/install.`, spent);
  };

  const denied = params.get("error");
  if (denied !== null) return refuse(400, `Slack answered ${denied.slice(0, 64)} (the install was cancelled)`);
  const code = params.get("code");
  if (!code) return refuse(400, "the redirect carried no code");
  const state = params.get("state");
  if (!state) return refuse(400, "the redirect carried no state");
  if (cookieOf(request, STATE_COOKIE) !== state)
    return refuse(400, "the state belongs to another browser's install (or the cookie expired)");

  const checked = await checkState(await stateKeys(deps.oauth.tokenKey, deps.oauth.previousTokenKey), state);
  if (!checked.ok) return refuse(400, "the state was not issued by this app", { state_check: checked.reason });
  // Expired or spent from here on: the browser forgets it.
  spent = true;
  if (checked.expiresAt <= now) return refuse(400, "the state expired (an install must finish within 10 minutes)");

  // Single use, decided by the database in one statement: of two redirects with one state, one inserts it.
  const [, recorded] = await deps.db.batch([
    deps.db
      .prepare("DELETE FROM oauth_states WHERE state IN (SELECT state FROM oauth_states WHERE expires_at <= ? LIMIT ?)")
      .bind(now, EXPIRED_STATES_PER_FINISH),
    deps.db
      .prepare("INSERT INTO oauth_states (state, expires_at) VALUES (?, ?) ON CONFLICT (state) DO NOTHING")
      .bind(state, checked.expiresAt),
  ]);
  if ((recorded?.meta.changes ?? 0) === 0) return refuse(400, "the state was already used");

  let answer: Awaited<ReturnType<ReturnType<typeof slackWebApi>["call"]>>;
  try {
    answer = await slackWebApi(undefined, deps.slackApiUrl, deps.edge).call(
      "oauth.v2.access",
      { client_id: deps.oauth.clientId, client_secret: deps.oauth.clientSecret, code, redirect_uri: deps.oauth.redirectUrl },
      ACCESS_TIMEOUT_MS,
    );
  } catch (error) {
    return refuse(502, "oauth.v2.access did not answer", { error: error instanceof Error ? error.message : String(error) });
  }
  // Slack's error codes are short; a longer one (a hostile or broken answer) is cut, as the ?error= above is.
  if (!answer.ok) return refuse(400, `Slack refused the code (${answer.error.slice(0, 64)})`);
  const parsed = installationFromAccess(answer.body, now);
  if (!parsed.ok) return refuse(502, parsed.reason);

  const keys = await tokenKeys(deps.oauth.tokenKey, deps.oauth.previousTokenKey);
  const installKey = await saveInstallation(deps.db, keys, parsed.install, now);
  deps.log("info", "installed", {
    install_key: installKey,
    team_id: parsed.install.teamId,
    enterprise_id: parsed.install.enterpriseId,
    org_wide: parsed.install.isEnterpriseInstall,
    rotating: parsed.install.refreshToken !== undefined,
  });
  try {
    await deps.installed?.(parsed.install, now);
  } catch (error) {
    deps.log("warn", "installed, but its waiting rows were not made due; they keep their wait", {
      install_key: installKey,
      error: describeError(error),
    });
  }
  const where = parsed.install.isEnterpriseInstall
    ? `every workspace of ${parsed.install.enterpriseId}`
    : `workspace ${parsed.install.teamId}`;
  return page(200, "ackbox is installed", `Installed in ${where}. You can close this page.`, true);
}

function page(status: number, title: string, text: string, forgetState: boolean): Response {
  const html = `<!doctype html><meta charset="utf-8"><title>${htmlEscape(title)}</title><h1>${htmlEscape(title)}</h1><p>${htmlEscape(text)}</p>`;
  const headers: Record<string, string> = { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" };
  // A spent state (used, unknown or expired): the browser forgets it.
  if (forgetState) headers["set-cookie"] = `${STATE_COOKIE}=; Max-Age=0; Path=/slack/oauth_redirect; HttpOnly; Secure; SameSite=Lax`;
  return new Response(html, { status, headers });
}

function cookieOf(request: Request, name: string): string | undefined {
  for (const part of (request.headers.get("cookie") ?? "").split(";")) {
    const [key, ...value] = part.trim().split("=");
    if (key === name) return value.join("=");
  }
  return undefined;
}

function htmlEscape(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
