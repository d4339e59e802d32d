/**
 * What went wrong with one attempt at an effect, as the retry policy needs to
 * know it. Produced by the effects (shared/effects/*) from Slack's answers;
 * consumed by decideOnFailure.
 *
 * - rate_limited: HTTP 429; Slack says exactly when to come back.
 * - transient:    no answer, a timeout, a 5xx, or an ok:false that Slack
 *                 documents as temporary (internal_error, fatal_error, …).
 * - fatal:        an answer that a retry would repeat (channel_not_found,
 *                 invalid_auth, an expired response_url, a bad payload).
 * - not_yet:      not attempted: what the effect needs first is not there yet
 *                 (an assistant's earlier answer in the same thread is still
 *                 streaming). No attempt spent; the row is due again after waitMs.
 */
import { scrubFreeText } from "../credentials.ts";

export type EffectFailure =
  | { readonly kind: "rate_limited"; readonly retryAfterMs: number; readonly message: string }
  | { readonly kind: "transient"; readonly message: string }
  | { readonly kind: "not_yet"; readonly waitMs: number; readonly message: string }
  | {
      readonly kind: "fatal";
      readonly message: string;
      /**
       * The effect happened, and what came after it cannot be kept (the engine sets it: fatalAfterPerforming). Its
       * park marks the row maybe_performed, so a filter replay leaves it out. An app throws fatal(), not this.
       */
      readonly performed?: true;
    };

/** An effect's failure, thrown by its perform() and carrying the classification. */
export class EffectError extends Error {
  readonly failure: EffectFailure;
  constructor(failure: EffectFailure) {
    super(failure.message);
    this.name = "EffectError";
    this.failure = failure;
  }
}

export const transient = (message: string): EffectError => new EffectError({ kind: "transient", message });
export const fatal = (message: string): EffectError => new EffectError({ kind: "fatal", message });
/** Fatal after the effect was performed (its follow-ups refused, its answer unreadable): not to be replayed blindly. */
export const fatalAfterPerforming = (message: string): EffectError => new EffectError({ kind: "fatal", message, performed: true });
export const rateLimited = (retryAfterMs: number, message: string): EffectError =>
  new EffectError({ kind: "rate_limited", retryAfterMs, message });
/** Not attempted (nothing was performed): due again in `waitMs`, its attempt given back. */
export const notYet = (waitMs: number, message: string): EffectError => new EffectError({ kind: "not_yet", waitMs, message });

/**
 * Anything thrown while performing becomes a classified failure; the unknown is transient. Its message is free
 * text on its way to last_error, the attempts, a log line and operator answers: scrubbed of credentials first
 * (shared/credentials.ts), whoever wrote it — an app's effect may put a URL or a token in its error.
 */
export function toFailure(error: unknown): EffectFailure {
  if (error instanceof EffectError) return { ...error.failure, message: scrubFreeText(error.failure.message) };
  if (error instanceof Error) return { kind: "transient", message: scrubFreeText(`${error.name}: ${error.message}`) };
  return { kind: "transient", message: scrubFreeText(String(error)) };
}
