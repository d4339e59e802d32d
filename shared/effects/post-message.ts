import { refusal } from "../slack/web-api.ts";
import { type EffectDefinition, optionalString, requireString } from "./effect.ts";

/**
 * chat.postMessage. Not idempotent: Slack takes no idempotency key, so a
 * repeat (a crash after posting, before completing) posts a second message.
 * The returned ts is kept in the row, so an operator can find the message.
 */
export const postMessage: EffectDefinition = {
  name: "chat.postMessage",
  idempotentByShape: false,
  async perform(payload, { slack, timeoutMs }) {
    const request = {
      channel: requireString(payload, "channel", "chat.postMessage"),
      text: requireString(payload, "text", "chat.postMessage"),
      thread_ts: optionalString(payload, "thread_ts"),
    };
    const answer = await slack.call("chat.postMessage", request, timeoutMs);
    if (!answer.ok) throw refusal("chat.postMessage", answer.error);
    return { channel: answer.body.channel, ts: answer.body.ts };
  },
};
