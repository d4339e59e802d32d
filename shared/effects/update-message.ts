import { refusal } from "../slack/web-api.ts";
import { type EffectDefinition, requireString } from "./effect.ts";

/** chat.update. Idempotent by shape: a repeat writes the same text again. */
export const updateMessage: EffectDefinition = {
  name: "chat.update",
  idempotentByShape: true,
  async perform(payload, { slack, timeoutMs }) {
    const request = {
      channel: requireString(payload, "channel", "chat.update"),
      ts: requireString(payload, "ts", "chat.update"),
      text: requireString(payload, "text", "chat.update"),
    };
    const answer = await slack.call("chat.update", request, timeoutMs);
    if (!answer.ok) throw refusal("chat.update", answer.error);
    return { channel: answer.body.channel, ts: answer.body.ts };
  },
};
