/**
 * The first attempt's two bounds per isolate, both counts (no averages,
 * nothing learnt):
 *
 * - at most `maxInFlight` inline rows in flight at once, waiting or
 *   performing: a slow Slack cannot pile calls up in one isolate. Past it a
 *   request's rows go to the queue at once, as they would without the first
 *   attempt.
 * - inline rows start only while at most `maxRequests` requests are in
 *   progress in the isolate; until then they wait (`quiet`), at most
 *   `maxWaitMs`. The isolate's acks go first — Slack waits 3 s for them,
 *   nobody waits for an effect that way — and a burst's rows start the moment
 *   its acks are answered, in the requests that recorded them. A request in
 *   progress for longer than STALE_REQUEST_MS is no longer counted (the
 *   runtime may have cancelled it: its client went away, and its end is
 *   never told).
 *
 * A slot is held at most STALE_SLOT_MS (an inline row ends within its lease,
 * 20 s by default, so every slot is given back well before): a request the
 * runtime cancelled between taking its slots and its answer, or an answer
 * that threw, never gives them back, and without the bound enough of those
 * would turn the first attempt off for the isolate for good.
 */

/** A request started longer ago than this is counted no more, ms. */
export const STALE_REQUEST_MS = 10_000;

/** Slots taken longer ago than this are free again, ms. */
export const STALE_SLOT_MS = 60_000;

export type Refused = "in_flight";

/** Calls `fn` after `ms`; returns what cancels it. The runtime's timer, or a test's. */
export type Timer = (ms: number, fn: () => void) => () => void;

const realTimer: Timer = (ms, fn) => {
  const id = setTimeout(fn, ms);
  return () => clearTimeout(id);
};

export class InlineGate {
  /** The slots taken and not given back, oldest first: when, and how many are still held. */
  private readonly holds: { readonly at: number; left: number }[] = [];
  /** Start times of the requests in progress, by token. */
  private readonly requests = new Map<number, number>();
  /** Deliveries waiting for at most maxRequests requests in progress, each woken once. */
  private readonly waiting = new Set<() => void>();
  private nextToken = 0;
  readonly maxInFlight: number;
  readonly maxRequests: number;
  readonly maxWaitMs: number;
  private readonly timer: Timer;

  constructor(maxInFlight: number, maxRequests: number, maxWaitMs: number, timer: Timer = realTimer) {
    this.maxInFlight = maxInFlight;
    this.maxRequests = maxRequests;
    this.maxWaitMs = maxWaitMs;
    this.timer = timer;
  }

  /** A request began at `now`; call the result when it has been answered. */
  requestStarted(now: number): () => void {
    const token = this.nextToken++;
    this.requests.set(token, now);
    return () => {
      if (!this.requests.delete(token)) return;
      if (this.requests.size <= this.maxRequests) for (const wake of [...this.waiting]) wake();
    };
  }

  /** Requests in progress at `now`, those started more than STALE_REQUEST_MS before it left out (and forgotten). */
  requestsInProgress(now: number): number {
    for (const [token, at] of this.requests) if (now - at > STALE_REQUEST_MS) this.requests.delete(token);
    return this.requests.size;
  }

  /**
   * Resolves once at most maxRequests requests are in progress — at once if so at `now`, else when enough of
   * them have been answered — or after `maxWaitMs` (at most the gate's), whichever comes first. Never rejects.
   */
  quiet(now: number, maxWaitMs = this.maxWaitMs): Promise<void> {
    const waitMs = Math.min(maxWaitMs, this.maxWaitMs);
    if (waitMs <= 0 || this.requestsInProgress(now) <= this.maxRequests) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = () => {
        cancel();
        this.waiting.delete(wake);
        resolve();
      };
      const cancel = this.timer(waitMs, wake);
      this.waiting.add(wake);
    });
  }

  /** Deliveries waiting in `quiet`. */
  get waitingCount(): number {
    return this.waiting.size;
  }

  /** Takes up to `wanted` in-flight slots at `now`; returns how many it got, or why none. */
  take(wanted: number, now: number): number | Refused {
    if (wanted <= 0) return 0;
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
