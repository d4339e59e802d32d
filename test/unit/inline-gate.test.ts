import { describe, expect, it } from "vitest";
import {
  INLINE_MAX_CONCURRENT_ACKS,
  INLINE_MAX_IN_FLIGHT,
  INLINE_MIN_USUAL_MS,
  INLINE_SLOWDOWN,
} from "../../shared/delivery/first-attempt.ts";
import { InlineGate, RECENT_WINDOW_MS, USUAL_WINDOW_MS } from "../../shared/delivery/inline-gate.ts";

const NOW = 1_000_000;
/** A usual ack in these tests, ms: above the floor, so the threshold is INLINE_SLOWDOWN × this. */
const USUAL = 4;
const SLOW = INLINE_SLOWDOWN * USUAL;
const QUEUEING = INLINE_MAX_CONCURRENT_ACKS + 1;

function gate(maxInFlight = INLINE_MAX_IN_FLIGHT): InlineGate {
  return new InlineGate({
    maxInFlight,
    maxConcurrentAcks: INLINE_MAX_CONCURRENT_ACKS,
    slowdown: INLINE_SLOWDOWN,
    minUsualMs: INLINE_MIN_USUAL_MS,
  });
}

/** Finishes `n` acks of `ms` each, ending at `at` (one after another on the clock: each ends where the next starts). */
function finished(g: InlineGate, n: number, ms: number, at: number): void {
  for (let i = n - 1; i >= 0; i--) {
    g.ackStarted();
    g.ackEnded(at - i * ms - ms, at - i * ms);
  }
}

function inProgress(g: InlineGate, n: number): void {
  for (let i = 0; i < n; i++) g.ackStarted();
}

/** An isolate that has seen usual acks, then slow ones until `at`: the recent average converges on `ms`. */
function slowedTo(g: InlineGate, ms: number, at: number): void {
  finished(g, 3, USUAL, at - 5_000);
  finished(g, 60, ms, at);
}

describe("InlineGate: saturation is acks queueing — many at once AND much slower than usual", () => {
  it("an idle isolate gives slots at once", () => {
    const g = gate();
    expect(g.take(1, NOW)).toBe(1);
    expect(g.inFlight).toBe(1);
  });

  it("slow acks with many in progress shed: both sides of the slowdown threshold", () => {
    const under = gate();
    slowedTo(under, SLOW - 0.5, NOW);
    inProgress(under, QUEUEING);
    expect(under.take(1, NOW)).toBe(1);
    const over = gate();
    slowedTo(over, SLOW + 0.5, NOW);
    inProgress(over, QUEUEING);
    expect(over.take(1, NOW)).toBe("saturated");
    expect(over.reading(NOW)).toEqual({ acks: QUEUEING, recentMs: expect.closeTo(SLOW + 0.5, 3), usualMs: USUAL });
  });

  it("slow acks shed only with more than the concurrency threshold in progress: both sides of it", () => {
    const at = gate();
    slowedTo(at, 3 * SLOW, NOW);
    inProgress(at, INLINE_MAX_CONCURRENT_ACKS);
    // A slow database, acks one or a few at a time: inline work does not make it slower.
    expect(at.take(1, NOW)).toBe(1);
    const above = gate();
    slowedTo(above, 3 * SLOW, NOW);
    inProgress(above, INLINE_MAX_CONCURRENT_ACKS + 1);
    expect(above.take(1, NOW)).toBe("saturated");
  });

  it("a burst goes inline whole: twenty requests at once in an isolate whose acks have been quick, each plans before any is slow", () => {
    const g = gate();
    finished(g, 10, USUAL, NOW - 100);
    inProgress(g, 20);
    const taken = Array.from({ length: 20 }, () => g.take(1, NOW));
    expect(taken).toEqual(Array(20).fill(1));
  });

  it("an I/O-bound isolate (remote D1: every ack 40 ms, many overlapping) is not saturated: overlap at the usual speed", () => {
    const g = gate();
    finished(g, 200, 40, NOW);
    inProgress(g, 12);
    expect(g.take(1, NOW)).toBe(1);
  });

  it("the usual ack is never counted under the floor: acks of 0–1 ms make the threshold INLINE_SLOWDOWN × the floor", () => {
    const floorOnly = INLINE_SLOWDOWN * INLINE_MIN_USUAL_MS;
    const under = gate();
    finished(under, 3, 0, NOW - 1_000);
    finished(under, 60, floorOnly - 0.5, NOW);
    inProgress(under, QUEUEING);
    expect(under.take(1, NOW)).toBe(1);
    const over = gate();
    finished(over, 3, 0, NOW - 1_000);
    finished(over, 60, floorOnly + 0.5, NOW);
    inProgress(over, QUEUEING);
    expect(over.take(1, NOW)).toBe("saturated");
  });

  it("a lull ends the slowdown: the last slow ack counts until RECENT_WINDOW_MS after it, not after", () => {
    const g = gate();
    slowedTo(g, 3 * SLOW, NOW);
    inProgress(g, QUEUEING);
    expect(g.take(1, NOW + RECENT_WINDOW_MS)).toBe("saturated");
    expect(g.take(1, NOW + RECENT_WINDOW_MS + 1)).toBe(1);
  });

  it("after a lull the recent average starts again from the next ack: one quick ack reopens the gate at once", () => {
    const g = gate();
    slowedTo(g, 3 * SLOW, NOW);
    finished(g, 1, USUAL, NOW + RECENT_WINDOW_MS + 10);
    inProgress(g, QUEUEING);
    expect(g.recentMs(NOW + RECENT_WINDOW_MS + 10)).toBe(USUAL);
    expect(g.take(1, NOW + RECENT_WINDOW_MS + 10)).toBe(1);
  });

  it("within a run of acks one quick ack does not reopen it: the recent duration is an average over acks", () => {
    const g = gate();
    slowedTo(g, 3 * SLOW, NOW);
    finished(g, 1, USUAL, NOW + 1);
    inProgress(g, QUEUEING);
    expect(g.take(1, NOW + 1)).toBe("saturated");
  });

  it("the usual ack is the fastest within USUAL_WINDOW_MS: a quick ack just inside still counts, just outside it does not", () => {
    // One quick ack, then only slow ones: while the quick one is remembered, the slow ones read as a slowdown.
    for (const [age, expected] of [
      [USUAL_WINDOW_MS - 1_000, "saturated"],
      [USUAL_WINDOW_MS + 1_000, 1],
    ] as const) {
      const g = gate();
      finished(g, 1, USUAL, NOW - age);
      finished(g, 60, 3 * SLOW, NOW);
      inProgress(g, QUEUEING);
      expect(g.take(1, NOW)).toBe(expected);
    }
  });

  it("a clock that steps back counts as a zero-length ack, never a negative one", () => {
    const g = gate();
    g.ackStarted();
    g.ackEnded(NOW, NOW - 50);
    expect(g.recentMs(NOW)).toBe(0);
    expect(g.usualMs(NOW)).toBe(0);
    expect(g.acksInProgress).toBe(0);
  });

  it("ack() counts the work as in progress while it runs and its duration from the clock's reading before it to the one after it", async () => {
    const g = gate();
    let t = NOW;
    let during = -1;
    await g.ack(
      async () => {
        during = g.acksInProgress;
        t = NOW + 7;
      },
      () => t,
    );
    expect(during).toBe(1);
    expect(g.acksInProgress).toBe(0);
    expect(g.recentMs(NOW + 7)).toBe(7);
  });

  it("ack() ends the ack when the work throws", async () => {
    const g = gate();
    await expect(
      g.ack(
        async () => {
          throw new Error("boom");
        },
        () => NOW,
      ),
    ).rejects.toThrow("boom");
    expect(g.acksInProgress).toBe(0);
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
    slowedTo(g, 3 * SLOW, NOW);
    inProgress(g, QUEUEING);
    expect(g.take(1, NOW)).toBe("saturated");
    expect(g.inFlight).toBe(0);
  });
});
