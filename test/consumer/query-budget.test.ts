/**
 * Bounded work when D1 fails: the consumer counts the D1 statements of an
 * invocation and stops claiming well before Workers' 1 000-query limit; the
 * rest of the batch goes back to the queue, untouched.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { createApp } from "../../shared/app/app.ts";
import { defineEffect, followUps } from "../../shared/app/effects.ts";
import { MAX_INTENTS, slack } from "../../shared/app/intents.ts";
import { ANSWER_WORST_QUERIES } from "../../shared/assistant/answer.ts";
import { deliverBatch, LONG_AT_ONCE } from "../../shared/delivery/deliver.ts";
import { countingDb, D1_QUERIES_PER_INVOCATION, STOP_CLAIMING_AT, WORST_QUERIES_PER_ROW } from "../../shared/delivery/query-budget.ts";
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

  it("the arithmetic with long effects: the stop, two quick lanes and the most answers at once still fit", () => {
    expect(STOP_CLAIMING_AT + (6 - LONG_AT_ONCE) * WORST_QUERIES_PER_ROW + LONG_AT_ONCE * ANSWER_WORST_QUERIES).toBeLessThan(
      D1_QUERIES_PER_INVOCATION,
    );
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

describe("the D1 query budget when effects ask for follow-ups", () => {
  /** Performs, then asks for the most follow-ups one effect may (MAX_INTENTS): its completion is a batch of 1 + MAX_INTENTS statements. */
  let performed = 0;
  const fan = defineEffect("fan", async () => {
    performed += 1;
    return followUps(
      null,
      Array.from({ length: MAX_INTENTS }, (_, i) => slack("chat.update", { channel: "C1", ts: "1.1", text: `${i}` }, { key: `u${i}` })),
    );
  });
  const app = createApp().uses("chat.update").effect(fan);

  it("a batch whose every completion (with MAX_INTENTS follow-ups each) fails stays under Workers' 1 000 queries", async () => {
    const ids: number[] = [];
    for (let i = 0; i < 100; i++) ids.push(await insertRow(env.DB, { status: "pending", effect: "fan", payload: {} }));
    const failFinishes = failingFinishes(env.DB);
    const { db, budget } = countingDb(failFinishes);
    const { deps } = deliveryDeps(NOW, { db, budget, effects: app.effects });
    performed = 0;
    const actions = await deliverBatch(deps, ids);
    console.log(`queries spent by a 100-message batch whose completions with ${MAX_INTENTS} follow-ups all fail: ${budget.used()}`);
    expect(budget.used()).toBeLessThanOrEqual(STOP_CLAIMING_AT + 6 * WORST_QUERIES_PER_ROW);
    expect(budget.used()).toBeLessThan(D1_QUERIES_PER_INVOCATION);
    // Rows were performed until the stop (each: a claim batch of 3 and up to 4 tries of its 1 + MAX_INTENTS-statement
    // completion), and only the rest deferred: a budget that deferred every row would perform none.
    const deferred = [...actions.values()].filter((a) => a.action === "retry" && a.delaySeconds === 0).length;
    expect(performed).toBeGreaterThanOrEqual(Math.floor(STOP_CLAIMING_AT / (3 + 4 * (1 + MAX_INTENTS))));
    expect(performed + deferred).toBe(ids.length);
  }, 60_000);
});
