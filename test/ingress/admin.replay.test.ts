import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { deliverBatch } from "../../shared/delivery/deliver.ts";
import { replayDead } from "../../shared/ops/replay.ts";
import { finishClaim } from "../../shared/outbox/fence.ts";
import { parseSettings } from "../../shared/settings.ts";
import { deliveryDeps } from "../support/consumer.ts";
import { beforeFirstBatch } from "../support/failing-db.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { meteredDb } from "../support/metered-db.ts";
import { adminDeps, callAdmin, insertAttempt, messageQueue, postJson } from "../support/ops.ts";
import { allRows, attemptsOf, insertRow, readRow, resetTables } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

beforeEach(() => resetTables(env.DB));

/** Shard 0's row `id` as the API names it with the tests' two shards (shared/ops/row-ref.ts). */
const r0 = (id: number) => `0:${id}`;

/**
 * Dead rows by several causes, and one row of every other state. Only dead
 * rows may ever move; each test names which dead ones its selection takes.
 */
async function seedSelection() {
  const dead = {
    channelNotFound: await insertRow(env.DB, {
      status: "dead",
      effect: "chat.postMessage",
      payload: { channel: "C0GONE", text: "hello" },
      attempts: 1,
      claimToken: "claim-parked-1",
      lastError: "chat.postMessage: channel_not_found",
      createdAt: NOW - 2 * HOUR,
      completedAt: NOW - 90 * MINUTE,
      teamId: "T0ONE",
    }),
    exhausted: await insertRow(env.DB, {
      status: "dead",
      effect: "reactions.add",
      attempts: 8,
      claimToken: "claim-parked-2",
      lastError: "attempts exhausted (8 of 8): reactions.add: HTTP 503",
      createdAt: NOW - 3 * HOUR,
      completedAt: NOW - 60 * MINUTE,
      teamId: "T0ONE",
    }),
    deadlinePassed: await insertRow(env.DB, {
      status: "dead",
      effect: "response_url",
      payload: { url: "https://hooks.slack.com/commands/T0TEAM/1/x", body: { text: "done" } },
      attempts: 3,
      claimToken: "claim-parked-3",
      lastError: "deadline passed before the next attempt could run: response_url: HTTP 500",
      createdAt: NOW - 2 * HOUR,
      completedAt: NOW - 30 * MINUTE,
      expiresAt: NOW - 90 * MINUTE,
      teamId: "T0TWO",
    }),
    deadLettered: await insertRow(env.DB, {
      status: "dead",
      effect: "chat.update",
      attempts: 2,
      lastError: "the outbox queue gave up on this row's message after max_retries (dead-letter queue)",
      createdAt: NOW - HOUR,
      completedAt: NOW - 20 * MINUTE,
      teamId: "T0TWO",
    }),
    channelNotFoundOtherTeam: await insertRow(env.DB, {
      status: "dead",
      effect: "chat.postMessage",
      payload: { channel: "C0GONE", text: "again" },
      attempts: 1,
      claimToken: "claim-parked-5",
      lastError: "chat.postMessage: channel_not_found",
      createdAt: NOW - HOUR,
      completedAt: NOW - 10 * MINUTE,
      teamId: "T0TWO",
    }),
  };
  const alive = {
    pending: await insertRow(env.DB, { status: "pending", effect: "chat.postMessage", createdAt: NOW - MINUTE, sweepAt: NOW + SECOND }),
    leased: await insertRow(env.DB, {
      status: "leased",
      effect: "chat.postMessage",
      lastError: "chat.postMessage: channel_not_found",
      claimExpiresAt: NOW + MINUTE,
      sweepAt: NOW + MINUTE,
    }),
    leaseExpired: await insertRow(env.DB, { status: "leased", claimExpiresAt: NOW - SECOND, sweepAt: NOW - SECOND }),
    retrying: await insertRow(env.DB, {
      status: "pending",
      effect: "chat.postMessage",
      attempts: 2,
      lastError: "chat.postMessage: channel_not_found",
      nextAttemptAt: NOW + MINUTE,
      sweepAt: NOW + 2 * MINUTE,
    }),
    done: await insertRow(env.DB, { status: "done", effect: "chat.postMessage", completedAt: NOW - 5 * MINUTE }),
  };
  await insertAttempt(env.DB, {
    outboxId: dead.exhausted,
    attempt: 7,
    outcome: "retry",
    error: "reactions.add: HTTP 503",
    finishedAt: NOW - 70 * MINUTE,
  });
  await insertAttempt(env.DB, {
    outboxId: dead.exhausted,
    attempt: 8,
    outcome: "dead",
    error: "attempts exhausted",
    finishedAt: NOW - 60 * MINUTE,
  });
  return { dead, alive };
}

const snapshot = async (ids: number[]) => Promise.all(ids.map((id) => readRow(env.DB, id)));
const sorted = (ids: number[]) => [...ids].sort((a, b) => a - b);

interface ReplayBody {
  dryRun: boolean;
  count: number;
  replayed: { id: number; effect: string; lastError: string | null; step: number; delaySeconds: number }[];
  skipped: { id: number; reason: string }[];
  enqueue: { sent: number; failed: number };
  steps: number;
  more: boolean;
  nextCursor: string | null;
  error?: string;
}

describe("POST /admin/replay by filter", () => {
  it("moves exactly the dead rows the filter matches, re-enqueues them, and leaves every other row byte-for-byte unchanged", async () => {
    const { dead, alive } = await seedSelection();
    const untouched = [dead.exhausted, dead.deadlinePassed, dead.deadLettered, ...Object.values(alive)];
    const before = await snapshot(untouched);
    const { deps, queue } = adminDeps();

    const { status, body } = await callAdmin<ReplayBody>(
      deps,
      "/admin/replay",
      NOW,
      postJson({ filter: { effect: "chat.postMessage", error: "CHANNEL_NOT_FOUND" } }),
    );

    expect(status).toBe(200);
    expect(sorted(body.replayed.map((r) => r.id))).toEqual(sorted([dead.channelNotFound, dead.channelNotFoundOtherTeam]));
    expect(body).toMatchObject({ dryRun: false, count: 2, skipped: [], enqueue: { sent: 2, failed: 0 }, more: false, nextCursor: null });
    expect(sorted(queue.ids())).toEqual(sorted([dead.channelNotFound, dead.channelNotFoundOtherTeam]));
    for (const id of [dead.channelNotFound, dead.channelNotFoundOtherTeam]) {
      expect(await readRow(env.DB, id)).toMatchObject({
        status: "pending",
        attempts: 0,
        claim_token: null,
        claim_expires_at: null,
        next_attempt_at: NOW,
        enqueued_at: NOW,
        sweeps: 0,
        sweep_at: NOW + 60 * SECOND,
        completed_at: null,
        updated_at: NOW,
        last_error: "chat.postMessage: channel_not_found",
      });
    }
    expect(await snapshot(untouched)).toEqual(before);
  });

  it("narrows by team and by the time the row died (since inclusive, until exclusive)", async () => {
    const { dead } = await seedSelection();
    const { deps } = adminDeps();
    const byTeam = await callAdmin<ReplayBody>(deps, "/admin/replay", NOW, postJson({ filter: { team: "T0TWO" }, dryRun: true }));
    expect(sorted(byTeam.body.replayed.map((r) => r.id))).toEqual(
      sorted([dead.deadlinePassed, dead.deadLettered, dead.channelNotFoundOtherTeam]),
    );
    // Died at NOW − 60 min and NOW − 30 min: the window [NOW − 60 min, NOW − 30 min) holds only the first.
    const byTime = await callAdmin<ReplayBody>(
      deps,
      "/admin/replay",
      NOW,
      postJson({ filter: { since: String(NOW - 60 * MINUTE), until: new Date(NOW - 30 * MINUTE).toISOString() }, dryRun: true }),
    );
    expect(byTime.body.replayed.map((r) => r.id)).toEqual([dead.exhausted]);
    const relative = await callAdmin<ReplayBody>(deps, "/admin/replay", NOW, postJson({ filter: { since: "25m" }, dryRun: true }));
    expect(sorted(relative.body.replayed.map((r) => r.id))).toEqual(sorted([dead.deadLettered, dead.channelNotFoundOtherTeam]));
  });

  it("is idempotent: a second replay finds no dead rows to move and sends nothing", async () => {
    const { dead } = await seedSelection();
    const { deps, queue } = adminDeps();
    const request = postJson({ filter: { error: "channel_not_found" } });
    const first = await callAdmin<ReplayBody>(deps, "/admin/replay", NOW, request);
    const afterFirst = await allRows(env.DB);
    const auditAfterFirst = await attemptsOf(env.DB, dead.channelNotFound);

    const second = await callAdmin<ReplayBody>(deps, "/admin/replay", NOW + SECOND, postJson({ filter: { error: "channel_not_found" } }));

    expect(first.body.count).toBe(2);
    expect(second.body).toMatchObject({ count: 0, replayed: [], enqueue: { sent: 0, failed: 0 } });
    expect(queue.messages).toHaveLength(2);
    expect(await allRows(env.DB)).toEqual(afterFirst);
    expect(await attemptsOf(env.DB, dead.channelNotFound)).toEqual(auditAfterFirst);
  });

  it("keeps history: earlier attempts stay, and a replay audit row holds the attempts and the error the row died with", async () => {
    const { dead } = await seedSelection();
    const { deps } = adminDeps();
    await callAdmin(deps, "/admin/replay", NOW, postJson({ ids: [r0(dead.exhausted)] }));
    expect(await attemptsOf(env.DB, dead.exhausted)).toEqual([
      expect.objectContaining({ attempt: 7, outcome: "retry", error: "reactions.add: HTTP 503" }),
      expect.objectContaining({ attempt: 8, outcome: "dead", error: "attempts exhausted" }),
      expect.objectContaining({ attempt: 8, outcome: "replay", error: "attempts exhausted (8 of 8): reactions.add: HTTP 503" }),
    ]);
  });
});

describe("POST /admin/replay by ids", () => {
  it("replays the dead ids and reports every other id as skipped with its status, touching none of them", async () => {
    const { dead, alive } = await seedSelection();
    const others = Object.values(alive);
    const before = await snapshot(others);
    const { deps, queue } = adminDeps();
    const { status, body } = await callAdmin<ReplayBody>(
      deps,
      "/admin/replay",
      NOW,
      postJson({ ids: [dead.deadLettered, ...others, 999_999, dead.deadLettered].map(r0) }),
    );
    expect(status).toBe(200);
    expect(body.replayed.map((r) => r.id)).toEqual([dead.deadLettered]);
    expect(body.skipped).toEqual([
      { ref: r0(alive.pending), shard: 0, id: alive.pending, reason: "pending" },
      { ref: r0(alive.leased), shard: 0, id: alive.leased, reason: "leased" },
      { ref: r0(alive.leaseExpired), shard: 0, id: alive.leaseExpired, reason: "leased" },
      { ref: r0(alive.retrying), shard: 0, id: alive.retrying, reason: "pending" },
      { ref: r0(alive.done), shard: 0, id: alive.done, reason: "done" },
      { ref: r0(999_999), shard: 0, id: 999_999, reason: "missing" },
    ]);
    expect(queue.ids()).toEqual([dead.deadLettered]);
    expect(await snapshot(others)).toEqual(before);
  });
});

describe("two operators replaying at once", () => {
  it("moves and sends a row once: a row that stopped being dead after it was selected is left alone", async () => {
    const id = await insertRow(env.DB, {
      status: "dead",
      lastError: "chat.postMessage: channel_not_found",
      completedAt: NOW - 60 * SECOND,
    });
    const other = adminDeps();
    // Our replay selects the row as dead; just before its step writes, the other operator's replay moves it.
    const { db, ran } = beforeFirstBatch(env.DB, () =>
      replayDead(other.deps, { selection: { by: "refs", refs: [{ shard: 0, id }] }, dryRun: false }, NOW - SECOND),
    );
    const ours = adminDeps({ db });

    const report = await replayDead(ours.deps, { selection: { by: "refs", refs: [{ shard: 0, id }] }, dryRun: false }, NOW);

    expect(ran()).toBe(true);
    expect(report.replayed).toEqual([]);
    expect(report.skipped).toEqual([{ shard: 0, id, reason: "no_longer_dead" }]);
    expect(other.queue.ids()).toEqual([id]);
    expect(ours.queue.messages).toEqual([]);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "pending", updated_at: NOW - SECOND, enqueued_at: NOW - SECOND });
    expect((await attemptsOf(env.DB, id)).filter((a) => a.outcome === "replay")).toHaveLength(1);
  });
});

describe("dry run", () => {
  it("reports what a replay would move and changes nothing: rows, audit rows, queue", async () => {
    const { dead } = await seedSelection();
    const rowsBefore = await allRows(env.DB);
    const auditBefore = await env.DB.prepare("SELECT * FROM outbox_attempts ORDER BY outbox_id, finished_at").all();
    const { deps, queue } = adminDeps();

    const { body } = await callAdmin<ReplayBody>(deps, "/admin/replay", NOW, postJson({ filter: {}, dryRun: true }));

    expect(body.dryRun).toBe(true);
    expect(sorted(body.replayed.map((r) => r.id))).toEqual(sorted(Object.values(dead)));
    expect(body.enqueue).toEqual({ sent: 0, failed: 0 });
    expect(queue.messages).toEqual([]);
    expect(await allRows(env.DB)).toEqual(rowsBefore);
    expect((await env.DB.prepare("SELECT * FROM outbox_attempts ORDER BY outbox_id, finished_at").all()).results).toEqual(
      auditBefore.results,
    );
  });
});

describe("bounded and throttled", () => {
  it("takes at most REPLAY_MAX_PER_CALL rows per call, says there is more, and the next call continues", async () => {
    const ids: number[] = [];
    for (let i = 0; i < 7; i++) ids.push(await insertRow(env.DB, { status: "dead", completedAt: NOW - i * SECOND, lastError: "x" }));
    const { deps, queue } = adminDeps({ settings: { replayMaxPerCall: 3, replayBatchSize: 2 } });

    const first = await callAdmin<ReplayBody>(deps, "/admin/replay", NOW, postJson({ filter: {} }));
    expect(first.body).toMatchObject({ count: 3, more: true });
    expect(first.body.replayed.map((r) => r.id)).toEqual(ids.slice(0, 3)); // newest first
    const second = await callAdmin<ReplayBody>(deps, "/admin/replay", NOW, postJson({ filter: {}, cursor: first.body.nextCursor }));
    const third = await callAdmin<ReplayBody>(deps, "/admin/replay", NOW, postJson({ filter: {}, cursor: second.body.nextCursor }));
    expect(second.body.replayed.map((r) => r.id)).toEqual(ids.slice(3, 6));
    expect(third.body).toMatchObject({ count: 1, more: false, nextCursor: null });
    expect(sorted(queue.ids())).toEqual(sorted(ids));

    const tooMany = await callAdmin<ReplayBody>(deps, "/admin/replay", NOW, postJson({ ids: ["0:1", "0:2", "0:3", "0:4"] }));
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.error).toContain("at most 3 ids per call");
  });

  it("moves and sends in steps of REPLAY_BATCH_SIZE, step n delayed n × REPLAY_STEP_DELAY_SECONDS, and the rows say when their message is due", async () => {
    for (let i = 0; i < 5; i++) await insertRow(env.DB, { status: "dead", completedAt: NOW - i * SECOND, lastError: "x" });
    const { deps, queue } = adminDeps({ settings: { replayBatchSize: 2, replayStepDelayMs: 7 * SECOND } });
    const { body } = await callAdmin<ReplayBody>(deps, "/admin/replay", NOW, postJson({ filter: {} }));
    expect(body.steps).toBe(3);
    expect(body.replayed.map((r) => [r.step, r.delaySeconds])).toEqual([
      [0, 0],
      [0, 0],
      [1, 7],
      [1, 7],
      [2, 14],
    ]);
    expect(queue.messages.map((m) => m.delaySeconds)).toEqual([undefined, undefined, 7, 7, 14]);
    const last = body.replayed[4];
    expect(await readRow(env.DB, last?.id ?? 0)).toMatchObject({
      next_attempt_at: NOW,
      enqueued_at: NOW + 14 * SECOND,
      sweep_at: NOW + 14 * SECOND + 60 * SECOND,
    });
  });

  it("leaves replayed rows for the sweep when the queue refuses: pending, never enqueued, due now", async () => {
    const id = await insertRow(env.DB, { status: "dead", lastError: "x" });
    const { deps } = adminDeps({ queue: messageQueue({ fail: true }) });
    const { body } = await callAdmin<ReplayBody>(deps, "/admin/replay", NOW, postJson({ ids: [r0(id)] }));
    expect(body).toMatchObject({ count: 1, enqueue: { sent: 0, failed: 1 } });
    expect(await readRow(env.DB, id)).toMatchObject({ status: "pending", enqueued_at: null, sweep_at: NOW });
  });

  it("reads and writes a fixed number of rows per replayed row, however many other dead rows exist", async () => {
    const { db, meter } = meteredDb(env.DB);
    const measure = async () => {
      const targets: number[] = [];
      for (let i = 0; i < 10; i++) targets.push(await insertRow(env.DB, { status: "dead", lastError: "boom", completedAt: NOW }));
      const deps = adminDeps({ db }).deps;
      meter.reset();
      const report = await replayDead(
        deps,
        { selection: { by: "refs", refs: targets.map((id) => ({ shard: 0, id })) }, dryRun: false },
        NOW,
      );
      expect(report.replayed).toHaveLength(10);
      return { read: meter.rowsRead, written: meter.rowsWritten, statements: meter.statements };
    };
    const small = await measure();
    await env.DB.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
       INSERT INTO outbox (idempotency_key, receipt_id, effect, payload, status, attempts, next_attempt_at, created_at, updated_at, completed_at, last_error)
       SELECT 'old' || i || ':k', 'old' || i, 'reactions.add', '{}', 'dead', 1, 0, 0, 0, 1, 'boom' FROM n`,
    ).run();
    const large = await measure();
    expect(large).toEqual(small);
    // 1 selection + 1 marker statement + 10 UPDATEs (one step).
    expect(small.statements).toBe(12);
    console.log(`replay of 10 rows by id: ${small.read} rows read, ${small.written} rows written, ${small.statements} statements`);
  });
});

describe("REPLAY_MAX_PER_CALL and REPLAY_BATCH_SIZE", () => {
  it("are refused together when one call could spend more than 900 D1 statements (a row each, a marker per step and shard)", () => {
    const errors = (vars: Record<string, string>) => {
      const parsed = parseSettings(vars);
      return parsed.ok ? [] : parsed.errors;
    };
    const message =
      "REPLAY_MAX_PER_CALL + ⌈REPLAY_MAX_PER_CALL ÷ REPLAY_BATCH_SIZE⌉ × SHARD_COUNT (the steps' markers, at most one per row) must be at most 900";
    expect(errors({ SHARD_COUNT: "1" })).toEqual([]); // 500 rows in 5 steps: 505
    expect(errors({ SHARD_COUNT: "16" })).toEqual([]); // 500 rows, 5 steps × 16 shards: 580
    expect(errors({ SHARD_COUNT: "1", REPLAY_MAX_PER_CALL: "800", REPLAY_BATCH_SIZE: "8" })).toEqual([]); // 900
    expect(errors({ SHARD_COUNT: "1", REPLAY_MAX_PER_CALL: "800", REPLAY_BATCH_SIZE: "7" })).toEqual([expect.stringContaining(message)]); // 915
    // The same 800 rows in steps of 100: 808 with one shard, 800 + 8 × 2 = 816 with two, 800 + min(800, 8 × 16) = 928 with 16.
    expect(errors({ SHARD_COUNT: "2", REPLAY_MAX_PER_CALL: "800", REPLAY_BATCH_SIZE: "100" })).toEqual([]);
    expect(errors({ SHARD_COUNT: "16", REPLAY_MAX_PER_CALL: "800", REPLAY_BATCH_SIZE: "100" })).toEqual([expect.stringContaining(message)]);
    // Steps of one row touch one shard each: 450 + 450 whatever SHARD_COUNT.
    expect(errors({ SHARD_COUNT: "16", REPLAY_MAX_PER_CALL: "450", REPLAY_BATCH_SIZE: "1" })).toEqual([]);
    expect(errors({ REPLAY_STEP_DELAY_SECONDS: "301" })).toEqual([expect.stringContaining("REPLAY_STEP_DELAY_SECONDS")]);
  });
});

describe("after a replay", () => {
  const slack = useFakeSlack();

  it("the claim that parked the row can no longer write it", async () => {
    const { dead } = await seedSelection();
    const { deps } = adminDeps();
    await callAdmin(deps, "/admin/replay", NOW, postJson({ ids: [r0(dead.channelNotFound)] }));
    const parked = await readRow(env.DB, dead.channelNotFound);
    const late = await finishClaim(
      env.DB,
      {
        id: dead.channelNotFound,
        receiptId: "x",
        idempotencyKey: "x:reply",
        depth: 0,
        effect: "chat.postMessage",
        payload: "{}",
        rateKey: null,
        keyHot: false,
        rateLimitedSince: null,
        attempts: 1,
        expiresAt: null,
        createdAt: 0,
        claimToken: "claim-parked-1",
        claimExpiresAt: NOW - HOUR,
      },
      { kind: "dead", error: "late re-run of the parking write" },
      NOW + SECOND,
      60 * SECOND,
      NOW - HOUR,
    );
    expect(late.applied).toBe(false);
    expect(await readRow(env.DB, dead.channelNotFound)).toEqual(parked);
  });

  it("the consumer performs it with a fresh attempt budget, and the audit trail keeps both lives' attempts", async () => {
    const id = await insertRow(env.DB, {
      status: "dead",
      effect: "chat.postMessage",
      payload: { channel: "C0WATCHED", text: "hello" },
      attempts: 8,
      lastError: "attempts exhausted (8 of 8): chat.postMessage: internal_error",
      completedAt: NOW - HOUR,
    });
    await insertAttempt(env.DB, {
      outboxId: id,
      attempt: 1,
      outcome: "retry",
      error: "chat.postMessage: internal_error",
      finishedAt: NOW - 2 * HOUR,
    });
    const { deps } = adminDeps();
    await callAdmin(deps, "/admin/replay", NOW, postJson({ ids: [r0(id)] }));

    slack.current.script("chat.postMessage", reply.error("internal_error"), reply.ok({ channel: "C0WATCHED", ts: "1.2" }));
    const consumer = deliveryDeps(NOW + SECOND);
    expect((await deliverBatch(consumer.deps, [id])).get(id)).toMatchObject({ action: "retry" });
    consumer.clock.set((await readRow(env.DB, id)).next_attempt_at);
    await deliverBatch(consumer.deps, [id]);

    expect(await readRow(env.DB, id)).toMatchObject({ status: "done", attempts: 2 });
    expect((await attemptsOf(env.DB, id)).map((a) => [a.attempt, a.outcome])).toEqual([
      [1, "retry"], // first life
      [1, "retry"], // second life: kept, not absorbed by the first life's row
      [8, "replay"],
    ]);
  });
});

describe("400: a replay request says what is wrong", () => {
  it.each([
    ["both ids and filter", { ids: ["0:1"], filter: {} }, "exactly one of ids"],
    ["neither", { dryRun: true }, "exactly one of ids"],
    ["ids that are not refs", { ids: ["0:1", -2] }, 'want "<shard>:<id>"'],
    ["an empty id list", { ids: [] }, "no ids given"],
    ["an unknown field", { ids: ["0:1"], force: true }, "unknown field(s) force"],
    ["an unknown filter key", { filter: { status: "done" } }, "unknown key(s) status"],
    ["a bad time", { filter: { since: "yesterday" } }, "since: want epoch ms"],
    ["since after until", { filter: { since: "1h", until: "2h" } }, "since must be before until"],
    ["a forged cursor", { filter: {}, cursor: "abc" }, "cursor"],
    ["dryRun as a string", { ids: ["0:1"], dryRun: "yes" }, "dryRun"],
  ])("%s", async (_, body, message) => {
    const { deps } = adminDeps();
    const answer = await callAdmin<ReplayBody>(deps, "/admin/replay", NOW, postJson(body));
    expect(answer.status).toBe(400);
    expect(answer.body.error).toContain(message);
  });

  it("refuses a body that is not JSON", async () => {
    const { deps } = adminDeps();
    const answer = await callAdmin<ReplayBody>(deps, "/admin/replay", NOW, { method: "POST", body: "ids=1" });
    expect([answer.status, answer.body.error]).toEqual([400, expect.stringContaining("want JSON")]);
  });

  it("refuses a JSON array (400) and a body over its limit (413)", async () => {
    const { deps } = adminDeps();
    const array = await callAdmin<ReplayBody>(deps, "/admin/replay", NOW, postJson([{ ids: ["0:1"] }]));
    expect([array.status, array.body.error]).toEqual([400, "body: want a JSON object"]);
    const huge = await callAdmin<ReplayBody>(deps, "/admin/replay", NOW, postJson({ ids: Array(30_000).fill("0:12345678") }));
    expect([huge.status, huge.body.error]).toEqual([413, expect.stringContaining("-byte limit")]);
  });
});

describe("POST /admin/replay says which rows it replays may have been performed (the dashboard's question counts them)", () => {
  it("a row named by id is replayed marked maybePerformed; one that is not, unmarked; a filter leaves the marked one out", async () => {
    const marked = await insertRow(env.DB, {
      status: "dead",
      lastError: "chat.postMessage: no result within 10000 ms",
      completedAt: NOW - MINUTE,
    });
    const plain = await insertRow(env.DB, { status: "dead", lastError: "chat.postMessage: channel_not_found", completedAt: NOW - MINUTE });
    await env.DB.prepare("UPDATE outbox SET maybe_performed = 1 WHERE id = ?1").bind(marked).run();
    const { deps } = adminDeps();
    const named = await callAdmin<{ replayed: { id: number; maybePerformed: boolean }[] }>(
      deps,
      "/admin/replay",
      NOW,
      postJson({ ids: [r0(marked), r0(plain)], dryRun: true }),
    );
    expect(named.body.replayed.map((r) => [r.id, r.maybePerformed])).toEqual([
      [marked, true],
      [plain, false],
    ]);
    const filtered = await callAdmin<{ replayed: { id: number; maybePerformed: boolean }[] }>(
      deps,
      "/admin/replay",
      NOW,
      postJson({ filter: {}, dryRun: true }),
    );
    expect(filtered.body.replayed.map((r) => [r.id, r.maybePerformed])).toEqual([[plain, false]]);
  });
});
