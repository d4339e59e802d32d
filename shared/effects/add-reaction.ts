import { SlackAPIError } from "slack-web-api-client";
import { classifySlackError } from "../slack/web-api.ts";
import { withTimeout } from "../timeout.ts";
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
    try {
      await withTimeout(slack.reactions.add(request), timeoutMs, "reactions.add");
      return { reacted: true };
    } catch (error) {
      if (error instanceof SlackAPIError && error.error === "already_reacted") return { reacted: true, already_reacted: true };
      throw classifySlackError("reactions.add", error);
    }
  },
};
