/**
 * The fault plan of a chaos run: every random choice the run makes, derived
 * from its seed alone, so `--seed N` replays the same faults and a red run can
 * be replayed.
 *
 * Nothing here draws from a shared stream in the order things happen: with
 * eight deliveries in flight, six consumer lanes and a crash, the order of
 * calls differs between runs, so a sequential stream would hand the same
 * event different faults. Each choice is instead a function of the seed and
 * of what it is about — the event's index, the delivery's retry number, the
 * n-th call for an effect — so the same thing gets the same fate in every run.
 *
 * No fault or fate comes from Math.random: the Workers under test draw from it
 * only for their retry jitter (when, never whether), which
 * test/node/chaos-invariants.test.ts checks over every module bundled into
 * them; the faulty ingress takes its write faults from a header the sender
 * sets from this plan.
 */

export type WriteFault = "none" | "before_commit" | "after_commit";
export type Fate = "applied" | "fatal" | "http_5xx" | "http_429" | "internal_error" | "hang" | "applied_then_hang";

/** Slack's retries after a failed delivery (Slack sends at most three). */
export const MAX_RETRIES = 3;

/** The request header the faulty ingress (test/chaos/ingress-with-faults.ts) reads its write fault from. */
export const WRITE_FAULT_HEADER = "x-chaos-write-fault";

export interface EventPlan {
  readonly index: number;
  readonly kind: "mention" | "message" | "command" | "click";
  /** Aimed at a channel that does not exist (never for a command: its effect goes to a response_url). */
  readonly fatal: boolean;
  /** Redelivered at the same moment as the first delivery. */
  readonly duplicateNow: boolean;
  /** Redelivered a little later although acked, after this delay (ms); null: not. */
  readonly duplicateLaterMs: number | null;
  /** The write fault injected into the delivery with retry number i (0 the first delivery, up to MAX_RETRIES). */
  readonly writeFaults: readonly WriteFault[];
}

export interface PlanShares {
  readonly seed: number;
  readonly events: number;
  /** Share of deliveries whose durable write fails (half before, half after committing). */
  readonly writeFailures: number;
  readonly fatalShare: number;
  readonly duplicateNow: number;
  readonly duplicateLater: number;
}

/** The per-event plan: a pure function of the seed and the shares. */
export function planEvents(shares: PlanShares): EventPlan[] {
  return Array.from({ length: shares.events }, (_, index) => {
    const random = seededRandom(shares.seed, "event", index);
    const fatalRoll = random() < shares.fatalShare;
    const roll = random();
    const kind: EventPlan["kind"] = roll < 0.35 ? "mention" : roll < 0.7 ? "message" : roll < 0.85 ? "command" : "click";
    const duplicateNow = random() < shares.duplicateNow;
    const later = random() < shares.duplicateLater;
    const laterMs = 250 + Math.floor(random() * 1_000);
    const writeFaults = Array.from({ length: MAX_RETRIES + 1 }, (): WriteFault => {
      const write = random();
      return write < shares.writeFailures / 2 ? "before_commit" : write < shares.writeFailures ? "after_commit" : "none";
    });
    return {
      index,
      kind,
      fatal: fatalRoll && kind !== "command",
      duplicateNow,
      duplicateLaterMs: later ? laterMs : null,
      writeFaults,
    };
  });
}

/**
 * The fate of the n-th call (from 1) that a non-fatal effect makes at Slack:
 * with probability `transient` one of four transient faults, evenly — HTTP 5xx
 * (500 or 503), 429, ok:false internal_error, or a hang (half of them after
 * applying the effect) — otherwise applied.
 */
export function slackFate(seed: number, transient: number, effectKey: string, call: number): { fate: Fate; status5xx: 500 | 503 } {
  const random = seededRandom(seed, "slack", effectKey, call);
  const faulty = random() < transient;
  const kind = Math.floor(random() * 4);
  const coin = random() < 0.5;
  if (!faulty) return { fate: "applied", status5xx: 500 };
  if (kind === 0) return { fate: "http_5xx", status5xx: coin ? 500 : 503 };
  if (kind === 1) return { fate: "http_429", status5xx: 500 };
  if (kind === 2) return { fate: "internal_error", status5xx: 500 };
  return { fate: coin ? "hang" : "applied_then_hang", status5xx: 500 };
}

/** A random source seeded by the run's seed and the parts naming one choice (FNV-1a of them, then mulberry32). */
export function seededRandom(seed: number, ...parts: readonly (string | number)[]): () => number {
  let hash = 0x811c9dc5;
  for (const char of [seed, ...parts].join("\u0000")) {
    hash ^= char.codePointAt(0) ?? 0;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return mulberry32(hash);
}

/** A seeded PRNG in [0, 1) (mulberry32): the same seed gives the same sequence in every run. */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}
