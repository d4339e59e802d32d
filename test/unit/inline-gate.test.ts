import { describe, expect, it } from "vitest";
import { INLINE_MAX_AVERAGE_ACKS, INLINE_MAX_IN_FLIGHT } from "../../shared/delivery/first-attempt.ts";
import { ACK_LOAD_WINDOW_MS, InlineGate } from "../../shared/delivery/inline-gate.ts";

const NOW = 1_000_000;
const WINDOW = ACK_LOAD_WINDOW_MS;

function gate(maxInFlight = INLINE_MAX_IN_FLIGHT, maxAverageAcks = INLINE_MAX_AVERAGE_ACKS): InlineGate {
  return new InlineGate({ maxInFlight, maxAverageAcks });
}

/** `n` acks that start at `from` and end at `to`. */
function acks(g: InlineGate, n: number, from: number, to: number): void {
  for (let i = 0; i < n; i++) g.ackStarted(from);
  for (let i = 0; i < n; i++) g.ackEnded(to);
}

describe("InlineGate: saturation is acks in progress averaged over time, not counted at an instant", () => {
  it("an idle isolate gives slots at once", () => {
    const g = gate();
    expect(g.take(1, NOW)).toBe(1);
    expect(g.inFlight).toBe(1);
  });

  it("a burst that clears is not saturation: ten acks at once for 50 ms, every one of them gets its slot", () => {
    const g = gate();
    for (let i = 0; i < 10; i++) g.ackStarted(NOW);
    // Each request plans while all ten are in progress (what an instantaneous count of 4 refused).
    const taken = Array.from({ length: 10 }, (_, i) => g.take(1, NOW + i * 5));
    for (let i = 0; i < 10; i++) g.ackEnded(NOW + 50);
    expect(taken).toEqual(Array(10).fill(1));
    expect(g.ackLoad(NOW + 50)).toBeLessThan(1);
  });

  it("the same burst once a second, for a minute, never reads as saturated", () => {
    const g = gate(1000);
    const refused: unknown[] = [];
    for (let s = 0; s < 60; s++) {
      const t = NOW + s * 1000;
      for (let i = 0; i < 10; i++) g.ackStarted(t);
      for (let i = 0; i < 10; i++) {
        const got = g.take(1, t + 40);
        if (got !== 1) refused.push(got);
      }
      for (let i = 0; i < 10; i++) g.ackEnded(t + 50);
      g.give(10);
    }
    expect(refused).toEqual([]);
  });

  it("sustained load just above the threshold is saturated; just at it, not", () => {
    const above = gate();
    acks(above, INLINE_MAX_AVERAGE_ACKS + 1, NOW, NOW + 30 * WINDOW);
    // The average reached the count it held for thirty windows (within e^-30), then the acks ended at that instant.
    expect(above.take(1, NOW + 30 * WINDOW)).toBe("saturated");

    const at = gate();
    acks(at, INLINE_MAX_AVERAGE_ACKS, NOW, NOW + 30 * WINDOW);
    expect(at.take(1, NOW + 30 * WINDOW)).toBe(1);
  });

  it("after saturation, slots come back once the average decays below the threshold: both sides of the moment", () => {
    // 20 acks held for 30 windows (an average of 20), then none: 20·e^(-t/τ) falls to 4 at t = τ·ln 5.
    const crossing = WINDOW * Math.log(20 / INLINE_MAX_AVERAGE_ACKS);
    const before = gate();
    acks(before, 20, NOW, NOW + 30 * WINDOW);
    expect(before.take(1, NOW + 30 * WINDOW + crossing - 5)).toBe("saturated");
    const after = gate();
    acks(after, 20, NOW, NOW + 30 * WINDOW);
    expect(after.take(1, NOW + 30 * WINDOW + crossing + 5)).toBe(1);
  });

  it("load that starts saturates the gate within a fraction of the window, not at once", () => {
    // 20 acks from NOW: the average passes 4 at τ·ln(20/16) ≈ 0.22 τ.
    const crossing = WINDOW * Math.log(20 / (20 - INLINE_MAX_AVERAGE_ACKS));
    const early = gate();
    for (let i = 0; i < 20; i++) early.ackStarted(NOW);
    expect(early.take(1, NOW + crossing - 5)).toBe(1);
    const late = gate();
    for (let i = 0; i < 20; i++) late.ackStarted(NOW);
    expect(late.take(1, NOW + crossing + 5)).toBe("saturated");
  });

  it("a clock that steps back counts as no time passed: the average neither jumps nor goes negative", () => {
    const g = gate();
    acks(g, 20, NOW, NOW + 30 * WINDOW);
    const load = g.ackLoad(NOW + 30 * WINDOW);
    expect(g.ackLoad(NOW)).toBe(load);
    expect(g.take(1, NOW)).toBe("saturated");
  });

  it("ack() counts the work as in progress from the clock's reading before it to the one after it", async () => {
    const g = gate();
    let t = NOW;
    await g.ack(
      async () => {
        t = NOW + 30 * WINDOW;
      },
      () => t,
    );
    // Thirty windows with one ack in progress: the average is 1 (to within e^-30), then it ended.
    expect(g.ackLoad(NOW + 30 * WINDOW)).toBeCloseTo(1, 6);
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
    acks(g, 20, NOW, NOW + 30 * WINDOW);
    expect(g.take(1, NOW + 30 * WINDOW)).toBe("saturated");
    expect(g.inFlight).toBe(0);
  });
});
