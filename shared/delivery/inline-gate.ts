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
 * Past either a request's rows go to the queue at once, as they would
 * without the first attempt.
 */

/** A request started longer ago than this is counted no more, ms. */
export const STALE_REQUEST_MS = 10_000;

export type Refused = "in_flight" | "busy";

export class InlineGate {
  private used = 0;
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
    const got = Math.min(wanted, this.maxInFlight - this.used);
    if (got <= 0) return "in_flight";
    this.used += got;
    return got;
  }

  give(count: number): void {
    this.used = Math.max(0, this.used - count);
  }

  get inFlight(): number {
    return this.used;
  }
}
