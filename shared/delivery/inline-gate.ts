/**
 * The first attempt's bound per isolate: at most `max` inline rows in flight
 * at once. Past it a request's rows go to the queue at once, so a slow Slack
 * cannot pile calls up in one isolate. It counts and nothing else: no clock,
 * no averages, nothing learnt.
 */
export class InlineGate {
  private used = 0;
  readonly max: number;

  constructor(max: number) {
    this.max = max;
  }

  /** Takes up to `wanted` slots; returns how many it got, or "in_flight" if none were left. */
  take(wanted: number): number | "in_flight" {
    if (wanted <= 0) return 0;
    const got = Math.min(wanted, this.max - this.used);
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
