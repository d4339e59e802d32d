/**
 * Bounded work when D1 fails: the consumer counts the D1 statements of an
 * invocation and stops claiming well before Workers' 1 000-query limit; the
 * rest of the batch goes back to the queue, untouched.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { createApp } from "../../shared/app/app.ts";
import { defineEffect, followUps } from "../../shared/app/effects.ts";
import { cancel, MAX_CANCELS, MAX_INTENTS, slack } from "../../shared/app/intents.ts";
import { deliverBatch, LONG_AT_ONCE, LongBounds } from "../../shared/delivery/deliver.ts";
import {
  countingDb,
  D1_QUERIES_PER_INVOCATION,
  LARGEST_FINISH,
  STOP_CLAIMING_AT,
  WORST_QUERIES_PER_ROW,
} from "../../shared/delivery/query-budget.ts";
import type { EffectDefinition } from "../../shared/effects/effect.ts";
import { leaseOf } from "../../shared/effects/lease.ts";
import { deliveryDeps } from "../support/consumer.ts";
import { failingFinishes } from "../support/failing-db.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { insertRow, readRow, resetTables } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";

const slackFake = useFakeSlack();
beforeEach(() => resetTables(env.DB));

/** A D1 whose every other call (run, all, first, raw or batch) fails, as a flapping D1 does. */
function flappingDb(db: D1Database): D1Database {
  let calls = 0;
  const fail = () => {
    calls += 1;
    return calls % 2 === 0;
  };
  const statement = (inner: D1PreparedStatement): D1PreparedStatement =>
    new Proxy(inner, {
      get(target, prop) {
        if (prop === "bind") return (...values: unknown[]) => statement(target.bind(...values));
        if (prop === "run" || prop === "all" || prop === "first" || prop === "raw") {
          return async (...args: unknown[]) => {
            if (fail()) throw new Error("D1_ERROR: simulated flap");
            return (target[prop] as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
        if (prop === REAL) return target;
        const value = Reflect.get(target, prop);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  return new Proxy(db, {
    get(target, prop) {
      if (prop === "prepare") return (sql: string) => statement(target.prepare(sql));
      if (prop === "batch") {
        return async (statements: D1PreparedStatement[]) => {
          if (fail()) throw new Error("D1_ERROR: simulated flap");
          return target.batch(statements.map((s) => (s as unknown as Record<symbol, D1PreparedStatement>)[REAL] ?? s));
        };
      }
      const value = Reflect.get(target, prop);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
const REAL = Symbol("real");

async function hundredFailingRows() {
  slackFake.current.always("chat.postMessage", reply.status(500));
  const ids: number[] = [];
  for (let i = 0; i < 100; i++)
    ids.push(await insertRow(env.DB, { status: "pending", effect: "chat.postMessage", payload: { channel: "C1", text: `${i}` } }));
  return ids;
}

describe("the D1 query budget of one consumer invocation", () => {
  it("the arithmetic: the stop plus every lane's worst case stays well under D1's limit", () => {
    expect(STOP_CLAIMING_AT + 6 * WORST_QUERIES_PER_ROW).toBeLessThanOrEqual(D1_QUERIES_PER_INVOCATION - 100);
  });

  it("a 100-message batch over a D1 failing every other call stays under its budget; unclaimed rows go back untouched", async () => {
    const ids = await hundredFailingRows();
    // A budget a tenth of the real one, so a 100-message batch reaches it.
    const { db, budget } = countingDb(flappingDb(env.DB), 70);
    const { deps, log } = deliveryDeps(NOW, { db, budget });
    const actions = await deliverBatch(deps, ids);
    expect(budget.used()).toBeLessThanOrEqual(70 + 6 * WORST_QUERIES_PER_ROW);
    const deferred = ids.filter(
      (id) => actions.get(id)?.action === "retry" && (actions.get(id) as { delaySeconds: number }).delaySeconds === 0,
    );
    expect(deferred.length).toBeGreaterThan(50);
    // Deferred only once the budget ran out: the rows before it were claimed and attempted (not every row deferred).
    const attempted = slackFake.current.callsTo("chat.postMessage").length;
    expect(attempted).toBeGreaterThan(0);
    expect(deferred.length).toBeLessThan(ids.length);
    for (const id of deferred) expect(await readRow(env.DB, id)).toMatchObject({ status: "pending", attempts: 0 });
    expect(log.records.find((r) => r.msg.startsWith("D1 query budget"))?.fields).toMatchObject({ deferred: deferred.length });
  }, 30_000);

  it("with the real budget, a batch whose every finish fails (p-retry: 4 tries of 3 statements each) stays under Workers' 1 000 queries", async () => {
    const ids = await hundredFailingRows();
    // Claims (a batch led by the claim) succeed; every other multi-statement write fails: 3 + 4 × 3 = 15 statements a
    // row, 1 500 for the batch unbounded.
    const failFinishes = failingFinishes(env.DB);
    const { db, budget } = countingDb(failFinishes);
    const { deps } = deliveryDeps(NOW, { db, budget });
    const actions = await deliverBatch(deps, ids);
    console.log(`queries spent by a 100-message batch whose finishes all fail: ${budget.used()}`);
    expect(budget.used()).toBeLessThanOrEqual(STOP_CLAIMING_AT + 6 * WORST_QUERIES_PER_ROW);
    expect(budget.used()).toBeLessThan(D1_QUERIES_PER_INVOCATION);
    const deferred = [...actions.values()].filter((a) => a.action === "retry" && a.delaySeconds === 0).length;
    expect(deferred).toBeGreaterThan(0);
    // Work stopped at the stop, not before it: at 15 statements a row (a claim with its cooldown check, 4 tries of a
    // 3-statement finish), the rows claimed before STOP_CLAIMING_AT was reached were each attempted once; every other
    // row was deferred.
    const attempted = slackFake.current.callsTo("chat.postMessage").length;
    expect(attempted).toBeGreaterThanOrEqual(Math.floor(STOP_CLAIMING_AT / 15));
    expect(attempted + deferred).toBe(ids.length);
    // p-retry's real back-off (50-400 ms) runs between the failed tries: seconds of wall time, not a time boundary.
  }, 30_000);
});

describe("the D1 query budget when effects ask for follow-ups and cancels", () => {
  /**
   * Performs, then asks for the largest completion one effect may: MAX_INTENTS intents, MAX_CANCELS of them cancels
   * (three statements each), a batch of LARGEST_FINISH statements.
   */
  let performed = 0;
  const fan = defineEffect("fan", async () => {
    performed += 1;
    return followUps(null, [
      ...Array.from({ length: MAX_INTENTS - MAX_CANCELS }, (_, i) =>
        slack("chat.update", { channel: "C1", ts: "1.1", text: `${i}` }, { key: `u${i}` }),
      ),
      ...Array.from({ length: MAX_CANCELS }, (_, i) => cancel(`remind:U${i}`)),
    ]);
  });
  const app = createApp().uses("chat.update").effect(fan);

  it("the largest completion is the one the budget counts: LARGEST_FINISH statements, cancels at three each", async () => {
    const id = await insertRow(env.DB, { status: "pending", effect: "fan", payload: {} });
    const { db, budget } = countingDb(env.DB);
    const { deps } = deliveryDeps(NOW, { db, budget, effects: app.effects });
    await deliverBatch(deps, [id]);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "done" });
    expect(LARGEST_FINISH).toBe(1 + (MAX_INTENTS - MAX_CANCELS) + 3 * MAX_CANCELS);
    // The claim with its cooldown check (3) and the completion: nothing else for a row with no installation to read.
    expect(budget.used()).toBe(3 + LARGEST_FINISH);
  });

  it("six lanes that claim just before the stop, each finishing with the largest completion, stay under the bound", async () => {
    const ids: number[] = [];
    for (let i = 0; i < 6; i++) ids.push(await insertRow(env.DB, { status: "pending", effect: "fan", payload: {} }));
    // Just enough below the stop that each of the six lanes passes the check and claims (3 statements each).
    const { db, budget } = countingDb(env.DB, STOP_CLAIMING_AT, { used: STOP_CLAIMING_AT - 6 * 3 - 1 });
    const { deps } = deliveryDeps(NOW, { db, budget, effects: app.effects });
    performed = 0;
    await deliverBatch(deps, ids);
    expect(performed).toBe(6);
    expect(budget.used()).toBeLessThanOrEqual(STOP_CLAIMING_AT + 6 * WORST_QUERIES_PER_ROW);
    expect(STOP_CLAIMING_AT + 6 * WORST_QUERIES_PER_ROW).toBeLessThanOrEqual(D1_QUERIES_PER_INVOCATION - 100);
  });

  it("a batch whose every completion (the largest each) fails stays under Workers' 1 000 queries", async () => {
    const ids: number[] = [];
    for (let i = 0; i < 100; i++) ids.push(await insertRow(env.DB, { status: "pending", effect: "fan", payload: {} }));
    const failFinishes = failingFinishes(env.DB);
    const { db, budget } = countingDb(failFinishes);
    const { deps } = deliveryDeps(NOW, { db, budget, effects: app.effects });
    performed = 0;
    const actions = await deliverBatch(deps, ids);
    console.log(`queries spent by a 100-message batch whose largest completions all fail: ${budget.used()}`);
    expect(budget.used()).toBeLessThanOrEqual(STOP_CLAIMING_AT + 6 * WORST_QUERIES_PER_ROW);
    expect(budget.used()).toBeLessThan(D1_QUERIES_PER_INVOCATION);
    // Rows were performed until the stop (each: a claim batch of 3 and up to 4 tries of its LARGEST_FINISH-statement
    // completion), and only the rest deferred: a budget that deferred every row would perform none.
    const deferred = [...actions.values()].filter((a) => a.action === "retry" && a.delaySeconds === 0).length;
    expect(performed).toBeGreaterThanOrEqual(Math.floor(STOP_CLAIMING_AT / (3 + 4 * LARGEST_FINISH)));
    expect(performed + deferred).toBe(ids.length);
  }, 60_000);
});

describe("the D1 query budget with long attempts", () => {
  /** A long effect that declares, and sends, QUERIES statements of its own through its lease's D1. */
  const QUERIES = 200;
  let started = 0;
  const spender: EffectDefinition = {
    name: "long_spender",
    idempotentByShape: true,
    long: { maxMs: 600_000, queries: QUERIES },
    perform: async (_payload, ctx) => {
      started += 1;
      const lease = leaseOf(ctx);
      if (!lease) throw new Error("a long attempt without its lease");
      for (let i = 0; i < QUERIES; i++) await lease.db.prepare("SELECT 1").run();
      return null;
    },
  };
  const app = createApp().effect(defineEffect("quick", async () => null));
  const effects = { get: (name: string) => (name === spender.name ? spender : app.effects.get(name)) } as typeof app.effects;
  const rows = async (effect: string, n: number) => {
    const ids: number[] = [];
    for (let i = 0; i < n; i++) ids.push(await insertRow(env.DB, { status: "pending", effect, payload: {} }));
    return ids;
  };
  beforeEach(() => {
    started = 0;
  });

  it("near the stop, a long attempt whose statements would pass it is given back, its attempt unspent", async () => {
    const longs = await rows("long_spender", LONG_AT_ONCE);
    const quick = await rows("quick", 6 - LONG_AT_ONCE);
    const { db, budget } = countingDb(env.DB, STOP_CLAIMING_AT, { used: STOP_CLAIMING_AT - 6 * 3 - 1 });
    const { deps } = deliveryDeps(NOW, { db, budget, effects, long: new LongBounds(NOW + 15 * 60_000) });
    await deliverBatch(deps, [...longs, ...quick]);
    expect(started).toBe(0);
    for (const id of longs) expect(await readRow(env.DB, id)).toMatchObject({ status: "pending", attempts: 0 });
    for (const id of quick) expect(await readRow(env.DB, id)).toMatchObject({ status: "done" });
    expect(budget.used()).toBeLessThanOrEqual(STOP_CLAIMING_AT + 6 * WORST_QUERIES_PER_ROW);
  });

  it("from a fresh budget, long attempts start while their reservations fit under the stop, and the rest wait", async () => {
    const longs = await rows("long_spender", 6);
    const { db, budget } = countingDb(env.DB);
    const { deps } = deliveryDeps(NOW, { db, budget, effects, long: new LongBounds(NOW + 15 * 60_000) });
    await deliverBatch(deps, longs);
    // 200 + 200 fit under 530 with the claims, a third reservation does not.
    expect(started).toBe(Math.floor((STOP_CLAIMING_AT - 6 * 3) / QUERIES));
    expect(budget.used()).toBeLessThanOrEqual(STOP_CLAIMING_AT + 6 * WORST_QUERIES_PER_ROW);
  });
});
