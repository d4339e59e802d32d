import { describe, expect, it } from "vitest";
import { BatchPacer, CHANNEL_PACE_MS, METHOD_PACE_MS, paceMsOf } from "../../shared/delivery/pacing.ts";

const NOW = 1_000_000;
const C1 = "T1/channel/C1";

describe("paceMsOf", () => {
  it("paces a channel key at Slack's one a second and a method key at Tier 3's 50 a minute", () => {
    expect(paceMsOf(C1)).toBe(CHANNEL_PACE_MS);
    expect(paceMsOf("T1/method/views.publish")).toBe(METHOD_PACE_MS);
    expect(CHANNEL_PACE_MS).toBe(1000);
    expect(METHOD_PACE_MS).toBe(1200);
  });
});

describe("BatchPacer", () => {
  it("lets a row without a key and the first row of each key go at once", () => {
    const pacer = new BatchPacer(true);
    expect(pacer.reserve(null, false, NOW)).toEqual({ kind: "go", waitMs: 0 });
    expect(pacer.reserve(null, false, NOW)).toEqual({ kind: "go", waitMs: 0 });
    expect(pacer.reserve(C1, false, NOW)).toEqual({ kind: "go", waitMs: 0 });
    expect(pacer.reserve("T1/channel/C2", false, NOW)).toEqual({ kind: "go", waitMs: 0 });
    expect(pacer.reserve("T2/channel/C1", false, NOW)).toEqual({ kind: "go", waitMs: 0 });
  });

  it("with PACE_AHEAD on, sends a second row of a cold key to a shared slot rather than sleeping on it", () => {
    const pacer = new BatchPacer(true);
    pacer.reserve(C1, false, NOW);
    expect(pacer.reserve(C1, false, NOW)).toEqual({ kind: "busy" });
    expect(pacer.reserve(C1, false, NOW + 5000)).toEqual({ kind: "busy" });
  });

  it("with PACE_AHEAD off, lets every row of a cold key go at once: nothing is paced before a 429", () => {
    const pacer = new BatchPacer(false);
    for (let i = 0; i < 5; i++) expect(pacer.reserve(C1, false, NOW)).toEqual({ kind: "go", waitMs: 0 });
  });

  it("spaces a hot key's rows one pace apart, and sends one that would wait longer to a slot, whatever PACE_AHEAD says", () => {
    const pacer = new BatchPacer(false);
    expect(pacer.reserve(C1, true, NOW)).toEqual({ kind: "go", waitMs: 0 });
    expect(pacer.reserve(C1, true, NOW)).toEqual({ kind: "go", waitMs: CHANNEL_PACE_MS });
    expect(pacer.reserve(C1, true, NOW)).toEqual({ kind: "busy" });
    // Once time has moved on, the next call is again at most a pace away.
    expect(pacer.reserve(C1, true, NOW + CHANNEL_PACE_MS + 1)).toEqual({ kind: "go", waitMs: CHANNEL_PACE_MS - 1 });
    expect(pacer.reserve(C1, true, NOW + 10 * CHANNEL_PACE_MS)).toEqual({ kind: "go", waitMs: 0 });
  });
});
