/**
 * The whole path, for an app's own tests (inside workerd, on the project's real local D1): a signed request
 * through the ingress Worker, then what it queued through the consumer Worker, each as deployed over the app,
 * and every call the effects made, read at a fake Slack. Only the network edge is faked, and handed to the
 * Workers as their edge (ingress(app, { edge }), consumer(app, { edge }); never globalThis.fetch, so paths may
 * run at once): a call to the Slack Web API or a response_url is answered here (ok: true, or what the test
 * scripts), a call to another host by the fake of its origin (`hosts`), else by `services` (an app's own outside
 * service), else fails the effect as a refused connection would.
 *
 *   const path = wholePath(app, env);
 *   const { response, calls } = await path.event({ type: "app_mention", user: "U1", text: "hi", channel: "C1", ts: "1.1" });
 *   expect(calls).toMatchObject([{ method: "chat.postMessage", params: { channel: "C1", thread_ts: "1.1" } }]);
 */

import { consumer } from "../../workers/consumer/worker.ts";
import { ingress } from "../../workers/ingress/worker.ts";
import type { OutboxMessage } from "../outbox/model.ts";
import type { JsonObject } from "../slack/inputs.ts";
import { signatureFor } from "../slack/signature.ts";
import type { SlackApp } from "./app.ts";
import { type FakeSlackStreams, fakeSlackStreams, STREAMS_METHODS } from "./fake-slack-streams.ts";
import { type FakeHost, fakeEdge } from "./network-edge.ts";

/** One call an effect made at the edge: a Web API method with its params, or a POST to a response_url. */
export type EdgeCall =
  | { readonly method: string; readonly params: Readonly<Record<string, unknown>> }
  | { readonly method: "response_url"; readonly url: string; readonly params: Readonly<Record<string, unknown>> };

/**
 * A model for an assistant's answers (app.assistant): the path sets MODEL_URL (and MODEL_NAME, MODEL_API_KEY) to
 * it and routes the answer's model calls to it; see fakeModel() in ackbox/testing.
 */
export interface PathModel {
  readonly fetch: (request: Request) => Promise<Response>;
}

/** Where the path's model answers. */
export const PATH_MODEL_URL = "https://model.test/v1";

export interface WholePathOptions {
  /** The model an assistant's answers ask (its calls go nowhere else). */
  readonly model?: PathModel;
  /** Answers of Web API methods, by method (default `{ ok: true }`): an object, or a function of the call's params. */
  readonly answers?: Readonly<Record<string, JsonObject | ((params: Readonly<Record<string, unknown>>) => JsonObject)>>;
  /** Fakes that each answer their origin (fakeService(origin), or any other fake of a host), before `services`. */
  readonly hosts?: readonly FakeHost[];
  /** The app's outside services: answers a request to any other host (undefined: the connection is refused). */
  readonly services?: (request: Request) => Response | Promise<Response> | undefined;
  /** The workspace the requests come from (default T0TEAM). */
  readonly teamId?: string;
}

export interface PathResult {
  /** The ingress's answer to Slack (the ack). */
  readonly response: Response;
  /** Its body, parsed when it is JSON, else the text ("" for an empty ack). */
  readonly body: unknown;
  /** The calls this request's effects made at the fake, in order: the first attempt's at the ack and the consumer's. */
  readonly calls: readonly EdgeCall[];
}

export interface WholePath {
  /** An Events API event, in its event_callback envelope (event_id and team filled in). */
  event(event: Readonly<Record<string, unknown>>): Promise<PathResult>;
  /** A slash command (its form fields over Slack's usual ones: team, user, channel, trigger_id, response_url). */
  command(command: string, fields?: Readonly<Record<string, string>>): Promise<PathResult>;
  /** An interaction payload (block_actions, view_submission, shortcut…), as Slack posts it in its `payload` field. */
  interaction(payload: Readonly<Record<string, unknown>>): Promise<PathResult>;
  /** Any body with its content type, signed as Slack signs it. */
  request(body: string, contentType: string): Promise<PathResult>;
  /** A payload built by the kit (slashCommand(), assistantMessage(), …), as Slack posts it. */
  payload(payload: { readonly body: string; readonly contentType: string }): Promise<PathResult>;
  /** Every call made through this path so far. */
  readonly calls: readonly EdgeCall[];
  /**
   * Slack's side of the path's assistant threads and streams (shared/app/fake-slack-streams.ts): chat.startStream,
   * appendStream, stopStream, assistant.threads.* and conversations.replies are answered by it (and chat.update of
   * a message it knows), so a test reads the answer's message as the user would see it: `streams.thread(dm, ts)`.
   */
  readonly streams: FakeSlackStreams;
}

const SIGNING_SECRET = "whole-path-signing-secret";
const SLACK_API_URL = "https://slack.test/api/";
const BOT_TOKEN = "xoxb-whole-path";
const RESPONSE_URL_HOST = "hooks.slack.com";
/** The key a custom step's workflow token is sealed with, when the test env sets none (a test key: never a deployment's). */
const TOKEN_KEY = "7e57".repeat(16);
/** The model key a path's answers send (a test key). */
const MODEL_KEY = "sk-whole-path-model-key";
/** How many rounds of queued messages (follow-ups enqueue the next round) one request is carried through. */
const MAX_ROUNDS = 8;

let sequence = 0;
const unique = (prefix: string) => `${prefix}${Date.now().toString(36)}${(sequence++).toString(36)}`.toUpperCase();

/**
 * `env` is the project's test env (`import { env } from "cloudflare:workers"`), whose DB has the engine's
 * migrations applied. The Slack settings are the path's own (single-workspace, a test token and signing secret);
 * the app's settings are env's (and its TOKEN_ENCRYPTION_KEY, else a test key: a custom step's workflow token is
 * sealed with it).
 */
export function wholePath(app: SlackApp, env: Readonly<Record<string, unknown>>, options: WholePathOptions = {}): WholePath {
  const teamId = options.teamId ?? "T0TEAM";
  const all: EdgeCall[] = [];
  const streams = fakeSlackStreams({ now: Date.now });
  /** The methods Slack's side of streams answers here: the rest answer `{ ok: true }` (or the test's answer), as before. */
  const streamed = (method: string, params: Readonly<Record<string, unknown>>) =>
    (STREAMED_METHODS.has(method) ||
      (method === "chat.update" &&
        typeof params.channel === "string" &&
        typeof params.ts === "string" &&
        streams.message(params.channel, params.ts) !== undefined)) &&
    options.answers?.[method] === undefined;

  /** A request's own edge: the fake Slack recording into `calls`, then `hosts`, then `services`. */
  function edgeOf(calls: EdgeCall[]): typeof fetch {
    const record = (call: EdgeCall) => {
      calls.push(call);
      all.push(call);
    };
    const hosts: FakeHost[] = [
      {
        origin: new URL(SLACK_API_URL).origin,
        handle: async (request) => {
          const call = await webApiCallOf(request);
          record(call);
          if (streamed(call.method, call.params)) return Response.json(streams.answer(call.method, call.params));
          const answer = options.answers?.[call.method];
          return Response.json(typeof answer === "function" ? answer(call.params) : (answer ?? { ok: true }));
        },
      },
      {
        origin: `https://${RESPONSE_URL_HOST}`,
        handle: async (request) => {
          record({ method: "response_url", url: request.url, params: (parsed(await request.text()) ?? {}) as Record<string, unknown> });
          return new Response("ok", { headers: { "content-type": "text/plain" } });
        },
      },
      ...(options.model
        ? [{ origin: new URL(PATH_MODEL_URL).origin, handle: (request: Request) => (options.model as PathModel).fetch(request) }]
        : []),
      ...(options.hosts ?? []),
    ];
    return fakeEdge(hosts, async (request) => {
      const answered = await options.services?.(request);
      if (answered) return answered;
      throw new TypeError(`wholePath: no service answers ${request.method} ${new URL(request.url).origin} (options.services)`);
    });
  }

  async function run(body: string, contentType: string): Promise<PathResult> {
    const calls: EdgeCall[] = [];
    // The Workers as deployed, over this request's edge: two requests under way at once (of one path or two) each
    // see their own calls, and none reaches the network.
    const edge = edgeOf(calls);
    const ingressWorker = ingress(app, { edge });
    const consumerWorker = consumer(app, { edge });
    // Every waitUntil of the request (the first attempt at the ack), awaited before it goes on.
    const pending: Promise<unknown>[] = [];
    const settledContext = () =>
      ({ waitUntil: (work: Promise<unknown>) => void pending.push(work), passThroughOnException: () => {}, props: {} }) as never;
    const drain = async () => {
      while (pending.length > 0) await Promise.allSettled(pending.splice(0));
    };
    const queued: OutboxMessage[] = [];
    const queue = {
      send: async (message: OutboxMessage) => void queued.push(message),
      sendBatch: async (messages: Iterable<{ body: OutboxMessage }>) => {
        for (const message of messages) queued.push(message.body);
      },
    };
    const pathEnv = {
      ...env,
      OUTBOX_QUEUE: queue,
      SLACK_SIGNING_SECRET: SIGNING_SECRET,
      SLACK_SIGNING_SECRET_PREVIOUS: "",
      SLACK_BOT_TOKEN: BOT_TOKEN,
      SLACK_API_URL,
      SLACK_CLIENT_ID: "",
      TOKEN_ENCRYPTION_KEY:
        typeof env.TOKEN_ENCRYPTION_KEY === "string" && env.TOKEN_ENCRYPTION_KEY !== "" ? env.TOKEN_ENCRYPTION_KEY : TOKEN_KEY,
      ...(options.model ? { MODEL_URL: PATH_MODEL_URL, MODEL_NAME: "whole-path-model", MODEL_API_KEY: MODEL_KEY } : {}),
    } as never;
    const timestamp = Math.floor(Date.now() / 1000);
    const request = new Request("https://ingress.test/slack/events", {
      method: "POST",
      headers: {
        "content-type": contentType,
        "x-slack-request-timestamp": String(timestamp),
        "x-slack-signature": await signatureFor(SIGNING_SECRET, timestamp, body),
      },
      body,
    });
    const response = await ingressWorker.fetch(request as never, pathEnv, settledContext());
    const text = await response.clone().text();
    await drain();
    for (let round = 0; queued.length > 0 && round < MAX_ROUNDS; round++) {
      const messages = queued.splice(0);
      await consumerWorker.queue(batchOf(messages) as never, pathEnv, settledContext());
      await drain();
    }
    return { response, body: parsed(text), calls };
  }

  return {
    event: (event) =>
      run(
        JSON.stringify({
          token: "legacy-verification-token",
          team_id: teamId,
          api_app_id: "A0WHOLEPATH",
          type: "event_callback",
          event_id: unique("Ev"),
          event_time: Math.floor(Date.now() / 1000),
          event: { event_ts: (event as { ts?: unknown }).ts ?? `${Math.floor(Date.now() / 1000)}.000100`, ...event },
        }),
        "application/json",
      ),
    command: (command, fields = {}) =>
      run(
        new URLSearchParams({
          token: "legacy-verification-token",
          team_id: teamId,
          team_domain: "whole-path",
          channel_id: "C0PATH",
          channel_name: "path",
          user_id: "U0PATH",
          user_name: "path",
          command,
          text: "",
          api_app_id: "A0WHOLEPATH",
          response_url: `https://hooks.slack.com/commands/${teamId}/1/${unique("r")}`,
          trigger_id: unique("1.2."),
          ...fields,
        }).toString(),
        "application/x-www-form-urlencoded",
      ),
    interaction: (payload) =>
      run(
        new URLSearchParams({
          payload: JSON.stringify({ team: { id: teamId, domain: "whole-path" }, trigger_id: unique("1.3."), ...payload }),
        }).toString(),
        "application/x-www-form-urlencoded",
      ),
    request: run,
    payload: (payload) => run(payload.body, payload.contentType),
    calls: all,
    streams,
  };
}

/** The methods the path's Slack answers with its model of streams and assistant threads. */
const STREAMED_METHODS: ReadonlySet<string> = new Set(STREAMS_METHODS.filter((m) => m !== "chat.update" && m !== "chat.postMessage"));

/** A call to the fake Slack's Web API: its method and params. */
async function webApiCallOf(request: Request): Promise<EdgeCall> {
  const text = await request.text();
  const params: Record<string, unknown> = {};
  for (const [key, value] of new URLSearchParams(text)) params[key] = jsonOrText(value);
  return { method: request.url.slice(SLACK_API_URL.length), params };
}

/** Form values the client serialised from objects or arrays (blocks, view) read back as JSON; the rest stay text. */
function jsonOrText(value: string): unknown {
  if (!/^[[{]/.test(value)) return value;
  try {
    return JSON.parse(value);
  } catch {
    return value;
  }
}

function parsed(text: string): unknown {
  if (text === "") return "";
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** A queue batch as workerd hands one to the consumer: every message acked or retried is only noted. */
function batchOf(bodies: readonly OutboxMessage[]) {
  const now = new Date();
  const messages = bodies.map((body, index) => ({
    id: `whole-path-${index}`,
    timestamp: now,
    body,
    attempts: 1,
    ack: () => {},
    retry: () => {},
  }));
  return { queue: "ackbox-outbox", messages, ackAll: () => {}, retryAll: () => {} };
}
