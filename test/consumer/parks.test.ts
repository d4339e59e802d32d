/**
 * Every park after a claim is fenced, or the row says its effect may already
 * have happened (SPEC invariant 13, migration 0010): a filter replay (the CLI's
 * `dead replay --filter`, the dashboard's button) leaves such a row out, so an
 * effect a holder performed is not performed again outside the one allowed
 * window; an operator who names the row by id still replays it.
 *
 * One test per park path: an uninstall's park of a leased row, a dead letter
 * for a row whose lease expired, the consumer's refusal of a row whose last
 * claim ended without a result, and the follow-up depth limit (parked after
 * its effect ran). Each has its counterpart on the other side: a row parked
 * the same way that was never attempted stays replayable by a filter; one
 * attempted before (pending again after a timeout) is marked by the one rule.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { deliverBatch, INSTALLATION_WAIT_MAX_MS } from "../../shared/delivery/deliver.ts";
import { fatal } from "../../shared/delivery/failure.ts";
import { completed, type EffectDefinition } from "../../shared/effects/effect.ts";
import { effectRegistry } from "../../shared/effects/registry.ts";
import { INSTALLATION_REMOVED, installationRemovedEffect } from "../../shared/installations/lifecycle.ts";
import { recordingLog } from "../../shared/log.ts";
import { listDead } from "../../shared/ops/dead.ts";
import { replayDead } from "../../shared/ops/replay.ts";
import { settleDeadLetter } from "../../shared/outbox/dead-letter.ts";
import { finishClaim } from "../../shared/outbox/fence.ts";
import { type ClaimedRow, MAX_FOLLOW_UP_DEPTH } from "../../shared/outbox/model.ts";
import { deliveryDeps, testSettings } from "../support/consumer.ts";
import { beforeFirstBatch } from "../support/failing-db.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { messageQueue } from "../support/ops.ts";
import { attemptsOf, insertRow, readRow, resetTables, shardDbs } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";

const slack = useFakeSlack();
beforeEach(async () => {
  await resetTables(env.DB);
  await env.DB.prepare("DELETE FROM installations").run();
});

/** The row as its holder's claim saw it, under `token`. */
async function heldBy(id: number, token: string, claimExpiresAt: number): Promise<ClaimedRow> {
  const row = await readRow(env.DB, id);
  return {
    id,
    receiptId: row.receipt_id,
    idempotencyKey: row.idempotency_key,
    depth: 0,
    effect: row.effect,
    payload: row.payload,
    attempts: row.attempts,
    expiresAt: row.expires_at,
    createdAt: row.created_at,
    claimToken: token,
    claimExpiresAt,
    rateLimitedSince: null,
    rateKey: null,
    keyHot: false,
    teamId: row.team_id,
    waitingSince: null,
  };
}

/** The holder comes back from Slack with the effect performed: its fenced completion. */
const complete = (row: ClaimedRow, at: number) => finishClaim(env.DB, row, { kind: "done", result: { ok: true } }, at, 60_000, at - 1);

function replay(selection: Parameters<typeof replayDead>[1]["selection"], at: number) {
  return replayDead(
    { shards: shardDbs(), queue: messageQueue(), settings: testSettings(), log: recordingLog() },
    { selection, dryRun: false },
    at,
  );
}
const byFilter = (at: number) => replay({ by: "filter", filter: {}, cursor: null }, at);
const byId = (id: number, at: number) => replay({ by: "refs", refs: [{ shard: 0, id }] }, at);

/** A filter replay leaves each of `performed` out (reported), and moves `untouched`; naming one by id moves it. */
async function expectFilterLeavesOut(performed: number | readonly number[], notPerformed: number, at: number) {
  const marked = typeof performed === "number" ? [performed] : performed;
  const listed = (await listDead(env.DB, {}, null, 10)).rows.map((r) => ({ id: r.id, maybePerformed: r.maybePerformed }));
  const filtered = await byFilter(at);
  expect(filtered.replayed.map((r) => r.id)).toEqual([notPerformed]);
  expect(filtered.skipped).toHaveLength(marked.length);
  expect(filtered.skipped).toEqual(expect.arrayContaining(marked.map((id) => ({ shard: 0, id, reason: "maybe_performed" }))));
  for (const id of marked) expect(await readRow(env.DB, id)).toMatchObject({ status: "dead" });
  // The dead listing shows why.
  expect(listed).toEqual(
    expect.arrayContaining([...marked.map((id) => ({ id, maybePerformed: true })), { id: notPerformed, maybePerformed: false }]),
  );

  for (const [i, id] of marked.entries()) {
    const named = await byId(id, at + 1 + i);
    expect(named.replayed.map((r) => r.id)).toEqual([id]);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "pending", maybe_performed: 0, claim_token: null });
  }
}

describe("a park that cannot be fenced marks the row: a filter replay does not repeat an effect its holder performed", () => {
  it("an uninstall parks a leased row while its holder performs it: the holder's completion is refused, and a filter replay leaves the row out", async () => {
    const leased = await insertRow(env.DB, {
      status: "leased",
      effect: "chat.postMessage",
      payload: { channel: "C1", text: "in flight" },
      teamId: "T0ONE",
      claimToken: "holder",
      claimExpiresAt: NOW + 20_000,
      createdAt: NOW - 5_000,
    });
    // Pending again after an attempt that timed out: Slack may have posted it (the one rule, mayHavePerformed).
    const retrying = await insertRow(env.DB, {
      status: "pending",
      effect: "chat.postMessage",
      payload: { channel: "C1", text: "timed out once" },
      attempts: 1,
      teamId: "T0ONE",
      createdAt: NOW - 5_000,
    });
    const pending = await insertRow(env.DB, {
      status: "pending",
      effect: "chat.postMessage",
      payload: { channel: "C1", text: "not yet sent" },
      teamId: "T0ONE",
      createdAt: NOW - 5_000,
    });
    const removal = installationRemovedEffect(env.DB, () => NOW);
    const payload = { team_id: "T0ONE", enterprise_id: null, org_wide: false, reason: "app_uninstalled", at: NOW, step: 1 };
    const { context } = deliveryDeps(NOW).deps;
    expect(removal.name).toBe(INSTALLATION_REMOVED);
    expect(await removal.perform(payload, { ...context, signal: new AbortController().signal, idempotencyKey: "k", attempt: 1 })).toEqual({
      removed: 0,
      parked: 3,
      step: 1,
    });

    expect((await complete(await heldBy(leased, "holder", NOW + 20_000), NOW + 1)).applied).toBe(false);
    await expectFilterLeavesOut([leased, retrying], pending, NOW + 2);
  });

  it("a dead letter parks a row whose lease expired while its holder may still perform it: the holder's completion is refused, and a filter replay leaves the row out", async () => {
    const maxAttempts = testSettings().maxAttempts;
    const expired = await insertRow(env.DB, {
      status: "leased",
      effect: "chat.postMessage",
      attempts: maxAttempts,
      claimToken: "holder",
      claimExpiresAt: NOW - 1,
      createdAt: NOW - 5_000,
    });
    // Pending with its attempts spent: each ended without a result the row kept (a timeout, an unknown answer), so
    // Slack may have performed it — marked by the one rule (mayHavePerformed), as a leased row is.
    const spentPending = await insertRow(env.DB, {
      status: "pending",
      effect: "chat.postMessage",
      attempts: maxAttempts,
      createdAt: NOW - 5_000,
    });
    // Past its deadline before any attempt: nothing can have been performed.
    const neverAttempted = await insertRow(env.DB, {
      status: "pending",
      effect: "chat.postMessage",
      attempts: 0,
      expiresAt: NOW - 1,
      createdAt: NOW - 5_000,
    });
    // The other side of the lease's boundary: a lease that expires at NOW is not parked.
    const live = await insertRow(env.DB, {
      status: "leased",
      effect: "chat.postMessage",
      attempts: maxAttempts,
      claimToken: "live",
      claimExpiresAt: NOW + 1,
    });
    const limits = { maxAttempts, byEffect: {} };
    expect(await settleDeadLetter(env.DB, expired, "dead-lettered", NOW, limits)).toBe("parked");
    expect(await settleDeadLetter(env.DB, spentPending, "dead-lettered", NOW, limits)).toBe("parked");
    expect(await settleDeadLetter(env.DB, neverAttempted, "dead-lettered", NOW, limits)).toBe("parked");
    expect(await settleDeadLetter(env.DB, live, "dead-lettered", NOW, limits)).toBe("left_alone");

    expect((await complete(await heldBy(expired, "holder", NOW - 1), NOW + 1)).applied).toBe(false);
    await expectFilterLeavesOut([expired, spentPending], neverAttempted, NOW + 2);
  });

  it("a row whose last claim ended without a result and that has no attempt left is parked by its next claim: its first holder's completion is refused, and a filter replay leaves the row out", async () => {
    const maxAttempts = testSettings().maxAttempts;
    const overran = await insertRow(env.DB, {
      status: "leased",
      effect: "chat.postMessage",
      payload: { channel: "C1", text: "overran" },
      attempts: maxAttempts,
      claimToken: "holder",
      claimExpiresAt: NOW - 1,
    });
    // Parked by a fenced finish that had an answer (channel_not_found): nothing can have been performed.
    const refused = await insertRow(env.DB, {
      status: "dead",
      effect: "chat.postMessage",
      claimToken: "other",
      lastError: "chat.postMessage: channel_not_found",
      completedAt: NOW - 10,
    });
    const { deps } = deliveryDeps(NOW);
    await deliverBatch(deps, [overran]);
    expect(await readRow(env.DB, overran)).toMatchObject({ status: "dead", maybe_performed: 1, claim_token: "claim-1" });

    expect((await complete(await heldBy(overran, "holder", NOW - 1), NOW + 1)).applied).toBe(false);
    await expectFilterLeavesOut(overran, refused, NOW + 2);
  });
});

describe("a refusal after an earlier claim marks the row: that claim may have performed it", () => {
  it("a row past its deadline is parked; marked when an earlier claim ended without a result (attempts > 1), not on its first claim", async () => {
    const reclaimed = await insertRow(env.DB, {
      status: "leased",
      effect: "chat.postMessage",
      payload: { channel: "C1", text: "late" },
      attempts: 1,
      claimToken: "first",
      claimExpiresAt: NOW - 1,
      expiresAt: NOW - 1,
    });
    const first = await insertRow(env.DB, {
      status: "pending",
      effect: "chat.postMessage",
      payload: { channel: "C1", text: "late too" },
      expiresAt: NOW - 1,
    });
    const { deps } = deliveryDeps(NOW);
    await deliverBatch(deps, [reclaimed, first]);
    expect(await readRow(env.DB, reclaimed)).toMatchObject({ status: "dead", maybe_performed: 1 });
    expect(await readRow(env.DB, first)).toMatchObject({ status: "dead", maybe_performed: 0 });
  });
});

describe("a park after the effect was performed marks the row", () => {
  it(`the follow-up depth limit (${MAX_FOLLOW_UP_DEPTH}) parks a performed row: a filter replay does not perform it again; one named by id does`, async () => {
    let performed = 0;
    const chain: EffectDefinition = {
      name: "test.chain",
      idempotentByShape: false,
      async perform() {
        performed += 1;
        return completed({ ok: true }, [{ key: "next", effect: "test.chain", payload: {} }]);
      },
    };
    const deep = await insertRow(env.DB, { status: "pending", effect: "test.chain", payload: {}, createdAt: NOW - 5_000 });
    const shallow = await insertRow(env.DB, { status: "pending", effect: "test.chain", payload: {}, createdAt: NOW - 5_000 });
    await env.DB.prepare("UPDATE outbox SET depth = ?2 WHERE id = ?1").bind(deep, MAX_FOLLOW_UP_DEPTH).run();
    // One below the limit: completed, its follow-up recorded.
    await env.DB.prepare("UPDATE outbox SET depth = ?2 WHERE id = ?1")
      .bind(shallow, MAX_FOLLOW_UP_DEPTH - 1)
      .run();
    const { deps } = deliveryDeps(NOW, { effects: effectRegistry([chain]) });
    await deliverBatch(deps, [deep, shallow]);
    expect(performed).toBe(2);
    expect(await readRow(env.DB, deep)).toMatchObject({ status: "dead", maybe_performed: 1 });
    expect(await readRow(env.DB, shallow)).toMatchObject({ status: "done", maybe_performed: 0 });

    const filtered = await byFilter(NOW + 1);
    expect(filtered.replayed).toEqual([]);
    expect(filtered.skipped).toEqual([{ shard: 0, id: deep, reason: "maybe_performed" }]);
    expect((await byId(deep, NOW + 2)).replayed.map((r) => r.id)).toEqual([deep]);
    expect(await readRow(env.DB, deep)).toMatchObject({ status: "pending", maybe_performed: 0 });
  });
});

describe("a filter replay checks the mark in the statement that moves the row", () => {
  it("a row marked between the selection and its step is not moved, and gets no replay audit row", async () => {
    const id = await insertRow(env.DB, { status: "dead", lastError: "chat.postMessage: HTTP 503", completedAt: NOW - 60_000 });
    // Selected unmarked; just before the step writes, the row is parked again under a holder still performing it.
    const { db, ran } = beforeFirstBatch(env.DB, (target) =>
      target.prepare("UPDATE outbox SET maybe_performed = 1 WHERE id = ?1").bind(id).run(),
    );
    const queue = messageQueue();
    const report = await replayDead(
      { shards: [db, ...shardDbs().slice(1)], queue, settings: testSettings(), log: recordingLog() },
      { selection: { by: "filter", filter: {}, cursor: null }, dryRun: false },
      NOW,
    );
    expect(ran()).toBe(true);
    expect(report.replayed).toEqual([]);
    expect(queue.messages).toEqual([]);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "dead", maybe_performed: 1 });
    expect((await attemptsOf(env.DB, id)).filter((a) => a.outcome === "replay")).toEqual([]);
  });
});

describe("one rule for every park the consumer makes (decide.ts, mayHavePerformed): marked when the effect may have happened", () => {
  const post = (attempts: number, lastError: string | null = null) =>
    insertRow(env.DB, {
      status: "pending",
      effect: "chat.postMessage",
      payload: { channel: "C1", text: `attempt ${attempts + 1}` },
      attempts,
      lastError,
      nextAttemptAt: NOW,
    });

  it("a fatal answer after an earlier timed-out attempt is marked (that attempt may have posted); the same answer on a first attempt is not", async () => {
    const retried = await post(1, "chat.postMessage: no result within 10000 ms");
    const first = await post(0);
    slack.current.always("chat.postMessage", reply.error("channel_not_found"));
    await deliverBatch(deliveryDeps(NOW).deps, [retried, first]);
    expect(await readRow(env.DB, retried)).toMatchObject({ status: "dead", attempts: 2, maybe_performed: 1 });
    expect(await readRow(env.DB, first)).toMatchObject({ status: "dead", attempts: 1, maybe_performed: 0 });
    await expectFilterLeavesOut(retried, first, NOW + 1);
  });

  it("an unknown answer (a 503) on the last attempt parks the row marked", async () => {
    const last = await post(testSettings().maxAttempts - 1);
    slack.current.script("chat.postMessage", reply.status(503));
    await deliverBatch(deliveryDeps(NOW).deps, [last]);
    expect(await readRow(env.DB, last)).toMatchObject({ status: "dead", maybe_performed: 1 });
    expect((await readRow(env.DB, last)).last_error).toMatch(/^attempts exhausted/);
  });

  it("a timeout on the only attempt an effect allows (maxAttempts 1) parks the row marked; a refusal on it does not", async () => {
    const hang: EffectDefinition = {
      name: "test.hang",
      idempotentByShape: false,
      maxAttempts: 1,
      timeoutMs: 50,
      perform: () => new Promise(() => {}),
    };
    const refuse: EffectDefinition = {
      name: "test.refuse",
      idempotentByShape: false,
      maxAttempts: 1,
      perform: async () => {
        throw fatal("test.refuse: invalid_arguments");
      },
    };
    const timedOut = await insertRow(env.DB, { status: "pending", effect: "test.hang", payload: {} });
    const refused = await insertRow(env.DB, { status: "pending", effect: "test.refuse", payload: {} });
    await deliverBatch(deliveryDeps(NOW, { effects: effectRegistry([hang, refuse]) }).deps, [timedOut, refused]);
    expect(await readRow(env.DB, timedOut)).toMatchObject({ status: "dead", attempts: 1, maybe_performed: 1 });
    expect((await readRow(env.DB, timedOut)).last_error).toContain("no result within 50 ms");
    expect(await readRow(env.DB, refused)).toMatchObject({ status: "dead", attempts: 1, maybe_performed: 0 });
  });

  it("a row parked after waiting out its installation is marked when an attempt came before the wait, not when none did", async () => {
    const waitedSince = NOW - INSTALLATION_WAIT_MAX_MS;
    const attemptedBefore = await post(1);
    const neverAttempted = await post(0);
    await env.DB.prepare("UPDATE outbox SET waiting_since = ?1").bind(waitedSince).run();
    const slackFor = async () => ({ ok: false as const, reason: "no installation for team T0TEAM" });
    await deliverBatch(deliveryDeps(NOW, { slackFor }).deps, [attemptedBefore, neverAttempted]);
    expect(await readRow(env.DB, attemptedBefore)).toMatchObject({ status: "dead", maybe_performed: 1 });
    expect(await readRow(env.DB, neverAttempted)).toMatchObject({ status: "dead", maybe_performed: 0 });
    expect(slack.current.calls).toEqual([]);
  });
});

describe("migration 0016: a dead row parked before the one rule is unknown, and marked", () => {
  it("marks every unmarked dead row that was attempted; leaves one never attempted, a marked one and live rows as they were", async () => {
    const migration = env.TEST_MIGRATIONS.find((m) => m.name.startsWith("0016_"));
    expect(migration?.name).toBe("0016_maybe_performed_unknown.sql");
    const rows = {
      attemptedOnce: await insertRow(env.DB, { status: "dead", attempts: 1, lastError: "chat.postMessage: channel_not_found" }),
      attemptedOften: await insertRow(env.DB, { status: "dead", attempts: 5, lastError: "attempts exhausted (5 of 5): HTTP 503" }),
      neverAttempted: await insertRow(env.DB, { status: "dead", attempts: 0, lastError: "cancelled: the ack answered 500" }),
      pending: await insertRow(env.DB, { status: "pending", attempts: 2 }),
      done: await insertRow(env.DB, { status: "done", attempts: 1 }),
    };
    const before = {
      neverAttempted: await readRow(env.DB, rows.neverAttempted),
      pending: await readRow(env.DB, rows.pending),
      done: await readRow(env.DB, rows.done),
    };
    for (const query of migration?.queries ?? []) await env.DB.prepare(query).run();
    expect(await readRow(env.DB, rows.attemptedOnce)).toMatchObject({ maybe_performed: 1 });
    expect(await readRow(env.DB, rows.attemptedOften)).toMatchObject({ maybe_performed: 1 });
    expect(await readRow(env.DB, rows.neverAttempted)).toEqual(before.neverAttempted);
    expect(await readRow(env.DB, rows.pending)).toEqual(before.pending);
    expect(await readRow(env.DB, rows.done)).toEqual(before.done);
    // A filter replay now leaves the attempted ones out.
    const filtered = await byFilter(NOW);
    expect(filtered.replayed.map((r) => r.id)).toEqual([rows.neverAttempted]);
    expect(filtered.skipped.map((r) => r.id).sort()).toEqual([rows.attemptedOnce, rows.attemptedOften].sort());
  });
});

describe("migration 0021: rows the uninstall and the dead letter parked pending after an attempt are marked", () => {
  it("marks those two parks' attempted rows; leaves their never-attempted rows, another path's refusal and live rows as they were", async () => {
    const migration = env.TEST_MIGRATIONS.find((m) => m.name.startsWith("0021_"));
    expect(migration?.name).toBe("0021_maybe_performed_parks.sql");
    const uninstalled = "installation removed: app_uninstalled for team T0ONE (re-install the app there, then replay)";
    const parkedAt = NOW - 10;
    const rows = {
      uninstallAttempted: await insertRow(env.DB, { status: "dead", attempts: 1, lastError: uninstalled, completedAt: parkedAt }),
      uninstallNeverAttempted: await insertRow(env.DB, { status: "dead", attempts: 0, lastError: uninstalled, completedAt: parkedAt }),
      deadLettered: await insertRow(env.DB, { status: "dead", attempts: 5, lastError: "dead-lettered", completedAt: parkedAt }),
      deadLetteredNeverAttempted: await insertRow(env.DB, {
        status: "dead",
        attempts: 0,
        lastError: "dead-lettered",
        completedAt: parkedAt,
      }),
      // A first attempt Slack refused: the one rule leaves it unmarked, and so does this migration.
      refused: await insertRow(env.DB, {
        status: "dead",
        attempts: 1,
        lastError: "chat.postMessage: channel_not_found",
        completedAt: parkedAt,
      }),
      // Dead-lettered once, replayed by id, then refused on its first attempt: the refusal's park decided its mark.
      replayedThenRefused: await insertRow(env.DB, {
        status: "dead",
        attempts: 1,
        lastError: "chat.postMessage: channel_not_found",
        completedAt: parkedAt,
      }),
      pending: await insertRow(env.DB, { status: "pending", attempts: 2, lastError: uninstalled }),
    };
    const audit = env.DB.prepare(
      "INSERT INTO outbox_attempts (outbox_id, attempt, outcome, error, finished_at) VALUES (?1, ?2, 'dead_letter', 'dead-lettered', ?3)",
    );
    await env.DB.batch([
      audit.bind(rows.deadLettered, 5, parkedAt),
      audit.bind(rows.deadLetteredNeverAttempted, 0, parkedAt),
      audit.bind(rows.replayedThenRefused, 5, parkedAt - 60_000),
    ]);
    const untouched = [rows.uninstallNeverAttempted, rows.deadLetteredNeverAttempted, rows.refused, rows.replayedThenRefused, rows.pending];
    const before = await Promise.all(untouched.map((id) => readRow(env.DB, id)));

    for (const query of migration?.queries ?? []) await env.DB.prepare(query).run();
    expect(await readRow(env.DB, rows.uninstallAttempted)).toMatchObject({ maybe_performed: 1 });
    expect(await readRow(env.DB, rows.deadLettered)).toMatchObject({ maybe_performed: 1 });
    expect(await Promise.all(untouched.map((id) => readRow(env.DB, id)))).toEqual(before);
  });
});
