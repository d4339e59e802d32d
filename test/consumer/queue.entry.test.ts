/**
 * The consumer Worker's entry, driven the way the platform drives it: message
 * batches from createMessageBatch (with getQueueResult to read acks and
 * retries), real queue sends delivered by local Queues, and the dead-letter
 * queue after max_retries.
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { recordingLog } from "../../shared/log.ts";
import type { OutboxMessage } from "../../shared/outbox/model.ts";
import { DEAD_LETTER_REASON } from "../../workers/consumer/dead-letters.ts";
import worker from "../../workers/consumer/index.ts";
import { sweep } from "../../workers/consumer/sweep.ts";
import { testSettings } from "../support/consumer.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { allRows, attemptsOf, insertRow, readRow, resetTables } from "../support/rows.ts";
import { waitFor } from "../support/wait.ts";

const slack = useFakeSlack();
beforeEach(() => resetTables(env.DB));

// Bodies as they may arrive, malformed ones included: the entry must cope with any.
const message = (id: unknown, attempts = 1) => ({
  id: crypto.randomUUID(),
  timestamp: new Date(),
  attempts,
  body: { id } as OutboxMessage,
});
const eyes = { channel: "C0WATCHED", timestamp: "1764504000.000200", name: "eyes" };

/** getQueueResult does not report retry delays, so record them on the way through. */
function spyOnRetryDelays(batch: MessageBatch): Map<string, number | undefined> {
  const delays = new Map<string, number | undefined>();
  for (const message of batch.messages) {
    const retry = message.retry.bind(message);
    Object.defineProperty(message, "retry", {
      value: (options?: QueueRetryOptions) => {
        delays.set(message.id, options?.delaySeconds);
        retry(options);
      },
    });
  }
  return delays;
}

describe("queue(ackbox-outbox)", () => {
  it("acks delivered and unclaimable messages, retries a failed one with its delay, acks malformed bodies", async () => {
    slack.current.script("reactions.add", reply.ok(), reply.rateLimited(12));
    const ok = await insertRow(env.DB, { status: "pending", payload: eyes, createdAt: Date.now() - 1000 });
    const limited = await insertRow(env.DB, { status: "pending", payload: eyes, createdAt: Date.now() - 1000 });
    const done = await insertRow(env.DB, { status: "done" });
    const messages = [message(ok), message(limited), message(done), message("not-an-id"), message(-4)];
    const batch = createMessageBatch("ackbox-outbox", messages);
    const delays = spyOnRetryDelays(batch);
    const ctx = createExecutionContext();

    await worker.queue(batch, env, ctx);
    const result = await getQueueResult(batch, ctx);

    expect(result.explicitAcks.sort()).toEqual([messages[0], messages[2], messages[3], messages[4]].map((m) => m?.id).sort());
    expect(result.retryMessages).toEqual([{ msgId: messages[1]?.id }]);
    expect(delays).toEqual(new Map([[messages[1]?.id, 12]]));
    expect((await readRow(env.DB, ok)).status).toBe("done");
    expect((await readRow(env.DB, limited)).status).toBe("pending");
  });

  it("retries every message, without spending an attempt, when the consumer is misconfigured", async () => {
    const id = await insertRow(env.DB, { status: "pending" });
    const batch = createMessageBatch("ackbox-outbox", [message(id)]);
    const ctx = createExecutionContext();
    await worker.queue(batch, { ...env, SLACK_BOT_TOKEN: "" }, ctx);
    const result = await getQueueResult(batch, ctx);
    // (getQueueResult does not report retryAll's delaySeconds; the entry passes 60.)
    expect(result.retryBatch.retry).toBe(true);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "pending", attempts: 0 });
    expect(slack.current.calls).toEqual([]);
  });
});

describe("queue(ackbox-outbox-dlq)", () => {
  it("parks pending rows and rows with an expired lease; leaves done rows and live leases alone", async () => {
    const now = Date.now();
    const pending = await insertRow(env.DB, { status: "pending", attempts: 3 });
    const expired = await insertRow(env.DB, { status: "leased", claimExpiresAt: now - 1000, sweepAt: now - 1000 });
    const done = await insertRow(env.DB, { status: "done" });
    const live = await insertRow(env.DB, { status: "leased", claimExpiresAt: now + 60_000, sweepAt: now + 60_000 });
    const before = { done: await readRow(env.DB, done), live: await readRow(env.DB, live) };
    const batch = createMessageBatch(
      "ackbox-outbox-dlq",
      [pending, expired, done, live].map((id) => message(id, 11)),
    );
    const ctx = createExecutionContext();

    await worker.queue(batch, env, ctx);
    const result = await getQueueResult(batch, ctx);

    expect(result.explicitAcks).toHaveLength(4);
    for (const id of [pending, expired]) {
      expect(await readRow(env.DB, id)).toMatchObject({ status: "dead", last_error: DEAD_LETTER_REASON, sweep_at: null });
      expect(await attemptsOf(env.DB, id)).toMatchObject([{ outcome: "dead_letter", error: DEAD_LETTER_REASON }]);
    }
    expect(await readRow(env.DB, done)).toEqual(before.done);
    expect(await readRow(env.DB, live)).toEqual(before.live);
  });
});

describe("through real local Queues", () => {
  it("invariant 3: with every queue message lost, the sweep alone gets every pending row performed, each once", async () => {
    const now = Date.now();
    slack.current.always("reactions.add", reply.ok());
    const ids: number[] = [];
    for (let i = 0; i < 12; i++) {
      // Committed long ago, their messages never arrived: the only way out is the sweep.
      ids.push(
        await insertRow(env.DB, {
          status: "pending",
          createdAt: now - 3_600_000,
          sweepAt: now - 3_000_000,
          payload: { ...eyes, timestamp: `1.${i}` },
        }),
      );
    }
    await sweep({ db: env.DB, queue: env.OUTBOX_QUEUE, settings: testSettings(), log: recordingLog() }, now);

    const rows = await waitFor(
      () => allRows(env.DB),
      (all) => all.every((row) => row.status === "done"),
    );
    expect(rows.map((row) => row.status)).toEqual(Array(12).fill("done"));
    const reacted = slack.current.callsTo("reactions.add").map((call) => call.params.timestamp);
    expect(reacted.sort()).toEqual(ids.map((_, i) => `1.${i}`).sort());
  });

  it("a crash between the effect and its completion repeats the effect (at-least-once), and reactions.add absorbs the repeat", async () => {
    slack.current.script("reactions.add", reply.ok(), reply.error("already_reacted"));
    const now = Date.now();
    const id = await insertRow(env.DB, { status: "pending", payload: eyes, createdAt: now - 300_000 });

    // The first worker claims and performs, then dies before its completion
    // write: simulated by a claim whose lease is already over and no finish.
    const { claimRows } = await import("../../shared/outbox/claim.ts");
    const { EFFECTS } = await import("../../shared/effects/registry.ts");
    const { slackWebApi } = await import("../../shared/slack/web-api.ts");
    const [claimed] = await claimRows(env.DB, [id], "doomed-worker", now - 200_000, 120_000);
    if (!claimed) throw new Error("no claim");
    await EFFECTS.get("reactions.add")?.perform(eyes, {
      slack: slackWebApi("xoxb-test-bot-token", "https://slack.test/api/"),
      responseUrlHosts: [],
      timeoutMs: 1000,
    });

    // The sweep finds the expired lease and re-enqueues; the real queue delivers.
    await sweep({ db: env.DB, queue: env.OUTBOX_QUEUE, settings: testSettings(), log: recordingLog() }, now);
    const row = await waitFor(
      () => readRow(env.DB, id),
      (r) => r.status === "done",
    );
    expect(row).toMatchObject({ status: "done", attempts: 2, result: JSON.stringify({ reacted: true, already_reacted: true }) });
    expect(slack.current.callsTo("reactions.add")).toHaveLength(2); // the duplicate, counted
  });

  it("a message whose row keeps failing goes to the dead-letter queue after max_retries, and its row is parked", async () => {
    // In this test project ackbox-outbox has max_retries = 1 (vitest.config.ts): two deliveries.
    slack.current.always("reactions.add", reply.status(500));
    const id = await insertRow(env.DB, { status: "pending", payload: eyes, createdAt: Date.now() - 1000 });
    await env.OUTBOX_QUEUE.send({ id });
    const row = await waitFor(
      () => readRow(env.DB, id),
      (r) => r.status === "dead",
      15_000,
    );
    expect(row).toMatchObject({ status: "dead", attempts: 2, last_error: DEAD_LETTER_REASON });
    expect((await attemptsOf(env.DB, id)).map((a) => `${a.attempt}:${a.outcome}`)).toEqual(["1:retry", "2:dead_letter", "2:retry"]);
  });
});
