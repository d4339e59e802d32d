/**
 * The app API: handlers registered per Slack surface, matched the way Slack
 * apps match (Bolt, slack-edge), and the one rule that stays: a handler
 * decides, it does not do. It returns intents (shared/app/intents.ts); the
 * pipeline records them before the ack and performs them after, at least once.
 *
 *   const app = createApp();
 *   app.event("app_mention", ({ payload }) => [slack("chat.postMessage", { channel: payload.channel, text: "hi" })]);
 *
 * Matching: handlers are tried in the order they were registered, and the
 * FIRST one whose matcher matches handles the input — nothing else runs,
 * whatever it returns. An input no handler matches is ignored: 200, nothing
 * written. Register specific handlers before catch-alls: a handler that an
 * earlier one would always take the input from (command("/standup") after
 * command(/^\//), message("deploy") after message(), the same action_id
 * twice) is refused when it is registered, naming the one before it — a
 * catch-all is an explicit choice, never a silent trap. (Only a string
 * pattern can be known to be covered; a RegExp registered after a catch-all
 * is the author's to order.)
 *
 * A handler gets { payload, body } (payload: the event, command, action,
 * view, shortcut or options request it matched; body: the whole envelope)
 * and a context, and returns an array of intents, or { intents, ack,
 * openView }, or nothing. It must not do I/O: the one exception Slack forces
 * (a modal within 3 s of its trigger_id) is `openView`, which the ingress
 * opens inline after the durable write. A handler that throws answers 500
 * (Slack retries) and the log names it.
 */
import type { AppHomeOpenedEvent, AppMentionEvent, GenericMessageEvent, SlackEvent as TypedEvent } from "@slack/types";
import { ANSWER_EFFECT, type ThreadRecord } from "../assistant/thread.ts";
import type { EffectDefinition } from "../effects/effect.ts";
import { type EffectRegistry, effectRegistry } from "../effects/registry.ts";
import type { IntendedEffect } from "../outbox/model.ts";
import { isObject, type JsonObject, present, type RecordableInput, type SlashCommand } from "../slack/inputs.ts";
import { isSlackMethodName } from "../slack/methods.ts";
import { MAX_WAIT_MINUTES, stepOf, withoutToken } from "../steps/execution.ts";
import {
  ASSISTANT_EVENT_OF,
  ASSISTANT_METHODS,
  ASSISTANT_SETTINGS,
  type AssistantKind,
  type AssistantThread,
  assistantRecords,
  assistantThread,
  isAssistantQuestion,
  threadOf,
} from "./assistant.ts";
import { type AppEffect, toDefinition } from "./effects.ts";
import { type AnyIntent, checkIntents } from "./intents.ts";
import { type AppSettings, mergeDeclarations, type NoSettings, type PublicSettingValues, type SettingsDeclaration } from "./settings.ts";
import {
  type FunctionDefinition,
  type FunctionExecutedPayload,
  type FunctionParameter,
  STEP_METHODS,
  type Step,
  stepContextOf,
  stepRouting,
  type ValuesOf,
} from "./steps.ts";

export type { FunctionDefinition, FunctionParameter };

export interface HandlerContext<V = NoSettings> {
  readonly teamId: string | undefined;
  readonly enterpriseId: string | undefined;
  readonly userId: string | undefined;
  readonly channelId: string | undefined;
  /** When the request was received (ms): use it, never a clock of your own. */
  readonly now: number;
  /** The app's declared settings (app.settings), typed by kind; never its secrets, which only effects get. */
  readonly settings: V;
  /**
   * The custom step execution the input belongs to (function_executed, or an interaction on something the step
   * posted, which carries function_data): its id, its inputs, complete() and fail(). Absent for any other input.
   */
  readonly step?: Step;
  /** The assistant thread the input is in (app.assistant's handlers): its status, prompts, title, a message, the answer. */
  readonly thread?: AssistantThread;
}

export interface Handled {
  /** Rows to record (slack, run, respondTo) and cancels (cancel), in the ack's one batch. */
  readonly intents?: readonly AnyIntent[];
  /** JSON body of the 200: a command's reply, a view's response_action, an options list. */
  readonly ack?: JsonObject;
  /** A modal to open with this input's trigger_id, inline, best effort. */
  readonly openView?: JsonObject;
}

export type HandlerResult = Handled | readonly AnyIntent[] | undefined;
export type Handler<P, B = JsonObject, V = NoSettings> = (
  input: { readonly payload: P; readonly body: B },
  context: HandlerContext<V>,
) => HandlerResult;

/**
 * A custom step's handler (app.function): its function_executed (without the workflow token), its inputs typed
 * by the definition, and `step` with complete() typed by its outputs. Returns intents with the completion, or no
 * completion yet: the step then waits for a user (shared/app/steps.ts).
 */
export type StepHandler<D extends FunctionDefinition, V = NoSettings> = (
  input: { readonly payload: FunctionExecutedPayload; readonly body: JsonObject; readonly inputs: ValuesOf<D["inputs"]> },
  context: HandlerContext<V> & { readonly step: Step<ValuesOf<D["outputs"]>> },
) => HandlerResult;

/** An assistant handler (app.assistant): its input, and `thread` to act in. */
export type AssistantHandler<P, V = NoSettings> = (
  input: { readonly payload: P; readonly body: JsonObject },
  context: HandlerContext<V> & { readonly thread: AssistantThread },
) => HandlerResult;

/** assistant_thread_started and assistant_thread_context_changed, as Slack sends them. */
export interface AssistantThreadEvent extends JsonObject {
  readonly type: "assistant_thread_started" | "assistant_thread_context_changed";
  readonly assistant_thread: {
    readonly user_id: string;
    readonly channel_id: string;
    readonly thread_ts: string;
    readonly context: JsonObject;
  };
  readonly event_ts: string;
}

/** An AI assistant: its view in Slack (the manifest's), and its handlers (shared/app/assistant.ts). */
export interface AssistantDefinition<V = NoSettings> {
  /** Shown in the assistant's view (the manifest's assistant_description); default "<app> assistant". */
  readonly description?: string;
  /** Offered in a new thread (the manifest's, and set in each new thread unless threadStarted answers it). */
  readonly suggestedPrompts?: readonly { readonly title: string; readonly message: string }[];
  /** A user opened a thread (assistant_thread_started). Default: the suggested prompts, if any. */
  readonly threadStarted?: AssistantHandler<AssistantThreadEvent, V>;
  /** The user looks at another channel (assistant_thread_context_changed); the engine keeps the context either way. */
  readonly threadContextChanged?: AssistantHandler<AssistantThreadEvent, V>;
  /** A user's message in the thread: typically `[thread.answer()]`. */
  readonly userMessage: AssistantHandler<GenericMessageEvent, V>;
}

/** Events by type, typed by @slack/types where it knows the type. */
export type EventOf<T extends string> = T extends TypedEvent["type"] ? Extract<TypedEvent, { type: T }> : JsonObject & { type: T };

/** An element of a block_actions payload (@slack/types has no interactivity payloads; these are the fields Slack documents). */
export interface BlockAction extends JsonObject {
  readonly type: string;
  readonly action_id: string;
  readonly block_id: string;
  readonly value?: string;
  readonly action_ts?: string;
}

export interface BlockActionsBody extends JsonObject {
  readonly type: "block_actions";
  readonly user: { readonly id: string; readonly [key: string]: unknown };
  readonly actions: readonly BlockAction[];
  readonly container?: JsonObject;
  readonly channel?: JsonObject;
  readonly message?: JsonObject;
  readonly view?: JsonObject;
  readonly trigger_id?: string;
  readonly response_url?: string;
}

/** A view as Slack sends it back: the definition plus its id, hash and the submitted state. */
export interface SubmittedView extends JsonObject {
  readonly id: string;
  readonly callback_id: string;
  readonly hash?: string;
  readonly private_metadata?: string;
  readonly state?: { readonly values: Readonly<Record<string, Readonly<Record<string, JsonObject>>>> };
}

export interface OptionsRequest extends JsonObject {
  readonly action_id: string;
  readonly block_id: string;
  readonly value: string;
}

export type Pattern = string | RegExp;

/** The conversations a message handler hears, by their event subscription (message.channels, message.im, …). */
export type MessageChannelType = "channels" | "groups" | "im" | "mpim";
const CHANNEL_TYPE_OF: Readonly<Record<MessageChannelType, string>> = { channels: "channel", groups: "group", im: "im", mpim: "mpim" };
const ALL_CHANNEL_TYPES = Object.keys(CHANNEL_TYPE_OF) as MessageChannelType[];
/** What a message handler that names none hears, and what the manifest subscribes for it: public channels. */
export const DEFAULT_MESSAGE_CHANNEL_TYPES: readonly MessageChannelType[] = ["channels"];

/** The conversations a registration hears: those it names, else a message handler's default; undefined for any other. */
function channelTypesOf(registration: Registration): readonly MessageChannelType[] | undefined {
  if (registration.hint.channelTypes) return registration.hint.channelTypes;
  const isMessage = registration.messageText !== undefined || (registration.surface === "event" && registration.pattern === "message");
  return isMessage ? DEFAULT_MESSAGE_CHANNEL_TYPES : undefined;
}

/** Manifest facts a matcher cannot carry: a description, or the names behind a RegExp. */
export interface ManifestHint {
  readonly description?: string;
  /**
   * For message() and event("message"): the conversations it hears (default: public channels only). The
   * manifest subscribes message.<type> for each, with its scope, and the handler matches only those events.
   */
  readonly channelTypes?: readonly MessageChannelType[];
  /** For function(): the custom step's definition and callback_id, as the manifest declares it. */
  readonly function?: FunctionDefinition & { readonly callbackId: string };
  /** For command(RegExp): the commands to declare in the manifest. */
  readonly names?: readonly string[];
  /** For shortcut(): its name in Slack's menus. */
  readonly title?: string;
  /** For command(): the hint Slack shows after the name. */
  readonly usageHint?: string;
}

/** What the manifest asks for beyond what the registrations imply (app.manifest). */
export interface ManifestExtras {
  /** Bot scopes the app needs that no declared method, event or command implies. */
  readonly scopes?: readonly string[];
  /** The app is an AI assistant (Slack's assistant_view): its description, and prompts offered in a new thread. */
  readonly assistant?: {
    readonly description: string;
    readonly suggestedPrompts?: readonly { readonly title: string; readonly message: string }[];
  };
}

export type Surface = "event" | "command" | "action" | "view_submission" | "view_closed" | "shortcut" | "message_shortcut" | "options";

interface Registration {
  readonly surface: Surface;
  /** The value matched: event type, command, action_id/block_id, callback_id. */
  readonly pattern: Pattern | undefined;
  /** For message(): the event is a user's message whose text matches. */
  readonly messageText?: Pattern | undefined;
  /** For function(): the function_executed event is this custom step's (its function.callback_id). */
  readonly functionId?: string;
  /** For assistant(): which of its inputs (a question is a message in the app's DM thread: isAssistantQuestion). */
  readonly assistant?: AssistantKind;
  readonly label: string;
  readonly hint: ManifestHint;
  readonly handler: Handler<never, never>;
}

/** What the ingress does with one input (workers/ingress/ack.ts). */
export type Routing =
  | { readonly action: "ignore"; readonly reason: string }
  | {
      readonly action: "record";
      /** Empty, with no cancels: answer (reply, modal) but write nothing. */
      readonly effects: readonly IntendedEffect[];
      /** Names of the input's workspace's rows to cancel in the same batch (shared/outbox/cancel-named.ts). */
      readonly cancels?: readonly string[];
      /** An assistant's thread records written in the same batch (shared/assistant/records.ts): context, turns, stops. */
      readonly records?: readonly ThreadRecord[];
      readonly reply?: JsonObject;
      readonly openView?: { readonly triggerId: string; readonly view: JsonObject };
      /** Which handler decided, for the log. */
      readonly handler: string;
    }
  | { readonly action: "refuse"; readonly reason: string };

export interface RouteContext {
  readonly now: number;
  /** The app's settings as this deployment parsed them (shared/app/settings.ts): handlers get their public part. */
  readonly settings: AppSettings;
}

/** The narrow interface the ingress and the consumer consume an app through. */
export interface SlackApp {
  route(input: RecordableInput, context: RouteContext): Routing;
  readonly effects: EffectRegistry;
  /** The settings the app declared, its effects' included: the Workers parse them at start (shared/app/settings.ts). */
  readonly declaredSettings: SettingsDeclaration;
}

/** An app; `V` is what its handlers read in ctx.settings, grown by each app.settings(...). */
export interface App<V extends object = NoSettings> extends SlackApp {
  /**
   * Declares settings of the app's own (shared/app/settings.ts): read from `.dev.vars`, the environment or
   * `[vars]`/secrets, checked at start, and handed to the handlers registered after this (typed) and to effects.
   */
  settings<const D extends SettingsDeclaration>(declared: D): App<V & PublicSettingValues<D>>;
  /** An Events API event of this type (any subtype, bots included for message). */
  event<T extends string>(type: T, handler: Handler<EventOf<T>, JsonObject, V>, hint?: ManifestHint): App<V>;
  /** A user's plain message (no subtype, not a bot's): any, or whose text contains the string / matches the RegExp. */
  message(pattern: Pattern | undefined, handler: Handler<GenericMessageEvent, JsonObject, V>, hint?: ManifestHint): App<V>;
  /** A slash command by name ("/ask"), or every command a RegExp matches. */
  command(name: Pattern, handler: Handler<SlashCommand, JsonObject, V>, hint?: ManifestHint): App<V>;
  /** A block_actions element, by action_id or block_id. */
  action(id: Pattern, handler: Handler<BlockAction, BlockActionsBody, V>): App<V>;
  /** A view submission by callback_id. */
  view(callbackId: Pattern, handler: Handler<SubmittedView, JsonObject, V>): App<V>;
  /** A view closed (notify_on_close) by callback_id. */
  viewClosed(callbackId: Pattern, handler: Handler<SubmittedView, JsonObject, V>): App<V>;
  /** A global shortcut by callback_id. */
  shortcut(callbackId: Pattern, handler: Handler<JsonObject, JsonObject, V>, hint?: ManifestHint): App<V>;
  /** A message shortcut by callback_id. */
  messageShortcut(callbackId: Pattern, handler: Handler<JsonObject, JsonObject, V>, hint?: ManifestHint): App<V>;
  /** A block_suggestion (external select options) by action_id: answer { ack: { options } }, inline. */
  options(actionId: Pattern, handler: Handler<OptionsRequest, JsonObject, V>): App<V>;
  /**
   * A Workflow Builder custom step: its function_executed events, by callback_id. The manifest declares it with
   * its parameters and the settings a step needs; the handler gets its typed inputs and returns intents with
   * `step.complete(outputs)` or `step.fail(message)` — or neither, and the step waits for a user: an action or view
   * handler of the same execution (ctx.step) completes it, or its deadline does (shared/app/steps.ts).
   */
  function<const D extends FunctionDefinition>(callbackId: string, definition: D, handler: StepHandler<D, V>): App<V>;
  /**
   * An AI assistant (Slack's assistant threads): handlers in Bolt's shape, each given `thread`; `thread.answer()`
   * streams the model's answer (MODEL_URL, MODEL_API_KEY, MODEL_NAME, declared here) once and complete. The manifest
   * declares the assistant's view, events and scopes from this alone (shared/app/assistant.ts).
   */
  assistant(
    definition: AssistantDefinition<V & PublicSettingValues<typeof ASSISTANT_SETTINGS>>,
  ): App<V & PublicSettingValues<typeof ASSISTANT_SETTINGS>>;
  /** Declares what the manifest needs beyond the registrations: extra bot scopes, the assistant view. */
  manifest(extras: ManifestExtras): App<V>;
  /** What app.manifest declared, merged. */
  readonly manifestExtras: ManifestExtras;
  /** Registers an effect of the app's own, so intents may name it; the settings it declares become the app's. */
  effect(effect: AppEffect): App<V>;
  /**
   * Declares Slack methods the handlers' intents call. An intent naming an
   * undeclared method is refused; the manifest asks for the declared methods' scopes.
   */
  uses(...methods: string[]): App<V>;
  /** Every Slack method the app may call: declared with uses, and by its effects' slackMethods. */
  readonly slackMethods: readonly string[];
  /** What is registered, in order (the manifest reads it). */
  readonly registrations: readonly Readonly<Pick<Registration, "surface" | "pattern" | "label" | "hint">>[];
  readonly appEffects: readonly AppEffect[];
}

export type { AppHomeOpenedEvent, AppMentionEvent, GenericMessageEvent };

export function createApp(): App {
  const registrations: Registration[] = [];
  // Replaced, never mutated: the Workers cache what they parsed per declaration object.
  let declaredSettings: SettingsDeclaration = {};
  let extras: ManifestExtras = {};
  const ownEffects = new Map<string, AppEffect>();
  const definitions: EffectDefinition[] = [];
  const declared = new Set<string>();
  /** Effects the engine brings for what the app registered (the assistant's answer). */
  const engineEffects = new Set<string>();
  const checks = {
    isAppEffect: (name: string) => ownEffects.has(name) || engineEffects.has(name),
    usesMethod: (method: string) => declared.has(method) || [...ownEffects.values()].some((e) => e.options.slackMethods?.includes(method)),
  };
  let registry = effectRegistry(definitions);

  const add = (registration: Registration): App => {
    const before = registrations.find((earlier) => covers(earlier, registration));
    if (before) {
      throw new Error(
        `${registration.label} would never run: ${before.label}, registered before it, takes every input it matches (first match wins). Register ${registration.label} before ${before.label}.`,
      );
    }
    registrations.push(registration);
    return app;
  };
  const label = (surface: string, pattern: Pattern | undefined) => `${surface}(${pattern === undefined ? "" : String(pattern)})`;

  const app: App = {
    settings(declared) {
      declaredSettings = mergeDeclarations(declaredSettings, declared);
      // The same object, its handlers' settings type grown: the values are the route's (context.settings.public).
      return app as never;
    },
    get declaredSettings() {
      return declaredSettings;
    },
    event: (type, handler, hint = {}) =>
      add({ surface: "event", pattern: type, label: label("event", type), hint, handler: handler as Handler<never, never> }),
    message: (pattern, handler, hint = {}) =>
      add({
        surface: "event",
        pattern: "message",
        messageText: pattern ?? "",
        label: label("message", pattern),
        hint,
        handler: handler as Handler<never, never>,
      }),
    command: (name, handler, hint = {}) =>
      add({ surface: "command", pattern: name, label: label("command", name), hint, handler: handler as Handler<never, never> }),
    action: (id, handler) =>
      add({ surface: "action", pattern: id, label: label("action", id), hint: {}, handler: handler as Handler<never, never> }),
    view: (id, handler) =>
      add({ surface: "view_submission", pattern: id, label: label("view", id), hint: {}, handler: handler as Handler<never, never> }),
    viewClosed: (id, handler) =>
      add({ surface: "view_closed", pattern: id, label: label("viewClosed", id), hint: {}, handler: handler as Handler<never, never> }),
    shortcut: (id, handler, hint = {}) =>
      add({ surface: "shortcut", pattern: id, label: label("shortcut", id), hint, handler: handler as Handler<never, never> }),
    messageShortcut: (id, handler, hint = {}) =>
      add({
        surface: "message_shortcut",
        pattern: id,
        label: label("messageShortcut", id),
        hint,
        handler: handler as Handler<never, never>,
      }),
    options: (id, handler) =>
      add({ surface: "options", pattern: id, label: label("options", id), hint: {}, handler: handler as Handler<never, never> }),
    function: (callbackId, definition, handler) => {
      if (registrations.some((r) => r.functionId === callbackId)) throw new Error(`function ${callbackId} is registered twice`);
      const wait = definition.waitMinutes;
      if (wait !== undefined && !(Number.isInteger(wait) && wait >= 1 && wait <= MAX_WAIT_MINUTES)) {
        throw new Error(
          `function ${callbackId}: waitMinutes must be a whole number from 1 to ${MAX_WAIT_MINUTES} (its workflow token lives 15 minutes)`,
        );
      }
      // Its completion's methods: declared for it, as app.uses would.
      for (const method of STEP_METHODS) declared.add(method);
      return add({
        surface: "event",
        pattern: "function_executed",
        functionId: callbackId,
        label: label("function", callbackId),
        hint: { function: { ...definition, callbackId } },
        handler: handler as unknown as Handler<never, never>,
      });
    },
    assistant(definition) {
      if (registrations.some((r) => r.assistant !== undefined)) throw new Error("the assistant is registered twice");
      if (typeof definition.userMessage !== "function")
        throw new Error("app.assistant needs userMessage: the handler of a user's question");
      declaredSettings = mergeDeclarations(declaredSettings, ASSISTANT_SETTINGS);
      for (const method of ASSISTANT_METHODS) declared.add(method);
      // Its answers are the engine's effect (shared/assistant/answer.ts), which the consumer brings: the app names it.
      engineEffects.add(ANSWER_EFFECT);
      const prompts = definition.suggestedPrompts ?? [];
      if (prompts.length > 4) throw new Error("app.assistant: Slack offers at most four suggested prompts");
      app.manifest({ assistant: { description: definition.description ?? "", suggestedPrompts: prompts } });
      const started: AssistantHandler<AssistantThreadEvent, never> =
        definition.threadStarted ?? ((_input, { thread }) => (prompts.length > 0 ? [thread.setSuggestedPrompts(prompts)] : []));
      const handlers: Record<AssistantKind, AssistantHandler<never, never> | undefined> = {
        started: started as AssistantHandler<never, never>,
        context: definition.threadContextChanged as AssistantHandler<never, never> | undefined,
        message: definition.userMessage as AssistantHandler<never, never>,
        stopped: undefined,
      };
      for (const kind of ["started", "context", "message", "stopped"] as const) {
        const handler = handlers[kind];
        add({
          surface: "event",
          pattern: ASSISTANT_EVENT_OF[kind],
          assistant: kind,
          label: `assistant(${kind === "message" ? "userMessage" : ASSISTANT_EVENT_OF[kind]})`,
          hint: kind === "message" ? { channelTypes: ["im"] } : {},
          // No handler of its own: the engine's record (a context, a stop) is what the input is for.
          handler: (handler ?? (() => [])) as unknown as Handler<never, never>,
        });
      }
      return app as never;
    },
    manifest(more) {
      if (more.assistant && extras.assistant) throw new Error("the assistant is declared twice");
      for (const scope of more.scopes ?? []) {
        if (!/^[a-z][a-z0-9_-]*(:[a-z0-9_.-]+)?$/.test(scope))
          throw new Error(`${JSON.stringify(scope)} is not a Slack scope (like users:read)`);
      }
      extras = {
        ...extras,
        ...more,
        scopes: [...new Set([...(extras.scopes ?? []), ...(more.scopes ?? [])])],
      };
      return app;
    },
    get manifestExtras() {
      return extras;
    },
    effect(effect) {
      if (ownEffects.has(effect.name)) throw new Error(`effect ${effect.name} is registered twice`);
      if (effect.options.settings) declaredSettings = mergeDeclarations(declaredSettings, effect.options.settings);
      ownEffects.set(effect.name, effect);
      definitions.push(toDefinition(effect, checks));
      registry = effectRegistry(definitions);
      return app;
    },
    uses(...methods) {
      for (const method of methods) {
        if (!isSlackMethodName(method)) throw new Error(`${JSON.stringify(method)} is not a Slack Web API method name`);
        declared.add(method);
      }
      return app;
    },
    get slackMethods() {
      const ofEffects = [...ownEffects.values()].flatMap((e) => e.options.slackMethods ?? []);
      return [...new Set([...declared, ...ofEffects])].sort();
    },
    get registrations() {
      return registrations.map(({ surface, pattern, label, hint }) => ({ surface, pattern, label, hint }));
    },
    get appEffects() {
      return [...ownEffects.values()];
    },
    get effects() {
      return registry;
    },
    route(input, context) {
      const found = match(registrations, input);
      if (!found) return { action: "ignore", reason: `no handler for ${describe(input)}` };
      const { registration } = found;
      // A step's input (shared/steps/execution.ts): its handler gets the step, and never the workflow token.
      const step = stepOf(input, context.now);
      if (registration.functionId !== undefined && step === undefined) {
        return { action: "ignore", reason: `function_executed for ${registration.functionId} without a usable function_execution_id` };
      }
      // An assistant's input: its handler gets the thread (shared/app/assistant.ts).
      const kind = registration.assistant;
      const where = kind !== undefined && input.surface === "event" ? threadOf(kind, input.event) : undefined;
      if (kind !== undefined && kind !== "stopped" && where === undefined) {
        return { action: "ignore", reason: `${describe(input)} names no assistant thread (channel and thread_ts)` };
      }
      const thread =
        where && input.surface === "event"
          ? assistantThread(where, input.teamId, kind === "message" ? { ts: String(input.event.ts) } : undefined)
          : undefined;
      const payload = isObject(found.payload) ? withoutToken(found.payload) : found.payload;
      const body = isObject(found.body) ? withoutToken(found.body) : found.body;
      let result: HandlerResult;
      try {
        result = registration.handler(
          { payload: payload as never, body: body as never, ...(registration.functionId !== undefined ? { inputs: step?.inputs } : {}) },
          {
            ...found.handlerContext,
            now: context.now,
            settings: context.settings.public,
            ...(step ? { step: stepContextOf(step) } : {}),
            ...(thread ? { thread } : {}),
          },
        );
      } catch (error) {
        return { action: "refuse", reason: `handler ${registration.label} threw: ${thrownText(error)}` };
      }
      if (typeof (result as { then?: unknown } | undefined)?.then === "function") {
        // An async handler would be waiting on I/O before the ack: not allowed, and its intents would be lost.
        return {
          action: "refuse",
          reason: `handler ${registration.label} returned a Promise: handlers decide synchronously (do I/O in an effect)`,
        };
      }
      // An assistant's handler that answers nothing (undefined) leaves its input ignored: no thread record either.
      if (kind !== undefined && result === undefined) return { action: "ignore", reason: `handler ${registration.label} returned nothing` };
      const handled: Handled = result === undefined ? {} : Array.isArray(result) ? { intents: result } : (result as Handled);
      let checked: ReturnType<typeof checkIntents>;
      try {
        checked = checkIntents(handled.intents ?? [], checks, context.now);
      } catch (error) {
        // Reading the intents runs the app's code too (a getter): refused as a throwing handler is, nothing recorded.
        return { action: "refuse", reason: `handler ${registration.label}: its intents could not be read: ${thrownText(error)}` };
      }
      if (!checked.ok) return { action: "refuse", reason: `handler ${registration.label}: ${checked.reason}` };
      const stepped = step ? stepRouting(step, input, registration.hint.function?.waitMinutes, checked, handled.ack) : undefined;
      if (stepped && "refuse" in stepped) return { action: "refuse", reason: `handler ${registration.label}: ${stepped.refuse}` };
      const effects = stepped?.effects ?? checked.effects;
      const cancels = stepped?.cancels ?? checked.cancels;
      const assisted = kind !== undefined ? assistantRecords(kind, input, effects) : undefined;
      if (assisted && "refuse" in assisted) return { action: "refuse", reason: `handler ${registration.label}: ${assisted.refuse}` };
      const records = assisted?.records ?? [];
      const reply = stepped ? stepped.reply : handled.ack;
      // Names are per workspace (shared/outbox/model.ts, namedKey): an input that names no workspace cannot use them.
      if (!input.teamId && (cancels.length > 0 || effects.some((e) => e.name !== undefined))) {
        return {
          action: "refuse",
          reason: `handler ${registration.label}: names a row or cancels one, but the input has no team (names are per workspace)`,
        };
      }
      let openView: { triggerId: string; view: JsonObject } | undefined;
      if (handled.openView) {
        const triggerId = triggerIdOf(input);
        if (!triggerId) return { action: "refuse", reason: `handler ${registration.label}: openView, but the input has no trigger_id` };
        openView = { triggerId, view: handled.openView };
      }
      return {
        action: "record",
        effects,
        ...(cancels.length > 0 ? { cancels } : {}),
        ...(records.length > 0 ? { records } : {}),
        handler: registration.label,
        ...(reply ? { reply } : {}),
        ...(openView ? { openView } : {}),
      };
    },
  };
  return app;
}

interface Match {
  readonly registration: Registration;
  readonly payload: unknown;
  readonly body: unknown;
  readonly handlerContext: Omit<HandlerContext, "now" | "settings">;
}

function matches(pattern: Pattern | undefined, value: string | undefined): boolean {
  if (value === undefined) return false;
  if (pattern === undefined) return true;
  return typeof pattern === "string" ? pattern === value : pattern.test(value);
}

/**
 * Whether `earlier` matches every input `later` would: then `later` can never
 * run. Decided only where it can be exactly: `later`'s pattern is a string
 * (an exact value, or a message's text it contains).
 */
function covers(earlier: Registration, later: Registration): boolean {
  if (earlier.surface !== later.surface || typeof later.pattern !== "string") return false;
  if (!matches(earlier.pattern, later.pattern)) return false;
  // A custom step's handler takes only its own step's events; a message handler only its conversations.
  if (earlier.functionId !== undefined && earlier.functionId !== later.functionId) return false;
  const heard = channelTypesOf(earlier);
  if (heard && !(channelTypesOf(later) ?? ALL_CHANNEL_TYPES).every((type) => heard.includes(type))) return false;
  if (earlier.surface !== "event" || earlier.messageText === undefined) return true; // any input of that type, or that id
  // message(): a user's plain message whose text contains (or matches) the pattern — it covers only messages of that kind.
  if (later.messageText === undefined) return false;
  const text = earlier.messageText;
  return text === "" || (typeof text === "string" && typeof later.messageText === "string" && later.messageText.includes(text));
}

/** The first registration that matches, with the payload it matched and the context of the input. */
function match(registrations: readonly Registration[], input: RecordableInput): Match | undefined {
  if (input.surface === "event") {
    const event = input.event;
    // A field Slack sends as "" is absent (its SDKs' sample payloads carry "" for every field not there): read by present().
    const base = { teamId: input.teamId, enterpriseId: undefined, userId: present(event.user), channelId: present(event.channel) };
    const channelType = present(event.channel_type);
    for (const registration of registrations) {
      if (registration.surface !== "event" || !matches(registration.pattern, event.type)) continue;
      if (registration.functionId !== undefined && stringAt(event, "function", "callback_id") !== registration.functionId) continue;
      if (registration.assistant === "message" && !isAssistantQuestion(event)) continue;
      const channelTypes = channelTypesOf(registration);
      // An event that does not say its channel_type (an older payload, or "") is not refused for it.
      if (channelTypes && channelType !== undefined && !channelTypes.some((t) => CHANNEL_TYPE_OF[t] === channelType)) continue;
      if (registration.messageText !== undefined) {
        if (present(event.subtype) || present(event.bot_id)) continue;
        const text = present(event.text) ?? "";
        const pattern = registration.messageText;
        if (typeof pattern === "string" ? !text.includes(pattern) : !pattern.test(text)) continue;
      }
      return { registration, payload: event, body: input.event, handlerContext: base };
    }
    return undefined;
  }
  if (input.surface === "command") {
    const { command } = input;
    for (const registration of registrations) {
      if (registration.surface === "command" && matches(registration.pattern, command.command)) {
        return {
          registration,
          payload: command,
          body: command,
          handlerContext: { teamId: command.teamId, enterpriseId: undefined, userId: command.userId, channelId: command.channelId },
        };
      }
    }
    return undefined;
  }
  const body = input.payload;
  const handlerContext = {
    teamId: input.teamId,
    enterpriseId: stringAt(body, "enterprise", "id"),
    userId: stringAt(body, "user", "id"),
    channelId: stringAt(body, "channel", "id") ?? stringAt(body, "container", "channel_id"),
  };
  const view = isObject(body.view) ? body.view : undefined;
  const candidates: { surface: Surface; values: (string | undefined)[]; payload: unknown }[] = [];
  switch (input.type) {
    case "block_actions":
      for (const action of Array.isArray(body.actions) ? body.actions.filter(isObject) : []) {
        candidates.push({ surface: "action", values: [present(action.action_id) ?? "", present(action.block_id) ?? ""], payload: action });
      }
      break;
    case "view_submission":
      candidates.push({ surface: "view_submission", values: [view ? (present(view.callback_id) ?? "") : undefined], payload: view });
      break;
    case "view_closed":
      candidates.push({ surface: "view_closed", values: [view ? (present(view.callback_id) ?? "") : undefined], payload: view });
      break;
    case "shortcut":
      candidates.push({ surface: "shortcut", values: [present(body.callback_id)], payload: body });
      break;
    case "message_action":
      candidates.push({ surface: "message_shortcut", values: [present(body.callback_id)], payload: body });
      break;
    case "block_suggestion":
      candidates.push({ surface: "options", values: [present(body.action_id)], payload: body });
      break;
  }
  for (const registration of registrations) {
    for (const candidate of candidates) {
      if (registration.surface === candidate.surface && candidate.values.some((value) => matches(registration.pattern, value))) {
        return { registration, payload: candidate.payload, body, handlerContext };
      }
    }
  }
  return undefined;
}

function describe(input: RecordableInput): string {
  if (input.surface === "event") {
    const subtype = present(input.event.subtype);
    return `event ${input.event.type}${subtype ? ` (${subtype})` : ""}`;
  }
  if (input.surface === "command") return `command ${input.command.command}`;
  return input.type;
}

function triggerIdOf(input: RecordableInput): string | undefined {
  if (input.surface === "command") return input.command.triggerId;
  if (input.surface === "interaction") return present(input.payload.trigger_id);
  return undefined;
}

function stringAt(object: JsonObject, field: string, inner: string): string | undefined {
  const value = object[field];
  return isObject(value) ? present(value[inner]) : undefined;
}

/** What a handler (or the app code its answer runs) threw, as a refusal quotes it. */
function thrownText(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
