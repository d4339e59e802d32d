/**
 * A fake Slack that misbehaves on purpose, and keeps the ledger the invariant
 * checker reads: every effect it applied, when, and whether its answer was lost.
 *
 *   POST /api/<method>   chat.postMessage, reactions.add, chat.update (form-encoded, as the client sends them)
 *   POST /respond/<id>   a response_url
 *   POST /api/oauth.v2.access  an install (code = the team id) or a refresh (grant_type=refresh_token)
 *   POST /api/auth.test, /api/conversations.info, /api/conversations.history  what a backfill reads: the
 *        token's team, the channel's kind (every channel of the run is public), and a channel's messages as the
 *        run planned them (`reads`), paged newest first; no faults
 *
 * As Slack's OAuth with token rotation: an install issues the team's first
 * pair (xoxe.xoxb-<team>-1, xoxe-1-<team>-1), each refresh the next; a
 * refresh token is single-use (a second spend answers invalid_refresh_token
 * and is counted: two workers spent one installation's refresh). Every Web API
 * call's token is recorded with its effect, so the verdict can check that each
 * effect carried its own workspace's token; a token never issued is refused
 * (invalid_auth). OAuth calls have no faults.
 *
 * Each call's fate comes from the run's fault plan (scripts/chaos/plan.ts):
 * a function of the seed, the effect, and how many times that effect has been
 * called, so the same seed gives every effect the same fates in every run:
 * - a fatal answer, always, for a channel in `fatalChannels` (a deleted
 *   channel does not come back): ok:false channel_not_found;
 * - with probability `transient`, one of four transient faults, evenly:
 *   HTTP 5xx; HTTP 429 with Retry-After; ok:false internal_error; or a hang
 *   (no answer until the consumer's timeout has long passed). Half of the
 *   hangs apply the effect first and then lose the answer, the way a real
 *   timeout can: that is the window in which at-least-once repeats an effect;
 * - otherwise it applies the effect and answers as Slack does.
 *
 * Applying follows Slack's semantics, so "visible" duplicates are counted
 * honestly: a second chat.postMessage is a second message; a second
 * reactions.add answers already_reacted and changes nothing; a chat.update
 * with the same text changes nothing.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { type Fate, slackFate } from "./plan.ts";

export type { Fate } from "./plan.ts";

export interface FaultPlan {
  /** Share of calls (0–1) answered with a transient fault. */
  readonly transient: number;
  /** Channels that do not exist: every call naming one gets channel_not_found. */
  readonly fatalChannels: ReadonlySet<string>;
  /** Retry-After of a 429, in seconds. */
  readonly retryAfterSeconds: number;
  /** How long a hang holds the connection before dropping it (longer than EFFECT_TIMEOUT_SECONDS). */
  readonly hangMs: number;
  /** The run's seed: every fate derives from it (scripts/chaos/plan.ts slackFate). */
  readonly seed: number;
  /** The key a call's fate is drawn on, when the run's effect keys carry times of this run (stable across runs). */
  readonly fateKeyOf?: (effectKey: string) => string;
}

/** What a backfill reads (scripts/chaos/chaos.ts): a channel's history, and whose a token is. */
export interface Reads {
  /** The messages Slack keeps for a channel, as conversations.history returns them. */
  readonly history: (channel: string) => readonly Readonly<Record<string, string>>[];
  /** The team of a token no install issued (single-workspace mode's SLACK_BOT_TOKEN). */
  readonly singleTeam: string;
}

export interface Application {
  /** When Slack applied the effect (ms). */
  readonly at: number;
  /** Whether the caller got the answer (false: applied, then the answer was lost). */
  readonly answered: boolean;
}

export interface Ledger {
  /** Effect key → every time it was applied. */
  readonly applied: ReadonlyMap<string, readonly Application[]>;
  /** Calls by fate. */
  readonly fates: Readonly<Record<Fate, number>>;
  /** Messages visible in Slack per thread key (a count above 1 is a visible duplicate). */
  readonly messagesPerThread: ReadonlyMap<string, number>;
  /** Distinct reactions present (Slack keeps one per message and name). */
  readonly reactions: ReadonlySet<string>;
  /** Effect keys Slack refused for good (channel_not_found). */
  readonly refused: ReadonlySet<string>;
  /** reactions.add calls answered already_reacted. */
  readonly alreadyReacted: number;
  readonly calls: number;
  /** Effect key → the team of every token its calls carried ("" for a call without a token). */
  readonly teamsByKey?: ReadonlyMap<string, readonly string[]>;
  /** Calls refused because their token was never issued. */
  readonly unknownTokens?: number;
  /** Installs (code grants) and refreshes answered, per team. */
  readonly installs?: ReadonlyMap<string, number>;
  readonly refreshes?: ReadonlyMap<string, number>;
  /** Refresh tokens spent a second time. */
  readonly refreshReused?: number;
}

export interface OAuthPlan {
  /** expires_in (seconds) of the pair issued to a team (default 12 h). */
  readonly expiresInSeconds: (teamId: string) => number;
}

export interface FaultySlack {
  readonly url: string;
  readonly apiUrl: string;
  responseUrl(id: string): string;
  ledger(): Ledger;
  close(): Promise<void>;
}

/** The key of the effect a call performs: what "the same effect" means for each method. */
export function effectKey(method: string, params: Readonly<Record<string, string>>, path: string): string | undefined {
  switch (method) {
    case "chat.postMessage":
      return `post:${params.channel}:${params.thread_ts ?? ""}`;
    case "reactions.add":
      return `react:${params.channel}:${params.timestamp}:${params.name}`;
    case "chat.update":
      return `update:${params.channel}:${params.ts}`;
    case "response_url":
      return `respond:${path}`;
    default:
      return undefined;
  }
}

export async function startFaultySlack(plan: FaultPlan, oauth?: OAuthPlan, reads?: Reads): Promise<FaultySlack> {
  const teamsByKey = new Map<string, string[]>();
  const installs = new Map<string, number>();
  const refreshes = new Map<string, number>();
  /** Issued bot token → its team; refresh token → its team, until spent. */
  const issuedTokens = new Map<string, string>();
  const liveRefresh = new Map<string, string>();
  const spentRefresh = new Set<string>();
  let unknownTokens = 0;
  let refreshReused = 0;
  const issue = (teamId: string) => {
    const generation = (installs.get(teamId) ?? 0) + (refreshes.get(teamId) ?? 0);
    const access = `xoxe.xoxb-${teamId}-${generation}`;
    const refresh = `xoxe-1-${teamId}-${generation}`;
    issuedTokens.set(access, teamId);
    liveRefresh.set(refresh, teamId);
    return {
      ok: true,
      access_token: access,
      token_type: "bot",
      refresh_token: refresh,
      expires_in: oauth?.expiresInSeconds(teamId) ?? 43_200,
      scope: "chat:write,reactions:write,commands",
      bot_user_id: "U0CHAOSBOT",
      app_id: "A0CHAOS",
      team: { id: teamId },
      enterprise: null,
      is_enterprise_install: false,
      authed_user: { id: "U0CHAOSADMIN" },
    };
  };
  const oauthAccess = (params: Record<string, string>): unknown => {
    if (params.grant_type === "refresh_token") {
      const token = params.refresh_token ?? "";
      const teamId = liveRefresh.get(token);
      if (teamId === undefined) {
        if (spentRefresh.has(token)) refreshReused += 1;
        return { ok: false, error: "invalid_refresh_token" };
      }
      liveRefresh.delete(token);
      spentRefresh.add(token);
      refreshes.set(teamId, (refreshes.get(teamId) ?? 0) + 1);
      return issue(teamId);
    }
    const teamId = params.code ?? "";
    installs.set(teamId, (installs.get(teamId) ?? 0) + 1);
    return issue(teamId);
  };
  const applied = new Map<string, Application[]>();
  const fates: Record<Fate, number> = { applied: 0, fatal: 0, http_5xx: 0, http_429: 0, internal_error: 0, hang: 0, applied_then_hang: 0 };
  const messagesPerThread = new Map<string, number>();
  const reactions = new Set<string>();
  const refused = new Set<string>();
  let alreadyReacted = 0;
  let calls = 0;
  const callsPerKey = new Map<string, number>();
  let ts = 0;
  const sockets = new Set<Socket>();
  const hangs = new Set<ReturnType<typeof setTimeout>>();

  const apply = (key: string, answered: boolean, method: string, params: Record<string, string>): unknown => {
    applied.set(key, [...(applied.get(key) ?? []), { at: Date.now(), answered }]);
    if (method === "chat.postMessage") {
      messagesPerThread.set(key, (messagesPerThread.get(key) ?? 0) + 1);
      return { ok: true, channel: params.channel, ts: `1764600000.${String(++ts).padStart(6, "0")}` };
    }
    if (method === "reactions.add") {
      if (reactions.has(key)) {
        alreadyReacted += 1;
        return { ok: false, error: "already_reacted" };
      }
      reactions.add(key);
      return { ok: true };
    }
    if (method === "chat.update") return { ok: true, channel: params.channel, ts: params.ts };
    return "ok";
  };

  const server = createServer(async (request: IncomingMessage, response: ServerResponse) => {
    const body = await readBody(request);
    const url = new URL(request.url ?? "/", "http://127.0.0.1");
    const isApi = url.pathname.startsWith("/api/");
    const method = isApi ? url.pathname.slice("/api/".length) : url.pathname.startsWith("/respond/") ? "response_url" : "";
    const params = isApi ? Object.fromEntries(new URLSearchParams(body)) : {};
    if (method === "oauth.v2.access") return send(response, 200, oauthAccess(params));
    if (reads && (method === "auth.test" || method === "conversations.info" || method === "conversations.history")) {
      const token = (request.headers.authorization ?? "").replace(/^Bearer /, "");
      return send(response, 200, read(reads, method, params, issuedTokens.get(token) ?? reads.singleTeam));
    }
    const key = effectKey(method, params, url.pathname);
    calls += 1;
    if (!key) return send(response, 404, { ok: false, error: "unknown_method" });
    if (isApi && oauth) {
      // Which workspace's token the call carried; a token Slack never issued is refused, as Slack does.
      const token = (request.headers.authorization ?? "").replace(/^Bearer /, "");
      const teamId = issuedTokens.get(token);
      teamsByKey.set(key, [...(teamsByKey.get(key) ?? []), teamId ?? ""]);
      if (teamId === undefined) {
        unknownTokens += 1;
        return send(response, 200, { ok: false, error: "invalid_auth" });
      }
    }

    const channel = params.channel ?? "";
    const call = (callsPerKey.get(key) ?? 0) + 1;
    callsPerKey.set(key, call);
    const drawn = slackFate(plan.seed, plan.transient, plan.fateKeyOf?.(key) ?? key, call);
    const fate: Fate = plan.fatalChannels.has(channel) ? "fatal" : drawn.fate;
    fates[fate] += 1;
    switch (fate) {
      case "fatal":
        refused.add(key);
        return send(response, 200, { ok: false, error: "channel_not_found" });
      case "http_5xx":
        return send(response, drawn.status5xx, "upstream trouble");
      case "http_429":
        return send(response, 429, { ok: false, error: "ratelimited" }, { "retry-after": String(plan.retryAfterSeconds) });
      case "internal_error":
        return send(response, 200, { ok: false, error: "internal_error" });
      case "applied_then_hang":
        apply(key, false, method, params);
        return hang(response);
      case "hang":
        return hang(response);
      case "applied":
        return send(response, 200, apply(key, true, method, params));
    }
  });

  const hang = (response: ServerResponse) => {
    const timer = setTimeout(() => {
      hangs.delete(timer);
      response.socket?.destroy();
    }, plan.hangMs);
    hangs.add(timer);
  };

  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;

  return {
    url,
    apiUrl: `${url}/api/`,
    responseUrl: (id) => `${url}/respond/${id}`,
    ledger: () => ({
      applied,
      fates: { ...fates },
      messagesPerThread,
      reactions,
      refused,
      alreadyReacted,
      calls,
      teamsByKey,
      unknownTokens,
      installs,
      refreshes,
      refreshReused,
    }),
    async close() {
      for (const timer of hangs) clearTimeout(timer);
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * auth.test (the token's team; the bot user the run's mentions name), conversations.info (a public channel) and
 * conversations.history (newest first, inclusive).
 */
function read(reads: Reads, method: string, params: Record<string, string>, teamId: string): unknown {
  if (method === "auth.test") return { ok: true, team_id: teamId, user_id: "U0ACKBOXBOT", bot_id: "B0ACKBOX" };
  if (method === "conversations.info") {
    return {
      ok: true,
      channel: { id: params.channel, is_channel: true, is_group: false, is_im: false, is_mpim: false, is_private: false },
    };
  }
  const oldest = Number(params.oldest ?? 0);
  const latest = params.latest === undefined ? Number.POSITIVE_INFINITY : Number(params.latest);
  const window = reads
    .history(params.channel ?? "")
    .filter((m) => Number(m.ts) >= oldest && Number(m.ts) <= latest)
    .toSorted((a, b) => Number(b.ts) - Number(a.ts));
  const from = Number(params.cursor ?? 0) || 0;
  const limit = Number(params.limit ?? 100) || 100;
  const page = window.slice(from, from + limit);
  const more = from + limit < window.length;
  return { ok: true, messages: page, has_more: more, response_metadata: { next_cursor: more ? String(from + limit) : "" } };
}

function send(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  const type = typeof body === "string" ? "text/plain" : "application/json; charset=utf-8";
  response.writeHead(status, { "content-type": type, ...headers });
  response.end(text);
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    request.on("error", reject);
  });
}
