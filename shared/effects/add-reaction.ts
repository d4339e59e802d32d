import { callWebApi } from "../slack/web-api.ts";
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
    return callWebApi(
      "reactions.add",
      timeoutMs,
      async () => {
        await slack.reactions.add(request);
        return { reacted: true };
      },
      (error) => (error.error === "already_reacted" ? { reacted: true, already_reacted: true } : undefined),
    );
  },
};
