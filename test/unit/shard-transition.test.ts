/**
 * Adding a shard (docs/scaling.md, "Adding a shard"): the setting that opens
 * the window, its checks, and which keys the window concerns.
 */
import { describe, expect, it } from "vitest";
import { parseSettings } from "../../shared/settings.ts";
import { shardIndexOf } from "../../shared/shards/route.ts";
import { previousShardOf, transitionOf } from "../../shared/shards/transition.ts";

const keys = Array.from({ length: 2000 }, (_, i) => `T:T${(i * 7919).toString(36).toUpperCase().padStart(8, "0")}`);

describe("SHARD_COUNT_PREVIOUS", () => {
  it("is unset by default: the steady state, no transition", () => {
    const result = parseSettings({});
    if (!result.ok) throw new Error(result.errors.join("; "));
    expect(result.settings.shardCountPrevious).toBeUndefined();
    expect(transitionOf(result.settings)).toBeUndefined();
  });

  it("set below SHARD_COUNT opens the transition from the previous count to the count", () => {
    const result = parseSettings({ SHARD_COUNT: "3", SHARD_COUNT_PREVIOUS: "2" });
    if (!result.ok) throw new Error(result.errors.join("; "));
    expect(transitionOf(result.settings)).toEqual({ count: 3, previous: 2 });
  });

  it.each([
    [
      { SHARD_COUNT: "2", SHARD_COUNT_PREVIOUS: "2" },
      "SHARD_COUNT_PREVIOUS must be smaller than SHARD_COUNT while a shard is added (got 2 and 2); leave it empty otherwise",
    ],
    [
      { SHARD_COUNT: "2", SHARD_COUNT_PREVIOUS: "3" },
      "SHARD_COUNT_PREVIOUS must be smaller than SHARD_COUNT while a shard is added (got 3 and 2); leave it empty otherwise",
    ],
    // Left behind after a move, or set before SHARD_COUNT was raised: a one-shard deployment has nothing to move from.
    [
      { SHARD_COUNT_PREVIOUS: "1" },
      "SHARD_COUNT_PREVIOUS must be smaller than SHARD_COUNT while a shard is added (got 1 and 1); leave it empty otherwise",
    ],
    [{ SHARD_COUNT: "2", SHARD_COUNT_PREVIOUS: "0" }, 'SHARD_COUNT_PREVIOUS must be a whole number from 1 to 15, got "0"'],
    [{ SHARD_COUNT: "2", SHARD_COUNT_PREVIOUS: "one" }, 'SHARD_COUNT_PREVIOUS must be a whole number from 1 to 15, got "one"'],
  ])("%o is a configuration error that says what it wants", (raw, error) => {
    const result = parseSettings(raw);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.errors).toContain(error);
  });
});

describe("which keys move", () => {
  it("1 → 2: exactly the keys that land on shard 1, each from shard 0; the others do not move", () => {
    const transition = { count: 2, previous: 1 };
    const moved = keys.filter((key) => previousShardOf(key, transition) !== undefined);
    expect(moved).toEqual(keys.filter((key) => shardIndexOf(key, 2) === 1));
    for (const key of moved) expect(previousShardOf(key, transition)).toBe(0);
    // About half, as jump hash promises (1 / (N + 1)).
    expect(moved.length / keys.length).toBeGreaterThan(0.45);
    expect(moved.length / keys.length).toBeLessThan(0.55);
  });

  it("3 → 4: only keys now on the new shard move, each from its own previous shard, about a quarter of them", () => {
    const transition = { count: 4, previous: 3 };
    const moved = keys.filter((key) => previousShardOf(key, transition) !== undefined);
    for (const key of moved) {
      expect(shardIndexOf(key, 4)).toBe(3);
      expect(previousShardOf(key, transition)).toBe(shardIndexOf(key, 3));
    }
    expect(moved.length / keys.length).toBeGreaterThan(0.2);
    expect(moved.length / keys.length).toBeLessThan(0.3);
  });

  it("outside a transition, and for an input without a team, nothing has a previous shard", () => {
    for (const key of keys.slice(0, 100)) expect(previousShardOf(key, undefined)).toBeUndefined();
    expect(previousShardOf(undefined, { count: 2, previous: 1 })).toBeUndefined();
  });
});
