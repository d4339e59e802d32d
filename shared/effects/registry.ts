import { addReaction } from "./add-reaction.ts";
import type { EffectDefinition } from "./effect.ts";
import { postMessage } from "./post-message.ts";
import { respond } from "./respond.ts";
import { updateMessage } from "./update-message.ts";

/**
 * Every effect an outbox row can name. The routing module (shared/app/route.ts)
 * may only intend effects listed here; a row naming anything else parks.
 */
export const EFFECTS: ReadonlyMap<string, EffectDefinition> = new Map(
  [postMessage, addReaction, updateMessage, respond].map((effect) => [effect.name, effect]),
);

export type EffectName = "chat.postMessage" | "reactions.add" | "chat.update" | "response_url";
