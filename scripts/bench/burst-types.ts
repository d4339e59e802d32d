/** The burst benchmark's options and figures: plain data, shared by its Node side (burst.ts) and its simulation (burst-sim.ts). */

export interface BurstOptions {
  /** Events in the burst, one scenario each (the issue asks for ≥ 300). */
  readonly eventCounts: readonly number[];
  /** Channel counts to spread the burst over, one scenario each. */
  readonly channelCounts: readonly number[];
  /** The fake Slack: sustained calls per second per channel, and the burst it lets through. */
  readonly perChannelPerSecond: number;
  readonly burst: number;
  /** Latency of one Slack call, in virtual ms. */
  readonly callLatencyMs: number;
  /** Virtual time after which a run stops, drained or not. */
  readonly capSeconds: number;
}

export type BurstVariantName = "ackbox (PACE_AHEAD off, the default)" | "ackbox, PACE_AHEAD on";

export interface BurstRun {
  readonly variant: BurstVariantName;
  readonly channels: number;
  readonly events: number;
  readonly delivered: number;
  readonly dead: number;
  /** Rows neither done nor dead when the run stopped (at capSeconds). */
  readonly unfinished: number;
  readonly slackCalls: number;
  readonly rateLimited: number;
  readonly rateLimitedShare: number;
  /** Successful calls beyond one per row: repeats. */
  readonly duplicates: number;
  /** Virtual seconds from the burst to the last effect; null when not every row was delivered. */
  readonly drainSeconds: number | null;
  /** events ÷ (channels × perChannelPerSecond). */
  readonly idealSeconds: number;
  readonly drainOverIdeal: number | null;
  /** Messages that reached the dead-letter queue (max_retries). */
  readonly deadLettered: number;
}

export interface BurstResult {
  readonly config: BurstOptions;
  readonly runs: readonly BurstRun[];
}
