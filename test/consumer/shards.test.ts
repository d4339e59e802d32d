/**
 * The consumer over two shards (SHARD_COUNT = 2, local D1s DB and DB_1): a
 * message is delivered against the D1 it names — row ids repeat across shards,
 * so the wrong D1 would claim another team's row —, a message naming a shard
 * this deployment does not have is acked with a log line and claims nothing,
 * and the cron re-sends stale rows from every shard, each message naming its own.
 */
import {
  createExecutionContext,
  createMessageBatch,
  createScheduledController,
  getQueueResult,
  waitOnExecutionContext,
} from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { DELIVERY_CONCURRENCY } from "../../shared/delivery/deliver.ts";
import { countingDb, D1_QUERIES_PER_INVOCATION, STOP_CLAIMING_AT, WORST_QUERIES_PER_ROW } from "../../shared/delivery/query-budget.ts";
import { tokenKeys } from "../../shared/installations/crypto.ts";
import { saveInstallation } from "../../shared/installations/store.ts";
import type { OutboxMessage } from "../../shared/outbox/model.ts";
import { DEAD_LETTER_REASON } from "../../workers/consumer/dead-letters.ts";
import { captureLog } from "../support/console-capture.ts";
import worker from "../support/entries/consumer.ts";
import { failingFinishes } from "../support/failing-db.ts";
import { gate, reply, useFakeSlack } from "../support/fake-slack.ts";
import { testInstallation } from "../support/installations.ts";
import { insertRow, readRow, resetAllShards, shardDbs } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";
import { waitFor } from "../support/wait.ts";

const slack = useFakeSlack();
beforeEach(() => resetAllShards());
afterEach(() => {
  vi.restoreAllMocks();
});

const TOKEN_KEY = "4a".repeat(32);
const eyes = { channel: "C0WATCHED", timestamp: "1764504000.000200", name: "eyes" };
const message = (body: OutboxMessage) => ({ id: crypto.randomUUID(), timestamp: new Date(), attempts: 1, body });

/** An OUTBOX_QUEUE that records what is sent. */
function capturingQueue() {
  const sent: OutboxMessage[] = [];
  const queue = {
    sent,
    async send(body: OutboxMessage) {
      sent.push(body);
    },
    async sendBatch(messages: Iterable<MessageSendRequest<OutboxMessage>>) {
      for (const m of messages) sent.push(m.body);
    },
  };
  return queue as typeof queue & Queue<OutboxMessage>;
}

describe("queue(): each message against its shard's D1", () => {
  it("delivers a message for shard 1 from DB_1, and leaves shard 0's row with the same id untouched", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    slack.current.script("reactions.add", reply.ok());
    const onOne = await insertRow(db1, { status: "pending", payload: eyes, createdAt: Date.now() - 1000 });
    // Each D1 numbers its own rows: the same id on two shards is what makes the shard part of the message.
    const onZero = await insertRow(db0, {
      id: onOne,
      status: "pending",
      payload: { ...eyes, channel: "C0ZERO" },
      createdAt: Date.now() - 1000,
    });
    expect(onZero).toBe(onOne);
    const untouched = await readRow(db0, onZero);

    const batch = createMessageBatch("ackbox-outbox", [message({ id: onOne, shard: 1 })]);
    const ctx = createExecutionContext();
    await worker.queue(batch, { ...env, OUTBOX_QUEUE: capturingQueue() }, ctx);
    const result = await getQueueResult(batch, ctx);

    expect(result.explicitAcks).toEqual([batch.messages[0]?.id]);
    expect((await readRow(db1, onOne)).status).toBe("done");
    expect(await readRow(db0, onZero)).toEqual(untouched);
    expect(slack.current.callsTo("reactions.add").map((call) => call.params.channel)).toEqual(["C0WATCHED"]);
  });

  it("delivers one batch with messages for both shards, each from its own D1", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    slack.current.always("reactions.add", reply.ok());
    const zero = await insertRow(db0, { status: "pending", payload: { ...eyes, channel: "C0ZERO" }, createdAt: Date.now() - 1000 });
    const one = await insertRow(db1, { status: "pending", payload: { ...eyes, channel: "C0ONE" }, createdAt: Date.now() - 1000 });
    const batch = createMessageBatch("ackbox-outbox", [message({ id: zero }), message({ id: one, shard: 1 })]);
    const ctx = createExecutionContext();
    await worker.queue(batch, { ...env, OUTBOX_QUEUE: capturingQueue() }, ctx);
    const result = await getQueueResult(batch, ctx);

    expect(result.explicitAcks.sort()).toEqual(batch.messages.map((m) => m.id).sort());
    expect((await readRow(db0, zero)).status).toBe("done");
    expect((await readRow(db1, one)).status).toBe("done");
    expect(
      slack.current
        .callsTo("reactions.add")
        .map((call) => call.params.channel)
        .sort(),
    ).toEqual(["C0ONE", "C0ZERO"]);
  });

  it("acks a message naming a shard that is not configured, with a log line naming it, and claims nothing anywhere", async () => {
    const lines = captureLog();
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    const rows = [
      await insertRow(db0, { status: "pending", payload: eyes, createdAt: Date.now() - 1000 }),
      await insertRow(db1, { status: "pending", payload: eyes, createdAt: Date.now() - 1000 }),
    ];
    const before = [await readRow(db0, rows[0] as number), await readRow(db1, rows[1] as number)];
    const batch = createMessageBatch("ackbox-outbox", [message({ id: rows[0] as number, shard: 2 })]);
    const ctx = createExecutionContext();
    await worker.queue(batch, { ...env, OUTBOX_QUEUE: capturingQueue() }, ctx);
    const result = await getQueueResult(batch, ctx);

    expect(result.explicitAcks).toEqual([batch.messages[0]?.id]);
    expect(result.retryMessages).toEqual([]);
    const line = lines.find((l) => l.includes("names a shard that is not configured"));
    expect(line).toBeDefined();
    expect(JSON.parse(line as string)).toMatchObject({ shard: 2, shard_count: 2, outbox_id: rows[0] });
    expect([await readRow(db0, rows[0] as number), await readRow(db1, rows[1] as number)]).toEqual(before);
    expect(slack.current.calls).toEqual([]);
  });

  it("a message for a shard it does not have (the Workers disagree on SHARD_COUNT) is loud: a mark on shard 0 and an alert post to ALERT_CHANNEL", async () => {
    captureLog();
    const [db0] = shardDbs() as [D1Database];
    const queue = capturingQueue();
    const batch = createMessageBatch("ackbox-outbox", [message({ id: 7, shard: 3 }), message({ id: 8, shard: 2 })]);
    const ctx = createExecutionContext();
    await worker.queue(batch, { ...env, OUTBOX_QUEUE: queue }, ctx);
    await getQueueResult(batch, ctx);

    const receipts = await db0.prepare("SELECT id, kind FROM receipts").all<{ id: string; kind: string }>();
    expect(receipts.results).toEqual([{ id: expect.stringMatching(/^alert:shard_count:raised:\d+$/), kind: "alert" }]);
    const post = await db0.prepare("SELECT id, effect, payload FROM outbox").first<{ id: number; effect: string; payload: string }>();
    expect(post?.effect).toBe("chat.postMessage");
    expect(JSON.parse(post?.payload ?? "{}")).toMatchObject({
      channel: "C0ALERTS",
      text: expect.stringContaining("the consumer (SHARD_COUNT 2) got a queue message for shard 3"),
    });
    // Sent to the queue as shard 0's (no shard field): this consumer delivers it.
    expect(queue.sent).toEqual([{ id: post?.id }]);
  });

  it("acks every message and claims nothing when a binding SHARD_COUNT needs is missing, naming it in the log", async () => {
    const lines = captureLog();
    const [db0] = shardDbs() as [D1Database];
    const row = await insertRow(db0, { status: "pending", payload: eyes, createdAt: Date.now() - 1000 });
    const before = await readRow(db0, row);
    const batch = createMessageBatch("ackbox-outbox", [message({ id: row })]);
    const ctx = createExecutionContext();
    await worker.queue(batch, { ...env, DB_1: undefined } as unknown as typeof env, ctx);
    const result = await getQueueResult(batch, ctx);
    expect(result.ackAll).toBe(true);
    expect(lines.find((l) => l.includes("consumer misconfigured"))).toContain("DB_1");
    expect(await readRow(db0, row)).toEqual(before);
    expect(slack.current.calls).toEqual([]);
  });

  it("acks a message whose shard is not a shard index (negative, fractional, text) as malformed", async () => {
    const lines = captureLog();
    const bodies = [
      { id: 1, shard: -1 },
      { id: 1, shard: 0.5 },
      { id: 1, shard: "1" },
    ] as unknown as OutboxMessage[];
    const batch = createMessageBatch("ackbox-outbox", bodies.map(message));
    const ctx = createExecutionContext();
    await worker.queue(batch, { ...env, OUTBOX_QUEUE: capturingQueue() }, ctx);
    const result = await getQueueResult(batch, ctx);
    expect(result.explicitAcks.sort()).toEqual(batch.messages.map((m) => m.id).sort());
    expect(lines.filter((l) => l.includes("malformed queue message acked"))).toHaveLength(3);
    expect(slack.current.calls).toEqual([]);
  });
});

/** `perShard` pending rows on each of the two shards, interleaved, and a message naming each. */
async function pendingOnBothShards(perShard: number): Promise<ReturnType<typeof message>[]> {
  const [db0, db1] = shardDbs() as [D1Database, D1Database];
  const messages: ReturnType<typeof message>[] = [];
  for (let i = 0; i < perShard; i++) {
    messages.push(message({ id: await insertRow(db0, { status: "pending", payload: eyes, createdAt: Date.now() - 1000 }) }));
    messages.push(message({ id: await insertRow(db1, { status: "pending", payload: eyes, createdAt: Date.now() - 1000 }), shard: 1 }));
  }
  return messages;
}

describe("queue(): D1's 1 000 queries are the invocation's, not a shard's", () => {
  it("a batch over two shards holds at most six Slack calls open at once, the connections one invocation may hold (each shard's group alone would take six)", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    const held = gate();
    slack.current.always("reactions.add", reply.held(held, reply.ok()));
    const messages: ReturnType<typeof message>[] = [];
    for (let i = 0; i < 10; i++) {
      const payload = { ...eyes, channel: `C${i}`, timestamp: `1.${i}` };
      messages.push(message({ id: await insertRow(db0, { status: "pending", payload, createdAt: Date.now() - 1000 }) }));
      messages.push(message({ id: await insertRow(db1, { status: "pending", payload, createdAt: Date.now() - 1000 }), shard: 1 }));
    }
    const batch = createMessageBatch("ackbox-outbox", messages);
    const ctx = createExecutionContext();
    const running = worker.queue(batch, { ...env, OUTBOX_QUEUE: capturingQueue() }, ctx);
    await waitFor(
      async () => slack.current.inFlight(),
      (n) => n >= DELIVERY_CONCURRENCY,
    );
    // Both groups have lanes waiting for a slot; none gets a seventh call out while six are held.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(slack.current.inFlight()).toBe(DELIVERY_CONCURRENCY);
    held.open();
    await running;
    await getQueueResult(batch, ctx);
    expect(slack.current.callsTo("reactions.add")).toHaveLength(20);
    expect(slack.current.maxInFlight()).toBe(DELIVERY_CONCURRENCY);
  });

  it("a 100-message batch over two shards whose every finish fails stays under 1 000 queries in all", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    slack.current.always("reactions.add", reply.status(500));
    const messages = await pendingOnBothShards(50);
    // Counted outside the consumer, on every shard: what D1 would count against the invocation.
    const zero = countingDb(failingFinishes(db0), Number.POSITIVE_INFINITY);
    const one = countingDb(failingFinishes(db1), Number.POSITIVE_INFINITY);
    captureLog();
    const batch = createMessageBatch("ackbox-outbox", messages);
    const ctx = createExecutionContext();
    await worker.queue(batch, { ...env, DB: zero.db, DB_1: one.db, OUTBOX_QUEUE: capturingQueue() }, ctx);
    await getQueueResult(batch, ctx);
    const spent = zero.budget.used() + one.budget.used();
    console.info(`queries spent by a two-shard batch whose finishes all fail: ${spent}`);
    expect(one.budget.used()).toBeGreaterThan(0);
    expect(spent).toBeLessThan(D1_QUERIES_PER_INVOCATION);
  }, 60_000);

  it("a shard-1 row's installation read on shard 0 counts too: a 100-message batch whose finishes all fail stays within the budget's stop plus six lanes' worst", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    // T0TEAM lives on shard 1; its installation, as every one, on shard 0: every shard-1 row reads it there.
    for (const db of [db0, db1]) await db.prepare("DELETE FROM installations").run();
    const keys = await tokenKeys(TOKEN_KEY, undefined);
    await saveInstallation(db0, keys, testInstallation("T0TEAM", "xoxb-team"), Date.now() - 1000);
    slack.current.always("reactions.add", reply.status(500));
    const messages = await pendingOnBothShards(50);
    const zero = countingDb(failingFinishes(db0), Number.POSITIVE_INFINITY);
    const one = countingDb(failingFinishes(db1), Number.POSITIVE_INFINITY);
    captureLog();
    const batch = createMessageBatch("ackbox-outbox", messages);
    const ctx = createExecutionContext();
    const oauth = {
      SLACK_CLIENT_ID: "1.2",
      SLACK_CLIENT_SECRET: "secret",
      SLACK_REDIRECT_URL: "https://ackbox.example/slack/oauth_redirect",
      TOKEN_ENCRYPTION_KEY: TOKEN_KEY,
    };
    await worker.queue(batch, { ...env, ...oauth, DB: zero.db, DB_1: one.db, OUTBOX_QUEUE: capturingQueue() }, ctx);
    await getQueueResult(batch, ctx);
    const spent = zero.budget.used() + one.budget.used();
    console.info(`queries spent by a two-shard OAuth batch whose finishes all fail: ${spent}`);
    expect(slack.current.callsTo("reactions.add").length).toBeGreaterThan(0);
    // query-budget.ts: past the stop, each of the six lanes sends at most WORST_QUERIES_PER_ROW.
    expect(spent).toBeLessThanOrEqual(STOP_CLAIMING_AT + DELIVERY_CONCURRENCY * WORST_QUERIES_PER_ROW);
  }, 60_000);
});

describe("queue(ackbox-outbox-dlq): a dead letter is parked on its row's shard", () => {
  it("parks the shard-1 row a dead-lettered message names, and leaves shard 0's row with the same id untouched", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    const spent = await insertRow(db1, { status: "pending", attempts: 8 });
    const same = await insertRow(db0, { id: spent, status: "pending", attempts: 8 });
    expect(same).toBe(spent);
    const untouched = await readRow(db0, same);
    const batch = createMessageBatch("ackbox-outbox-dlq", [message({ id: spent, shard: 1 })]);
    const ctx = createExecutionContext();
    await worker.queue(batch, env, ctx);
    const result = await getQueueResult(batch, ctx);
    expect(result.explicitAcks).toEqual([batch.messages[0]?.id]);
    expect(await readRow(db1, spent)).toMatchObject({ status: "dead", last_error: DEAD_LETTER_REASON });
    expect(await readRow(db0, same)).toEqual(untouched);
  });
});

describe("scheduled(): the sweep walks every shard", () => {
  it("re-sends the stale rows of both shards, each message naming its row's shard, and leaves the fresh ones", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    const staleZero = await insertRow(db0, { status: "pending", sweepAt: NOW - 1000, nextAttemptAt: NOW + 3_600_000 });
    const freshZero = await insertRow(db0, { status: "pending", sweepAt: NOW + 1000 });
    const staleOne = await insertRow(db1, { status: "pending", sweepAt: NOW - 1000, nextAttemptAt: NOW + 3_600_000 });
    const freshOne = await insertRow(db1, { status: "pending", sweepAt: NOW + 1000 });
    const queue = capturingQueue();
    const ctx = createExecutionContext();
    // No alert channel: an alert's own outbox row would be one more message (alerts.shards.test.ts tests those).
    const quiet = { ...env, OUTBOX_QUEUE: queue, ALERT_CHANNEL: "" };
    const started = Date.now();
    await worker.scheduled(createScheduledController({ scheduledTime: NOW, cron: "* * * * *" }), quiet, ctx);
    await waitOnExecutionContext(ctx);

    expect(queue.sent).toEqual([{ id: staleZero }, { id: staleOne, shard: 1 }]);
    // Stale by the scheduled time; re-sent at the clock of their take (lease-clock.test.ts).
    for (const [db, id] of [
      [db0, staleZero],
      [db1, staleOne],
    ] as const) {
      const row = await readRow(db, id);
      expect([row.sweeps, Number(row.enqueued_at) >= started]).toEqual([1, true]);
    }
    expect(await readRow(db0, freshZero)).toMatchObject({ sweeps: 0 });
    expect(await readRow(db1, freshOne)).toMatchObject({ sweeps: 0 });
  });
});

describe("scheduled() without a binding SHARD_COUNT needs", () => {
  it("skips the tick on every shard, with a log line naming the binding", async () => {
    const lines = captureLog();
    const [db0] = shardDbs() as [D1Database];
    const stale = await insertRow(db0, { status: "pending", sweepAt: NOW - 1000, nextAttemptAt: NOW + 3_600_000 });
    const queue = capturingQueue();
    const ctx = createExecutionContext();
    const broken = { ...env, OUTBOX_QUEUE: queue, DB_1: undefined } as unknown as typeof env;
    await worker.scheduled(createScheduledController({ scheduledTime: NOW, cron: "* * * * *" }), broken, ctx);
    await waitOnExecutionContext(ctx);
    expect(lines.find((l) => l.includes("sweeper misconfigured; tick skipped"))).toContain("DB_1");
    expect(queue.sent).toEqual([]);
    expect(await readRow(db0, stale)).toMatchObject({ sweeps: 0 });
  });
});
