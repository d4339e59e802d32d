/**
 * The first attempt's load gate (one per isolate): may a request's rows go
 * first inline, or does the isolate shed them to the queue at once?
 *
 * Two signals, each with its own reason:
 *
 * - "saturated": the isolate has been busy with acks most of the last
 *   moments AND they overlap — both averaged over time (exponential moving
 *   averages, time constant ACK_LOAD_WINDOW_MS): the share of time with at
 *   least one ack in progress above `maxBusyShare`, and the acks in progress
 *   above `minAverageAcks`. A burst that clears and then waits is neither,
 *   however many requests it held. Measured in the benchmark
 *   (docs/benchmarks.md) — instantaneous counts cannot tell a burst from
 *   saturation: "more than 4 acks in progress now" shed 145 of 200 requests'
 *   rows at the light 10/s (its load generator sends ten at once each
 *   second). Averaged, the light load reads a busy share of 0–0.1, half
 *   saturation 0–0.4, the saturated ack run 0.4–0.6 with 4–7 acks in
 *   progress (requests wait in the runtime outside the handler, where no
 *   count sees them). The acks condition keeps an I/O-bound isolate (remote
 *   D1: one ack in progress most of the time, never more than a couple) from
 *   reading as saturated on its busy share alone.
 * - "in_flight": inline rows already in flight at the cap. A ceiling on the
 *   isolate's outstanding inline work whatever the ack load (a slow Slack
 *   must not pile calls up in one isolate).
 *
 * `now` is a parameter of every decision (the Worker passes Date.now(), which
 * in workerd advances with I/O, enough for a window of a second).
 */

/** Why the gate gave a request's rows to the queue at once. */
export type ShedReason = "in_flight" | "saturated";

/**
 * The time constant of the busy share: a burst shorter than it barely moves
 * it; an isolate busy without a pause for a few of it reads as saturated.
 */
export const ACK_LOAD_WINDOW_MS = 500;

export interface InlineGateLimits {
  /** Inline rows in flight at most. */
  readonly maxInFlight: number;
  /** The share of recent time with an ack in progress (0–1) above which the isolate may count as saturated… */
  readonly maxBusyShare: number;
  /** …when the acks in progress, averaged over the same window, are also above this. */
  readonly minAverageAcks: number;
  /** The average's time constant, ms. */
  readonly windowMs?: number;
}

export class InlineGate {
  private used = 0;
  private acks = 0;
  private busy = 0;
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

  /** The share of recent time, up to `now`, with at least one ack in progress. */
  busyShare(now: number): number {
    this.advance(now);
    return this.busy;
  }

  /** The acks in progress, averaged over recent time up to `now`. */
  averageAcks(now: number): number {
    this.advance(now);
    return this.average;
  }

  /** Takes up to `wanted` slots; returns how many it got, or why none. */
  take(wanted: number, now: number): number | ShedReason {
    if (wanted <= 0) return 0;
    if (this.busyShare(now) > this.limits.maxBusyShare && this.average > this.limits.minAverageAcks) return "saturated";
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
   * The count (and so busy or idle) was constant since the last change, so
   * each average moves toward it exactly: x(t) = v + (x − v)·e^(−Δt/τ), v the
   * count, or 1 while an ack is in progress and 0 when none is. A clock that
   * steps back counts as no time passed.
   */
  private advance(now: number): void {
    if (this.at === undefined) {
      this.at = now;
      return;
    }
    const dt = now - this.at;
    if (dt <= 0) return;
    const decay = Math.exp(-dt / this.limits.windowMs);
    const b = this.acks > 0 ? 1 : 0;
    this.busy = b + (this.busy - b) * decay;
    this.average = this.acks + (this.average - this.acks) * decay;
    this.at = now;
  }
}
