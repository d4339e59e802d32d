import { refusal } from "../slack/web-api.ts";
import { type EffectDefinition, requireString } from "./effect.ts";

/**
 * reactions.add. Idempotent by shape: a repeat answers already_reacted, which
 * is the state we wanted, so it counts as success.
 */
export const addReaction: EffectDefinition = {
  name: "reactions.add",
  idempotentByShape: true,
  async perform(payload, { slack, timeoutMs }) {
    const request = {
      channel: requireString(payload, "channel", "reactions.add"),
      timestamp: requireString(payload, "timestamp", "reactions.add"),
      name: requireString(payload, "name", "reactions.add"),
    };
    const answer = await slack.call("reactions.add", request, timeoutMs);
    if (answer.ok) return { reacted: true };
    if (answer.error === "already_reacted") return { reacted: true, already_reacted: true };
    throw refusal("reactions.add", answer.error);
  },
};
