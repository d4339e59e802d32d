import { fatal } from "../delivery/failure.ts";
import type { JsonObject } from "../slack/inputs.ts";
import type { SlackWebApi } from "../slack/web-api.ts";

/** What an effect may use while it runs. */
export interface EffectContext {
  readonly slack: SlackWebApi;
  /** Hosts a response_url may point at (RESPONSE_URL_HOSTS). */
  readonly responseUrlHosts: readonly string[];
  /** Per-call timeout; well inside the lease (shared/settings.ts checks it). */
  readonly timeoutMs: number;
}

export interface EffectDefinition {
  /** The outbox row's `effect` column. */
  readonly name: string;
  /**
   * Whether performing it twice is harmless by its shape. At-least-once means
   * a crash between the effect and its completion repeats it: a reaction or an
   * update absorbs that; a posted message shows up twice.
   */
  readonly idempotentByShape: boolean;
  /** A tighter attempt limit than MAX_ATTEMPTS, where Slack limits uses. */
  readonly maxAttempts?: number;
  /** Performs the effect; returns what to keep in the row's `result`, or throws an EffectError. */
  perform(payload: JsonObject, context: EffectContext): Promise<unknown>;
}

/** A required string field of a payload; a missing one is a bug in the routing, so it parks. */
export function requireString(payload: JsonObject, field: string, effect: string): string {
  const value = payload[field];
  if (typeof value !== "string" || value === "") throw fatal(`${effect}: payload has no ${field}`);
  return value;
}

export function optionalString(payload: JsonObject, field: string): string | undefined {
  const value = payload[field];
  return typeof value === "string" && value !== "" ? value : undefined;
}
