/**
 * A local Slack stand-in: the Web API methods the reference and example apps
 * call and the response_url posts, answered in Slack's shapes, so a local run
 * without a Slack workspace shows every effect arriving. It also fakes the
 * example app's answer service (examples/ask/app.ts), which honours Idempotency-Key,
 * and an OpenAI-compatible model for the assistant's answers (issue 39).
 *
 *   POST /api/<method>                 Web API: form-encoded (as slack-web-api-client sends it) or JSON,
 *                                      `Authorization: Bearer xox…`; answers {ok:true,…} or {ok:false,error}.
 *                                      The streaming and assistant methods (chat.startStream / appendStream /
 *                                      stopStream, chat.postMessage, chat.update of a message it knows,
 *                                      assistant.threads.setStatus / setSuggestedPrompts / setTitle,
 *                                      conversations.replies) are answered by a model of Slack's side
 *                                      (shared/app/fake-slack-streams.ts, on the stand-in's clock): a stream
 *                                      closes 5 minutes after its start, a status 2 minutes after it was set
 *   POST /model/v1/chat/completions    the fake model (shared/app/fake-model.ts): MODEL_URL=<url>/model/v1.
 *                                      Streams a canned answer naming the question (40 chunks over about
 *                                      4 s by default) as OpenAI's server-sent events; checks
 *                                      `Authorization: Bearer <key>` against the key it was given (401 in
 *                                      OpenAI's shape when wrong; any key when given none); records the
 *                                      Idempotency-Key, never the key
 *   POST /commands/… /actions/… /response/…
 *                                      a response_url: a JSON message; answers 200 {"ok":true}
 *   POST /example/answer               the example's answer service: {"question"} → {"answer"}; a
 *                                      repeated Idempotency-Key gets the first answer again
 *   GET  /oauth/v2/authorize           Slack's authorize page, approving at once; POST /api/oauth.v2.access
 *                                      trades its code (or a refresh token) for a token
 *   GET  /_standin/calls[?since=<seq>] what it received, as JSON (loopback clients only; every /_standin/
 *                                      endpoint refuses a browser's Origin, and every endpoint a Host that
 *                                      is not loopback)
 *   POST /_standin/revoke?team=<id>    revokes every token issued to a workspace, as an uninstall does (loopback only)
 *   POST /_standin/messages            {"channel","message"}: a message "posted in Slack" (delivered as an event or
 *                                      not), which conversations.history then answers with (loopback only)
 *   POST /_standin/workflow            {"callback_id","team"?}: a workflow runs a custom step: a new execution
 *                                      (function_execution_id) and its workflow token (bot_access_token), for the
 *                                      function_executed the caller sends the ingress (loopback only); then
 *                                      functions.completeSuccess / completeError answer as Slack does (below)
 *   POST /_standin/assistant-thread    {"channel":"D…","user"}: a user opens an assistant thread: its root, and the
 *                                      thread_ts for the assistant_thread_started the caller sends (loopback only)
 *   POST /_standin/stop                {"channel","ts"}: the user presses the stop button on a stream (or in a
 *                                      thread): its streams stop, and the agent_session_stopped fields Slack
 *                                      would send the app are returned as {"ok":true,"event":{…}} (loopback only)
 *   GET  /_standin/thread?channel=&thread_ts=
 *                                      a thread as Slack holds it: every message with its text, whether it still
 *                                      streams, how it ended, its start/append/stop/update counts; the status,
 *                                      prompts and title; and any overlapping calls to one stream (loopback only)
 *
 * A message told through POST /_standin/messages with a `user` (a person's, in a thread or not) is also a
 * message of the streams model, so conversations.replies shows it.
 *
 * It listens on 127.0.0.1 only, keeps the last MAX_KEPT calls (counts are
 * kept for all), and prints one line per call if given a `print`.
 */

import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type ChatMessage, type FakeModel, fakeModel, type ModelCall } from "../../shared/app/fake-model.ts";
import {
  type AgentSessionStopped,
  type FakeSlackStreams,
  type FakeThread,
  fakeSlackStreams,
  type Overlap,
} from "../../shared/app/fake-slack-streams.ts";

export interface StandinCall {
  /** 1, 2, 3, … in arrival order. */
  readonly seq: number;
  readonly at: string;
  readonly kind: "api" | "response_url" | "service";
  /** The Web API method, "response_url", or "example.answer" (the example's service). */
  readonly method: string;
  readonly path: string;
  /** Form fields of a Web API call (objects arrive JSON-encoded, as Slack receives them). */
  readonly params: Readonly<Record<string, string>>;
  /** A JSON body (a response_url message, or a Web API call sent as JSON). */
  readonly json?: unknown;
  /** The Idempotency-Key header a service call carried. */
  readonly idempotencyKey?: string;
  /**
   * Whose token a Web API call carried, never the token: the workspace (or `E:<org>`) the stand-in
   * issued it to through OAuth and its number (1, 2, … in issue order), or null for a token it did not
   * issue (a single-workspace SLACK_BOT_TOKEN). Absent: no token (oauth.v2.access, a service, a response_url).
   */
  readonly token?: { readonly issuedTo: string; readonly n: number } | null;
  readonly answer: { readonly status: number; readonly body: unknown };
  /** A model call's course (never its key): whether the key matched, how it ended, its chunks and times. */
  readonly model?: {
    readonly authorized: boolean;
    readonly outcome: string;
    readonly chunks: number;
    /** Time to its first content chunk, from the call's start. */
    readonly firstTokenMs?: number;
    readonly durationMs: number;
  };
}

export interface StandinSnapshot {
  readonly calls: readonly StandinCall[];
  /** Calls per method since the start, including those no longer kept. */
  readonly counts: Readonly<Record<string, number>>;
  readonly total: number;
}

export interface SlackStandin {
  /** http://127.0.0.1:<port> */
  readonly url: string;
  /** What SLACK_API_URL points at: `<url>/api/`. */
  readonly apiUrl: string;
  /** A response_url on the stand-in, e.g. responseUrl("commands/T0/1/abc"). */
  responseUrl(path: string): string;
  snapshot(since?: number): StandinSnapshot;
  /** Slack's side of streams and assistant threads (for a test in the same process). */
  readonly streams: FakeSlackStreams;
  /** The fake model behind /model/v1 (a test in the same process may script its next turns: a failure, a stall). */
  readonly model: FakeModel;
  close(): Promise<void>;
}

export interface StandinOptions {
  /** 0 (the default) picks a free port. */
  readonly port?: number;
  /** One line per call received. */
  readonly print?: (line: string) => void;
  readonly now?: () => number;
  /** How long after chat.startStream a stream closes (Slack: about 5 minutes). */
  readonly streamLifetimeMs?: number;
  /** The fake model at /model/v1. */
  readonly model?: StandinModelOptions;
}

export interface StandinModelOptions {
  /** The MODEL_API_KEY a call must carry; without one, any Bearer key is taken. */
  readonly apiKey?: string;
  /** The canned answer (default: a paragraph naming the question and how many messages of history came with it). */
  readonly answer?: string | ((messages: readonly ChatMessage[]) => string);
  /** How many chunks it is streamed in (default 40). */
  readonly chunks?: number;
  /** Before the first chunk (default 400 ms): the model's own time to first token. */
  readonly firstChunkDelayMs?: number;
  /** Between chunks (default 90 ms: 40 chunks in about 4 s). */
  readonly betweenChunksMs?: number;
  /** Waits (default: a real timer, ended early by an abort). */
  readonly sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

/**
 * The stand-in model's answer when none is given: it names the question and the history that came with it,
 * so a demo can check exactly which answer landed in which thread, asked with which history.
 */
export function standinAnswer(messages: readonly ChatMessage[]): string {
  const asked = [...messages].reverse().find((m) => m.role === "user")?.content;
  const question = typeof asked === "string" ? asked : "";
  const history = messages.filter((m) => m.role === "user" || m.role === "assistant").length - 1;
  return (
    `You asked: "${question}". This is the local stand-in model answering, streamed in pieces the way a real ` +
    `model streams its tokens, so you can watch the message grow in the thread and see that it arrives once, ` +
    `complete, even if the process is stopped part way. It was asked with ${history} earlier ` +
    `message${history === 1 ? "" : "s"} of this thread's history.`
  );
}

const realSleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolveSleep) => {
    if (signal.aborted) return resolveSleep();
    const timer = setTimeout(resolveSleep, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        resolveSleep();
      },
      { once: true },
    );
  });

/**
 * A channel the stand-in answers `channel_not_found` for, whatever the
 * method: the demo's labelled failure, so a local run has a dead row to
 * practise the runbook on (docs/operating.md).
 */
export const MISSING_CHANNEL = "C0GONE";

const MAX_KEPT = 10_000;
const MAX_BODY_BYTES = 1024 * 1024;
const RESPONSE_URL_PREFIXES = ["/commands/", "/actions/", "/response/"];

/** The stand-in's own workspace: auth.test's team for a token it did not issue (a single-workspace SLACK_BOT_TOKEN). */
export const STANDIN_TEAM = "T0LOCAL";

const BOT = { user: "U0ACKBOXBOT", bot_id: "B0ACKBOX", app_id: "A0ACKBOX", team: STANDIN_TEAM } as const;

type Answer = { status: number; body: unknown };
type Params = Record<string, string>;

export async function startSlackStandin(options: StandinOptions = {}): Promise<SlackStandin> {
  const now = options.now ?? Date.now;
  const kept: StandinCall[] = [];
  const counts: Record<string, number> = {};
  const reactions = new Set<string>();
  const answers = new Map<string, string>();
  /** Each channel's messages as Slack keeps them (told through POST /_standin/messages), for conversations.history. */
  const history = new Map<string, Record<string, unknown>[]>();
  let seq = 0;
  let tsCounter = 0;

  /**
   * The OAuth half of Slack, for `npm run demo`'s installs: the authorize page
   * (GET /oauth/v2/authorize, which "approves" at once for the workspace in its
   * `team` parameter, default T0LOCAL, and redirects with a one-time code) and
   * oauth.v2.access with both grant types. `rotate=1` on the authorize URL
   * gives a rotating token (xoxe.xoxb-…, 12 h, a single-use refresh token);
   * `expires_in=<s>` shortens the first token's life (a refreshed one gets
   * 12 h), so a demo can meet a token already due for its refresh.
   * Spent codes and refresh tokens answer invalid_code / invalid_refresh_token,
   * as Slack does, so a second refresh with one refresh token is visible.
   *
   * Every token it issues is remembered (never recorded or printed): a call
   * carrying one is recorded with whose it is (`token`), an expired one is
   * answered token_expired, and a revoked one (POST /_standin/revoke?team=…,
   * what Slack does at an uninstall) token_revoked.
   */
  const codes = new Map<
    string,
    { team: string; enterprise: string | undefined; rotate: boolean; scope: string; expiresIn: number | undefined }
  >();
  const refreshTokens = new Map<string, { team: string; enterprise: string | undefined; scope: string }>();
  const issued = new Map<string, { issuedTo: string; n: number; expiresAt: number | undefined; revoked: boolean }>();
  /**
   * Custom step executions (POST /_standin/workflow), as Slack keeps them: running until one completion, which
   * revokes its workflow token (valid 15 minutes from its issue, or until then). A completion of a finished one
   * is answered execution_not_in_running_state, of an unknown one function_execution_not_found, one made with
   * another execution's workflow token access_denied. One made with a bot token is answered access_denied too:
   * Slack documents no bot token completing an execution, so the stand-in takes the conservative reading.
   */
  const executions = new Map<string, { token: string; state: "running" | "completed"; callbackId: string }>();
  let executionSeq = 0;
  const startExecution = (callbackId: string, team: string) => {
    executionSeq += 1;
    const executionId = `Fx0LOCAL${executionSeq.toString(36).toUpperCase()}${randomBytes(3).toString("hex").toUpperCase()}`;
    const token = `xwfp-local-${executionSeq}-${randomBytes(8).toString("hex")}`;
    issued.set(token, { issuedTo: `workflow ${executionId} (${team})`, n: ++issuedCount, expiresAt: now() + 15 * 60_000, revoked: false });
    executions.set(executionId, { token, state: "running", callbackId });
    return { function_execution_id: executionId, bot_access_token: token };
  };
  const complete = (p: Params, bearer: string, outputs: boolean): Answer => {
    const execution = executions.get(p.function_execution_id ?? "");
    if (!execution) return error("function_execution_not_found");
    if (execution.state !== "running") return error("execution_not_in_running_state");
    if (bearer !== execution.token) return error("access_denied");
    if (outputs) {
      const parsed = safeJson(p.outputs ?? "");
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return error("invalid_arguments");
    } else if (!p.error) return error("invalid_arguments");
    execution.state = "completed";
    const token = issued.get(bearer);
    if (token) token.revoked = true;
    return ok({});
  };
  let tokenSeq = 0;
  let issuedCount = 0;
  const accessAnswer = (grant: { team: string; enterprise: string | undefined; scope: string }, rotate: boolean, expiresIn = 43_200) => {
    tokenSeq += 1;
    const orgWide = grant.team === "";
    const base = {
      token_type: "bot",
      scope: grant.scope,
      bot_user_id: BOT.user,
      bot_id: BOT.bot_id,
      app_id: BOT.app_id,
      team: orgWide ? null : { id: grant.team, name: grant.team },
      enterprise: grant.enterprise ? { id: grant.enterprise, name: grant.enterprise } : null,
      is_enterprise_install: orgWide,
      authed_user: { id: "U0INSTALLER" },
    };
    const who = orgWide ? grant.enterprise : grant.team;
    const issuedTo = orgWide ? `E:${grant.enterprise}` : grant.team;
    // A random part: a token cannot be guessed from the numbers a call record shows.
    const secret = randomBytes(8).toString("hex");
    if (!rotate) {
      const token = `xoxb-local-${who}-${tokenSeq}-${secret}`;
      issued.set(token, { issuedTo, n: ++issuedCount, expiresAt: undefined, revoked: false });
      return ok({ ...base, access_token: token });
    }
    const token = `xoxe.xoxb-local-${who}-${tokenSeq}-${secret}`;
    issued.set(token, { issuedTo, n: ++issuedCount, expiresAt: now() + expiresIn * 1000, revoked: false });
    const refresh = `xoxe-1-local-${who}-${tokenSeq}-${secret}`;
    refreshTokens.set(refresh, grant);
    return ok({ ...base, access_token: token, refresh_token: refresh, expires_in: expiresIn });
  };
  /** Slack's revocation at an uninstall: every token of the workspace stops working, refresh tokens too. */
  const revoke = (team: string): number => {
    let revoked = 0;
    for (const token of issued.values())
      if (token.issuedTo === team && !token.revoked) {
        token.revoked = true;
        revoked += 1;
      }
    for (const [refresh, grant] of refreshTokens)
      if (grant.team === team || `E:${grant.enterprise}` === team) refreshTokens.delete(refresh);
    return revoked;
  };
  const oauthAccess = (p: Params): Answer => {
    if (!p.client_id) return error("invalid_client_id");
    if (!p.client_secret) return error("bad_client_secret");
    if (p.grant_type === "refresh_token") {
      const grant = p.refresh_token ? refreshTokens.get(p.refresh_token) : undefined;
      if (!grant || !p.refresh_token) return error("invalid_refresh_token");
      refreshTokens.delete(p.refresh_token);
      return accessAnswer(grant, true);
    }
    const grant = p.code ? codes.get(p.code) : undefined;
    if (!grant || !p.code) return error("invalid_code");
    codes.delete(p.code);
    return accessAnswer(grant, grant.rotate, grant.expiresIn);
  };

  /** A fresh message ts, unique within this stand-in: "<unix seconds>.<6 digits>". */
  const freshTs = () => `${Math.floor(now() / 1000)}.${String(++tsCounter % 1_000_000).padStart(6, "0")}`;

  /** Slack's side of streams and assistant threads: the messages the app posts, streams and updates, and their state. */
  const streams = fakeSlackStreams({
    now,
    bot: BOT,
    freshTs,
    ...(options.streamLifetimeMs !== undefined ? { streamLifetimeMs: options.streamLifetimeMs } : {}),
  });
  const modelOptions = options.model ?? {};
  const model = fakeModel({
    ...(modelOptions.apiKey !== undefined ? { apiKey: modelOptions.apiKey } : {}),
    now,
    sleep: modelOptions.sleep ?? realSleep,
    default: {
      answer: modelOptions.answer ?? standinAnswer,
      chunks: modelOptions.chunks ?? 40,
      firstChunkDelayMs: modelOptions.firstChunkDelayMs ?? 400,
      betweenChunksMs: modelOptions.betweenChunksMs ?? 90,
    },
  });
  const fromStreams = (method: string, p: Params): Answer => ({ status: 200, body: streams.answer(method, p) });

  const methods: Record<string, (p: Params, tokenTeam: string | undefined) => Answer> = {
    "api.test": (p) => ok({ args: p }),
    // Whose token it is, as Slack answers: the workspace the stand-in issued it to, else its own.
    "auth.test": (_p, tokenTeam) =>
      ok({
        url: "https://ackbox-local.slack.com/",
        team: "ackbox local",
        user: "ackbox",
        team_id: tokenTeam ?? BOT.team,
        user_id: BOT.user,
        bot_id: BOT.bot_id,
      }),
    // Every message the app posts is kept by the streams model: conversations.replies shows it, and a reply in a
    // thread clears the thread's status, as Slack's does.
    "chat.postMessage": (p) => fromStreams("chat.postMessage", p),
    "chat.update": (p) => {
      // A message the stand-in knows (it posted or streamed it) is updated as Slack would (streaming_state_conflict
      // while it streams, …); any other (a demo's button message it never saw) is answered as before, ok.
      if (p.channel && p.ts && streams.message(p.channel, p.ts)) return fromStreams("chat.update", p);
      if (!p.channel) return error("channel_not_found");
      if (!p.ts) return error("message_not_found");
      if (p.markdown_text && (p.text || p.blocks)) return error("markdown_text_conflict");
      if (!p.text && !p.markdown_text && !p.blocks && !p.attachments) return error("no_text");
      const text = p.markdown_text ?? p.text ?? "";
      return ok({ channel: p.channel, ts: p.ts, text, message: { text, user: BOT.user, bot_id: BOT.bot_id } });
    },
    "chat.startStream": (p) => fromStreams("chat.startStream", p),
    "chat.appendStream": (p) => fromStreams("chat.appendStream", p),
    "chat.stopStream": (p) => fromStreams("chat.stopStream", p),
    "assistant.threads.setStatus": (p) => fromStreams("assistant.threads.setStatus", p),
    "assistant.threads.setSuggestedPrompts": (p) => fromStreams("assistant.threads.setSuggestedPrompts", p),
    "assistant.threads.setTitle": (p) => fromStreams("assistant.threads.setTitle", p),
    "conversations.replies": (p) => fromStreams("conversations.replies", p),
    "reactions.add": (p) => {
      if (!p.channel) return error("channel_not_found");
      if (!p.timestamp) return error("bad_timestamp");
      if (!p.name) return error("invalid_name");
      const key = `${p.channel}/${p.timestamp}/${p.name}`;
      if (reactions.has(key)) return error("already_reacted");
      reactions.add(key);
      return ok({});
    },
    "conversations.history": (p) => conversationsHistory(history.get(p.channel ?? "") ?? [], p, now()),
    // The stand-in's own workspace names its conversations by kind: D… a DM, G… a private channel, C… a public one.
    "conversations.info": (p) => (p.channel ? ok({ channel: conversationOf(p.channel) }) : error("channel_not_found")),
    // The bot is a member of every channel it has been told a message of, all on one page.
    "users.conversations": () => ok({ channels: [...history.keys()].sort().map(conversationOf), response_metadata: { next_cursor: "" } }),
    "views.open": (p) => {
      if (!p.trigger_id) return error("invalid_trigger_id");
      let view: Record<string, unknown>;
      try {
        view = JSON.parse(p.view ?? "");
      } catch {
        return error("invalid_arguments");
      }
      const id = `V0${(seq + 1).toString(36).toUpperCase().padStart(8, "0")}`;
      return ok({
        view: { ...view, id, team_id: BOT.team, app_id: BOT.app_id, bot_id: BOT.bot_id, hash: `${Math.floor(now() / 1000)}.${id}` },
      });
    },
    "views.publish": (p) => {
      if (!p.user_id) return error("invalid_arguments");
      let view: Record<string, unknown>;
      try {
        view = JSON.parse(p.view ?? "");
      } catch {
        return error("invalid_arguments");
      }
      if (view.type !== "home") return error("invalid_arguments");
      const id = `V0${(seq + 1).toString(36).toUpperCase().padStart(8, "0")}`;
      return ok({ view: { ...view, id, team_id: BOT.team, app_id: BOT.app_id, hash: `${Math.floor(now() / 1000)}.${id}` } });
    },
  };

  const record = (call: Omit<StandinCall, "seq" | "at">): StandinCall => {
    const full: StandinCall = { seq: ++seq, at: new Date(now()).toISOString(), ...call };
    kept.push(full);
    if (kept.length > MAX_KEPT) kept.splice(0, kept.length - MAX_KEPT);
    counts[call.method] = (counts[call.method] ?? 0) + 1;
    options.print?.(describeCall(full));
    return full;
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((error) => {
      if (!res.headersSent) send(res, 500, { ok: false, error: "internal_error", detail: String(error) });
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    // Its control endpoints are for local tools: a browser page (any site, which a form post or a text/plain
    // fetch could aim here without a CORS preflight) says where it comes from, and is refused.
    if (url.pathname.startsWith("/_standin/") && req.headers.origin !== undefined)
      return send(res, 403, { error: "the stand-in's /_standin/ endpoints take no browser requests (Origin set)" });
    // A same-origin GET sends no Origin: a site whose name a DNS rebinding points at 127.0.0.1 could read what the
    // stand-in received (its calls, the history it was told, its answers). Such a request names that site in Host;
    // the Workers and the local tools name the loopback address. So nothing is answered to another Host.
    if (!isLoopbackHost(req.headers.host))
      return send(res, 403, { error: "the stand-in answers only a loopback Host (127.0.0.1, localhost or [::1])" });
    if (req.method === "GET" && url.pathname === "/_standin/calls") {
      if (!isLoopback(req.socket.remoteAddress)) return send(res, 403, { error: "loopback only" });
      const since = Number(url.searchParams.get("since") ?? "0");
      return send(res, 200, snapshot(Number.isFinite(since) ? since : 0));
    }
    if (req.method === "GET" && url.pathname === "/oauth/v2/authorize") {
      const redirect = url.searchParams.get("redirect_uri");
      const state = url.searchParams.get("state") ?? "";
      if (!redirect || !/^https?:\/\//.test(redirect)) return send(res, 400, { ok: false, error: "bad_redirect_uri" });
      const enterprise = url.searchParams.get("enterprise") ?? undefined;
      const team = url.searchParams.get("org_wide") === "1" ? "" : (url.searchParams.get("team") ?? BOT.team);
      const code = `local-code-${++tokenSeq}`;
      const expiresIn = Number(url.searchParams.get("expires_in") ?? "");
      codes.set(code, {
        team,
        enterprise,
        rotate: url.searchParams.get("rotate") === "1",
        scope: url.searchParams.get("scope") ?? "",
        expiresIn: Number.isInteger(expiresIn) && expiresIn > 0 ? expiresIn : undefined,
      });
      const target = new URL(redirect);
      target.searchParams.set("code", code);
      target.searchParams.set("state", state);
      record({
        kind: "api",
        method: "oauth.authorize",
        path: url.pathname,
        params: { team: team || "(org-wide)", enterprise: enterprise ?? "" },
        answer: { status: 302, body: { ok: true } },
      });
      res.writeHead(302, { location: target.toString() }).end();
      return;
    }
    if (req.method === "GET" && url.pathname === "/_standin/thread") {
      if (!isLoopback(req.socket.remoteAddress)) return send(res, 403, { error: "loopback only" });
      const channel = url.searchParams.get("channel") ?? "";
      const threadTs = url.searchParams.get("thread_ts") ?? "";
      if (channel === "" || !TS.test(threadTs)) return send(res, 400, { ok: false, error: "want ?channel=<id>&thread_ts=<ts>" });
      const thread = streams.thread(channel, threadTs);
      const ours = new Set(thread.messages.map((m) => `${channel} ${m.ts}`));
      const overlaps = streams.overlaps().filter((o) => ours.has(o.key) || o.key === `${channel} ${threadTs} start`);
      return send(res, 200, { ok: true, thread, overlaps });
    }
    if (req.method === "GET" && url.pathname === "/") {
      return send(res, 200, { service: "ackbox local Slack stand-in", api: "/api/<method>", calls: "/_standin/calls" });
    }
    if (req.method !== "POST") return send(res, 405, { ok: false, error: "method_not_allowed" });
    if (url.pathname === "/_standin/revoke") {
      if (!isLoopback(req.socket.remoteAddress)) return send(res, 403, { error: "loopback only" });
      const team = url.searchParams.get("team") ?? "";
      if (team === "") return send(res, 400, { ok: false, error: "team is required" });
      return send(res, 200, { ok: true, revoked: revoke(team) });
    }
    if (url.pathname === "/_standin/workflow") {
      if (!isLoopback(req.socket.remoteAddress)) return send(res, 403, { error: "loopback only" });
      const asked = safeJson((await readBody(req)) ?? "") as { callback_id?: unknown; team?: unknown } | undefined;
      if (typeof asked?.callback_id !== "string" || asked.callback_id === "")
        return send(res, 400, { ok: false, error: 'want {"callback_id":"<the step>","team":"T…"}' });
      const team = typeof asked.team === "string" && asked.team !== "" ? asked.team : BOT.team;
      return send(res, 200, { ok: true, ...startExecution(asked.callback_id, team) });
    }
    if (url.pathname === "/_standin/assistant-thread") {
      if (!isLoopback(req.socket.remoteAddress)) return send(res, 403, { error: "loopback only" });
      const asked = safeJson((await readBody(req)) ?? "") as { channel?: unknown; user?: unknown } | undefined;
      if (typeof asked?.channel !== "string" || asked.channel === "" || typeof asked.user !== "string" || asked.user === "")
        return send(res, 400, { ok: false, error: 'want {"channel":"D…","user":"U…"}' });
      return send(res, 200, { ok: true, ...streams.assistantThread({ channel: asked.channel, user: asked.user }) });
    }
    if (url.pathname === "/_standin/stop") {
      if (!isLoopback(req.socket.remoteAddress)) return send(res, 403, { error: "loopback only" });
      const asked = safeJson((await readBody(req)) ?? "") as { channel?: unknown; ts?: unknown; user?: unknown } | undefined;
      if (typeof asked?.channel !== "string" || typeof asked.ts !== "string" || !TS.test(asked.ts))
        return send(res, 400, { ok: false, error: 'want {"channel":"D…","ts":"<a stream\'s or a thread\'s ts>"}' });
      let event: AgentSessionStopped;
      try {
        event = streams.stopByUser(asked.channel, asked.ts, typeof asked.user === "string" ? asked.user : undefined);
      } catch {
        return send(res, 404, { ok: false, error: "message_not_found" });
      }
      options.print?.(
        `(the user pressed stop in ${event.channel} thread ${event.thread_ts}: streams stopped [${event.streaming_message_ts.join(", ")}])`,
      );
      return send(res, 200, { ok: true, event });
    }
    if (url.pathname === "/_standin/messages") {
      if (!isLoopback(req.socket.remoteAddress)) return send(res, 403, { error: "loopback only" });
      const told = safeJson((await readBody(req)) ?? "") as { channel?: unknown; message?: { ts?: unknown } } | undefined;
      if (typeof told?.channel !== "string" || typeof told.message?.ts !== "string" || !TS.test(told.message.ts))
        return send(res, 400, { ok: false, error: 'want {"channel":"C…","message":{"ts":"<ts>",…}}' });
      const messages = history.get(told.channel) ?? [];
      messages.push(told.message);
      history.set(told.channel, messages);
      tellStreams(told.channel, told.message as Record<string, unknown>);
      return send(res, 200, { ok: true, stored: messages.length });
    }

    const raw = await readBody(req);
    if (raw === undefined) return send(res, 413, { ok: false, error: "request_too_large" });
    const contentType = (req.headers["content-type"] ?? "").toLowerCase();

    if (url.pathname.startsWith("/model/")) return serveModel(req, res, url, raw);

    if (url.pathname.startsWith("/api/")) {
      const method = decodeURIComponent(url.pathname.slice("/api/".length));
      const params: Params = contentType.includes("json") ? jsonParams(raw) : Object.fromEntries(new URLSearchParams(raw));
      const auth = req.headers.authorization ?? (params.token ? `Bearer ${params.token}` : "");
      if (method === "oauth.v2.access") {
        // Authenticated by the client id and secret, not a token; what is kept of it holds neither codes nor tokens.
        const answer = oauthAccess(params);
        const body = answer.body as Record<string, unknown>;
        const kept = { ok: body.ok, error: body.error, team: body.team, enterprise: body.enterprise, expires_in: body.expires_in };
        record({
          kind: "api",
          method,
          path: url.pathname,
          params: { grant_type: params.grant_type ?? "authorization_code" },
          answer: { status: answer.status, body: kept },
        });
        return send(res, answer.status, answer.body);
      }
      const bearer = auth.replace(/^Bearer /, "");
      const known = issued.get(bearer);
      const answer: Answer = !auth
        ? error("not_authed")
        : !/^Bearer xox[a-z]-|^Bearer xoxe\.xox[a-z]-|^Bearer xwfp-/.test(auth) || (auth.startsWith("Bearer xwfp-") && !known)
          ? error("invalid_auth")
          : known?.revoked
            ? error("token_revoked")
            : known?.expiresAt !== undefined && known.expiresAt <= now()
              ? error("token_expired")
              : method === "functions.completeSuccess" || method === "functions.completeError"
                ? complete(params, bearer, method === "functions.completeSuccess")
                : !methods[method]
                  ? error("unknown_method")
                  : params.channel === MISSING_CHANNEL
                    ? error("channel_not_found")
                    : (methods[method]?.(params, known && !known.issuedTo.startsWith("E:") ? known.issuedTo : undefined) ??
                      error("unknown_method"));
      delete params.token;
      record({
        kind: "api",
        method,
        path: url.pathname,
        params,
        ...(contentType.includes("json") ? { json: safeJson(raw) } : {}),
        ...(auth ? { token: known ? { issuedTo: known.issuedTo, n: known.n } : null } : {}),
        answer,
      });
      return send(res, answer.status, answer.body);
    }

    if (url.pathname === "/example/answer") {
      const question = (safeJson(raw) as { question?: unknown } | undefined)?.question;
      const key = typeof req.headers["idempotency-key"] === "string" ? req.headers["idempotency-key"] : undefined;
      let answer: Answer;
      if (typeof question !== "string") answer = { status: 400, body: { error: "no question" } };
      else {
        const text = (key && answers.get(key)) ?? `The stand-in's answer to "${question}" (#${answers.size + 1}).`;
        if (key) answers.set(key, text);
        answer = { status: 200, body: { answer: text } };
      }
      record({
        kind: "service",
        method: "example.answer",
        path: url.pathname,
        params: {},
        json: safeJson(raw),
        ...(key ? { idempotencyKey: key } : {}),
        answer,
      });
      return send(res, answer.status, answer.body);
    }

    if (RESPONSE_URL_PREFIXES.some((prefix) => url.pathname.startsWith(prefix))) {
      const json = safeJson(raw);
      const answer: Answer =
        json === undefined || typeof json !== "object" || json === null
          ? { status: 400, body: { ok: false, error: "invalid_payload" } }
          : { status: 200, body: { ok: true } };
      record({ kind: "response_url", method: "response_url", path: url.pathname, params: {}, json, answer });
      return send(res, answer.status, answer.body);
    }
    return send(res, 404, { ok: false, error: "not_found" });
  }

  /** A person's message told to the stand-in is one the streams model shows in conversations.replies too. */
  function tellStreams(channel: string, message: Record<string, unknown>): void {
    const { ts, user, text, thread_ts: threadTs, bot_id: botId } = message;
    if (typeof ts !== "string" || typeof user !== "string" || botId !== undefined || streams.message(channel, ts)) return;
    if (threadTs !== undefined && (typeof threadTs !== "string" || !TS.test(threadTs))) return;
    streams.userMessage({ channel, user, text: typeof text === "string" ? text : "", ts, ...(threadTs ? { thread_ts: threadTs } : {}) });
  }

  /**
   * The fake model over HTTP: the request as a web Request (aborted when the client goes away), its answer
   * streamed back as it is produced, and one call recorded and printed when it ends.
   */
  async function serveModel(req: IncomingMessage, res: ServerResponse, url: URL, raw: string): Promise<void> {
    const gone = new AbortController();
    res.on("close", () => {
      if (!res.writableFinished) gone.abort(new DOMException("the client closed the connection", "AbortError"));
    });
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) if (typeof value === "string") headers.set(name, value);
    const request = new Request(`http://127.0.0.1${url.pathname}`, {
      method: req.method ?? "POST",
      headers,
      ...(req.method === "GET" || req.method === "HEAD" ? {} : { body: raw }),
      signal: gone.signal,
    });
    const before = model.calls.length;
    const response = await model.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    try {
      if (response.body) for await (const chunk of response.body) res.write(chunk);
    } catch {
      // The client went away (or the model's turn ended the connection): what was sent is all there is.
    }
    res.end();
    const call = model.calls[before];
    if (call) recordModelCall(call, url.pathname);
  }

  function recordModelCall(call: ModelCall, path: string): void {
    const body = call.body as { model?: unknown; messages?: unknown } | undefined;
    record({
      kind: "service",
      method: "model.chat.completions",
      path,
      params: {},
      json: body,
      ...(call.idempotencyKey !== null ? { idempotencyKey: call.idempotencyKey } : {}),
      answer: { status: call.status, body: { outcome: call.outcome ?? "aborted", text: call.text } },
      model: {
        authorized: call.authorized,
        outcome: call.outcome ?? "aborted",
        chunks: call.chunksSent,
        ...(call.firstContentAt !== undefined ? { firstTokenMs: call.firstContentAt - call.startedAt } : {}),
        durationMs: (call.endedAt ?? now()) - call.startedAt,
      },
    });
  }

  function snapshot(since = 0): StandinSnapshot {
    return { calls: kept.filter((call) => call.seq > since), counts: { ...counts }, total: seq };
  }

  await new Promise<void>((resolveListen, rejectListen) => {
    server.once("error", rejectListen);
    server.listen(options.port ?? 0, "127.0.0.1", () => {
      server.off("error", rejectListen);
      resolveListen();
    });
  });
  const { port } = server.address() as AddressInfo;
  const base = `http://127.0.0.1:${port}`;
  return {
    url: base,
    apiUrl: `${base}/api/`,
    responseUrl: (path) => `${base}/${path.replace(/^\/+/, "")}`,
    snapshot,
    streams,
    model,
    close: () =>
      new Promise<void>((resolveClose) => {
        server.close(() => resolveClose());
        server.closeAllConnections();
      }),
  };
}

const TS = /^\d{1,12}(\.\d{1,6})?$/;
/** A ts as a number of microseconds, exactly (a double would round the sixth digit for some). */
const micros = (ts: string): bigint => {
  const [seconds = "0", fraction = ""] = ts.split(".");
  return BigInt(seconds) * 1_000_000n + BigInt(fraction.padEnd(6, "0"));
};

/**
 * conversations.history as Slack answers it: the channel's messages between
 * `oldest` and `latest` (default now; bounds excluded unless `inclusive`),
 * newest first, `limit` a page (default 100), `has_more`, and
 * `response_metadata.next_cursor` ("" on the last page) to ask for the next.
 */
export function conversationsHistory(messages: readonly Record<string, unknown>[], p: Params, nowMs: number): Answer {
  if (!p.channel) return error("channel_not_found");
  const oldest = p.oldest ?? "0";
  const latest = p.latest ?? (nowMs / 1000).toFixed(6);
  if (!TS.test(oldest)) return error("invalid_ts_oldest");
  if (!TS.test(latest)) return error("invalid_ts_latest");
  const limit = p.limit === undefined ? 100 : Number(p.limit);
  if (!Number.isInteger(limit) || limit < 1) return error("invalid_limit");
  let from = micros(latest);
  let fromIncluded = p.inclusive === "true" || p.inclusive === "1";
  if (p.cursor) {
    const next = /^next_ts:(\d{1,12}(?:\.\d{1,6})?)$/.exec(Buffer.from(p.cursor, "base64").toString("utf8"));
    if (!next?.[1]) return error("invalid_cursor");
    from = micros(next[1]);
    fromIncluded = true;
  }
  const to = micros(oldest);
  const toIncluded = p.inclusive === "true" || p.inclusive === "1";
  const inWindow = messages
    .map((m) => ({ m, at: micros(String(m.ts)) }))
    .filter(({ at }) => (fromIncluded ? at <= from : at < from) && (toIncluded ? at >= to : at > to))
    .sort((a, b) => (a.at === b.at ? 0 : a.at > b.at ? -1 : 1));
  const page = inWindow.slice(0, limit).map(({ m }) => m);
  const following = inWindow[limit]?.m.ts;
  return ok({
    messages: page,
    has_more: following !== undefined,
    pin_count: 0,
    response_metadata: { next_cursor: following === undefined ? "" : Buffer.from(`next_ts:${String(following)}`).toString("base64") },
  });
}

/** A conversation object (conversations.info) of the stand-in's workspace, whose ids say their kind. */
function conversationOf(id: string): Record<string, unknown> {
  const im = id.startsWith("D");
  const priv = id.startsWith("G");
  return { id, is_channel: !im && !priv, is_group: priv, is_im: im, is_mpim: false, is_private: im || priv, is_member: true };
}

/** Tells a stand-in about a message "posted in Slack" (over HTTP), so conversations.history has it. */
export async function tellStandinMessage(standinUrl: string, channel: string, message: Record<string, unknown>): Promise<void> {
  const response = await fetch(`${standinUrl.replace(/\/+$/, "")}/_standin/messages`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ channel, message }),
    signal: AbortSignal.timeout(5000),
  });
  await response.body?.cancel();
  if (!response.ok) throw new Error(`stand-in at ${standinUrl} answered ${response.status} to a message`);
}

/** Starts a custom step's execution at a stand-in (over HTTP): its id and workflow token, for the function_executed to send. */
export async function startStandinExecution(
  standinUrl: string,
  callbackId: string,
  team?: string,
): Promise<{ readonly executionId: string; readonly token: string }> {
  const response = await fetch(`${standinUrl.replace(/\/+$/, "")}/_standin/workflow`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ callback_id: callbackId, ...(team ? { team } : {}) }),
    signal: AbortSignal.timeout(5000),
  });
  if (!response.ok) throw new Error(`stand-in at ${standinUrl} answered ${response.status} to a workflow`);
  const body = (await response.json()) as { function_execution_id: string; bot_access_token: string };
  return { executionId: body.function_execution_id, token: body.bot_access_token };
}

/** Opens an assistant thread at a stand-in (over HTTP): its thread_ts, for the assistant_thread_started to send. */
export async function openStandinAssistantThread(
  standinUrl: string,
  channel: string,
  user: string,
): Promise<{ readonly thread_ts: string }> {
  const response = await fetch(`${standinUrl.replace(/\/+$/, "")}/_standin/assistant-thread`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ channel, user }),
    signal: AbortSignal.timeout(5000),
  });
  if (!response.ok) throw new Error(`stand-in at ${standinUrl} answered ${response.status} to an assistant thread`);
  const body = (await response.json()) as { thread_ts: string };
  return { thread_ts: body.thread_ts };
}

/** Presses the stop button on a stream (or in a thread) at a stand-in: the agent_session_stopped fields to send the ingress. */
export async function stopStandinStream(standinUrl: string, channel: string, ts: string): Promise<AgentSessionStopped> {
  const response = await fetch(`${standinUrl.replace(/\/+$/, "")}/_standin/stop`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ channel, ts }),
    signal: AbortSignal.timeout(5000),
  });
  if (!response.ok) throw new Error(`stand-in at ${standinUrl} answered ${response.status} to a stop`);
  return ((await response.json()) as { event: AgentSessionStopped }).event;
}

/** Reads a thread as the stand-in's Slack holds it (over HTTP), for a demo's exact verdicts. */
export async function fetchStandinThread(
  standinUrl: string,
  channel: string,
  threadTs: string,
): Promise<{ readonly thread: FakeThread; readonly overlaps: readonly Overlap[] }> {
  const query = new URLSearchParams({ channel, thread_ts: threadTs });
  const response = await fetch(`${standinUrl.replace(/\/+$/, "")}/_standin/thread?${query}`, { signal: AbortSignal.timeout(5000) });
  if (!response.ok) throw new Error(`stand-in at ${standinUrl} answered ${response.status} to a thread`);
  const body = (await response.json()) as { thread: FakeThread; overlaps: Overlap[] };
  return { thread: body.thread, overlaps: body.overlaps };
}

/** Reads a stand-in's calls over HTTP (what the demo does from another process). */
export async function fetchStandinCalls(standinUrl: string, since = 0): Promise<StandinSnapshot> {
  const response = await fetch(`${standinUrl.replace(/\/+$/, "")}/_standin/calls?since=${since}`, { signal: AbortSignal.timeout(5000) });
  if (!response.ok) throw new Error(`stand-in at ${standinUrl} answered ${response.status}`);
  return (await response.json()) as StandinSnapshot;
}

/** One line for the terminal: what arrived, the parts a person checks, and the answer. */
export function describeCall(call: StandinCall): string {
  const p = call.params;
  const answer = call.answer.body as { ok?: boolean; error?: string; ts?: string; answer?: string };
  if (call.kind === "service" && call.method === "model.chat.completions") {
    // The model's course, never its key: whether the key matched, how it ended, its chunks and times.
    const body = (call.json ?? {}) as { model?: unknown; messages?: unknown };
    const m = call.model;
    const course = m
      ? `${m.outcome} chunks=${m.chunks}${m.firstTokenMs !== undefined ? ` first-token=${m.firstTokenMs}ms` : ""} in ${m.durationMs}ms`
      : "";
    const text = (call.answer.body as { text?: string } | undefined)?.text;
    return `model.chat.completions model=${typeof body.model === "string" ? body.model : "-"} messages=${Array.isArray(body.messages) ? body.messages.length : "-"} idempotency-key=${call.idempotencyKey ?? "-"} key=${m?.authorized ? "ok" : "wrong"} → ${call.answer.status} ${course}${text ? ` text=${quote(text)}` : ""}`;
  }
  if (call.kind === "service") {
    const question = (call.json as { question?: string } | undefined)?.question;
    return `${call.method} question=${quote(question)} idempotency-key=${call.idempotencyKey ?? "-"} → ${answer?.answer !== undefined ? `answer=${quote(answer.answer)}` : `error ${call.answer.status}`}`;
  }
  const verdict = answer?.ok === true ? `ok${answer.ts ? ` ts=${answer.ts}` : ""}` : `error ${answer?.error ?? call.answer.status}`;
  let what: string;
  switch (call.method) {
    case "chat.postMessage":
      what = `channel=${p.channel}${p.thread_ts ? ` thread_ts=${p.thread_ts}` : ""} text=${quote(p.text)}`;
      break;
    case "chat.update":
      what = `channel=${p.channel} ts=${p.ts} ${p.markdown_text !== undefined ? `markdown_text=${quote(p.markdown_text)}` : `text=${quote(p.text)}`}`;
      break;
    case "chat.startStream":
      what = `channel=${p.channel} thread_ts=${p.thread_ts} markdown_text=${quote(p.markdown_text)}`;
      break;
    case "chat.appendStream":
    case "chat.stopStream":
      what = `channel=${p.channel} ts=${p.ts} markdown_text=${quote(p.markdown_text)}`;
      break;
    case "assistant.threads.setStatus":
      what = `channel_id=${p.channel_id} thread_ts=${p.thread_ts} status=${quote(p.status)}`;
      break;
    case "reactions.add":
      what = `:${p.name}: on channel=${p.channel} ts=${p.timestamp}`;
      break;
    case "views.open":
      what = `trigger_id=${p.trigger_id} view=${quote(viewTitle(p.view))}`;
      break;
    case "views.publish":
      what = `user_id=${p.user_id} view=home`;
      break;
    case "functions.completeSuccess":
      what = `execution=${p.function_execution_id} outputs=${quote(p.outputs)}`;
      break;
    case "functions.completeError":
      what = `execution=${p.function_execution_id} error=${quote(p.error)}`;
      break;
    case "response_url": {
      const body = (call.json ?? {}) as { text?: string; response_type?: string };
      what = `${call.path} ${body.response_type ?? ""} text=${quote(body.text)}`;
      break;
    }
    default:
      what = Object.entries(p)
        .map(([k, v]) => `${k}=${quote(v)}`)
        .join(" ");
  }
  // Whose token it carried (never the token): the demo's two workspaces each show their own.
  const by = call.token ? ` [token #${call.token.n} of ${call.token.issuedTo}]` : "";
  return `${call.method} ${what}${richMark(call)}${by} → ${verdict}`;
}

/** " +blocks(3) +attachments(1)" when a message carries them: the text alone is not what went out. */
function richMark(call: StandinCall): string {
  const body = (call.kind === "response_url" ? call.json : call.params) as Record<string, unknown> | undefined;
  const marks: string[] = [];
  for (const field of ["blocks", "attachments"]) {
    const value = body?.[field];
    const list = typeof value === "string" ? safeJson(value) : value;
    if (Array.isArray(list) && list.length > 0) marks.push(`+${field}(${list.length})`);
    else if (value !== undefined && value !== "" && !Array.isArray(list)) marks.push(`+${field}(?)`);
  }
  return marks.length > 0 ? ` ${marks.join(" ")}` : "";
}

function viewTitle(view: string | undefined): string | undefined {
  try {
    return (JSON.parse(view ?? "") as { title?: { text?: string } }).title?.text;
  } catch {
    return undefined;
  }
}

function quote(text: string | undefined): string {
  if (text === undefined) return "-";
  const short = text.length > 80 ? `${text.slice(0, 77)}…` : text;
  return JSON.stringify(short);
}

const ok = (fields: Record<string, unknown>): Answer => ({ status: 200, body: { ok: true, ...fields } });
const error = (code: string): Answer => ({ status: 200, body: { ok: false, error: code } });

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8" });
  res.end(JSON.stringify(body));
}

function readBody(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolveBody, rejectBody) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) tooLarge = true;
      else chunks.push(chunk);
    });
    req.on("end", () => resolveBody(tooLarge ? undefined : Buffer.concat(chunks).toString("utf8")));
    req.on("error", rejectBody);
  });
}

function jsonParams(raw: string): Params {
  const json = safeJson(raw);
  if (typeof json !== "object" || json === null) return {};
  return Object.fromEntries(Object.entries(json).map(([k, v]) => [k, typeof v === "string" ? v : JSON.stringify(v)]));
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The Host header's name, without its port: one of the loopback names. */
function isLoopbackHost(host: string | undefined): boolean {
  const name = host?.replace(/:\d+$/, "").toLowerCase();
  return name === "127.0.0.1" || name === "localhost" || name === "[::1]";
}

function isLoopback(address: string | undefined): boolean {
  return address === "127.0.0.1" || address === "::1" || address === "::ffff:127.0.0.1";
}
