/**
 * The first attempt's load gate (one per isolate): may a request's rows go
 * first inline, or does the isolate shed them to the queue at once?
 *
 * Two signals, each with its own reason:
 *
 * - "saturated": the isolate's acks are queueing. All at once: more than
 *   `maxConcurrentAcks` requests in progress at this moment (the asking one
 *   included), AND the acks that recorded something lately took more than
 *   `slowdown` times as long as the usual such ack, AND they have done so
 *   for `slowdownLastsMs`. None alone is saturation:
 *   - many acks at once at their usual speed is a burst, or an I/O-bound
 *     isolate (remote D1: acks overlap because each waits on the network,
 *     not because the CPU is behind);
 *   - slow acks one at a time is a slow database, which inline work does
 *     not make slower;
 *   - and a slowdown that has not lasted `slowdownLastsMs` is a stall or a
 *     burst, not saturation: a burst's later acks queue behind its first,
 *     and a pause of the isolate (a collection, a neighbour on the CPU)
 *     queues the few requests that arrive during it, but both clear within
 *     tens of ms. Shedding them sent their rows a second later for nothing
 *     (measured: a steady half-saturation load shed 57–66 of 800 rows on
 *     such stalls, which made its p99 1.2 s). A slowdown starts when the
 *     recent average rises over `slowdown` × the usual; one that has not
 *     counted yet ends when the average is back at or under it (or at a
 *     lull). One that counted only pauses while the average is under: if it
 *     rises over again within RECENT_WINDOW_MS of when it last counted, it
 *     counts at once (a flood's average wavers around the threshold, and
 *     each dip must not buy the flood another `slowdownLastsMs` inline).
 *     It last counted when a stretch over the threshold without a dip had
 *     lasted `slowdownLastsMs`: a resumed slowdown's moments over do not
 *     renew it, so half a second after the last such stretch, moments over
 *     are a stall again.
 *     The threshold has no lower exit level, on purpose: a remote D1's
 *     spread keeps its average near it (mean 22 ms against 3 × 8), and a
 *     slowdown that ended only well under it would hold such an isolate
 *     shut; its moments over it do not last `slowdownLastsMs`.
 *   When all hold, each ack waits behind the others, inline work takes CPU
 *   the acks need, and the rows go to the queue — the ack as it was before
 *   the first attempt. Shedding keeps the signal: under a load that
 *   saturates the isolate the acks still queue, now behind other acks.
 *
 *   Every request is counted while in progress (one the runtime abandoned —
 *   a client that went away — stops counting after STALE_ACK_MS), but only
 *   acks that made the durable write are timed, and only up to the write's
 *   end (an ignored event or a url_verification answers without waiting on
 *   anything and would teach the gate a usual of zero; a modal's views.open
 *   after the write is Slack's latency, not the isolate's). So unsigned
 *   requests and slow bodies can raise the count but teach nothing: alone
 *   they cannot shut the gate.
 *
 *   The usual ack: the fastest timed ack of the last USUAL_WINDOW_MS — what
 *   the isolate does when nothing is in its way. Even in a flood some acks
 *   find the isolate free, so an isolate born into one still learns a usual
 *   it can compare with (measured: a median of each second's fastest learnt
 *   a flood's own 6–8 ms as usual and shed 3 % of its rows). Every timed ack
 *   is learnt, so a database that became slower for good becomes the usual
 *   within the window (learning only while the gate was open kept a busy
 *   isolate shut for good after such a step); an overload in which no ack
 *   at all is quick for a whole window is learnt the same way, and the gate
 *   reopens. One ack counts for at most MAX_SLOWDOWN_COUNTED × the usual, so
 *   a write that hit its budget does not shut the gate for the acks after
 *   it.
 *
 *   Known limit: the usual is the fastest, so a remote D1 whose writes
 *   spread widely (8–36 ms, mean 22) reads as a 3× slowdown now and then
 *   when more than 3 acks overlap. Counted at once, that shed a fifth of the
 *   rows at twelve in progress with that spread in random order (a review's
 *   measure; the unit test's model of it sheds a quarter); it must now last
 *   `slowdownLastsMs`, which that spread's moments do not (none shed in the
 *   model), except within half a second of a real slowdown that counted
 *   (the resume above). A spread slow for that long would send rows the
 *   queue's path, a second later; nothing is lost.
 *
 * - "in_flight": inline rows already in flight at the cap. A ceiling on the
 *   isolate's outstanding inline work whatever the ack load (a slow Slack
 *   must not pile calls up in one isolate).
 *
 * `now` is a parameter of every decision (the Worker passes Date.now(), which
 * in workerd advances with I/O: an ack's duration is the time it waited on
 * D1 and for its turn, which is what grows when the isolate falls behind).
 * A request asks the gate at the time it plans, not at its start: in an
 * isolate that has fallen behind, its start is long past, and asking as of
 * then would lengthen every slowdown by the request's own wait.
 */

/** Why the gate gave a request's rows to the queue at once. */
export type ShedReason = "in_flight" | "saturated";

/** The usual ack is the fastest timed within this window. */
export const USUAL_WINDOW_MS = 30_000;
/** Acks finished longer ago than this say nothing about now: a lull ends the slowdown. */
export const RECENT_WINDOW_MS = 500;
/** Each finished ack's weight in the recent duration (an exponential average over acks). */
export const RECENT_WEIGHT = 0.2;
/** A request in progress longer than this is counted no more: the runtime may have abandoned it (its client went away). */
export const STALE_ACK_MS = 10_000;
/** One timed ack counts for at most this many times the usual in the recent average. */
export const MAX_SLOWDOWN_COUNTED = 10;

export interface InlineGateLimits {
  /** Inline rows in flight at most. */
  readonly maxInFlight: number;
  /** Requests in progress at once (the asking one included) above which the isolate may count as saturated… */
  readonly maxConcurrentAcks: number;
  /** …when its recent timed acks took more than this many times as long as the usual one. */
  readonly slowdown: number;
  /** …and they have done so for at least this long, ms (a shorter slowdown is a stall or a burst). */
  readonly slowdownLastsMs: number;
  /**
   * The usual ack is never counted below this, ms: Date.now() moves in whole
   * milliseconds, and a local ack can finish within one.
   */
  readonly minUsualMs: number;
}

/** What the gate read when it decided: said in the ack's log line when it sheds. */
export interface GateReading {
  readonly acks: number;
  /** The recent timed acks' duration, ms (to 0.1). */
  readonly recentMs: number | undefined;
  /** The usual one, floored at minUsualMs, ms (to 0.1): saturation is recent > slowdown × this. */
  readonly usualMs: number | undefined;
  /**
   * How long the current slowdown has gone on, ms, dips included once it has
   * counted (undefined if the average is not over the threshold): it is
   * saturation from `slowdownLastsMs`.
   */
  readonly slowMs: number | undefined;
}

/**
 * A slowdown: whether the recent average is over the threshold now; since
 * when the slowdown has been going (through the dips of one that counted);
 * since when the average has been over without a dip (this stretch); and
 * the last ack at which a stretch of its own had lasted `slowdownLastsMs`
 * (the slowdown counted as saturation). Only such a stretch renews the
 * count: a resumed slowdown counts at once, but its moments over do not
 * keep it resumable, or a remote D1's spread, over the threshold a quarter
 * of the time in moments, would be held shut by one real slowdown for good.
 */
interface Slowdown {
  readonly over: boolean;
  readonly since: number | undefined;
  readonly stretchSince: number | undefined;
  readonly countedAt: number | undefined;
}

/** One bucket per second of the usual window: the fastest timed ack that ended in it (a ring: old seconds are overwritten). */
const BUCKETS = Math.ceil(USUAL_WINDOW_MS / 1000);

export class InlineGate {
  private used = 0;
  /** Start times of the requests in progress, by token. */
  private readonly inProgress = new Map<number, number>();
  private nextToken = 0;
  /** The recent timed acks: their average and when the last ended; the slowdown, as the last ack left it. */
  private recent: { ms: number; at: number; slowdown: Slowdown } | undefined;
  private readonly fastest: ({ second: number; ms: number } | undefined)[] = Array(BUCKETS).fill(undefined);
  readonly limits: InlineGateLimits;

  constructor(limits: InlineGateLimits) {
    this.limits = limits;
  }

  /** A request began at `now`; the token ends it. */
  ackStarted(now: number): number {
    const token = this.nextToken++;
    this.inProgress.set(token, now);
    return token;
  }

  /**
   * The request of `token` ended at `now`. `timedMs`: how long it took up to
   * the end of its durable write (committed, failed or given up on at its
   * budget), or undefined if it made none. A negative duration (a clock that
   * stepped back) counts as zero.
   */
  ackEnded(token: number, now: number, timedMs: number | undefined): void {
    this.inProgress.delete(token);
    if (timedMs === undefined) return;
    const usual = this.usualMs(now);
    const cap = usual === undefined ? Number.POSITIVE_INFINITY : MAX_SLOWDOWN_COUNTED * Math.max(this.limits.minUsualMs, usual);
    const ms = Math.max(0, timedMs);
    const took = Math.min(ms, cap);
    // After a lull the average (and any slowdown) starts again from this ack: a slowdown long past is not carried into a new burst.
    const last = this.recent !== undefined && now - this.recent.at <= RECENT_WINDOW_MS ? this.recent : undefined;
    // The carried average is capped too: an isolate's first ack, timed before any usual existed, is not carried whole.
    const carried = last ? Math.min(last.ms, cap) : undefined;
    const average = carried === undefined ? took : carried + RECENT_WEIGHT * (took - carried);
    const over = usual !== undefined && average > this.limits.slowdown * Math.max(this.limits.minUsualMs, usual);
    this.recent = { ms: average, at: now, slowdown: this.slowdownAfter(last?.slowdown, over, now) };
    const second = Math.floor(now / 1000);
    const slot = ((second % BUCKETS) + BUCKETS) % BUCKETS;
    const bucket = this.fastest[slot];
    // The usual learns the ack as it was (the cap is the average's, so a slower database can still become the usual).
    this.fastest[slot] = bucket?.second === second ? { second, ms: Math.min(bucket.ms, ms) } : { second, ms };
  }

  /**
   * The slowdown after an ack that left the average `over` the threshold or
   * not. Over: the stretch over goes on, or one starts now; the slowdown
   * goes on from its start, or, if one counted within RECENT_WINDOW_MS,
   * resumes (a flood's average wavers around the threshold, and each dip
   * must not buy it another `slowdownLastsMs` inline), or starts now. Not
   * over: the slowdown pauses; one that never counted ends (a stall, a burst).
   */
  private slowdownAfter(last: Slowdown | undefined, over: boolean, now: number): Slowdown {
    const countedAt = last?.countedAt;
    if (!over) return { over: false, since: countedAt === undefined ? undefined : last?.since, stretchSince: undefined, countedAt };
    const goesOn = last?.over === true;
    const resumes = !goesOn && countedAt !== undefined && now - countedAt <= RECENT_WINDOW_MS;
    const since = goesOn || resumes ? (last?.since ?? now) : now;
    const stretchSince = goesOn ? (last?.stretchSince ?? now) : now;
    const counts = now - stretchSince >= this.limits.slowdownLastsMs;
    return { over: true, since, stretchSince, countedAt: counts ? now : goesOn || resumes ? countedAt : undefined };
  }

  /** Requests in progress at `now`: those started within STALE_ACK_MS (the others are forgotten). */
  acksInProgress(now: number): number {
    for (const [token, at] of this.inProgress) if (now - at > STALE_ACK_MS) this.inProgress.delete(token);
    return this.inProgress.size;
  }

  /** The usual timed ack at `now`: the fastest within USUAL_WINDOW_MS, if any. Not floored (the floor applies where compared). */
  usualMs(now: number): number | undefined {
    const from = Math.floor((now - USUAL_WINDOW_MS) / 1000);
    let fastest: number | undefined;
    for (const b of this.fastest) if (b && b.second > from && (fastest === undefined || b.ms < fastest)) fastest = b.ms;
    return fastest;
  }

  /** The recent timed acks' duration (an average over acks), if one finished within RECENT_WINDOW_MS of `now`. */
  recentMs(now: number): number | undefined {
    return this.recent && now - this.recent.at <= RECENT_WINDOW_MS ? this.recent.ms : undefined;
  }

  reading(now: number): GateReading {
    const recent = this.recentMs(now);
    const usual = this.usualMs(now);
    return {
      acks: this.acksInProgress(now),
      recentMs: recent === undefined ? undefined : Math.round(recent * 10) / 10,
      usualMs: usual === undefined ? undefined : Math.round(Math.max(this.limits.minUsualMs, usual) * 10) / 10,
      slowMs: this.slowForMs(now),
    };
  }

  /** How long the current slowdown has lasted at `now`, if the average is over the threshold (a lull ends it). */
  slowForMs(now: number): number | undefined {
    const slowdown = this.recentMs(now) === undefined ? undefined : this.recent?.slowdown;
    return slowdown?.over && slowdown.since !== undefined ? Math.max(0, now - slowdown.since) : undefined;
  }

  /** Are the isolate's acks queueing at `now`? (See the module's comment.) */
  saturated(now: number): boolean {
    if (this.acksInProgress(now) <= this.limits.maxConcurrentAcks) return false;
    return (this.slowForMs(now) ?? -1) >= this.limits.slowdownLastsMs;
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
}
