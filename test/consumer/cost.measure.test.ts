/**
 * What one event costs in D1's billing units, measured through the real
 * statements against real local D1 (meta.rows_written of each): the ack's
 * batch, the consumer's claim and its fenced completion. The figures are the
 * ones docs/benchmarks.md and the migrations quote; a schema change that
 * moves them fails here and must say so there.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { claimOrTakeSlot, claimRows } from "../../shared/outbox/claim.ts";
import { finishClaim } from "../../shared/outbox/fence.ts";
import { recordIntent } from "../../shared/outbox/record.ts";
import { meteredDb } from "../support/metered-db.ts";
import { resetTables } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";

beforeEach(() => resetTables(env.DB));

async function oneEvent(payload: Record<string, unknown>, effect = "chat.postMessage") {
  const { db, meter } = meteredDb(env.DB);
  const id = `Ev-cost-${Math.random().toString(36).slice(2)}`;
  const verdict = await recordIntent(
    db,
    { id, kind: "event", type: "app_mention", teamId: "T1" },
    [{ key: "reply", effect, payload }],
    NOW,
    60_000,
  );
  if (!verdict.firstDelivery) throw new Error("not recorded");
  const ack = meter.rowsWritten;
  meter.reset();
  const [row] = await claimRows(db, verdict.outboxIds, "claim-1", NOW + 10, 120_000);
  if (!row) throw new Error("not claimed");
  const claim = meter.rowsWritten;
  meter.reset();
  const { applied } = await finishClaim(db, row, { kind: "done", result: { ts: "1.1" } }, NOW + 20, 60_000, NOW + 10);
  expect(applied).toBe(true);
  return { ack, claim, done: meter.rowsWritten, statementsToFinish: meter.statements };
}

describe("rows written per delivered event (one effect, happy path)", () => {
  it("ack 6 (receipt 2 + outbox row 4, its outbox_pending_by_due entry included), claim 2, done 2: 10 in all (9 before migration 0004)", async () => {
    const cost = await oneEvent({ channel: "C1", text: "hi" });
    expect(cost).toEqual({ ack: 6, claim: 2, done: 2, statementsToFinish: 1 });
  });

  it("a timer's row and a named row each cost one row written more at the ack (outbox_timers, outbox_named_by_fact)", async () => {
    const ack = async (extra: Record<string, unknown>) => {
      const { db, meter } = meteredDb(env.DB);
      const id = `Ev-cost-${Math.random().toString(36).slice(2)}`;
      const effect = { key: "reply", effect: "chat.postMessage", payload: { channel: "C1" }, ...extra };
      await recordIntent(db, { id, kind: "event", type: "app_mention", teamId: "T1" }, [effect], NOW, 60_000);
      return meter.rowsWritten;
    };
    expect(await ack({})).toBe(6);
    expect(await ack({ afterMs: 60_000 })).toBe(7);
    expect(await ack({ name: `n${Math.random()}` })).toBe(7);
  });
});

describe("the consumer's claim of a row (deliver.ts): one round trip with its cooldown check", () => {
  it("takes a claimable row with no cooldown in one round trip: the claim and the two slot statements that match nothing", async () => {
    const { db: plain } = meteredDb(env.DB);
    const verdict = await recordIntent(
      plain,
      { id: "Ev-cost-claim", kind: "event", type: "app_mention", teamId: "T1" },
      [{ key: "reply", effect: "chat.postMessage", payload: { channel: "C1", text: "hi" } }],
      NOW,
      60_000,
    );
    if (!verdict.firstDelivery) throw new Error("not recorded");
    const { db, meter } = meteredDb(env.DB);
    const { row, slot } = await claimOrTakeSlot(db, verdict.outboxIds[0] ?? 0, "claim-1", NOW + 10, 120_000, 60_000);
    expect(row?.claimToken).toBe("claim-1");
    expect(slot).toBeUndefined();
    expect(meter).toMatchObject({ roundTrips: 1, statements: 3, rowsRead: 6, rowsWritten: 2 });
  });
});

describe("the meter itself: a cost measured through it is never free by omission", () => {
  it("counts the rows a raw() statement reads, and answers in raw()'s shape", async () => {
    await oneEvent({ channel: "C1", text: "hi" });
    const { db, meter } = meteredDb(env.DB);
    const rows = await db.prepare("SELECT id, status FROM outbox").raw<[number, string]>({ columnNames: false });
    expect(rows).toEqual([[expect.any(Number), "done"]]);
    expect(meter).toMatchObject({ statements: 1, rowsRead: 1, rowsWritten: 0 });
    const [columns] = await db.prepare("SELECT id, status FROM outbox").raw({ columnNames: true });
    expect(columns).toEqual(["id", "status"]);
  });

  it("refuses a result that carries no cost figures instead of counting it as 0", async () => {
    const statement = { all: async () => ({ results: [], success: true, meta: {} }) };
    const bare = { prepare: () => statement } as unknown as D1Database;
    const { db } = meteredDb(bare);
    await expect(db.prepare("SELECT 1").all()).rejects.toThrow(/without rows_read/);
  });
});
