export interface BackoffPolicy {
  readonly backoffBaseMs: number;
  readonly backoffCapMs: number;
}

/**
 * Exponential backoff with "equal jitter": half the exponential step is kept,
 * the other half is random. Retries of many rows that failed together (Slack
 * down for a minute) spread out instead of returning in one wave, and no delay
 * collapses to zero. `attempt` counts from 1; `random` is injected so tests
 * pin it.
 */
export function backoffMs(attempt: number, policy: BackoffPolicy, random: () => number): number {
  const exponent = Math.min(Math.max(attempt, 1) - 1, 30);
  const step = Math.min(policy.backoffCapMs, policy.backoffBaseMs * 2 ** exponent);
  return Math.round(step / 2 + (random() * step) / 2);
}
