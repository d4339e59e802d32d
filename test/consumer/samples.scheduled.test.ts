import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { recordingLog } from "../../shared/log.ts";
import { readSamples } from "../../shared/ops/samples.ts";
import { watchBacklog } from "../../shared/ops/watch.ts";
import type { Settings } from "../../shared/settings.ts";
import { testSettings } from "../support/consumer.ts";
import worker from "../support/entries/consumer.ts";
import { meteredDb } from "../support/metered-db.ts";
import { insertAttempt, resetOpsTables } from "../support/ops.ts";
import { insertRow, readRow, recordingQueue, resetTables } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

beforeEach(async () => {
  await resetTables(env.DB);
  await resetOpsTables(env.DB);
});
afterEach(() => vi.restoreAllMocks());

/** No alert channel: these tests are about samples, and alerts would add rows of their own. */
function watch(over: Partial<Settings> = {}, db: D1Database = env.DB) {
  const deps = { db, queue: recordingQueue(), settings: testSettings({ alertChannel: undefined, ...over }), log: recordingLog() };
  return (now: number) => watchBacklog(deps, now);
}

async function seedSample(at: number) {
  await env.DB.prepare(
    `INSERT INTO backlog_samples (at, pending, leased, dead, stale_leases, never_enqueued, oldest_pending_age_ms, done_in_window, failed_in_window, window_ms)
     VALUES (?, 0, 0, 0, 0, 0, NULL, 0, 0, 900000)`,
  )
    .bind(at)
    .run();
}

describe("a backlog sample per tick", () => {
  it("records the figures at the tick's time", async () => {
    await insertRow(env.DB, { status: "pending", createdAt: NOW - 90 * SECOND, enqueuedAt: null, sweepAt: NOW + MINUTE });
    await insertRow(env.DB, { status: "leased", createdAt: NOW - 30 * SECOND, claimExpiresAt: NOW - SECOND, sweepAt: NOW + MINUTE });
    const dead = await insertRow(env.DB, { status: "dead", completedAt: NOW - MINUTE });
    await insertRow(env.DB, { status: "done", completedAt: NOW - 2 * MINUTE });
    await insertAttempt(env.DB, { outboxId: dead, attempt: 1, outcome: "dead", finishedAt: NOW - MINUTE });
    await watch()(NOW);
    expect(await readSamples(env.DB, 0, NOW)).toEqual([
      {
        at: NOW,
        pending: 1,
        leased: 1,
        dead: 1,
        staleLeases: 1,
        neverEnqueued: 1,
        oldestPendingAgeMs: 90 * SECOND,
        doneInWindow: 1,
        failedInWindow: 1,
        windowMs: 15 * MINUTE,
        queueBacklog: null, // the recording queue has no metrics()
        countsCapped: false,
      },
    ]);
  });

  it("writes nothing new when a tick is re-run for the same scheduled time", async () => {
    const run = watch();
    await run(NOW);
    await insertRow(env.DB, { status: "pending", createdAt: NOW });
    await run(NOW);
    const samples = await readSamples(env.DB, 0, NOW + HOUR);
    expect(samples.map((s) => [s.at, s.pending])).toEqual([[NOW, 0]]);
  });

  it("prunes samples older than SAMPLE_RETENTION_HOURS, oldest first, at most PRUNE_BATCH_SIZE per tick", async () => {
    const retention = 48 * HOUR;
    for (let i = 0; i < 3; i++) await seedSample(NOW - retention - (i + 1) * SECOND);
    await seedSample(NOW - retention); // exactly at the cut-off: kept
    await seedSample(NOW - retention + SECOND);
    const run = watch({ pruneBatchSize: 2 });
    const first = await run(NOW);
    expect(first.samplesPruned).toBe(2);
    expect((await readSamples(env.DB, 0, NOW)).map((s) => NOW - s.at)).toEqual([retention + SECOND, retention, retention - SECOND, 0]);
    // A minute later the cut-off has moved past the three oldest left; two go this tick.
    const second = await run(NOW + MINUTE);
    expect(second.samplesPruned).toBe(2);
    expect((await readSamples(env.DB, 0, NOW + MINUTE)).map((s) => s.at)).toEqual([NOW - retention + SECOND, NOW, NOW + MINUTE]);
  });

  it("reads as many rows with 3 000 done rows in history as with none", async () => {
    await insertRow(env.DB, { status: "pending", createdAt: NOW - MINUTE });
    await insertRow(env.DB, { status: "dead", completedAt: NOW - MINUTE });
    const { db, meter } = meteredDb(env.DB);
    const measure = async (now: number) => {
      meter.reset();
      await watch({}, db)(now);
      return { read: meter.rowsRead, written: meter.rowsWritten };
    };
    await measure(NOW - MINUTE); // the first tick also writes the alert state rows once
    const before = await measure(NOW);
    await env.DB.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
       INSERT INTO outbox (idempotency_key, receipt_id, effect, payload, status, attempts, next_attempt_at, created_at, updated_at, completed_at)
       SELECT 'old' || i || ':k', 'old' || i, 'reactions.add', '{}', 'done', 1, 0, 0, 0, 1 FROM n`,
    ).run();
    const after = await measure(NOW + MINUTE);
    expect(before.read).toBeGreaterThan(0); // a meter that saw nothing would pass at 0 = 0
    expect(after).toEqual(before);
    console.log(`watch step per tick (1 pending, 1 dead): ${before.read} rows read, ${before.written} rows written`);
  });
});

describe("scheduled()", () => {
  it("samples after the sweep, and a failing sample never undoes the sweep", async () => {
    // Due an hour from the real clock, which the real consumer reads: the sweep's message finds it not yet due.
    const stale = await insertRow(env.DB, {
      status: "pending",
      sweepAt: NOW - SECOND,
      nextAttemptAt: Date.now() + HOUR,
      createdAt: NOW - MINUTE,
    });
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    await env.DB.prepare("ALTER TABLE backlog_samples RENAME TO backlog_samples_away").run();
    const started = Date.now();
    try {
      const ctx = createExecutionContext();
      await worker.scheduled(createScheduledController({ scheduledTime: NOW, cron: "* * * * *" }), env, ctx);
      await waitOnExecutionContext(ctx);
    } finally {
      await env.DB.prepare("ALTER TABLE backlog_samples_away RENAME TO backlog_samples").run();
    }
    const swept = await readRow(env.DB, stale);
    expect([swept.sweeps, Number(swept.enqueued_at) >= started]).toEqual([1, true]);
    const logged = errors.mock.calls.map((c) => JSON.parse(String(c[0])));
    expect(logged).toContainEqual(expect.objectContaining({ level: "error", msg: "backlog watch failed; the sweep itself completed" }));

    const ctx = createExecutionContext();
    await worker.scheduled(createScheduledController({ scheduledTime: NOW + MINUTE, cron: "* * * * *" }), env, ctx);
    await waitOnExecutionContext(ctx);
    expect((await readSamples(env.DB, 0, NOW + HOUR)).map((s) => s.at)).toEqual([NOW + MINUTE]);
  });
});
