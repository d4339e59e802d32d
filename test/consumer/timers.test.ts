/**
 * Timers in the consumer and the sweep (shared/outbox/model.ts, scheduleOf): the claim refuses a timer before
 * its time, whoever asks; the sweep sends one at its time (its sweep_at), on both sides of its horizon; an early
 * message leaves it be; a follow-up can be a timer, its time counted from its parent's completion; a cancel at
 * its time races the claim and exactly one wins. Time is a parameter: no test waits for a timer.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { createApp } from "../../shared/app/app.ts";
import { defineEffect, followUps } from "../../shared/app/effects.ts";
import { slack } from "../../shared/app/intents.ts";
import { deliverBatch } from "../../shared/delivery/deliver.ts";
import { recordingLog } from "../../shared/log.ts";
import { claimRows } from "../../shared/outbox/claim.ts";
import { enqueueRecorded } from "../../shared/outbox/enqueue.ts";
import { MAX_TIMER_AHEAD_MS, namedKey } from "../../shared/outbox/model.ts";
import { recordIntent } from "../../shared/outbox/record.ts";
import { takeStaleRows } from "../../shared/outbox/sweep.ts";
import { deliveryDeps } from "../support/consumer.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { messageQueue } from "../support/ops.ts";
import { allRows, insertRow, readRow, resetTables } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";

const slackFake = useFakeSlack();
beforeEach(() => resetTables(env.DB));

const SECOND = 1000;
const GRACE = 60 * SECOND;

/** A timer as the ack writes it: next_attempt_at, due_at and sweep_at at its time. */
const timer = (dueAt: number, over: Parameters<typeof insertRow>[1] | object = {}) =>
  insertRow(env.DB, {
    status: "pending",
    effect: "chat.postMessage",
    payload: { channel: "C1", text: "later" },
    createdAt: NOW - 10 * SECOND,
    dueAt,
    nextAttemptAt: dueAt,
    enqueuedAt: dueAt,
    sweepAt: dueAt,
    ...over,
  });

describe("a timer before and at its time", () => {
  it("the claim refuses it one second before its time and takes it at its time", async () => {
    const id = await timer(NOW);
    expect(await claimRows(env.DB, [id], "early", NOW - SECOND, 60_000)).toEqual([]);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "pending", attempts: 0 });
    expect(await claimRows(env.DB, [id], "on-time", NOW, 60_000)).toMatchObject([{ id, claimToken: "on-time" }]);
  });

  it("a message that comes early (a capped delay) leaves it pending, untouched, and calls nobody", async () => {
    const id = await timer(NOW + 3600 * SECOND);
    const before = await readRow(env.DB, id);
    const { deps } = deliveryDeps(NOW);
    expect((await deliverBatch(deps, [id])).get(id)).toEqual({ action: "ack" });
    expect(await readRow(env.DB, id)).toEqual(before);
    expect(slackFake.current.calls).toEqual([]);
  });

  it("is performed once its time has come, as any row", async () => {
    slackFake.current.script("chat.postMessage", reply.ok({ ts: "1.1" }));
    const id = await timer(NOW);
    await deliverBatch(deliveryDeps(NOW).deps, [id]);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "done", attempts: 1, due_at: NOW });
    expect(slackFake.current.callsTo("chat.postMessage")).toHaveLength(1);
  });
});

describe("the sweep sends a timer at its time", () => {
  it("takes timers due one second before and at the tick, not one second after: queued or not", async () => {
    const ids = {
      queuedPast: await timer(NOW - SECOND),
      queuedNow: await timer(NOW),
      queuedAhead: await timer(NOW + SECOND),
      farPast: await timer(NOW - SECOND, { enqueuedAt: null }),
      farAhead: await timer(NOW + SECOND, { enqueuedAt: null }),
    };
    const ahead = [await readRow(env.DB, ids.queuedAhead), await readRow(env.DB, ids.farAhead)];
    const taken = await takeStaleRows(env.DB, NOW, GRACE, 100);
    expect(taken).toEqual([ids.queuedPast, ids.queuedNow, ids.farPast].sort((a, b) => a - b));
    // The rows ahead of the tick are exactly as they were.
    expect([await readRow(env.DB, ids.queuedAhead), await readRow(env.DB, ids.farAhead)]).toEqual(ahead);
    // A taken one is looked at again a grace after the take, sent (enqueued_at the take), still due at its time.
    expect(await readRow(env.DB, ids.farPast)).toMatchObject({
      enqueued_at: NOW,
      sweep_at: NOW + GRACE,
      next_attempt_at: NOW - SECOND,
      sweeps: 1,
    });
  });

  it("a timer whose delayed send failed waits for its time, not for the next tick", async () => {
    const id = await timer(NOW + 600 * SECOND);
    const result = await enqueueRecorded(messageQueue({ fail: true }), env.DB, [{ id, delaySeconds: 600 }], NOW, recordingLog());
    expect(result).toEqual({ sent: 0, failed: 1 });
    expect(await readRow(env.DB, id)).toMatchObject({ enqueued_at: null, sweep_at: NOW + 600 * SECOND });
    expect(await takeStaleRows(env.DB, NOW + 599 * SECOND, GRACE, 100)).toEqual([]);
    expect(await takeStaleRows(env.DB, NOW + 600 * SECOND, GRACE, 100)).toEqual([id]);
  });

  it("sends rows due now at once, a timer delayed to its time, one beyond the queue's delay not at all", async () => {
    const queue = messageQueue();
    await enqueueRecorded(
      queue,
      env.DB,
      [
        { id: 1, delaySeconds: 0 },
        { id: 2, delaySeconds: 90 },
        { id: 3, delaySeconds: null },
        { id: 4, delaySeconds: 90 },
      ],
      NOW,
      recordingLog(),
    );
    expect(queue.messages.map((m) => [m.body.id, m.delaySeconds ?? 0])).toEqual([
      [1, 0],
      [2, 90],
      [4, 90],
    ]);
  });
});

describe("a cancel at the timer's time, racing its claim", () => {
  it("never both: cancelled and unclaimed, or claimed and too late", async () => {
    const outcomes = new Set<string>();
    for (let round = 0; round < 12; round++) {
      await resetTables(env.DB);
      const id = await timer(NOW, { key: namedKey("T0TEAM", `at${round}`) });
      const receipt = { id: `interaction:T0TEAM:at${round}`, kind: "interaction" as const, type: "block_actions", teamId: "T0TEAM" };
      const cancelling = () => recordIntent(env.DB, receipt, [], NOW, GRACE, undefined, undefined, { cancels: [`at${round}`] });
      const claiming = Array.from({ length: 4 }, (_, i) => () => claimRows(env.DB, [id], `c${round}-${i}`, NOW, 60_000));
      const started = round % 2 === 0 ? [cancelling(), ...claiming.map((c) => c())] : [...claiming.map((c) => c()), cancelling()];
      const settled = await Promise.all(started);
      const recorded = settled.find((r) => !Array.isArray(r)) as Awaited<ReturnType<typeof recordIntent>>;
      const claimed = settled.filter((r): r is Awaited<ReturnType<typeof claimRows>> => Array.isArray(r)).flat();
      const verdict = recorded.firstDelivery ? recorded.cancels[0]?.outcome : undefined;
      const row = await readRow(env.DB, id);
      if (verdict === "cancelled") expect([claimed.length, row.status]).toEqual([0, "done"]);
      else expect([verdict, claimed.length, row.status]).toEqual(["too_late", 1, "leased"]);
      outcomes.add(String(verdict));
    }
    expect([...outcomes].sort()).toEqual(["cancelled", "too_late"]);
  });

  it("before its time, a cancel wins and the row's message, when it comes, finds nothing to do", async () => {
    const id = await timer(NOW + 60 * SECOND, { key: namedKey("T0TEAM", "soon") });
    const receipt = { id: "interaction:T0TEAM:soon", kind: "interaction" as const, type: "block_actions", teamId: "T0TEAM" };
    const recorded = await recordIntent(env.DB, receipt, [], NOW, GRACE, undefined, undefined, { cancels: ["soon"] });
    expect(recorded).toMatchObject({ cancels: [{ outcome: "cancelled", rowId: id }] });
    const { deps } = deliveryDeps(NOW + 60 * SECOND);
    expect((await deliverBatch(deps, [id])).get(id)).toEqual({ action: "ack" });
    expect(await takeStaleRows(env.DB, NOW + 120 * SECOND, GRACE, 100)).toEqual([]);
    expect(slackFake.current.calls).toEqual([]);
  });
});

describe("a follow-up can be a timer", () => {
  /** Posts the escalation 120 s after this completion, or, asked so, past a year (refused). */
  const escalate = defineEffect<{ far?: boolean }>("escalate", async (args) =>
    followUps({ posted: true }, [
      slack(
        "chat.postMessage",
        { channel: "C1", text: "nobody acked" },
        args.far ? { at: NOW + MAX_TIMER_AHEAD_MS + 3600 * SECOND } : { after: 120, name: "esc:C1:1.1" },
      ),
    ]),
  );
  const app = createApp().uses("chat.postMessage").effect(escalate);

  it("recorded with its parent's completion, due 120 s after the completion's clock, its message delayed to it", async () => {
    const id = await insertRow(env.DB, {
      status: "pending",
      effect: "escalate",
      payload: {},
      key: "EvE:escalate",
      createdAt: NOW - SECOND,
    });
    const queue = messageQueue();
    const harness = deliveryDeps(NOW, { effects: app.effects, queue });
    // The completion is written 5 s after the claim: its clock, not the claim's, counts.
    let reads = 0;
    const deps = { ...harness.deps, clock: () => NOW + (reads++ === 0 ? 0 : 5 * SECOND) };
    await deliverBatch(deps, [id]);
    const rows = await allRows(env.DB);
    expect(rows.map((r) => [r.idempotency_key, r.status, r.due_at, r.next_attempt_at, r.sweep_at])).toEqual([
      ["EvE:escalate", "done", null, NOW - SECOND, null],
      [namedKey("T0TEAM", "esc:C1:1.1"), "pending", NOW + 125 * SECOND, NOW + 125 * SECOND, NOW + 125 * SECOND],
    ]);
    expect(queue.messages.map((m) => [m.body.id, m.delaySeconds])).toEqual([[rows[1]?.id, 120]]);
  });

  it("past a year is refused: the parent parks (its effect was performed), the follow-up is not recorded", async () => {
    const id = await insertRow(env.DB, { status: "pending", effect: "escalate", payload: { far: true }, key: "EvF:escalate" });
    await deliverBatch(deliveryDeps(NOW, { effects: app.effects, queue: messageQueue() }).deps, [id]);
    expect(await readRow(env.DB, id)).toMatchObject({
      status: "dead",
      last_error: expect.stringContaining("more than a year"),
    });
    expect(await allRows(env.DB)).toHaveLength(1);
  });
});
