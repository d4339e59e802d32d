import { type BackoffPolicy, backoffMs } from "./backoff.ts";
import type { EffectFailure } from "./failure.ts";

export interface RetryPolicy extends BackoffPolicy {
  readonly maxAttempts: number;
}

export type Decision =
  | { readonly action: "retry"; readonly delayMs: number; readonly reason: string }
  | { readonly action: "park"; readonly reason: string };

/**
 * What to do after a failed attempt: a pure function of the row, the failure,
 * `now` and the policy. The consumer only carries the decision out.
 *
 * - fatal errors park at once: a retry would get the same answer;
 * - the attempt that reaches maxAttempts parks;
 * - a 429 waits exactly Slack's Retry-After; anything else backs off;
 * - a row with a deadline (a response_url's 30 minutes) parks if the retry
 *   would land after it, rather than retrying into certain failure.
 */
export function decideOnFailure(
  row: { readonly attempts: number; readonly expiresAt: number | null },
  failure: EffectFailure,
  now: number,
  policy: RetryPolicy,
  random: () => number,
): Decision {
  if (failure.kind === "fatal") return { action: "park", reason: failure.message };
  if (row.attempts >= policy.maxAttempts) {
    return { action: "park", reason: `attempts exhausted (${row.attempts} of ${policy.maxAttempts}): ${failure.message}` };
  }
  const delayMs = failure.kind === "rate_limited" ? failure.retryAfterMs : backoffMs(row.attempts, policy, random);
  if (row.expiresAt !== null && now + delayMs > row.expiresAt) {
    return { action: "park", reason: `deadline passed before the next attempt could run: ${failure.message}` };
  }
  return { action: "retry", delayMs, reason: failure.message };
}

/**
 * Cloudflare Queues takes whole seconds, at most 24 hours (Queues limits,
 * "delaySeconds (when sending or retrying)"). Rounded up: never early. A
 * longer wait is still exact in the row (next_attempt_at): the message comes
 * back early, finds the row not due and is acked, and the sweep sends it again
 * when it is.
 */
export const MAX_QUEUE_DELAY_SECONDS = 86_400;

export function queueDelaySeconds(delayMs: number): number {
  return Math.min(MAX_QUEUE_DELAY_SECONDS, Math.max(0, Math.ceil(delayMs / 1000)));
}
