/**
 * The first attempt's load gate (one per isolate): may a request's rows go
 * first inline, or does the isolate shed them to the queue at once?
 *
 * Two signals, each with its own reason:
 *
 * - "saturated": acks are queueing in this isolate. Both at once: more than
 *   `maxConcurrentAcks` acks in progress at this moment, AND the acks that
 *   finished lately took more than `slowdown` times the usual ack (the
 *   fastest of the last USUAL_WINDOW_MS, never counted under
 *   `minUsualMs`). Either alone is not saturation:
 *   - many acks at once with usual durations is a burst, or an I/O-bound
 *     isolate (remote D1: acks overlap because each waits tens of ms on the
 *     database, not because the CPU is behind) — the burst goes inline whole:
 *     its requests plan before any of them has finished slowly;
 *   - slow acks one at a time is a slow database, which inline work does
 *     not make slower.
 *   When both hold, every request waits behind the others, inline work is
 *   taking CPU the acks need, and the rows go to the queue — the ack as it
 *   was before the first attempt. Shedding keeps the signal: under a load
 *   that saturates the isolate the acks still queue, now behind other acks,
 *   so the gate stays shut until the load eases and acks are quick again.
 *   Measured (docs/benchmarks.md, the ack and latency sections): a steady
 *   load at half of saturation reads ~1 ack in progress and a recent ack of
 *   1–2 ms (at most 5 and 5.3); a saturated ack run 5–20 in progress, 7–15 ms
 *   against a usual 1–2.
 *   The previous gate averaged "an ack in progress" over 0.5 s; shedding
 *   lowered that very signal, so under saturation it settled at its
 *   threshold and shed only a fifth to a third of the rows, and a round of
 *   saturation shorter than its time constant was mostly inline.
 * - "in_flight": inline rows already in flight at the cap. A ceiling on the
 *   isolate's outstanding inline work whatever the ack load (a slow Slack
 *   must not pile calls up in one isolate).
 *
 * `now` is a parameter of every decision (the Worker passes Date.now(), which
 * in workerd advances with I/O: an ack's duration is the time it waited on
 * I/O and for its turn, which is what grows when the isolate falls behind).
 */

/** Why the gate gave a request's rows to the queue at once. */
export type ShedReason = "in_flight" | "saturated";

/** "The usual ack" is the fastest one finished within this window. */
export const USUAL_WINDOW_MS = 30_000;
/** Acks finished longer ago than this say nothing about now: a lull ends the slowdown. */
export const RECENT_WINDOW_MS = 500;
/** Each finished ack's weight in the recent duration (an exponential average over acks). */
export const RECENT_WEIGHT = 0.2;

export interface InlineGateLimits {
  /** Inline rows in flight at most. */
  readonly maxInFlight: number;
  /** Acks in progress at once (the asking one included) above which the isolate may count as saturated… */
  readonly maxConcurrentAcks: number;
  /** …when its recent acks took more than this many times the usual ack. */
  readonly slowdown: number;
  /**
   * The usual ack is never counted below this, ms: Date.now() moves in whole
   * milliseconds, and a local ack can finish within one.
   */
  readonly minUsualMs: number;
}

/** What the gate read when it decided: said in the ack's log line when it sheds. */
export interface GateReading {
  readonly acks: number;
  readonly recentMs: number | undefined;
  readonly usualMs: number | undefined;
}

/** One bucket per second of the usual window: the fastest ack finished in it. */
const BUCKETS = Math.ceil(USUAL_WINDOW_MS / 1000);

export class InlineGate {
  private used = 0;
  private acks = 0;
  private recent: { ms: number; at: number } | undefined;
  private readonly fastest: { second: number; ms: number }[] = [];
  readonly limits: InlineGateLimits;

  constructor(limits: InlineGateLimits) {
    this.limits = limits;
  }

  /** Runs one ack, in progress from `clock()` before it to `clock()` after it; its duration is counted when it ends. */
  async ack<T>(work: () => Promise<T>, clock: () => number): Promise<T> {
    const startedAt = clock();
    this.ackStarted();
    try {
      return await work();
    } finally {
      this.ackEnded(startedAt, clock());
    }
  }

  ackStarted(): void {
    this.acks += 1;
  }

  /** An ack that started at `startedAt` ended at `now`. A clock that stepped back counts as a zero-length ack. */
  ackEnded(startedAt: number, now: number): void {
    this.acks = Math.max(0, this.acks - 1);
    const ms = Math.max(0, now - startedAt);
    const fresh = this.recent !== undefined && now - this.recent.at <= RECENT_WINDOW_MS;
    // After a lull the average starts again from this ack: a slowdown long past is not carried into a new burst.
    this.recent = { ms: fresh && this.recent ? this.recent.ms + RECENT_WEIGHT * (ms - this.recent.ms) : ms, at: now };
    const second = Math.floor(now / 1000);
    const bucket = this.fastest[second % BUCKETS];
    if (bucket?.second === second) bucket.ms = Math.min(bucket.ms, ms);
    else this.fastest[second % BUCKETS] = { second, ms };
  }

  /** The fastest ack finished within the usual window up to `now`, if any. */
  usualMs(now: number): number | undefined {
    const from = Math.floor((now - USUAL_WINDOW_MS) / 1000);
    let min: number | undefined;
    for (const b of this.fastest) if (b && b.second > from && (min === undefined || b.ms < min)) min = b.ms;
    return min;
  }

  /** The recent acks' duration (an average over acks), if one finished within RECENT_WINDOW_MS of `now`. */
  recentMs(now: number): number | undefined {
    return this.recent && now - this.recent.at <= RECENT_WINDOW_MS ? this.recent.ms : undefined;
  }

  reading(now: number): GateReading {
    return { acks: this.acks, recentMs: this.recentMs(now), usualMs: this.usualMs(now) };
  }

  /** Are acks queueing in this isolate at `now`? (See the module's comment.) */
  saturated(now: number): boolean {
    if (this.acks <= this.limits.maxConcurrentAcks) return false;
    const recent = this.recentMs(now);
    const usual = this.usualMs(now);
    if (recent === undefined || usual === undefined) return false;
    return recent > this.limits.slowdown * Math.max(this.limits.minUsualMs, usual);
  }

  /** Takes up to `wanted` slots; returns how many it got, or why none. */
  take(wanted: number, now: number): number | ShedReason {
    if (wanted <= 0) return 0;
    if (this.saturated(now)) return "saturated";
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

  get acksInProgress(): number {
    return this.acks;
  }
}
