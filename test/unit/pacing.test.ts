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
  it("lets a row without a key and the first row of each key go at once, and remembers each key on its own", () => {
    const pacer = new BatchPacer(true);
    const keys = [C1, "T1/channel/C2", "T2/channel/C1", "T1/method/views.publish"];
    expect(pacer.reserve(null, false, NOW)).toEqual({ kind: "go", waitMs: 0 });
    for (const key of keys) expect(pacer.reserve(key, false, NOW)).toEqual({ kind: "go", waitMs: 0 });
    // Each first row reserved its key, and only its key: a second row of each is paced; a row without a key never is.
    for (const key of keys) expect(pacer.reserve(key, false, NOW)).toEqual({ kind: "busy" });
    expect(pacer.reserve(null, false, NOW)).toEqual({ kind: "go", waitMs: 0 });
    // Hot keys, each spaced from its own first call at its own pace: a channel's 1 s, a method's 1.2 s.
    const hot = new BatchPacer(false);
    for (const key of keys) expect(hot.reserve(key, true, NOW)).toEqual({ kind: "go", waitMs: 0 });
    expect(keys.map((key) => hot.reserve(key, true, NOW))).toEqual([
      { kind: "go", waitMs: CHANNEL_PACE_MS },
      { kind: "go", waitMs: CHANNEL_PACE_MS },
      { kind: "go", waitMs: CHANNEL_PACE_MS },
      { kind: "go", waitMs: METHOD_PACE_MS },
    ]);
  });

  it("with PACE_AHEAD on, sends a second row of a cold key to a shared slot rather than sleeping on it", () => {
    const pacer = new BatchPacer(true);
    pacer.reserve(C1, false, NOW);
    expect(pacer.reserve(C1, false, NOW)).toEqual({ kind: "busy" });
    expect(pacer.reserve(C1, false, NOW + 5000)).toEqual({ kind: "busy" });
  });

  it("with PACE_AHEAD off, lets every row of a cold key go at once: nothing is paced before a 429; once hot, the key is paced from its first call", () => {
    const pacer = new BatchPacer(false);
    for (let i = 0; i < 5; i++) expect(pacer.reserve(C1, false, NOW)).toEqual({ kind: "go", waitMs: 0 });
    // The key turns hot (a 429 in another lane): its next row waits a pace after the batch's first call on it.
    expect(pacer.reserve(C1, true, NOW + 200)).toEqual({ kind: "go", waitMs: CHANNEL_PACE_MS - 200 });
    // The one after would wait more than a pace: it takes a shared release slot instead.
    expect(pacer.reserve(C1, true, NOW + 200)).toEqual({ kind: "busy" });
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
