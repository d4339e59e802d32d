import { isSlackMethodName } from "../slack/methods.ts";
import { STEP_EFFECTS } from "../steps/effects.ts";
import type { EffectDefinition } from "./effect.ts";
import { respond } from "./respond.ts";
import { slackMethodEffect } from "./slack-method.ts";

/**
 * Which code performs an outbox row's `effect`, in this order: an effect the
 * app defined (its name has no dot, so it never shadows a Slack method);
 * "response_url"; the two methods that complete a custom step's execution
 * (shared/steps/effects.ts); any Slack Web API method by name. Anything else is not an
 * effect: the ingress refuses an intent naming it (shared/app/intents.ts),
 * and a row naming it (a deploy removed the effect) parks.
 */
export interface EffectRegistry {
  get(name: string): EffectDefinition | undefined;
  /** Effects with a tighter attempt limit than MAX_ATTEMPTS, by name (the dead-letter queue needs them). */
  attemptLimits(): Readonly<Record<string, number>>;
}

export function effectRegistry(custom: readonly EffectDefinition[]): EffectRegistry {
  const own = new Map(custom.map((effect) => [effect.name, effect]));
  const methods = new Map<string, EffectDefinition>();
  return {
    get(name) {
      const found = own.get(name) ?? (name === respond.name ? respond : (STEP_EFFECTS.get(name) ?? methods.get(name)));
      if (found || !isSlackMethodName(name)) return found;
      const method = slackMethodEffect(name);
      methods.set(name, method);
      return method;
    },
    attemptLimits() {
      const limited = [respond, ...custom].flatMap((e) => (e.maxAttempts === undefined ? [] : [[e.name, e.maxAttempts] as const]));
      return Object.fromEntries(limited);
    },
  };
}

/** `effects`, and `effect` by its name before them: an engine effect a Worker brings (the assistant's answer). */
export function withEffect(effects: EffectRegistry, effect: EffectDefinition): EffectRegistry {
  return {
    get: (name) => (name === effect.name ? effect : effects.get(name)),
    attemptLimits: () => effects.attemptLimits(),
  };
}
