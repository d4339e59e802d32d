/**
 * Throttling of repeated operator-API auth failures, per client address.
 *
 * Chosen: a map in the isolate's memory, no storage. A failed request costs
 * a map lookup, never a D1 write (an unauthenticated caller must not be able
 * to make us pay per request). After FAILURE_LIMIT failures from one address
 * within WINDOW_MS, that address gets 429 + Retry-After until its window
 * ends, without its token being checked; a success does not reset the count
 * (a correct token from a throttled address waits too: the address is what
 * is throttled, not the guess).
 *
 * Its limits, plainly: it is per isolate — Cloudflare runs many, so an
 * attacker spread over them gets FAILURE_LIMIT guesses per window per
 * isolate, and a new isolate starts empty; the map holds at most
 * MAX_ADDRESSES entries and drops the oldest-inserted one when full, so
 * an attacker with that many addresses can push an address out early. It is
 * a brake and a log signal, not the defence: the defence is a token of 32+
 * varied characters (shared/admin-token.ts), which no rate of guessing
 * reaches. For a hard, global limit, put a Cloudflare WAF rate-limiting rule
 * on /admin/*.
 */

export const FAILURE_LIMIT = 10;
export const WINDOW_MS = 60_000;
export const MAX_ADDRESSES = 1024;

interface Entry {
  windowStart: number;
  failures: number;
}

export interface AuthThrottle {
  /** ms until `address` may try again, or 0 if it may try now. */
  blockedFor(address: string, now: number): number;
  /** Records a failure; returns the failures counted in the address's current window. */
  recordFailure(address: string, now: number): number;
  readonly size: number;
}

export function authThrottle(limit = FAILURE_LIMIT, windowMs = WINDOW_MS, maxAddresses = MAX_ADDRESSES): AuthThrottle {
  const entries = new Map<string, Entry>();
  const current = (address: string, now: number): Entry | undefined => {
    const entry = entries.get(address);
    if (entry && now - entry.windowStart >= windowMs) {
      entries.delete(address);
      return undefined;
    }
    return entry;
  };
  return {
    blockedFor(address, now) {
      const entry = current(address, now);
      return entry && entry.failures >= limit ? entry.windowStart + windowMs - now : 0;
    },
    recordFailure(address, now) {
      let entry = current(address, now);
      if (!entry) {
        if (entries.size >= maxAddresses) {
          const oldest = entries.keys().next();
          if (!oldest.done) entries.delete(oldest.value);
        }
        entry = { windowStart: now, failures: 0 };
        entries.set(address, entry);
      }
      entry.failures += 1;
      return entry.failures;
    },
    get size() {
      return entries.size;
    },
  };
}

/**
 * The client's address as Cloudflare reports it (CF-Connecting-IP, which
 * Cloudflare sets on every request through its edge and a client cannot
 * forge there). Absent only on calls that never crossed the edge (a local
 * run, a test calling the handler): those are not throttled, only logged.
 */
export function clientAddress(request: Request): string | undefined {
  return request.headers.get("cf-connecting-ip") ?? undefined;
}

/** The answer to a throttled address: no body worth reading, and when to come back. */
export function tooManyFailures(retryAfterMs: number): Response {
  return new Response("too many failed attempts\n", {
    status: 429,
    headers: { "retry-after": String(Math.max(1, Math.ceil(retryAfterMs / 1000))), "cache-control": "no-store" },
  });
}
