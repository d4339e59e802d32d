import { describe, expect, it } from "vitest";
import { ShardConfigError, shardBindingName, shardsOf } from "../../shared/shards/bindings.ts";
import { fnv1a64, HOME_SHARD, jumpHash, routingKeyOf, shardIndexOf } from "../../shared/shards/route.ts";

const teams = Array.from({ length: 2000 }, (_, i) => `T${(i * 7919).toString(36).toUpperCase().padStart(8, "0")}`);

describe("routingKeyOf", () => {
  it("keys a workspace by its team and an org-wide install by its enterprise", () => {
    expect(routingKeyOf({ teamId: "T1", enterpriseId: "E1" })).toBe("T:T1");
    expect(routingKeyOf({ teamId: "T1", enterpriseId: "E1", isEnterpriseInstall: false })).toBe("T:T1");
    expect(routingKeyOf({ teamId: "T1", enterpriseId: "E1", isEnterpriseInstall: true })).toBe("E:E1");
    expect(routingKeyOf({ enterpriseId: "E1", isEnterpriseInstall: true })).toBe("E:E1");
  });

  it("has no key when neither the team nor an org-wide enterprise is known", () => {
    expect(routingKeyOf({})).toBeUndefined();
    expect(routingKeyOf({ enterpriseId: "E1" })).toBeUndefined();
    expect(routingKeyOf({ teamId: "" })).toBeUndefined();
  });
});

describe("shardIndexOf", () => {
  it("matches FNV-1a 64's published vectors, so the routing is the same on every runtime", () => {
    expect(fnv1a64("")).toBe(0xcbf29ce484222325n);
    expect(fnv1a64("a")).toBe(0xaf63dc4c8601ec8cn);
    expect(fnv1a64("foobar")).toBe(0x85944171f73967e8n);
  });

  it("routes the same team to the same shard every time, and an input without a team to the home shard", () => {
    for (const team of teams.slice(0, 50)) expect(shardIndexOf(`T:${team}`, 4)).toBe(shardIndexOf(`T:${team}`, 4));
    expect(shardIndexOf(undefined, 4)).toBe(HOME_SHARD);
    expect(shardIndexOf("T:anything", 1)).toBe(0);
  });

  it("spreads teams over the shards within 10 % of an even share", () => {
    for (const count of [2, 4, 8]) {
      const perShard = new Array<number>(count).fill(0);
      for (const team of teams) perShard[shardIndexOf(`T:${team}`, count)] = (perShard[shardIndexOf(`T:${team}`, count)] ?? 0) + 1;
      for (const n of perShard) expect(Math.abs(n - teams.length / count)).toBeLessThan((teams.length / count) * 0.1);
    }
  });

  it("moves only the keys that land on the new shard when a shard is added", () => {
    for (const count of [1, 2, 3]) {
      let moved = 0;
      for (const team of teams) {
        const before = shardIndexOf(`T:${team}`, count);
        const after = shardIndexOf(`T:${team}`, count + 1);
        if (before !== after) {
          moved++;
          expect(after).toBe(count);
        }
      }
      expect(moved).toBeGreaterThan(0);
      expect(Math.abs(moved - teams.length / (count + 1))).toBeLessThan((teams.length / (count + 1)) * 0.15);
    }
  });

  it("refuses a shard count that is not a positive integer", () => {
    expect(() => jumpHash(1n, 0)).toThrow(RangeError);
    expect(() => shardIndexOf("T:T1", 1.5)).toThrow(RangeError);
    expect(() => shardIndexOf(undefined, 0)).toThrow(RangeError);
  });
});

describe("shardsOf", () => {
  const fakeDb = (name: string) => ({ name, prepare() {}, batch() {} }) as unknown as D1Database;

  it("names shard 0 DB, as every deployment before sharding, and shard i DB_i", () => {
    expect([0, 1, 3].map(shardBindingName)).toEqual(["DB", "DB_1", "DB_3"]);
    const env = { DB: fakeDb("0"), DB_1: fakeDb("1"), DB_2: fakeDb("2") };
    expect(shardsOf(env, 1).map((s) => s.index)).toEqual([0]);
    expect(shardsOf(env, 3).map((s) => s.db)).toEqual([env.DB, env.DB_1, env.DB_2]);
  });

  it("names every missing binding instead of routing teams over fewer shards", () => {
    const env = { DB: fakeDb("0"), DB_2: "not a database" };
    expect(() => shardsOf(env, 4)).toThrow(ShardConfigError);
    expect(() => shardsOf(env, 4)).toThrow("D1 bindings DB_1, DB_2, DB_3 are missing");
    expect(() => shardsOf(env, 0)).toThrow(ShardConfigError);
  });
});
