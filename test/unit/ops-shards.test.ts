/**
 * The pure parts of the operator surface across shards: a row ref parsed and
 * formatted (shared/ops/row-ref.ts), the shards' figures merged into one
 * system's (shared/ops/merge.ts), and the dead list's merged order and cursors
 * (shared/ops/dead-shards.ts).
 */
import { describe, expect, it } from "vitest";
import type { BacklogFigures, WaitingTeam } from "../../shared/ops/backlog.ts";
import { compareDead, decodeShardCursor, encodeShardCursor, shardCursorOf } from "../../shared/ops/dead-shards.ts";
import { mergeFigures } from "../../shared/ops/merge.ts";
import { formatRowRef, parseRowRef } from "../../shared/ops/row-ref.ts";

describe("row refs", () => {
  it.each([
    ["1:42", 2, { shard: 1, id: 42 }],
    ["0:7", 2, { shard: 0, id: 7 }],
    ["15:1", 16, { shard: 15, id: 1 }],
    ["42", 1, { shard: 0, id: 42 }],
    [42, 1, { shard: 0, id: 42 }],
    ["0:42", 1, { shard: 0, id: 42 }],
  ])("%j with %i shard(s) names %o", (text, count, ref) => {
    expect(parseRowRef(text, count)).toEqual({ ok: true, value: ref });
  });

  it.each([
    ["1:", 2, 'row ref "1:": want "<shard>:<id>" (e.g. 1:42'],
    ["x:3", 2, 'row ref "x:3": want "<shard>:<id>"'],
    [":3", 2, 'want "<shard>:<id>"'],
    ["1:2:3", 2, 'want "<shard>:<id>"'],
    ["9:1", 2, 'row ref "9:1": shard 9 is not configured (SHARD_COUNT is 2: shards 0–1)'],
    ["1:1", 1, "shard 1 is not configured (SHARD_COUNT is 1: shards 0–0)"],
    ["3", 2, 'row ref "3": with 2 shards a row id is ambiguous; name the row as <shard>:<id> (e.g. 0:3 or 1:3'],
    [3, 4, "with 4 shards a row id is ambiguous"],
    ["0", 1, "a row id is a positive whole number"],
    ["1:0", 2, "a row id is a positive whole number"],
    [-2, 1, 'want "<shard>:<id>"'],
    [1.5, 1, 'want "<shard>:<id>"'],
    [null, 2, 'want "<shard>:<id>"'],
    ["1: 2", 2, 'want "<shard>:<id>"'],
  ])("%j with %i shard(s) is refused: %s", (text, count, error) => {
    const parsed = parseRowRef(text, count);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.error).toContain(error);
  });

  it("is the plain id with one shard and <shard>:<id> with more, and parses back to itself", () => {
    expect(formatRowRef({ shard: 0, id: 42 }, 1)).toBe("42");
    expect(formatRowRef({ shard: 0, id: 42 }, 2)).toBe("0:42");
    expect(formatRowRef({ shard: 3, id: 9 }, 4)).toBe("3:9");
    for (const count of [1, 2, 16]) {
      const ref = { shard: count - 1, id: 123 };
      expect(parseRowRef(formatRowRef(ref, count), count)).toEqual({ ok: true, value: ref });
    }
  });
});

function figures(over: Partial<BacklogFigures>): BacklogFigures {
  return {
    at: 1_000_000,
    cap: 100,
    capped: false,
    pending: 0,
    leased: 0,
    dead: 0,
    byEffect: {},
    oldestPendingDueAt: null,
    oldestPendingAgeMs: null,
    waitingForTime: 0,
    nextTimerAt: null,
    staleLeases: 0,
    neverEnqueued: 0,
    overdue: 0,
    windows: [{ windowMs: 60_000, done: 0, failed: 0, parkedDead: 0, failureRate: null }],
    waitingTeams: [],
    steps: { live: 0, waitingForUser: 0, nearExpiry: 0, nextExpiryAt: null },
    lastAlertPost: null,
    ...over,
  };
}

const team = (teamId: string, oldestCreatedAt: number): WaitingTeam => ({
  teamId,
  installKey: null,
  state: "missing",
  reason: null,
  blockedAt: null,
  rows: 1,
  oldestCreatedAt,
});

describe("mergeFigures", () => {
  it("sums the counts, keeps the oldest pending, sums the windows and recomputes the rate from the sums", () => {
    const merged = mergeFigures([
      figures({
        pending: 2,
        leased: 1,
        dead: 3,
        staleLeases: 1,
        neverEnqueued: 2,
        overdue: 1,
        byEffect: { "chat.postMessage": { pending: 2, leased: 1, dead: 0 } },
        oldestPendingDueAt: 900_000,
        oldestPendingAgeMs: 100_000,
        windows: [{ windowMs: 60_000, done: 1, failed: 3, parkedDead: 1, failureRate: 0.75 }],
        lastAlertPost: { id: 7, status: "dead", error: "channel_not_found", channel: "C0A" },
        waitingTeams: [team("T0LATE", 950_000)],
      }),
      figures({
        pending: 5,
        dead: 1,
        byEffect: { "chat.postMessage": { pending: 1, leased: 0, dead: 1 }, "reactions.add": { pending: 4, leased: 0, dead: 0 } },
        oldestPendingDueAt: 400_000,
        oldestPendingAgeMs: 600_000,
        windows: [{ windowMs: 60_000, done: 9, failed: 0, parkedDead: 0, failureRate: 0 }],
        lastAlertPost: { id: 1, status: "done", error: null, channel: "C0A" },
        waitingTeams: [team("T0EARLY", 500_000)],
      }),
    ]);
    expect(merged).toMatchObject({
      pending: 7,
      leased: 1,
      dead: 4,
      staleLeases: 1,
      neverEnqueued: 2,
      overdue: 1,
      capped: false,
      byEffect: { "chat.postMessage": { pending: 3, leased: 1, dead: 1 }, "reactions.add": { pending: 4, leased: 0, dead: 0 } },
      oldestPendingDueAt: 400_000,
      oldestPendingAgeMs: 600_000,
      windows: [{ windowMs: 60_000, done: 10, failed: 3, parkedDead: 1, failureRate: 3 / 13 }],
      // Alert posts live on shard 0.
      lastAlertPost: { id: 7, status: "dead" },
    });
    expect(merged.waitingTeams.map((t) => t.teamId)).toEqual(["T0EARLY", "T0LATE"]);
  });

  it("is capped when any shard is, has no oldest when no shard has one, and no rate when no shard attempted", () => {
    const merged = mergeFigures([figures({}), figures({ capped: true })]);
    expect(merged).toMatchObject({ capped: true, oldestPendingAgeMs: null, windows: [{ failureRate: null }] });
  });

  it("is the one shard's figures unchanged with one shard", () => {
    const one = figures({ pending: 3 });
    expect(mergeFigures([one])).toBe(one);
  });
});

describe("the dead list's merged order and cursors", () => {
  it("orders newest first, then shard 0 before shard 1, then the higher id first", () => {
    const rows = [
      { completedAt: 5, shard: 1, id: 1 },
      { completedAt: 5, shard: 0, id: 1 },
      { completedAt: 9, shard: 1, id: 3 },
      { completedAt: 5, shard: 0, id: 2 },
    ];
    expect([...rows].sort(compareDead)).toEqual([
      { completedAt: 9, shard: 1, id: 3 },
      { completedAt: 5, shard: 0, id: 2 },
      { completedAt: 5, shard: 0, id: 1 },
      { completedAt: 5, shard: 1, id: 1 },
    ]);
  });

  it("derives each shard's own cursor: before the cursor's shard none of its rows at that time, after it all of them", () => {
    const cursor = { completedAt: 5, shard: 1, id: 7 };
    expect(shardCursorOf(cursor, 0)).toEqual({ completedAt: 5, id: 0 });
    expect(shardCursorOf(cursor, 1)).toEqual({ completedAt: 5, id: 7 });
    expect(shardCursorOf(cursor, 2)).toEqual({ completedAt: 5, id: Number.MAX_SAFE_INTEGER });
  });

  it("encodes the triple with several shards and the pair with one, and refuses the other form", () => {
    const cursor = { completedAt: 1764504000000, shard: 1, id: 42 };
    expect(encodeShardCursor(cursor, 2)).toBe("1764504000000.1.42");
    expect(decodeShardCursor("1764504000000.1.42", 2)).toEqual(cursor);
    expect(encodeShardCursor({ ...cursor, shard: 0 }, 1)).toBe("1764504000000.42");
    expect(decodeShardCursor("1764504000000.42", 1)).toEqual({ ...cursor, shard: 0 });
    expect(decodeShardCursor("1764504000000.42", 2)).toBeNull();
    expect(decodeShardCursor("1764504000000.2.42", 2)).toBeNull();
    expect(decodeShardCursor("1764504000000.1.42", 1)).toBeNull();
  });
});
