import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { tokenKeys } from "../../shared/installations/crypto.ts";
import { recordingLog } from "../../shared/log.ts";
import { GAPS_LOOKBACK_MS } from "../../shared/ops/backfill-gaps.ts";
import { claimRows } from "../../shared/outbox/claim.ts";
import { takeStaleRows } from "../../shared/outbox/sweep.ts";
import { WORKFLOW_TOKEN_LIFETIME_MS } from "../../shared/steps/execution.ts";
import { insertExecutionStatement, sealExecution } from "../../shared/steps/tokens.ts";
import { sweep } from "../../workers/consumer/sweep.ts";
import { capturingDb, queryPlan, statementMatching } from "../support/captured-sql.ts";
import { testSettings } from "../support/consumer.ts";
import worker from "../support/entries/consumer.ts";
import { beforeFirstBatch } from "../support/failing-db.ts";
import { meteredDb } from "../support/metered-db.ts";
import { allRows, insertRow, readRow, recordingQueue, resetTables } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";

const SECOND = 1000;
const GRACE = 60 * SECOND;
const HOUR = 3600 * SECOND;

beforeEach(() => resetTables(env.DB));

/**
 * One row of each kind, each on both sides of its time boundary (± 1 s).
 * `stale` rows must be re-enqueued by a sweep at NOW; the others untouched.
 */
async function seedSelection() {
  const stale = {
    pendingMessageLost: await insertRow(env.DB, { status: "pending", createdAt: NOW - 120 * SECOND, sweepAt: NOW - SECOND }),
    neverEnqueued: await insertRow(env.DB, { status: "pending", enqueuedAt: null, sweepAt: NOW }),
    leaseExpired: await insertRow(env.DB, { status: "leased", claimExpiresAt: NOW - SECOND, sweepAt: NOW - SECOND }),
    retryDueAndLate: await insertRow(env.DB, {
      status: "pending",
      attempts: 2,
      nextAttemptAt: NOW - GRACE - SECOND,
      sweepAt: NOW - SECOND,
    }),
  };
  const untouched = {
    pendingInGrace: await insertRow(env.DB, { status: "pending", createdAt: NOW - 59 * SECOND, sweepAt: NOW + SECOND }),
    freshlyClaimed: await insertRow(env.DB, { status: "leased", claimExpiresAt: NOW + SECOND, sweepAt: NOW + SECOND }),
    waitingForRetry: await insertRow(env.DB, {
      status: "pending",
      attempts: 1,
      nextAttemptAt: NOW + 10 * SECOND,
      sweepAt: NOW + 10 * SECOND + GRACE,
    }),
    retryDueInGrace: await insertRow(env.DB, {
      status: "pending",
      attempts: 1,
      nextAttemptAt: NOW - GRACE + SECOND,
      sweepAt: NOW + SECOND,
    }),
    done: await insertRow(env.DB, { status: "done", completedAt: NOW - 2 * HOUR }),
    dead: await insertRow(env.DB, { status: "dead", completedAt: NOW - 2 * HOUR }),
  };
  return { stale, untouched };
}

function sweepDeps(queue = recordingQueue(), over: Parameters<typeof testSettings>[0] = {}) {
  return { deps: { db: env.DB, queue, settings: testSettings(over), log: recordingLog() }, queue };
}

describe("re-enqueue (invariant 3: nothing pending is forgotten)", () => {
  it("re-enqueues exactly the stale rows, and leaves every other row byte-for-byte unchanged", async () => {
    const { stale, untouched } = await seedSelection();
    const before = await Promise.all(Object.values(untouched).map((id) => readRow(env.DB, id)));
    const { deps, queue } = sweepDeps();

    const report = await sweep(deps, NOW);

    expect(queue.sent.sort((a, b) => a - b)).toEqual(Object.values(stale).sort((a, b) => a - b));
    expect(report).toMatchObject({ reenqueued: 4, enqueueFailed: 0, steps: 1 });
    expect(await Promise.all(Object.values(untouched).map((id) => readRow(env.DB, id)))).toEqual(before);
    for (const id of Object.values(stale)) {
      expect(await readRow(env.DB, id)).toMatchObject({ enqueued_at: NOW, sweeps: 1, sweep_at: NOW + GRACE });
    }
  });

  it("does not re-send a row again until its next look-in: one grace period, then two for every consecutive re-send", async () => {
    const id = await insertRow(env.DB, { status: "pending", sweepAt: NOW });
    const { deps, queue } = sweepDeps();
    await sweep(deps, NOW);
    await sweep(deps, NOW + GRACE - 1);
    expect(queue.sent).toEqual([id]);
    await sweep(deps, NOW + GRACE);
    expect(queue.sent).toEqual([id, id]);
    expect((await readRow(env.DB, id)).sweep_at).toBe(NOW + GRACE + 2 * GRACE);
    for (let i = 0; i < 5; i++) await sweep(deps, (await readRow(env.DB, id)).sweep_at ?? 0);
    const row = await readRow(env.DB, id);
    expect(row.sweeps).toBe(7);
    expect((row.sweep_at ?? 0) - (row.enqueued_at ?? 0)).toBe(2 * GRACE); // capped at 2 × grace
  });

  it("starts the back-off over once a message reaches the row (a claim resets the count)", async () => {
    const id = await insertRow(env.DB, { status: "pending", sweeps: 3, sweepAt: NOW - SECOND });
    await claimRows(env.DB, [id], "worker", NOW, 300_000);
    expect((await readRow(env.DB, id)).sweeps).toBe(0);
  });

  it("is bounded per tick: SWEEP_BATCH_SIZE rows per step, SWEEP_MAX_STEPS steps", async () => {
    for (let i = 0; i < 7; i++) await insertRow(env.DB, { status: "pending", sweepAt: NOW - i });
    const { deps, queue } = sweepDeps(recordingQueue(), { sweepBatchSize: 2, sweepMaxSteps: 3 });
    const report = await sweep(deps, NOW);
    expect(report).toMatchObject({ reenqueued: 6, steps: 3 });
    expect(queue.sent).toHaveLength(6);
    await sweep(deps, NOW);
    expect(queue.sent).toHaveLength(7);
  });

  it("takes the stalest rows first", async () => {
    const older = await insertRow(env.DB, { status: "pending", sweepAt: NOW - 10 * SECOND });
    await insertRow(env.DB, { status: "pending", sweepAt: NOW - SECOND });
    const { deps, queue } = sweepDeps(recordingQueue(), { sweepBatchSize: 1, sweepMaxSteps: 1 });
    await sweep(deps, NOW);
    expect(queue.sent).toEqual([older]);
  });

  it("marks rows not enqueued when the queue refuses, so the next tick tries again", async () => {
    const id = await insertRow(env.DB, { status: "pending", sweepAt: NOW - SECOND });
    const { deps } = sweepDeps(recordingQueue({ fail: true }));
    const report = await sweep(deps, NOW);
    expect(report).toMatchObject({ reenqueued: 0, enqueueFailed: 1, steps: 1 });
    expect(await readRow(env.DB, id)).toMatchObject({ status: "pending", enqueued_at: null, sweep_at: NOW });
  });
});

describe("the take's count is the verdict: a row claimed between the candidates and the take is not re-sent", () => {
  it("a consumer claims a stale row after the sweep read it as a candidate: the sweep takes and re-sends only the others", async () => {
    const rows = [
      await insertRow(env.DB, { status: "pending", sweepAt: NOW - 3 * SECOND }),
      await insertRow(env.DB, { status: "pending", sweepAt: NOW - 2 * SECOND }),
      await insertRow(env.DB, { status: "pending", sweepAt: NOW - SECOND }),
    ];
    const claimedMeanwhile = rows[1] as number;
    // Between the candidate SELECT and the batch of takes, a consumer claims one of the candidates.
    const { db, ran } = beforeFirstBatch(env.DB, async (target) => {
      expect((await claimRows(target, [claimedMeanwhile], "consumer", NOW, 120_000)).map((r) => r.id)).toEqual([claimedMeanwhile]);
    });
    expect((await readRow(env.DB, claimedMeanwhile)).status).toBe("pending");
    const { deps, queue } = sweepDeps();
    const report = await sweep({ ...deps, db }, NOW);
    expect(ran()).toBe(true);
    expect(queue.sent.sort((a, b) => a - b)).toEqual([rows[0], rows[2]]);
    expect(report).toMatchObject({ reenqueued: 2 });
    // The claimed row is the consumer's, untouched by the sweep: no sweep counted, its lease's sweep_at.
    expect(await readRow(env.DB, claimedMeanwhile)).toMatchObject({
      status: "leased",
      claim_token: "consumer",
      sweeps: 0,
      sweep_at: NOW + 120_000,
    });
  });
});

describe("cost does not grow with history (invariant 6)", () => {
  it("finds stale rows through the partial index, and scans no table", async () => {
    // The statements takeStaleRows really sends, captured at the D1 boundary and explained with their own values.
    await insertRow(env.DB, { status: "pending", sweepAt: NOW - SECOND });
    const { db, statements } = capturingDb(env.DB);
    expect(await takeStaleRows(db, NOW, GRACE, 10)).toHaveLength(1);
    const candidates = statementMatching(statements, /^\s*SELECT/);
    expect(await queryPlan(env.DB, candidates)).toContain("USING INDEX outbox_sweepable");
    for (const statement of statements) expect(await queryPlan(env.DB, statement)).not.toMatch(/^SCAN outbox$/m);
  });

  it("reads no more rows with 3 000 done rows present than with none: 2 per row taken", async () => {
    const { db, meter } = meteredDb(env.DB);
    const measure = async () => {
      await resetStale();
      meter.reset();
      const taken = await takeStaleRows(db, NOW, GRACE, 10);
      expect(taken).toHaveLength(10);
      return meter.rowsRead;
    };
    const stale: number[] = [];
    for (let i = 0; i < 12; i++) stale.push(await insertRow(env.DB, { status: "pending", sweepAt: NOW - i }));
    const resetStale = () => env.DB.prepare("UPDATE outbox SET sweep_at = ?1 - id WHERE status = 'pending'").bind(NOW).run();

    const without = await measure();
    await env.DB.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
       INSERT INTO outbox (idempotency_key, receipt_id, effect, payload, status, attempts, next_attempt_at, created_at, updated_at, completed_at, claim_token)
       SELECT 'old' || i || ':k', 'old' || i, 'reactions.add', '{}', 'done', 1, 0, 0, 0, 1, 't' FROM n`,
    ).run();
    const withHistory = await measure();

    expect(withHistory).toBe(without);
    expect(withHistory).toBe(2 * 10);
  });
});

describe("pruning", () => {
  it("deletes receipts, done rows and dead rows past their retention (± 1 s), with their audit rows", async () => {
    const settings = testSettings();
    const receipt = (id: string, at: number) =>
      env.DB.prepare("INSERT INTO receipts (id, kind, type, delivery_id, received_at) VALUES (?, 'event', 'message', 'd', ?)")
        .bind(id, at)
        .run();
    await receipt("old", NOW - settings.receiptRetentionMs - SECOND);
    await receipt("young", NOW - settings.receiptRetentionMs + SECOND);
    const oldDone = await insertRow(env.DB, { status: "done", completedAt: NOW - settings.doneRetentionMs - SECOND });
    const youngDone = await insertRow(env.DB, { status: "done", completedAt: NOW - settings.doneRetentionMs + SECOND });
    const oldDead = await insertRow(env.DB, { status: "dead", completedAt: NOW - settings.deadRetentionMs - SECOND });
    const youngDead = await insertRow(env.DB, { status: "dead", completedAt: NOW - settings.deadRetentionMs + SECOND });
    const ancientPending = await insertRow(env.DB, { status: "pending", createdAt: 0, sweepAt: NOW + HOUR });
    await env.DB.prepare(
      "INSERT INTO outbox_attempts (outbox_id, attempt, outcome, finished_at) VALUES (?, 1, 'retry', 0), (?, 1, 'retry', 0)",
    )
      .bind(oldDone, youngDone)
      .run();

    const { deps } = sweepDeps();
    const report = await sweep(deps, NOW);

    expect(report.pruned).toEqual({ receipts: 1, done: 1, dead: 1, gaps: 0, cancels: 0 });
    const { results: receipts } = await env.DB.prepare("SELECT id FROM receipts").all<{ id: string }>();
    expect(receipts.map((r) => r.id)).toEqual(["young"]);
    expect((await allRows(env.DB)).map((r) => r.id)).toEqual([youngDone, youngDead, ancientPending]);
    const { results: audit } = await env.DB.prepare("SELECT outbox_id FROM outbox_attempts").all<{ outbox_id: number }>();
    expect(audit.map((a) => a.outbox_id)).toEqual([youngDone]);
    expect(oldDead).toBeGreaterThan(0);
  });

  it("a scrub step D1 refuses is logged, and the tick stands: its re-enqueue and report are kept (and the alerts after it run)", async () => {
    const stale = await insertRow(env.DB, { status: "pending", enqueuedAt: NOW - 10 * GRACE, sweepAt: NOW - SECOND });
    const db = new Proxy(env.DB, {
      get(target, prop) {
        if (prop === "prepare") {
          return (sql: string) => {
            if (sql.includes("outbox_scrub_due")) throw new Error("D1_ERROR: simulated overload");
            return target.prepare(sql);
          };
        }
        const value = Reflect.get(target, prop);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const { deps, queue } = sweepDeps();
    const report = await sweep({ ...deps, db }, NOW);
    const { log } = deps;
    expect(report).toMatchObject({ reenqueued: 1, scrubbed: 0 });
    expect(queue.sent).toEqual([stale]);
    expect(log.records.find((r) => r.msg.startsWith("scrub step failed"))?.level).toBe("error");
  });

  it("prunes delivery gaps older than the backlog's lookback, so the table does not grow forever", async () => {
    const gap = (until: number, team: string) =>
      env.DB.prepare("INSERT INTO delivery_gaps (gap_until, team_id, gap_from) VALUES (?, ?, ?)")
        .bind(until, team, until - HOUR)
        .run();
    await gap(NOW - GAPS_LOOKBACK_MS - SECOND, "T0OLD");
    await gap(NOW - GAPS_LOOKBACK_MS + SECOND, "T0YOUNG");
    const { deps } = sweepDeps();
    expect((await sweep(deps, NOW)).pruned.gaps).toBe(1);
    const { results } = await env.DB.prepare("SELECT team_id FROM delivery_gaps").all<{ team_id: string }>();
    expect(results.map((r) => r.team_id)).toEqual(["T0YOUNG"]);
  });

  it("prunes at most PRUNE_BATCH_SIZE rows of each kind per tick", async () => {
    for (let i = 0; i < 5; i++) await insertRow(env.DB, { status: "done", completedAt: 1 + i });
    const { deps } = sweepDeps(recordingQueue(), { pruneBatchSize: 2 });
    expect((await sweep(deps, NOW)).pruned.done).toBe(2);
    expect((await allRows(env.DB)).length).toBe(3);
  });
});

describe("workflow tokens (custom steps): the cron scrubs an expired one and prunes its execution with the receipts", () => {
  const KEY = "5eed".repeat(16);
  /** An execution whose step waits for a user (nothing completed it): its workflow token held, sealed, as the ack writes it. */
  async function waitingExecution(executionId: string, issuedAt: number) {
    const keys = await tokenKeys(KEY, undefined);
    const step = { kind: "executed", executionId, callbackId: "wait", workflowExecutionId: "Wx0STEP", inputs: {}, issuedAt } as const;
    const sealed = await sealExecution(keys, { ...step, token: `xwfp-${executionId}` }, "T0TEAM");
    await insertExecutionStatement(env.DB, sealed, `Ev0${executionId}`).run();
    return sealed;
  }
  const executionOf = (id: string) =>
    env.DB.prepare("SELECT token IS NOT NULL AS held, key_id, ended_at, end_reason FROM step_executions WHERE execution_id = ?1")
      .bind(id)
      .first();

  it("held at expires_at − 1; at expires_at scrubbed (token and key gone, ended 'expired' then); kept until the receipts' retention, pruned after it", async () => {
    const settings = testSettings();
    const { expiresAt, issuedAt } = await waitingExecution("Fx0WAITING", NOW);
    // Issued a minute later: on the other side of each boundary throughout.
    const later = await waitingExecution("Fx0LATER", NOW + 60 * SECOND);
    expect(expiresAt).toBe(issuedAt + WORKFLOW_TOKEN_LIFETIME_MS);
    const { deps } = sweepDeps();

    expect((await sweep(deps, expiresAt - 1)).executions).toEqual({ expired: 0, pruned: 0 });
    expect(await executionOf("Fx0WAITING")).toEqual({ held: 1, key_id: expect.any(String), ended_at: null, end_reason: null });

    expect((await sweep(deps, expiresAt)).executions).toEqual({ expired: 1, pruned: 0 });
    expect(await executionOf("Fx0WAITING")).toEqual({ held: 0, key_id: null, ended_at: expiresAt, end_reason: "expired" });
    expect(await executionOf("Fx0LATER")).toMatchObject({ held: 1, end_reason: null });
    // Scrubbed once: a later tick finds nothing more to do for it.
    expect((await sweep(deps, expiresAt + 1)).executions).toEqual({ expired: 0, pruned: 0 });

    // Kept, token-less, for the audit trail while its receipt is; pruned the moment it is older.
    const retained = issuedAt + settings.receiptRetentionMs;
    // (The one expired at this tick is Fx0LATER, its token past its own expiry by now.)
    expect((await sweep(deps, retained)).executions).toEqual({ expired: 1, pruned: 0 });
    expect(await executionOf("Fx0WAITING")).toMatchObject({ end_reason: "expired" });
    expect((await sweep(deps, retained + 1)).executions).toEqual({ expired: 0, pruned: 1 });
    expect(await executionOf("Fx0WAITING")).toBeNull();
    expect(await executionOf("Fx0LATER")).toEqual({ held: 0, key_id: null, ended_at: later.expiresAt, end_reason: "expired" });
  });
});

describe("scheduled()", () => {
  it("runs the sweep at the controller's scheduled time, through the real queue", async () => {
    // Due an hour from the real clock, which the real consumer reads: the message the sweep sends finds it not yet due.
    const stale = await insertRow(env.DB, { status: "pending", sweepAt: NOW - SECOND, nextAttemptAt: Date.now() + HOUR });
    const fresh = await insertRow(env.DB, { status: "pending", sweepAt: NOW + SECOND });
    const ctx = createExecutionContext();
    const started = Date.now();
    await worker.scheduled(createScheduledController({ scheduledTime: NOW, cron: "* * * * *" }), env, ctx);
    await waitOnExecutionContext(ctx);
    // Stale by the scheduled time, re-enqueued at the clock of its take (its message will find it not yet due
    // and be acked: the row decides).
    const row = await readRow(env.DB, stale);
    expect(row.sweeps).toBe(1);
    expect(Number(row.enqueued_at)).toBeGreaterThanOrEqual(started);
    expect(await readRow(env.DB, fresh)).toMatchObject({ sweeps: 0 });
  });
});
