import { describe, expect, it } from "vitest";
import { INLINE_MAX_BUSY_SHARE, INLINE_MAX_IN_FLIGHT, INLINE_MIN_AVERAGE_ACKS } from "../../shared/delivery/first-attempt.ts";
import { ACK_LOAD_WINDOW_MS, InlineGate } from "../../shared/delivery/inline-gate.ts";

const NOW = 1_000_000;
const TAU = ACK_LOAD_WINDOW_MS;
/** Long enough for both averages to reach a constant load (within e^-30). */
const LONG = 30 * TAU;

function gate(maxInFlight = INLINE_MAX_IN_FLIGHT): InlineGate {
  return new InlineGate({ maxInFlight, maxBusyShare: INLINE_MAX_BUSY_SHARE, minAverageAcks: INLINE_MIN_AVERAGE_ACKS });
}

function start(g: InlineGate, n: number, at: number): void {
  for (let i = 0; i < n; i++) g.ackStarted(at);
}

function end(g: InlineGate, n: number, at: number): void {
  for (let i = 0; i < n; i++) g.ackEnded(at);
}

/** Saturated for a long while: 20 acks in progress from NOW to NOW + LONG (busy share 1, 20 on average), then none. */
function saturatedUntil(g: InlineGate, until = NOW + LONG): void {
  start(g, 20, NOW);
  end(g, 20, until);
}

describe("InlineGate: saturation is a busy isolate with overlapping acks, averaged over time — not a count at an instant", () => {
  it("an idle isolate gives slots at once", () => {
    const g = gate();
    expect(g.take(1, NOW)).toBe(1);
    expect(g.inFlight).toBe(1);
  });

  it("a burst that clears is not saturation: ten acks at once for 50 ms, every one of them gets its slot", () => {
    const g = gate();
    start(g, 10, NOW);
    // Each request plans while all ten are in progress (what the old instantaneous count of 4 refused).
    const taken = Array.from({ length: 10 }, (_, i) => g.take(1, NOW + i * 5));
    end(g, 10, NOW + 50);
    expect(taken).toEqual(Array(10).fill(1));
    expect(g.busyShare(NOW + 50)).toBeLessThan(INLINE_MAX_BUSY_SHARE);
  });

  it("the same burst once a second, for a minute, never reads as saturated", () => {
    const g = gate(1000);
    const refused: unknown[] = [];
    for (let s = 0; s < 60; s++) {
      const t = NOW + s * 1000;
      start(g, 10, t);
      for (let i = 0; i < 10; i++) {
        const got = g.take(1, t + 40);
        if (got !== 1) refused.push(got);
      }
      end(g, 10, t + 50);
      g.give(10);
    }
    expect(refused).toEqual([]);
  });

  it("sustained overlapping acks saturate the gate once the busy share passes the threshold: both sides of the moment", () => {
    // From idle, 20 acks from NOW: the busy share is 1 − e^(−t/τ) and crosses the threshold at τ·ln(1/(1 − share)).
    const crossing = TAU * Math.log(1 / (1 - INLINE_MAX_BUSY_SHARE));
    const early = gate();
    start(early, 20, NOW);
    expect(early.take(1, NOW + crossing - 5)).toBe(1);
    const late = gate();
    start(late, 20, NOW);
    expect(late.take(1, NOW + crossing + 5)).toBe("saturated");
  });

  it("after saturation, slots come back once the busy share decays below the threshold: both sides of the moment", () => {
    // Busy share 1 at NOW + LONG, then idle: e^(−t/τ) falls to the threshold at τ·ln(1/share).
    const crossing = TAU * Math.log(1 / INLINE_MAX_BUSY_SHARE);
    const before = gate();
    saturatedUntil(before);
    expect(before.take(1, NOW + LONG + crossing - 5)).toBe("saturated");
    const after = gate();
    saturatedUntil(after);
    expect(after.take(1, NOW + LONG + crossing + 5)).toBe(1);
  });

  it("an isolate always busy with few overlapping acks is not saturated (an I/O-bound ack, remote D1): the average count must pass its floor too", () => {
    const at = gate();
    start(at, INLINE_MIN_AVERAGE_ACKS, NOW);
    // Busy share 1, and exactly the floor on average: not above it.
    expect(at.take(1, NOW + LONG)).toBe(1);
    const above = gate();
    start(above, INLINE_MIN_AVERAGE_ACKS + 1, NOW);
    expect(above.take(1, NOW + LONG)).toBe("saturated");
  });

  it("a clock that steps back counts as no time passed: the averages neither jump nor go negative", () => {
    const g = gate();
    start(g, 20, NOW);
    const share = g.busyShare(NOW + LONG);
    expect(g.busyShare(NOW)).toBe(share);
    expect(g.averageAcks(NOW)).toBeCloseTo(20, 6);
    expect(g.take(1, NOW)).toBe("saturated");
  });

  it("ack() counts the work as in progress from the clock's reading before it to the one after it", async () => {
    const g = gate();
    let t = NOW;
    await g.ack(
      async () => {
        t = NOW + LONG;
      },
      () => t,
    );
    // In progress for LONG: busy share and average both 1 (to within e^-30) when it ended.
    expect(g.busyShare(NOW + LONG)).toBeCloseTo(1, 6);
    expect(g.averageAcks(NOW + LONG)).toBeCloseTo(1, 6);
  });
});

describe("InlineGate: the in-flight cap", () => {
  it("gives what is left under the cap, then refuses with in_flight; a slot given back is taken again", () => {
    const g = gate(3);
    expect(g.take(2, NOW)).toBe(2);
    expect(g.take(2, NOW)).toBe(1);
    expect(g.take(1, NOW)).toBe("in_flight");
    g.give(1);
    expect(g.take(1, NOW)).toBe(1);
    expect(g.inFlight).toBe(3);
  });

  it("asks for nothing, gets nothing and is never refused; gives back never below zero", () => {
    const g = gate(0);
    expect(g.take(0, NOW)).toBe(0);
    g.give(5);
    expect(g.inFlight).toBe(0);
  });

  it("saturation is checked before the cap: a saturated isolate with free slots still sheds, and keeps its slots", () => {
    const g = gate(16);
    start(g, 20, NOW);
    expect(g.take(1, NOW + LONG)).toBe("saturated");
    expect(g.inFlight).toBe(0);
  });
});
