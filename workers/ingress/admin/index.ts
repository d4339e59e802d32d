/**
 * The operator API, /admin/*, on the ingress (SPEC §1).
 *
 *   GET  /admin                  the dashboard page (a static shell; see dashboard.ts)
 *   GET  /admin/backlog          JSON figures, health, queue backlog, alerts (?hours= adds sampled history)
 *   GET  /admin/metrics          the same figures as Prometheus text
 *   GET  /admin/dead             dead rows of every shard: ?effect ?error ?team ?since ?until ?limit ?cursor
 *   POST /admin/replay           {"ids":[ref…]} | {"filter":{…},"cursor"?,"limit"?}, "dryRun"?
 *   GET  /admin/events/<id>      the audit trail of an event_id or operation id (?team= narrows to its shard)
 *   GET  /admin/timers           pending and cancelled timers of every shard, soonest first: ?team ?due_before ?limit ?cursor
 *   GET  /admin/installations    the workspaces the app is installed in, every shard (never a token)
 *   POST /admin/backfill         one page of a channel's history, each message handled once (backfill.ts)
 *   POST /admin/backfill/channels one page of the conversations the bot is in, for a backfill of them all
 *
 * Every answer is the whole deployment's, across SHARD_COUNT shards (a row is
 * named "<shard>:<id>" with more than one: shared/ops/row-ref.ts).
 *
 * Order of the checks: ADMIN_TOKEN unset → 404 for everything under /admin,
 * the same answer as any unknown path (the API is off and says nothing);
 * then the bearer check → 401, identical for a missing, wrong or
 * wrong-length token, on every path but the page shell (unknown paths too, so
 * a caller without the token cannot learn which paths exist) — unless the
 * caller's address has failed too often lately: 429 (throttle.ts); then
 * dispatch.
 */
import { checkBearer, unauthorized } from "./auth.ts";
import { postBackfill, postBackfillChannels } from "./backfill.ts";
import { getBacklog, getMetrics } from "./backlog.ts";
import { dashboardResponse } from "./dashboard.ts";
import { getDead, postReplay } from "./dead.ts";
import type { AdminDeps } from "./deps.ts";
import { getEvent } from "./events.ts";
import { getInstallations } from "./installations.ts";
import { json } from "./params.ts";
import { type AuthThrottle, authThrottle, clientAddress, tooManyFailures } from "./throttle.ts";
import { getTimers } from "./timers.ts";

/** This isolate's record of failed attempts (throttle.ts says why in memory, and its limits). */
const isolateThrottle = authThrottle();

export type { AdminDeps } from "./deps.ts";

/** Whether a path belongs to the operator API. */
export function isAdminPath(pathname: string): boolean {
  return pathname === "/admin" || pathname.startsWith("/admin/");
}

/** The answer when the operator API is off: the ingress's own 404. */
export function adminOff(): Response {
  return new Response("not found", { status: 404 });
}

export async function handleAdmin(
  request: Request,
  deps: AdminDeps,
  now: number,
  throttle: AuthThrottle = isolateThrottle,
): Promise<Response> {
  const url = new URL(request.url);
  const path = url.pathname.replace(/\/+$/, "") || "/";
  const log = deps.log;
  const token = deps.settings.adminToken;
  if (!token) {
    log("info", "operator API is off (ADMIN_TOKEN unset)", { path, method: request.method });
    return adminOff();
  }

  if (path === "/admin") {
    if (request.method !== "GET" && request.method !== "HEAD") return methodNotAllowed("GET, HEAD");
    return dashboardResponse();
  }

  const address = clientAddress(request);
  const wait = address === undefined ? 0 : throttle.blockedFor(address, now);
  if (wait > 0) {
    log("warn", "admin request throttled: too many failed attempts from this address", { path, method: request.method, address });
    return tooManyFailures(wait);
  }
  const auth = await checkBearer(request.headers.get("authorization"), token);
  if (!auth.ok) {
    const failures = address === undefined ? undefined : throttle.recordFailure(address, now);
    log("warn", "admin request refused", { path, method: request.method, reason: auth.reason, address, failures });
    return unauthorized();
  }

  const started = performance.now();
  const response = await dispatch(request, url, path, deps, now);
  log("info", "admin request", { path, method: request.method, status: response.status, ms: Math.round(performance.now() - started) });
  return response;
}

async function dispatch(request: Request, url: URL, path: string, deps: AdminDeps, now: number): Promise<Response> {
  const get = request.method === "GET" || request.method === "HEAD";
  switch (path) {
    case "/admin/backlog":
      return get ? getBacklog(url, deps, now) : methodNotAllowed("GET, HEAD");
    case "/admin/metrics":
      return get ? getMetrics(deps, now) : methodNotAllowed("GET, HEAD");
    case "/admin/dead":
      return get ? getDead(url, deps, now) : methodNotAllowed("GET, HEAD");
    case "/admin/replay":
      return request.method === "POST" ? postReplay(request, deps, now) : methodNotAllowed("POST");
    case "/admin/installations":
      return get ? getInstallations(deps, now) : methodNotAllowed("GET, HEAD");
    case "/admin/timers":
      return get ? getTimers(url, deps, now) : methodNotAllowed("GET, HEAD");
    case "/admin/backfill":
      return request.method === "POST" ? postBackfill(request, deps, now) : methodNotAllowed("POST");
    case "/admin/backfill/channels":
      return request.method === "POST" ? postBackfillChannels(request, deps) : methodNotAllowed("POST");
  }
  if (path.startsWith("/admin/events/")) {
    return get ? getEvent(path.slice("/admin/events/".length), url, deps) : methodNotAllowed("GET, HEAD");
  }
  return json(
    {
      error: "no such endpoint",
      endpoints: [
        "/admin/backlog",
        "/admin/metrics",
        "/admin/dead",
        "/admin/replay",
        "/admin/events/<id>",
        "/admin/installations",
        "/admin/timers",
        "/admin/backfill",
        "/admin/backfill/channels",
      ],
    },
    404,
  );
}

function methodNotAllowed(allow: string): Response {
  return new Response("method not allowed\n", { status: 405, headers: { allow } });
}
