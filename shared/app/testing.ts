/**
 * The test kit for app authors: the second module of the app's door (beside
 * shared/app/index.ts; the package's `ackbox/testing` once the engine is one).
 * It needs no test framework and nothing from the engine's own test/ folder:
 *
 *   runHandler(app, payload)        a Slack payload through the ingress's own parser
 *                                   and app.route: the ack, and the intents it would record
 *   runEffect(app, intent, net)     one attempt at an intent (your effect, a Slack method,
 *                                   a response_url) with the engine's own effect code,
 *                                   against a fake Slack and fake services
 *   runChain(app, intents, net)     every intent and its follow-ups, each retried as the
 *                                   consumer would (no waiting), and what each step did
 *   fakeSlack(), fakeService(url)   the network edge: they answer as Slack (ok:false
 *                                   errors, 429 with Retry-After) and as your service do,
 *                                   and record every call
 *   slashCommand(), mention(), message(), eventCallback(), buttonClick(),
 *   viewSubmission(), blockSuggestion(), functionExecuted(),
 *   assistantThreadStarted(), assistantMessage()
 *                                   payloads in Slack's own shapes (the fields Slack's
 *                                   docs and SDKs' samples show: envelopes with authorizations,
 *                                   every slash-command form field, block_actions with its
 *                                   container and message, view_submission with its state, a
 *                                   custom step's function_executed; a click or a submission
 *                                   inside a step with its function_data)
 *
 *   wholePath(app, env, …)          the whole path, inside workerd with the vitest plugin: a
 *                                   signed request through ingress(app) into D1, what it queued
 *                                   through consumer(app), the calls at a fake Slack
 *                                   (shared/app/whole-path.ts)
 *
 * runEffect and runChain perform intents in memory, with no D1 row, claim or
 * fence; wholePath is the one that runs the durable path.
 *
 * The fakes sit where the engine meets the network, and are handed to it: each
 * run builds the effect's context (EffectContext.edge: its Slack client, its
 * ctx.fetch, a response_url) — or wholePath its Workers, ingress(app, { edge })
 * and consumer(app, { edge }) — on a fetch that answers each host from its fake
 * (shared/app/network-edge.ts), so the engine's real Slack client and outbound
 * rules run unchanged. Nothing assigns globalThis.fetch: runs may overlap, each
 * fake sees only its own run's calls, and a host no fake serves is refused, never
 * sent to the network.
 */
import { toFailure } from "../delivery/failure.ts";
import { isCompleted } from "../effects/effect.ts";
import { DEFAULT_MAX_BODY_BYTES, guardedFetch } from "../effects/outbound.ts";
import { type IntendedEffect, MAX_FOLLOW_UP_DEPTH } from "../outbox/model.ts";
import { SETTINGS } from "../settings.ts";
import { type JsonObject, parseSlackBody } from "../slack/inputs.ts";
import { slackWebApi } from "../slack/web-api.ts";
import type { SlackApp } from "./app.ts";
import type { Intent } from "./intents.ts";
import { type FakeHost, fakeEdge } from "./network-edge.ts";
import { type AppSettings, parseAppSettings } from "./settings.ts";

/** An intended effect (what the engine records) as the intent it came from. */
const intentOf = (e: IntendedEffect): Intent => ({
  key: e.key,
  effect: e.effect,
  args: e.payload as JsonObject,
  ...(e.expiresAt === undefined ? {} : { expiresAt: e.expiresAt }),
  ...(e.name === undefined ? {} : { name: e.name }),
  ...(e.at === undefined ? {} : { at: e.at }),
  ...(e.afterMs === undefined ? {} : { after: e.afterMs / 1000 }),
});

// ── Payloads, as Slack sends them ────────────────────────────────────────────

/** A request body as Slack posts it to the Request URL. */
export interface SlackPayload {
  readonly contentType: "application/json" | "application/x-www-form-urlencoded";
  readonly body: string;
}

/** The workspace, app, user and channel the payloads happen in unless told otherwise. */
export const TEST_TEAM = "T0TEAM";
export const TEST_APP = "A0APP";
export const TEST_USER = "U0HUMAN";
export const TEST_CHANNEL = "C0CHANNEL";
/** The bot user the kit's Slack answers as (authorizations[0].user_id, a posted message's user). */
export const TEST_BOT_USER = "U0BOT";

let sequence = 0;
const next = () => ++sequence;
/** A message ts as Slack writes them (seconds.micro), unique within a run. */
export const newTs = (): string => `1764504000.${String(100_000 + (next() % 900_000)).padStart(6, "0")}`;
const newTrigger = () => `${13_345_224_609 + next()}.738474920.8088930838d88f008e0`;

interface Where {
  readonly team?: string;
  readonly user?: string;
  readonly channel?: string;
}

/** The custom step execution an interaction happens in (its function_data), as functionExecuted() made it. */
export interface InStep {
  readonly executionId: string;
  readonly callbackId: string;
  readonly inputs?: JsonObject;
  /** The workflow token Slack sends beside it (default: a fresh test one). */
  readonly token?: string;
}

/** A fresh custom step execution id, as Slack writes them (Fx…). */
export const newExecutionId = (): string => `Fx0KIT${next()}`;
/** A workflow token in its shape (xwfp-…), for a test: never a real one. */
export const newWorkflowToken = (): string => `xwfp-test-kit-${next()}-${"0".repeat(16)}`;

/** What an interaction inside a step carries: function_data and the workflow token. */
function stepFields(step: InStep | undefined): JsonObject {
  if (!step) return {};
  return {
    function_data: {
      execution_id: step.executionId,
      function: { callback_id: step.callbackId },
      inputs: step.inputs ?? {},
    },
    bot_access_token: step.token ?? newWorkflowToken(),
  };
}

/**
 * A custom step's execution (function_executed) in its envelope, as Slack sends it when a workflow runs the step:
 * the function's definition, its inputs, the execution ids and its workflow token.
 */
export function functionExecuted(f: {
  callbackId: string;
  inputs?: JsonObject;
  executionId?: string;
  workflowExecutionId?: string;
  token?: string;
  team?: string;
  eventId?: string;
}): SlackPayload {
  return eventCallback(
    {
      type: "function_executed",
      function: {
        id: `Fn0KIT${next()}`,
        callback_id: f.callbackId,
        title: f.callbackId,
        type: "app",
        input_parameters: [],
        output_parameters: [],
        app_id: TEST_APP,
        date_created: 1_764_500_000,
        date_updated: 1_764_500_000,
        date_deleted: 0,
      },
      inputs: f.inputs ?? {},
      function_execution_id: f.executionId ?? newExecutionId(),
      workflow_execution_id: f.workflowExecutionId ?? `Wx0KIT${next()}`,
      bot_access_token: f.token ?? newWorkflowToken(),
    },
    { team: f.team ?? TEST_TEAM, ...(f.eventId ? { eventId: f.eventId } : {}) },
  );
}

/** An Events API envelope around `event` (event_callback, with its authorizations as Slack sends them). */
export function eventCallback(
  event: JsonObject & { readonly type: string },
  options: { team?: string; eventId?: string } = {},
): SlackPayload {
  const team = options.team ?? TEST_TEAM;
  const eventId = options.eventId ?? `Ev0KIT${next()}`;
  const body = {
    token: "legacy-verification-token",
    team_id: team,
    api_app_id: TEST_APP,
    event: { event_ts: typeof event.ts === "string" ? event.ts : newTs(), ...event },
    type: "event_callback",
    event_id: eventId,
    event_time: 1_764_504_000,
    authorizations: [{ enterprise_id: null, team_id: team, user_id: TEST_BOT_USER, is_bot: true, is_enterprise_install: false }],
    is_ext_shared_channel: false,
    event_context: `4-${eventId}`,
  };
  return { contentType: "application/json", body: JSON.stringify(body) };
}

/** An app_mention event in its envelope. */
export function mention(f: Where & { text?: string; ts?: string; threadTs?: string } = {}): SlackPayload {
  const ts = f.ts ?? newTs();
  return eventCallback(
    {
      type: "app_mention",
      user: f.user ?? TEST_USER,
      text: f.text ?? `<@${TEST_BOT_USER}> hello`,
      ts,
      ...(f.threadTs ? { thread_ts: f.threadTs } : {}),
      team: f.team ?? TEST_TEAM,
      channel: f.channel ?? TEST_CHANNEL,
      blocks: [],
    },
    { team: f.team ?? TEST_TEAM },
  );
}

/** A user's plain message in a channel (message.channels), in its envelope. */
export function message(f: Where & { text?: string; ts?: string; threadTs?: string; channelType?: string } = {}): SlackPayload {
  return eventCallback(
    {
      type: "message",
      channel_type: f.channelType ?? "channel",
      user: f.user ?? TEST_USER,
      text: f.text ?? "hello",
      ts: f.ts ?? newTs(),
      ...(f.threadTs ? { thread_ts: f.threadTs } : {}),
      team: f.team ?? TEST_TEAM,
      channel: f.channel ?? TEST_CHANNEL,
    },
    { team: f.team ?? TEST_TEAM },
  );
}

/** The app's DM an assistant thread is in, unless told otherwise. */
export const TEST_DM = "D0KITDM";

/**
 * assistant_thread_started (a user opened the app's assistant pane), in its envelope: the thread (its DM and
 * thread_ts) and the context Slack sends (the channel the user looks at).
 */
export function assistantThreadStarted(
  f: { team?: string; user?: string; dm?: string; threadTs?: string; context?: JsonObject; type?: "assistant_thread_context_changed" } = {},
): SlackPayload {
  return eventCallback(
    {
      type: f.type ?? "assistant_thread_started",
      assistant_thread: {
        user_id: f.user ?? TEST_USER,
        context: f.context ?? { channel_id: TEST_CHANNEL, team_id: f.team ?? TEST_TEAM, enterprise_id: null },
        channel_id: f.dm ?? TEST_DM,
        thread_ts: f.threadTs ?? "1764504000.000001",
      },
    },
    { team: f.team ?? TEST_TEAM },
  );
}

/** A user's question in an assistant thread: a message in the app's DM (channel_type im), in the thread. */
export function assistantMessage(f: {
  text: string;
  team?: string;
  user?: string;
  dm?: string;
  threadTs?: string;
  ts?: string;
}): SlackPayload {
  const threadTs = f.threadTs ?? "1764504000.000001";
  return eventCallback(
    {
      type: "message",
      channel_type: "im",
      user: f.user ?? TEST_USER,
      text: f.text,
      ts: f.ts ?? newTs(),
      thread_ts: threadTs,
      parent_user_id: f.user ?? TEST_USER,
      team: f.team ?? TEST_TEAM,
      channel: f.dm ?? TEST_DM,
    },
    { team: f.team ?? TEST_TEAM },
  );
}

/** A slash command, form-encoded with every field Slack sends. */
export function slashCommand(f: Where & { command: string; text?: string; triggerId?: string; responseUrl?: string }): SlackPayload {
  const team = f.team ?? TEST_TEAM;
  const form = new URLSearchParams({
    token: "legacy-verification-token",
    team_id: team,
    team_domain: "kit",
    channel_id: f.channel ?? TEST_CHANNEL,
    channel_name: "general",
    user_id: f.user ?? TEST_USER,
    user_name: "ada",
    command: f.command,
    text: f.text ?? "",
    api_app_id: TEST_APP,
    is_enterprise_install: "false",
    response_url: f.responseUrl ?? `https://hooks.slack.com/commands/${team}/${next()}/kit`,
    trigger_id: f.triggerId ?? newTrigger(),
  });
  return { contentType: "application/x-www-form-urlencoded", body: form.toString() };
}

/** Any interactivity payload, form-encoded as `payload=<JSON>`. */
export function interaction(payload: JsonObject & { readonly type: string }): SlackPayload {
  return { contentType: "application/x-www-form-urlencoded", body: new URLSearchParams({ payload: JSON.stringify(payload) }).toString() };
}

const userOf = (f: Where) => ({ id: f.user ?? TEST_USER, username: "ada", name: "ada", team_id: f.team ?? TEST_TEAM });

/** A click on a button in a message (block_actions), the message it sits on included. */
export function buttonClick(
  f: Where & {
    actionId: string;
    value?: string;
    blockId?: string;
    messageTs?: string;
    /** The message the button sits on, as Slack echoes it (text, blocks, thread_ts…). */
    message?: JsonObject;
    triggerId?: string;
    /** The custom step execution whose message the button sits on: the click carries its function_data. */
    step?: InStep;
  },
): SlackPayload {
  const team = f.team ?? TEST_TEAM;
  const channel = f.channel ?? TEST_CHANNEL;
  const ts = f.messageTs ?? newTs();
  return interaction({
    ...stepFields(f.step),
    type: "block_actions",
    user: userOf(f),
    api_app_id: TEST_APP,
    token: "legacy-verification-token",
    container: { type: "message", message_ts: ts, channel_id: channel, is_ephemeral: false },
    trigger_id: f.triggerId ?? newTrigger(),
    team: { id: team, domain: "kit" },
    enterprise: null,
    is_enterprise_install: false,
    channel: { id: channel, name: "general" },
    message: { type: "message", user: TEST_BOT_USER, ts, bot_id: "B0BOT", text: "", ...f.message },
    state: { values: {} },
    response_url: `https://hooks.slack.com/actions/${team}/${next()}/kit`,
    actions: [
      {
        action_id: f.actionId,
        block_id: f.blockId ?? "actions",
        text: { type: "plain_text", text: f.actionId, emoji: true },
        ...(f.value === undefined ? {} : { value: f.value }),
        type: "button",
        action_ts: "1764504001.000000",
      },
    ],
  });
}

/** A modal submitted (view_submission), with its state as Slack sends it: values[block_id][action_id]. */
export function viewSubmission(
  f: Where & {
    callbackId: string;
    values?: JsonObject;
    privateMetadata?: string;
    viewId?: string;
    triggerId?: string;
    /** The custom step execution the modal was opened in: the submission carries its function_data. */
    step?: InStep;
  },
): SlackPayload {
  const team = f.team ?? TEST_TEAM;
  const viewId = f.viewId ?? `V0KIT${next()}`;
  return interaction({
    ...stepFields(f.step),
    type: "view_submission",
    team: { id: team, domain: "kit" },
    user: userOf(f),
    api_app_id: TEST_APP,
    token: "legacy-verification-token",
    trigger_id: f.triggerId ?? newTrigger(),
    view: {
      id: viewId,
      team_id: team,
      type: "modal",
      title: { type: "plain_text", text: "Modal" },
      blocks: [],
      callback_id: f.callbackId,
      private_metadata: f.privateMetadata ?? "",
      state: { values: f.values ?? {} },
      hash: `${next()}.kit`,
      app_id: TEST_APP,
      app_installed_team_id: team,
      bot_id: "B0BOT",
      previous_view_id: null,
      root_view_id: viewId,
    },
    response_urls: [],
    is_enterprise_install: false,
    enterprise: null,
  });
}

/** An external select's options request (block_suggestion). */
export function blockSuggestion(f: Where & { actionId: string; value: string; blockId?: string }): SlackPayload {
  return interaction({
    type: "block_suggestion",
    user: userOf(f),
    container: { type: "view", view_id: "V0KITHOME" },
    api_app_id: TEST_APP,
    token: "legacy-verification-token",
    action_id: f.actionId,
    block_id: f.blockId ?? "options",
    value: f.value,
    team: { id: f.team ?? TEST_TEAM, domain: "kit" },
  });
}

// ── Handlers ──────────────────────────────────────────────────────────────────

export interface HandlerRun {
  /** recorded: the ingress would write these intents (none: it answers and writes nothing); ignored: 200, nothing; refused: 500, nothing. */
  readonly outcome: "recorded" | "ignored" | "refused";
  /** Which handler decided (its label, as the log names it). */
  readonly handler?: string;
  /** The body of the 200 (a command's reply, a response_action, options). */
  readonly ack?: JsonObject;
  /** The modal the ingress would open with the trigger_id. */
  readonly openView?: JsonObject;
  readonly intents: readonly Intent[];
  /** The names it cancels (cancel(name)), in the same batch as its intents; absent when none. */
  readonly cancels?: readonly string[];
  /** Why it was ignored or refused. */
  readonly reason?: string;
}

export interface HandlerOptions {
  /** When the request was received (ms). */
  readonly now?: number;
  /** The app's own settings, as a deployment's vars and secrets give them (`{ NOTES_URL: "https://…" }`). */
  readonly settings?: Readonly<Record<string, string>>;
}

/**
 * The app's declared settings (shared/app/settings.ts) read from `raw` and checked as the Workers check them;
 * a declaration's default fills what is not given. A missing required one throws, naming it: the deployment
 * would answer 500.
 */
export function appSettingsFor(app: SlackApp, raw: Readonly<Record<string, string>> = {}): AppSettings {
  const parsed = parseAppSettings(app.declaredSettings, raw);
  if (!parsed.ok) throw new Error(`the app's settings are not usable: ${parsed.errors.join("; ")}`);
  return parsed.settings;
}

/**
 * A Slack payload through what the ingress does before its durable write: the
 * same parser, the same app.route. Throws on a body the ingress would refuse
 * as malformed (400): that is a mistake in the test, not an outcome.
 */
export function runHandler(app: SlackApp, payload: SlackPayload, options: HandlerOptions = {}): HandlerRun {
  const parsed = parseSlackBody(payload.contentType, payload.body);
  if (!parsed.ok) throw new Error(`not a payload the ingress accepts (it would answer 400): ${parsed.reason}`);
  const input = parsed.input;
  if (input.surface === "url_verification") return { outcome: "ignored", intents: [], reason: "url_verification" };
  if (input.surface === "unhandled") return { outcome: "ignored", intents: [], reason: `unhandled type ${input.type}` };
  const routing = app.route(input, { now: options.now ?? Date.now(), settings: appSettingsFor(app, options.settings) });
  if (routing.action !== "record")
    return { outcome: routing.action === "ignore" ? "ignored" : "refused", intents: [], reason: routing.reason };
  return {
    outcome: "recorded",
    handler: routing.handler,
    ...(routing.reply ? { ack: routing.reply } : {}),
    ...(routing.openView ? { openView: routing.openView.view } : {}),
    intents: routing.effects.map(intentOf),
    ...(routing.cancels ? { cancels: routing.cancels } : {}),
  };
}

export { type FakeModel, type FakeModelOptions, fakeModel, type ModelTurn, modelTurn } from "./fake-model.ts";
export type { FakeMessage, FakeSlackStreams, FakeThread } from "./fake-slack-streams.ts";
export type { FakeHost } from "./network-edge.ts";
export { type EdgeCall, type PathResult, type WholePath, type WholePathOptions, wholePath } from "./whole-path.ts";

// ── The network edge: a fake Slack and fake services ─────────────────────────

/** One scripted answer: Slack's (a JSON body on 200, or a status) or any service's. */
export type Answer =
  | { readonly status: number; readonly json?: unknown; readonly text?: string; readonly headers?: Readonly<Record<string, string>> }
  | { readonly network: "down" };

/** ok:true, with the fields given. */
export const slackOk = (fields: JsonObject = {}): Answer => ({ status: 200, json: { ok: true, ...fields } });
/** An ok:false answer, as Slack gives it: HTTP 200, { ok: false, error }. */
export const slackError = (error: string): Answer => ({ status: 200, json: { ok: false, error } });
/** HTTP 429 with Retry-After in seconds, as Slack rate limits. */
export const rateLimited = (retryAfterSeconds: number): Answer => ({
  status: 429,
  json: { ok: false, error: "ratelimited" },
  headers: { "retry-after": String(retryAfterSeconds) },
});
/** Any HTTP status, with an optional JSON body (a service's 503, its 200 with an answer). */
export const httpStatus = (status: number, json?: unknown): Answer => (json === undefined ? { status } : { status, json });
/** No answer at all (a dropped connection). */
export const networkDown = (): Answer => ({ network: "down" });

export interface SlackCall {
  readonly method: string;
  /** The arguments as the method got them (JSON-encoded form fields decoded back: blocks are arrays again). */
  readonly args: JsonObject;
  /** Whether the call carried a bot token (never the token itself). */
  readonly authorized: boolean;
  /** The HTTP status answered (0: no answer at all). */
  readonly status: number;
  /** The JSON the fake answered ({ ok, ts, … } or { ok: false, error }), if it answered JSON. */
  readonly reply: JsonObject | undefined;
}

export interface ServiceCall {
  readonly method: string;
  readonly url: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  /** The body parsed as JSON, or undefined. */
  readonly json: unknown;
  readonly text: string;
  /** The HTTP status answered (0: no answer at all). */
  readonly status: number;
}

/** The Slack Web API base the kit's Slack client calls. */
export const FAKE_SLACK_API = "https://slack.test/api/";
const RESPONSE_URL_HOST = "hooks.slack.com";

export interface FakeSlack {
  /** Answers for the next calls to `method` (or "response_url"), in order; after them, Slack's usual answer. */
  answer(method: string, ...answers: Answer[]): FakeSlack;
  readonly calls: readonly SlackCall[];
  callsTo(method: string): SlackCall[];
  /** Scripted answers no call used. */
  unused(): string[];
  /** @internal the kit's network edge */
  readonly handle: (request: Request) => Promise<Response>;
}

/**
 * Slack, answering as Slack does: ok:true with what the method returns
 * (chat.postMessage a new ts and the message; views.* a view id), and
 * ok:false where Slack refuses what it was sent — no channel
 * (channel_not_found), a message with neither text nor blocks (no_text), the
 * same reaction twice (already_reacted). A response_url answers "ok".
 * Scripted answers (slackError, rateLimited, httpStatus, networkDown) come first.
 */
export function fakeSlack(): FakeSlack {
  const scripts = new Map<string, Answer[]>();
  const calls: SlackCall[] = [];
  const reactions = new Set<string>();
  let ts = 0;

  const usual = (method: string, args: JsonObject): Answer => {
    const channel = typeof args.channel === "string" ? args.channel : undefined;
    switch (method) {
      case "chat.postMessage":
      case "chat.postEphemeral": {
        if (!channel) return slackError("channel_not_found");
        if (args.text === undefined && args.blocks === undefined && args.attachments === undefined) return slackError("no_text");
        const posted = `1764600000.${String(++ts).padStart(6, "0")}`;
        if (method === "chat.postEphemeral") return slackOk({ message_ts: posted });
        return slackOk({
          channel,
          ts: posted,
          message: { type: "message", user: TEST_BOT_USER, bot_id: "B0BOT", ts: posted, text: args.text ?? "", app_id: TEST_APP },
        });
      }
      case "chat.update":
        if (!channel) return slackError("channel_not_found");
        if (typeof args.ts !== "string") return slackError("message_not_found");
        return slackOk({ channel, ts: args.ts, text: args.text ?? "" });
      case "reactions.add": {
        if (!channel) return slackError("channel_not_found");
        const key = `${channel}:${String(args.timestamp)}:${String(args.name)}`;
        if (reactions.has(key)) return slackError("already_reacted");
        reactions.add(key);
        return slackOk();
      }
      case "views.open":
      case "views.publish":
      case "views.update":
      case "views.push":
        return slackOk({ view: { id: `V0KIT${++ts}` } });
      case "response_url":
        return { status: 200, text: "ok" };
      default:
        return slackOk();
    }
  };

  const fake: FakeSlack = {
    answer(method, ...answers) {
      scripts.set(method, [...(scripts.get(method) ?? []), ...answers]);
      return fake;
    },
    calls,
    callsTo: (method) => calls.filter((c) => c.method === method),
    unused: () => [...scripts.entries()].flatMap(([method, answers]) => answers.map(() => method)),
    async handle(request) {
      const url = new URL(request.url);
      const isResponseUrl = url.hostname === RESPONSE_URL_HOST;
      const method = isResponseUrl ? "response_url" : request.url.slice(FAKE_SLACK_API.length);
      const text = new TextDecoder().decode(await request.arrayBuffer());
      const args = isResponseUrl ? ((safeJson(text) as JsonObject | undefined) ?? {}) : formArgs(text);
      const answer = scripts.get(method)?.shift() ?? usual(method, args);
      const reply = "json" in answer && answer.json !== null && typeof answer.json === "object" ? (answer.json as JsonObject) : undefined;
      calls.push({
        method,
        args,
        authorized: request.headers.get("authorization")?.startsWith("Bearer ") === true,
        status: "status" in answer ? answer.status : 0,
        reply,
      });
      return responseOf(answer);
    },
  };
  return fake;
}

export interface FakeService extends FakeHost {
  /** Answers for the next requests, in order; after them, `otherwise` (default 404). */
  answer(...answers: Answer[]): FakeService;
  /** The answer once the scripted ones are used (default HTTP 404). */
  otherwise(answer: Answer): FakeService;
  readonly calls: readonly ServiceCall[];
  unused(): number;
}

/** An outside service at `origin` (e.g. "https://standup.example"): scripted answers, every request recorded. */
export function fakeService(origin: string): FakeService {
  const parsed = new URL(origin);
  const scripted: Answer[] = [];
  let fallback: Answer = { status: 404, json: { error: "not scripted in the test" } };
  const calls: ServiceCall[] = [];
  const service: FakeService = {
    origin: parsed.origin,
    answer(...answers) {
      scripted.push(...answers);
      return service;
    },
    otherwise(answer) {
      fallback = answer;
      return service;
    },
    calls,
    unused: () => scripted.length,
    async handle(request) {
      const text = new TextDecoder().decode(await request.arrayBuffer());
      const answer = scripted.shift() ?? fallback;
      const url = new URL(request.url);
      calls.push({
        method: request.method,
        url: request.url,
        path: url.pathname + url.search,
        headers: Object.fromEntries(request.headers),
        json: safeJson(text),
        text,
        status: "status" in answer ? answer.status : 0,
      });
      return responseOf(answer);
    },
  };
  return service;
}

// ── Effects ──────────────────────────────────────────────────────────────────

export interface Network {
  readonly slack: FakeSlack;
  /** The app's outside services, each answering its origin: fakeService(origin), or any other fake of a host. */
  readonly services?: readonly FakeHost[];
}

export interface EffectRunOptions extends Network {
  /** The row's idempotency key (default: the intent's key). */
  readonly idempotencyKey?: string;
  /** 1 for the first attempt. */
  readonly attempt?: number;
  /** Per-attempt timeout (default: the effect's own, else 5 s). */
  readonly timeoutMs?: number;
  /** The app's own settings, secrets included, as a deployment gives them (see HandlerOptions). */
  readonly settings?: Readonly<Record<string, string>>;
}

/** One attempt, as the consumer would record it. */
export type EffectRun =
  | {
      readonly outcome: "done";
      readonly result: unknown;
      readonly followUps: readonly Intent[];
      /** The names it cancels with its completion, absent when none (runChain does not apply them: wholePath runs the durable path). */
      readonly cancels?: readonly string[];
    }
  /** A transient failure or a 429: retried (a 429 after retryAfterMs, and it spends no attempt). */
  | { readonly outcome: "retry"; readonly error: string; readonly retryAfterMs?: number }
  /** A failure a retry cannot cure: the row is parked dead. */
  | { readonly outcome: "park"; readonly error: string };

/**
 * One attempt at `intent` with the engine's own code for it (your effect,
 * any Slack method with its semantics table, a response_url), its network
 * answered by the fakes.
 */
export async function runEffect(app: SlackApp, intent: Intent, options: EffectRunOptions): Promise<EffectRun> {
  const definition = app.effects.get(intent.effect);
  if (!definition) return { outcome: "park", error: `no effect named ${JSON.stringify(intent.effect)}: a row naming it would park` };
  const timeoutMs = options.timeoutMs ?? definition.timeoutMs ?? 5000;
  const appSettings = appSettingsFor(app, options.settings); // a missing setting is the test's mistake: thrown
  return withNetwork(options, async (edge) => {
    try {
      const result = await definition.perform(intent.args, {
        appSettings,
        slack: slackWebApi("xoxb-test-kit", FAKE_SLACK_API, edge),
        responseUrlHosts: [RESPONSE_URL_HOST],
        timeoutMs,
        fetch: guardedFetch({ hosts: ["*"], timeoutMs, maxBodyBytes: DEFAULT_MAX_BODY_BYTES }, "fetch", edge),
        edge,
        idempotencyKey: options.idempotencyKey ?? intent.key,
        attempt: options.attempt ?? 1,
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (!isCompleted(result)) return { outcome: "done", result: result ?? null, followUps: [] };
      return {
        outcome: "done",
        result: result.result ?? null,
        followUps: result.followUps.map(intentOf),
        ...(result.cancels.length > 0 ? { cancels: result.cancels } : {}),
      };
    } catch (error) {
      const failure = toFailure(error);
      if (failure.kind === "fatal") return { outcome: "park", error: failure.message };
      if (failure.kind === "rate_limited") return { outcome: "retry", error: failure.message, retryAfterMs: failure.retryAfterMs };
      return { outcome: "retry", error: failure.message };
    }
  });
}

export interface ChainStep {
  /** The row's idempotency key: a follow-up's is `<parent's key>><its key>`. */
  readonly key: string;
  readonly effect: string;
  readonly args: JsonObject;
  /** 1 + its parent's depth; the intents given are depth 0. */
  readonly depth: number;
  /** Every attempt, in order. */
  readonly attempts: readonly EffectRun[];
  /** done, or dead (parked, or its attempts spent). */
  readonly status: "done" | "dead";
}

const DEFAULT_MAX_ATTEMPTS = Number(SETTINGS.find((s) => s.name === "MAX_ATTEMPTS")?.default ?? "8");
/** 429s one step may meet before the kit stops (the engine bounds them by wall-clock time instead). */
const MAX_RATE_LIMITED = 20;

/**
 * Every intent and its follow-ups, as the consumer would perform them: each
 * step retried at once (the kit does not wait out backoff or Retry-After; a
 * 429 spends no attempt) until done, parked, or its attempts spent
 * (the effect's maxAttempts, else MAX_ATTEMPTS's default); follow-ups after
 * their parent, keyed from its key.
 */
export async function runChain(
  app: SlackApp,
  intents: readonly Intent[],
  network: Network & { readonly keyPrefix?: string; readonly settings?: Readonly<Record<string, string>> },
): Promise<ChainStep[]> {
  const steps: ChainStep[] = [];
  const queue = intents.map((intent) => ({ intent, key: `${network.keyPrefix ?? "kit"}:${intent.key}`, depth: 0 }));
  for (let item = queue.shift(); item; item = queue.shift()) {
    const { intent, key, depth } = item;
    const limit = Math.min(app.effects.get(intent.effect)?.maxAttempts ?? DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_ATTEMPTS);
    const attempts: EffectRun[] = [];
    let counted = 0;
    let last: EffectRun | undefined;
    while (counted < limit && attempts.length < limit + MAX_RATE_LIMITED) {
      last = await runEffect(app, intent, { ...network, idempotencyKey: key, attempt: counted + 1 });
      attempts.push(last);
      if (last.outcome !== "retry") break;
      if (last.retryAfterMs === undefined) counted += 1;
    }
    if (last?.outcome === "done" && last.followUps.length > 0 && depth >= MAX_FOLLOW_UP_DEPTH) {
      last = { outcome: "park", error: `${intent.effect}: follow-ups at depth ${depth}, the limit` };
      attempts.push(last);
    }
    steps.push({ key, effect: intent.effect, args: intent.args, depth, attempts, status: last?.outcome === "done" ? "done" : "dead" });
    if (last?.outcome === "done")
      queue.push(...last.followUps.map((followUp) => ({ intent: followUp, key: `${key}>${followUp.key}`, depth: depth + 1 })));
  }
  return steps;
}

/**
 * Runs with the network's own edge (the effect's context is built on it, nothing else): Slack's Web API and
 * response_urls to the fake Slack, each service's origin to its fake, any other host refused as a connection
 * nobody answers.
 */
async function withNetwork<T>(network: Network, run: (edge: typeof fetch) => Promise<T>): Promise<T> {
  const hosts: FakeHost[] = [
    { origin: new URL(FAKE_SLACK_API).origin, handle: (request) => network.slack.handle(request) },
    { origin: `https://${RESPONSE_URL_HOST}`, handle: (request) => network.slack.handle(request) },
    ...(network.services ?? []),
  ];
  const edge = fakeEdge(hosts, async (request) => {
    const origin = new URL(request.url).origin;
    throw new TypeError(`no fake answers ${origin}: pass fakeService(${JSON.stringify(origin)}) in services`);
  });
  return run(edge);
}

function responseOf(answer: Answer): Response {
  if ("network" in answer) throw new TypeError("Network connection lost.");
  const headers = new Headers(answer.headers);
  let body: string | null = null;
  if (answer.json !== undefined) {
    body = JSON.stringify(answer.json);
    if (!headers.has("content-type")) headers.set("content-type", "application/json; charset=utf-8");
  } else if (answer.text !== undefined) {
    body = answer.text;
    if (!headers.has("content-type")) headers.set("content-type", "text/plain");
  }
  return new Response(answer.status === 204 ? null : body, { status: answer.status, headers });
}

/** A form as a method's arguments: fields that carry JSON (blocks, view, metadata) decoded back. */
function formArgs(text: string): JsonObject {
  const args: Record<string, unknown> = {};
  for (const [key, value] of new URLSearchParams(text)) {
    const decoded = value.startsWith("{") || value.startsWith("[") ? safeJson(value) : undefined;
    args[key] = decoded ?? value;
  }
  return args;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
