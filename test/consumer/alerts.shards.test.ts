/**
 * The cron watches the deployment as ONE system over the tests' two shards:
 * each shard is measured during the walk, and after it one sample and one
 * alert judgement are made on the merged figures, kept on shard 0 — one alert
 * when both shards are over a threshold, not two; an alert that only the sum
 * crosses; and no judgement at all when a shard could not be measured.
 */
import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { alertOperationId } from "../../shared/ops/alerts.ts";
import type { OutboxMessage } from "../../shared/outbox/model.ts";
import { captureLog } from "../support/console-capture.ts";
import worker from "../support/entries/consumer.ts";
import { insertRow, resetAllShards, shardDbs } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";

const SECOND = 1000;
const MINUTE = 60 * SECOND;
/** ALERT_WINDOW_SECONDS' default: 15 minutes; NOW is the start of a window. */
const WINDOW = 15 * MINUTE;

beforeEach(async () => {
  await resetAllShards();
  for (const db of shardDbs()) await db.batch([db.prepare("DELETE FROM backlog_samples"), db.prepare("DELETE FROM alert_state")]);
});
afterEach(() => vi.restoreAllMocks());

async function tick(over: Partial<Record<string, unknown>> = {}) {
  const sent: OutboxMessage[] = [];
  const queue = {
    async send(body: OutboxMessage) {
      sent.push(body);
    },
    async sendBatch(messages: Iterable<MessageSendRequest<OutboxMessage>>) {
      for (const m of messages) sent.push(m.body);
    },
  };
  const ctx = createExecutionContext();
  await worker.scheduled(
    createScheduledController({ scheduledTime: NOW, cron: "* * * * *" }),
    { ...env, OUTBOX_QUEUE: queue, ...over } as unknown as typeof env,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return sent;
}

const alertReceipts = (db: D1Database) =>
  db
    .prepare("SELECT id FROM receipts WHERE kind = 'alert' ORDER BY id")
    .all<{ id: string }>()
    .then((r) => r.results.map((x) => x.id));
const samples = (db: D1Database) =>
  db
    .prepare("SELECT at, pending, dead, oldest_pending_age_ms FROM backlog_samples ORDER BY at")
    .all()
    .then((r) => r.results);

/** A pending row `ageSeconds` old at NOW, not yet due for the sweep. */
const owe = (db: D1Database, ageSeconds: number) =>
  insertRow(db, { status: "pending", createdAt: NOW - ageSeconds * SECOND, nextAttemptAt: NOW + MINUTE, sweepAt: NOW + MINUTE });

describe("scheduled(): one alert set for all shards", () => {
  it("raises ONE oldest_pending alert, on shard 0, when both shards hold rows past the threshold, and keeps one sample of the sum there", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    await owe(db0, 700);
    await owe(db1, 900);

    const sent = await tick();

    const id = alertOperationId("oldest_pending", "raised", NOW, WINDOW);
    expect(await alertReceipts(db0)).toEqual([id]);
    expect(await alertReceipts(db1)).toEqual([]);
    const post = await db0.prepare("SELECT id, payload FROM outbox WHERE receipt_id = ?").bind(id).first<{ id: number; payload: string }>();
    // The oldest of both shards' rows (900 s, on shard 1) is the one the alert reports.
    expect(JSON.parse(post?.payload ?? "{}").text).toContain("oldest pending row is 900 s old");
    expect(JSON.parse(post?.payload ?? "{}").text).toContain("2 pending");
    // Only the alert's post was enqueued (shard 0: { id }); the owed rows are not due.
    expect(sent).toEqual([{ id: post?.id }]);
    expect(await samples(db0)).toEqual([{ at: NOW, pending: 2, dead: 0, oldest_pending_age_ms: 900 * SECOND }]);
    expect(await samples(db1)).toEqual([]);
    expect(await db0.prepare("SELECT kind, firing FROM alert_state WHERE firing = 1").all()).toMatchObject({
      results: [{ kind: "oldest_pending", firing: 1 }],
    });
    expect((await db1.prepare("SELECT COUNT(*) AS n FROM alert_state").first<{ n: number }>())?.n).toBe(0);
  });

  it("raises new_dead when only the sum of the shards' parked rows reaches ALERT_DEAD_ROWS", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    const threshold = { ALERT_DEAD_ROWS: "2" };
    await insertRow(db0, { status: "dead", completedAt: NOW - MINUTE, lastError: "x" });
    await tick(threshold);
    expect(await alertReceipts(db0)).toEqual([]);
    await insertRow(db1, { status: "dead", completedAt: NOW - MINUTE, lastError: "x" });
    await tick(threshold);
    expect(await alertReceipts(db0)).toEqual([alertOperationId("new_dead", "raised", NOW, WINDOW)]);
    expect(await alertReceipts(db1)).toEqual([]);
  });

  it("judges no alert and records no sample when a shard cannot be measured, and says which", async () => {
    const lines = captureLog();
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    await owe(db0, 700);
    await owe(db1, 900);
    // Shard 1's D1 fails every statement: its sweep and its measure fail, shard 0's tick still runs.
    const failing = new Proxy(db1, {
      get(target, prop) {
        if (prop === "batch" || prop === "prepare") {
          return () => {
            throw new Error("D1_ERROR: simulated outage");
          };
        }
        const value = Reflect.get(target, prop);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    await tick({ DB_1: failing });
    expect(lines.find((l) => l.includes("backlog not measured on every shard"))).toContain('"shards":[1]');
    expect(await alertReceipts(db0)).toEqual([]);
    expect(await samples(db0)).toEqual([]);
  });
});
