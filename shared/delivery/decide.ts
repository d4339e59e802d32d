import { type BackoffPolicy, backoffMs } from "./backoff.ts";
import type { EffectFailure } from "./failure.ts";

export interface RetryPolicy extends BackoffPolicy {
  readonly maxAttempts: number;
  /** How long after its first 429 a row may keep being rate limited (RATE_LIMIT_MAX_WAIT_HOURS). */
  readonly rateLimitMaxWaitMs: number;
  /** The spread added to a 429's wait (the key's pace): rows released together do not collide again. */
  readonly rateLimitJitterMs: number;
}

export type Decision =
  | {
      readonly action: "retry";
      readonly delayMs: number;
      readonly reason: string;
      /** A 429: the attempt is not counted (the consumer gives it back), and the key cools down. */
      readonly rateLimited?: { readonly retryAfterMs: number; readonly cappedFromMs?: number };
    }
  | { readonly action: "park"; readonly reason: string };

/**
 * What to do after a failed attempt: a pure function of the row, the failure,
 * `now` and the policy. The consumer only carries the decision out.
 *
 * - fatal errors park at once: a retry would get the same answer;
 * - a 429 is Slack's pacing, not a failure: it spends no attempt and waits
 *   Retry-After (capped at the backoff cap: a broken or hostile answer must not
 *   park a row for years) plus a jitter of up to one pace, so rows released
 *   together do not collide again; it is bounded instead by wall-clock time,
 *   rateLimitMaxWaitMs after the row's first 429 (this one, if none before);
 * - any other failure: the attempt that reaches maxAttempts parks, else backoff;
 * - a row with a deadline (a response_url's 30 minutes) parks if the retry
 *   would land after it, rather than retrying into certain failure.
 */
export function decideOnFailure(
  row: { readonly attempts: number; readonly expiresAt: number | null; readonly rateLimitedSince: number | null },
  failure: EffectFailure,
  now: number,
  policy: RetryPolicy,
  random: () => number,
): Decision {
  if (failure.kind === "fatal") return { action: "park", reason: failure.message };
  // Not attempted: the consumer makes it a wait (deliver.ts) before asking; here it is a retry that spends nothing.
  if (failure.kind === "not_yet") return { action: "retry", delayMs: failure.waitMs, reason: failure.message };
  if (failure.kind === "rate_limited") {
    const waitedMs = now - (row.rateLimitedSince ?? now);
    if (waitedMs >= policy.rateLimitMaxWaitMs) {
      return {
        action: "park",
        reason: `rate limited for longer than the wall-clock limit (${Math.round(waitedMs / 1000)} s since the first 429, limit ${policy.rateLimitMaxWaitMs / 1000} s): ${failure.message}`,
      };
    }
    const retryAfterMs = Math.min(failure.retryAfterMs, policy.backoffCapMs);
    const delayMs = retryAfterMs + Math.floor(random() * policy.rateLimitJitterMs);
    if (row.expiresAt !== null && now + delayMs > row.expiresAt) {
      return { action: "park", reason: `deadline passed before the next attempt could run: ${failure.message}` };
    }
    const rateLimited = retryAfterMs < failure.retryAfterMs ? { retryAfterMs, cappedFromMs: failure.retryAfterMs } : { retryAfterMs };
    return { action: "retry", delayMs, reason: failure.message, rateLimited };
  }
  if (row.attempts >= policy.maxAttempts) {
    return { action: "park", reason: `attempts exhausted (${row.attempts} of ${policy.maxAttempts}): ${failure.message}` };
  }
  const delayMs = backoffMs(row.attempts, policy, random);
  if (row.expiresAt !== null && now + delayMs > row.expiresAt) {
    return { action: "park", reason: `deadline passed before the next attempt could run: ${failure.message}` };
  }
  return { action: "retry", delayMs, reason: failure.message };
}

/**
 * THE RULE for every park's maybe_performed mark (migration 0010; SPEC
 * invariant 13): a filter replay leaves a marked row out, so a mark wrongly
 * left off is an effect performed twice, and one wrongly set costs an operator
 * naming the row by id. Marked when the effect may have happened:
 *
 * - any attempt after the first (attempts > 1): an earlier claim attempted it
 *   and ended without a result the row kept (a timeout, an unknown answer, a
 *   lease that ran out), whatever this claim then learns;
 * - this attempt's failure leaves it unknown: every transient failure (no
 *   answer, a timeout, a 5xx, and the ok:false answers Slack documents as
 *   possibly half-done: internal_error, fatal_error);
 * - the effect ran, and what came after failed ("performed", or a fatal
 *   failure the engine raised after performing).
 *
 * Unmarked only when nothing can have been performed: this claim's attempt is
 * the row's first and Slack refused it outright (a fatal answer, a 429), or it
 * was never made (refused or waited before any attempt, on a first claim).
 */
export function mayHavePerformed(row: { readonly attempts: number }, attempt?: EffectFailure | "performed"): boolean {
  if (row.attempts > 1 || attempt === "performed") return true;
  if (attempt === undefined || attempt.kind === "rate_limited" || attempt.kind === "not_yet") return false;
  return attempt.kind === "transient" || attempt.performed === true;
}

/**
 * Cloudflare Queues takes whole seconds, at most 12 hours: 43 200 s
 * (https://developers.cloudflare.com/queues/platform/limits/, "delaySeconds
 * (when sending or retrying)"). Rounded up: never early. A longer wait is
 * still exact in the row (next_attempt_at): the message comes back early,
 * finds the row not due and is acked, and the sweep sends it again when it is.
 */
export const MAX_QUEUE_DELAY_SECONDS = 43_200;

export function queueDelaySeconds(delayMs: number): number {
  return Math.min(MAX_QUEUE_DELAY_SECONDS, Math.max(0, Math.ceil(delayMs / 1000)));
}
