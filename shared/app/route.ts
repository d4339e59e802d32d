/**
 * The reference app: the one module an app author edits.
 *
 * It maps an authenticated Slack input to what the app intends, and nothing
 * else: no I/O, no clock of its own, no Slack calls. The pipeline around it
 * records the intended effects durably before the ack and performs them
 * after, at least once (README, "Delivery semantics").
 *
 * Return `ignore` for anything the app does not act on: the ingress answers
 * 200 and writes nothing. Return `record` with one or more effects (each with
 * a key unique within this input), optionally with the body of the ack (a
 * slash command's immediate reply, a view submission's response_action), and
 * optionally a view to open inline (a modal must open within Slack's
 * 3 seconds, so it cannot wait for the outbox; see workers/ingress/ack.ts).
 */
import type { EffectName } from "../effects/registry.ts";
import { RESPONSE_URL_LIFETIME_MS } from "../effects/respond.ts";
import type { IntendedEffect } from "../outbox/model.ts";
import {
  type CommandInput,
  type EventInput,
  type InteractionInput,
  isObject,
  type JsonObject,
  type RecordableInput,
} from "../slack/inputs.ts";

export interface AppContext {
  /** WATCHED_CHANNELS; empty means every channel. */
  readonly watchedChannels: ReadonlySet<string>;
  /** The time the request was received (ms). */
  readonly now: number;
}

export interface AppEffect extends IntendedEffect {
  readonly effect: EffectName;
}

export type Routing =
  | { readonly action: "ignore"; readonly reason: string }
  | {
      readonly action: "record";
      readonly effects: readonly AppEffect[];
      /** JSON body of the 200; none means an empty 200. */
      readonly reply?: JsonObject;
      /** A modal to open with views.open before the ack, best effort. */
      readonly openView?: { readonly triggerId: string; readonly view: JsonObject };
    };

export function route(input: RecordableInput, app: AppContext): Routing {
  switch (input.surface) {
    case "event":
      return routeEvent(input, app);
    case "command":
      return routeCommand(input, app);
    case "interaction":
      return routeInteraction(input);
  }
}

function routeEvent({ event }: EventInput, app: AppContext): Routing {
  if (event.bot_id || event.subtype === "bot_message") return ignore("a bot's message (ours included)");
  if (event.type === "app_mention") {
    if (!event.channel || !event.ts) return ignore("app_mention without channel or ts");
    return record([
      {
        key: "reply",
        effect: "chat.postMessage",
        payload: { channel: event.channel, thread_ts: event.ts, text: `Hi <@${event.user ?? "there"}>, ackbox heard you.` },
      },
    ]);
  }
  if (event.type === "message") {
    if (event.subtype) return ignore(`unhandled message subtype ${event.subtype}`);
    if (!event.channel || !event.ts) return ignore("message without channel or ts");
    if (app.watchedChannels.size > 0 && !app.watchedChannels.has(event.channel)) return ignore("channel not watched");
    return record([{ key: "eyes", effect: "reactions.add", payload: { channel: event.channel, timestamp: event.ts, name: "eyes" } }]);
  }
  return ignore(`unhandled event type ${event.type}`);
}

function routeCommand({ command }: CommandInput, app: AppContext): Routing {
  const label = `${command.command}${command.text ? ` ${command.text}` : ""}`;
  return {
    action: "record",
    reply: { response_type: "ephemeral", text: `Working on \`${label}\`…` },
    effects: [
      {
        key: "result",
        effect: "response_url",
        payload: { url: command.responseUrl, body: { response_type: "ephemeral", replace_original: false, text: `Done: \`${label}\`` } },
        expiresAt: app.now + RESPONSE_URL_LIFETIME_MS,
      },
    ],
    ...(command.text.trim() === "modal" ? { openView: { triggerId: command.triggerId, view: feedbackModal() } } : {}),
  };
}

function routeInteraction(input: InteractionInput): Routing {
  const { payload } = input;
  const user = isObject(payload.user) && typeof payload.user.id === "string" ? payload.user.id : undefined;
  if (input.type === "block_actions") {
    const container = isObject(payload.container) ? payload.container : {};
    const channel = stringField(container, "channel_id") ?? (isObject(payload.channel) ? stringField(payload.channel, "id") : undefined);
    const ts = stringField(container, "message_ts") ?? (isObject(payload.message) ? stringField(payload.message, "ts") : undefined);
    if (!channel || !ts) return ignore("block action not on a message");
    const action = Array.isArray(payload.actions) && isObject(payload.actions[0]) ? payload.actions[0] : {};
    const actionId = stringField(action, "action_id") ?? "a button";
    return record([
      { key: "update", effect: "chat.update", payload: { channel, ts, text: `<@${user ?? "someone"}> clicked ${actionId}.` } },
    ]);
  }
  if (input.type === "view_submission") {
    if (!user) return ignore("view submission without a user");
    return {
      action: "record",
      reply: { response_action: "clear" },
      effects: [{ key: "thanks", effect: "chat.postMessage", payload: { channel: user, text: "Thanks, ackbox received your feedback." } }],
    };
  }
  return ignore(`no route for ${input.type}`);
}

function feedbackModal(): JsonObject {
  return {
    type: "modal",
    callback_id: "ackbox_feedback",
    title: { type: "plain_text", text: "Feedback" },
    submit: { type: "plain_text", text: "Send" },
    blocks: [
      {
        type: "input",
        block_id: "feedback",
        label: { type: "plain_text", text: "What should we know?" },
        element: { type: "plain_text_input", action_id: "text", multiline: true },
      },
    ],
  };
}

function stringField(object: JsonObject, field: string): string | undefined {
  const value = object[field];
  return typeof value === "string" && value !== "" ? value : undefined;
}

const ignore = (reason: string): Routing => ({ action: "ignore", reason });
const record = (effects: AppEffect[]): Routing => ({ action: "record", effects });
