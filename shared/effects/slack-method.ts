import { isObject, type JsonObject } from "../slack/inputs.ts";
import { semanticsOf } from "../slack/methods.ts";
import { refusal } from "../slack/web-api.ts";
import type { EffectDefinition } from "./effect.ts";

/**
 * Any Slack Web API method as an effect: the row's payload is the method's
 * arguments, sent whole; what Slack's answer means comes from the semantics
 * table (shared/slack/methods.ts).
 */
export function slackMethodEffect(method: string): EffectDefinition {
  const semantics = semanticsOf(method);
  return {
    name: method,
    idempotentByShape: semantics.repeat === "harmless",
    inline: true,
    async perform(payload, { slack, timeoutMs, signal }) {
      const answer = await slack.call(method, payload, timeoutMs, signal);
      if (answer.ok) return keptOf(answer.body);
      if (semantics.alreadyDone?.includes(answer.error)) return { already: answer.error };
      throw refusal(method, answer.error, semantics.retryable);
    },
  };
}

/**
 * What the row keeps of Slack's answer: its top-level scalars (ts, channel,
 * …) and the id of each object (view.id, channel.id). Enough for a follow-up
 * or an operator to find what was made; small enough for every row.
 */
export function keptOf(body: JsonObject): JsonObject {
  const kept: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(body)) {
    if (key === "ok" || key === "response_metadata" || key === "warning") continue;
    if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") kept[key] = value;
    else if (isObject(value) && typeof value.id === "string") kept[key] = { id: value.id };
  }
  return kept;
}
