/**
 * The first attempt's load gate (one per isolate): may a request's rows go
 * first inline, or does the isolate shed them to the queue at once?
 *
 * Two signals, each with its own reason:
 *
 * - "saturated": the isolate's acks in progress, AVERAGED OVER TIME (an
 *   exponential moving average of the count, time constant
 *   ACK_LOAD_WINDOW_MS), above a threshold. By Little's law that average is
 *   the ack rate times the ack's duration: it grows when requests arrive
 *   faster than the isolate answers them, and stays low for a burst that
 *   clears. An instantaneous count cannot tell the two apart: measured in the
 *   benchmark's light load (10/s, which its load generator offers as ten
 *   requests at once each second), a gate of "more than 4 acks in progress
 *   now" shed 145 of 200 requests' rows to the queue's 1 s batch window
 *   (docs/benchmarks.md).
 * - "in_flight": inline rows already in flight at the cap. A ceiling on the
 *   isolate's outstanding Slack calls whatever the ack load (a slow Slack
 *   must not pile calls up in one isolate).
 *
 * `now` is a parameter of every decision (the Worker passes Date.now(), which
 * in workerd advances with I/O, enough for a window of a second).
 */

/** Why the gate gave a request's rows to the queue at once. */
export type ShedReason = "in_flight" | "saturated";

/**
 * The time constant of the ack-load average: a burst shorter than it barely
 * moves the average; load sustained for a fraction of it does.
 */
export const ACK_LOAD_WINDOW_MS = 1000;

export interface InlineGateLimits {
  /** Inline rows in flight at most. */
  readonly maxInFlight: number;
  /** The time-averaged acks in progress above which the isolate counts as saturated. */
  readonly maxAverageAcks: number;
  /** The average's time constant, ms. */
  readonly windowMs?: number;
}

export class InlineGate {
  private used = 0;
  private acks = 0;
  private average = 0;
  private at: number | undefined;
  readonly limits: Required<InlineGateLimits>;

  constructor(limits: InlineGateLimits) {
    this.limits = { windowMs: ACK_LOAD_WINDOW_MS, ...limits };
  }

  /** Runs one ack, counted as in progress from `clock()` before it to `clock()` after it. */
  async ack<T>(work: () => Promise<T>, clock: () => number): Promise<T> {
    this.ackStarted(clock());
    try {
      return await work();
    } finally {
      this.ackEnded(clock());
    }
  }

  ackStarted(now: number): void {
    this.advance(now);
    this.acks += 1;
  }

  ackEnded(now: number): void {
    this.advance(now);
    this.acks = Math.max(0, this.acks - 1);
  }

  /** The acks in progress, averaged over time up to `now`. */
  ackLoad(now: number): number {
    this.advance(now);
    return this.average;
  }

  /** Takes up to `wanted` slots; returns how many it got, or why none. */
  take(wanted: number, now: number): number | ShedReason {
    if (wanted <= 0) return 0;
    if (this.ackLoad(now) > this.limits.maxAverageAcks) return "saturated";
    const got = Math.min(wanted, this.limits.maxInFlight - this.used);
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

  /**
   * The count was constant since the last change, so the average moves
   * toward it exactly: average(t) = acks + (average − acks)·e^(−Δt/τ). A
   * clock that steps back counts as no time passed.
   */
  private advance(now: number): void {
    if (this.at === undefined) {
      this.at = now;
      return;
    }
    const dt = now - this.at;
    if (dt <= 0) return;
    this.average = this.acks + (this.average - this.acks) * Math.exp(-dt / this.limits.windowMs);
    this.at = now;
  }
}
