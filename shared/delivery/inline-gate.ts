/**
 * The first attempt's two bounds per isolate, both counts (no averages,
 * nothing learnt):
 *
 * - at most `maxInFlight` inline rows in flight at once: a slow Slack cannot
 *   pile calls up in one isolate;
 * - no inline row while more than `maxRequests` requests are in progress in
 *   the isolate (the asking one included): the isolate's acks are queueing,
 *   and inline work would take the CPU they need. A request in progress for
 *   longer than STALE_REQUEST_MS is no longer counted (the runtime may have
 *   cancelled it: its client went away, and its end is never told).
 *
 * A slot is held at most STALE_SLOT_MS (an inline row ends within its lease,
 * 20 s by default, so every slot is given back well before): a request the
 * runtime cancelled between taking its slots and its answer, or an answer
 * that threw, never gives them back, and without the bound enough of those
 * would turn the first attempt off for the isolate for good.
 *
 * Past either a request's rows go to the queue at once, as they would
 * without the first attempt.
 */

/** A request started longer ago than this is counted no more, ms. */
export const STALE_REQUEST_MS = 10_000;

/** Slots taken longer ago than this are free again, ms. */
export const STALE_SLOT_MS = 60_000;

export type Refused = "in_flight" | "busy";

export class InlineGate {
  /** The slots taken and not given back, oldest first: when, and how many are still held. */
  private readonly holds: { readonly at: number; left: number }[] = [];
  /** Start times of the requests in progress, by token. */
  private readonly requests = new Map<number, number>();
  private nextToken = 0;
  readonly maxInFlight: number;
  readonly maxRequests: number;

  constructor(maxInFlight: number, maxRequests: number) {
    this.maxInFlight = maxInFlight;
    this.maxRequests = maxRequests;
  }

  /** A request began at `now`; call the result when it has been answered. */
  requestStarted(now: number): () => void {
    const token = this.nextToken++;
    this.requests.set(token, now);
    return () => this.requests.delete(token);
  }

  /** Requests in progress at `now`, those started more than STALE_REQUEST_MS before it left out (and forgotten). */
  requestsInProgress(now: number): number {
    for (const [token, at] of this.requests) if (now - at > STALE_REQUEST_MS) this.requests.delete(token);
    return this.requests.size;
  }

  /** Takes up to `wanted` in-flight slots at `now`; returns how many it got, or why none. */
  take(wanted: number, now: number): number | Refused {
    if (wanted <= 0) return 0;
    if (this.requestsInProgress(now) > this.maxRequests) return "busy";
    while (this.holds.length > 0 && now - (this.holds[0]?.at ?? now) > STALE_SLOT_MS) this.holds.shift();
    const got = Math.min(wanted, this.maxInFlight - this.used);
    if (got <= 0) return "in_flight";
    this.holds.push({ at: now, left: got });
    return got;
  }

  /** Gives `count` slots back (the oldest holds first: which hold they came from does not change the count). */
  give(count: number): void {
    let left = count;
    while (left > 0 && this.holds.length > 0) {
      const oldest = this.holds[0] as { at: number; left: number };
      const given = Math.min(left, oldest.left);
      oldest.left -= given;
      left -= given;
      if (oldest.left === 0) this.holds.shift();
    }
  }

  private get used(): number {
    return this.holds.reduce((sum, hold) => sum + hold.left, 0);
  }

  get inFlight(): number {
    return this.used;
  }
}
