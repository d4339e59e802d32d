/**
 * The consumer Worker's entry, driven the way the platform drives it: message
 * batches from createMessageBatch (with getQueueResult to read acks and
 * retries), real queue sends delivered by local Queues, and the dead-letter
 * queue after max_retries.
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { networkEdge } from "../../shared/effects/outbound.ts";
import { recordingLog } from "../../shared/log.ts";
import type { OutboxMessage } from "../../shared/outbox/model.ts";
import { DEAD_LETTER_REASON } from "../../workers/consumer/dead-letters.ts";
import { sweep } from "../../workers/consumer/sweep.ts";
import { testSettings } from "../support/consumer.ts";
import worker from "../support/entries/consumer.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { allRows, attemptsOf, insertRow, readRow, resetTables } from "../support/rows.ts";
import { waitFor } from "../support/wait.ts";

const slack = useFakeSlack();
beforeEach(() => resetTables(env.DB));
afterEach(() => {
  vi.restoreAllMocks();
});

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

/** An OUTBOX_QUEUE that records what is sent (or refuses it), so a re-send is seen, not delivered. */
function capturingQueue(failWith?: Error) {
  const sent: { body: OutboxMessage; delaySeconds?: number }[] = [];
  const queue = {
    sent,
    async send(body: OutboxMessage, options?: QueueSendOptions) {
      if (failWith) throw failWith;
      sent.push({ body, delaySeconds: options?.delaySeconds });
    },
    async sendBatch(messages: Iterable<MessageSendRequest<OutboxMessage>>) {
      if (failWith) throw failWith;
      for (const m of messages) sent.push({ body: m.body, delaySeconds: m.delaySeconds });
    },
  };
  return queue as typeof queue & Queue<OutboxMessage>;
}

describe("queue(ackbox-outbox)", () => {
  it("acks delivered and unclaimable messages, retries a failed one with its delay, re-sends a rate-limited one, acks malformed bodies", async () => {
    vi.spyOn(Math, "random").mockReturnValue(0);
    slack.current.script("reactions.add", reply.ok(), reply.rateLimited(12)).script("chat.postMessage", reply.status(500));
    const ok = await insertRow(env.DB, { status: "pending", payload: eyes, createdAt: Date.now() - 1000 });
    const limited = await insertRow(env.DB, {
      status: "pending",
      payload: { ...eyes, channel: "C0LIMITED" },
      createdAt: Date.now() - 1000,
    });
    const failed = await insertRow(env.DB, {
      status: "pending",
      effect: "chat.postMessage",
      payload: { channel: "C0OTHER", text: "hi" },
      createdAt: Date.now() - 1000,
    });
    const done = await insertRow(env.DB, { status: "done" });
    const messages = [message(ok), message(limited), message(failed), message(done), message("not-an-id"), message(-4)];
    const batch = createMessageBatch("ackbox-outbox", messages);
    const delays = spyOnRetryDelays(batch);
    const queue = capturingQueue();
    const ctx = createExecutionContext();

    await worker.queue(batch, { ...env, OUTBOX_QUEUE: queue }, ctx);
    const result = await getQueueResult(batch, ctx);

    // The 429 is Slack's pacing, not a failure: acked and sent again, so it does not count toward max_retries.
    expect(result.explicitAcks.sort()).toEqual([0, 1, 3, 4, 5].map((i) => messages[i]?.id).sort());
    expect(queue.sent).toEqual([{ body: { id: limited }, delaySeconds: 12 }]);
    expect(result.retryMessages).toEqual([{ msgId: messages[2]?.id }]);
    expect(delays).toEqual(new Map([[messages[2]?.id, 1]]));
    expect((await readRow(env.DB, ok)).status).toBe("done");
    expect(await readRow(env.DB, limited)).toMatchObject({ status: "pending", attempts: 0 });
  });

  it("retries a rate-limited message instead when it cannot be sent again, and the row keeps its schedule", async () => {
    vi.spyOn(Math, "random").mockReturnValue(0);
    slack.current.script("reactions.add", reply.rateLimited(5));
    const limited = await insertRow(env.DB, { status: "pending", payload: eyes, createdAt: Date.now() - 1000 });
    const batch = createMessageBatch("ackbox-outbox", [message(limited)]);
    const delays = spyOnRetryDelays(batch);
    const queue = capturingQueue(new Error("queue unavailable"));
    const ctx = createExecutionContext();

    await worker.queue(batch, { ...env, OUTBOX_QUEUE: queue }, ctx);
    const result = await getQueueResult(batch, ctx);

    expect(result.explicitAcks).toEqual([]);
    expect(delays).toEqual(new Map([[batch.messages[0]?.id, 5]]));
    expect(await readRow(env.DB, limited)).toMatchObject({ status: "pending", attempts: 0 });
  });

  it("acks every message, spends no attempt and leaves the rows for the sweep when the consumer is misconfigured", async () => {
    const id = await insertRow(env.DB, { status: "pending" });
    const before = await readRow(env.DB, id);
    const batch = createMessageBatch("ackbox-outbox", [message(id)]);
    const ctx = createExecutionContext();
    await worker.queue(batch, { ...env, SLACK_BOT_TOKEN: "" }, ctx);
    const result = await getQueueResult(batch, ctx);
    expect(result.ackAll).toBe(true);
    expect(await readRow(env.DB, id)).toEqual(before);
    expect(slack.current.calls).toEqual([]);
  });
});

describe("queue(ackbox-outbox-dlq)", () => {
  it("parks rows whose attempts are spent or whose deadline passed; hands rows with attempts left back to the sweep", async () => {
    // The Worker's entry reads the wall clock: these rows are created on it, a minute before.
    const now = Date.now();
    const createdAt = now - 60_000;
    const rows = {
      spent: await insertRow(env.DB, { createdAt, status: "pending", attempts: 8 }),
      spentExpiredLease: await insertRow(env.DB, {
        createdAt,
        status: "leased",
        attempts: 8,
        claimExpiresAt: now - 1000,
        sweepAt: now - 1000,
      }),
      responseUrlSpent: await insertRow(env.DB, { createdAt, status: "pending", attempts: 5, effect: "response_url" }),
      pastDeadline: await insertRow(env.DB, { createdAt, status: "pending", attempts: 1, effect: "response_url", expiresAt: now - 1 }),
      healthyDue: await insertRow(env.DB, { createdAt, status: "pending", attempts: 2, sweepAt: now + 60_000 }),
      waitingForRetry: await insertRow(env.DB, {
        createdAt,
        status: "pending",
        attempts: 2,
        nextAttemptAt: now + 30_000,
        sweepAt: now + 90_000,
      }),
      done: await insertRow(env.DB, { createdAt, status: "done", attempts: 9 }),
      liveLease: await insertRow(env.DB, { createdAt, status: "leased", attempts: 9, claimExpiresAt: now + 60_000, sweepAt: now + 60_000 }),
    };
    const untouched = [rows.waitingForRetry, rows.done, rows.liveLease];
    const before = await Promise.all(untouched.map((id) => readRow(env.DB, id)));
    const batch = createMessageBatch(
      "ackbox-outbox-dlq",
      Object.values(rows).map((id) => message(id, 1)),
    );
    const ctx = createExecutionContext();

    await worker.queue(batch, env, ctx);
    const result = await getQueueResult(batch, ctx);

    expect(result.explicitAcks).toHaveLength(8);
    for (const id of [rows.spent, rows.spentExpiredLease, rows.responseUrlSpent, rows.pastDeadline]) {
      expect(await readRow(env.DB, id)).toMatchObject({
        status: "dead",
        last_error: DEAD_LETTER_REASON,
        sweep_at: null,
        claim_token: null,
      });
      expect(await attemptsOf(env.DB, id)).toMatchObject([{ outcome: "dead_letter", error: DEAD_LETTER_REASON }]);
    }
    const healthy = await readRow(env.DB, rows.healthyDue);
    expect(healthy.status).toBe("pending");
    expect(healthy.sweep_at).toBeLessThanOrEqual(Date.now());
    expect(await attemptsOf(env.DB, rows.healthyDue)).toEqual([]);
    expect(await Promise.all(untouched.map((id) => readRow(env.DB, id)))).toEqual(before);
  });
});

describe("through real local Queues", () => {
  it("invariant 3: with every queue message lost, the sweep alone gets every pending row performed, each once", async () => {
    const now = Date.now();
    slack.current.always("reactions.add", reply.ok());
    const ids: number[] = [];
    for (let i = 0; i < 12; i++) {
      // Committed long ago, their messages never arrived: the only way out is the sweep.
      // Four channels, three rows each: within Slack's burst, so in-batch pacing adds no wait to this test of the sweep.
      ids.push(
        await insertRow(env.DB, {
          status: "pending",
          createdAt: now - 3_600_000,
          sweepAt: now - 3_000_000,
          payload: { ...eyes, channel: `C0WATCHED${i % 4}`, timestamp: `1.${i}` },
        }),
      );
    }
    await sweep({ db: env.DB, queue: env.OUTBOX_QUEUE, settings: testSettings(), log: recordingLog() }, now);

    const rows = await waitFor(
      () => allRows(env.DB),
      (all) => all.every((row) => row.status === "done"),
    );
    expect(rows.map((row) => row.status)).toEqual(Array(12).fill("done"));
    // Each once, seen after every row is done and after a further sweep an hour on: nothing is
    // owed, so nothing is re-sent, and no thirteenth call shows up.
    const again = await sweep({ db: env.DB, queue: env.OUTBOX_QUEUE, settings: testSettings(), log: recordingLog() }, now + 3_600_000);
    expect(again.reenqueued).toBe(0);
    expect((await allRows(env.DB)).map((row) => `${row.status}:${row.attempts}`)).toEqual(Array(12).fill("done:1"));
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
    const { slackMethodEffect } = await import("../../shared/effects/slack-method.ts");
    const { slackWebApi } = await import("../../shared/slack/web-api.ts");
    const [claimed] = await claimRows(env.DB, [id], "doomed-worker", now - 200_000, 120_000);
    if (!claimed) throw new Error("no claim");
    await slackMethodEffect("reactions.add").perform(eyes, {
      slack: slackWebApi("xoxb-test-bot-token", "https://slack.test/api/", networkEdge),
      responseUrlHosts: [],
      timeoutMs: 1000,
      fetch,
      edge: networkEdge,
      idempotencyKey: claimed.idempotencyKey,
      attempt: claimed.attempts,
      signal: new AbortController().signal,
    });

    // The sweep finds the expired lease and re-enqueues; the real queue delivers.
    await sweep({ db: env.DB, queue: env.OUTBOX_QUEUE, settings: testSettings(), log: recordingLog() }, now);
    const row = await waitFor(
      () => readRow(env.DB, id),
      (r) => r.status === "done",
    );
    expect(row).toMatchObject({ status: "done", attempts: 2, result: JSON.stringify({ already: "already_reacted" }) });
    // Once done, a further sweep owes nothing: the repeat stays one repeat.
    const again = await sweep({ db: env.DB, queue: env.OUTBOX_QUEUE, settings: testSettings(), log: recordingLog() }, now + 3_600_000);
    expect(again.reenqueued).toBe(0);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "done", attempts: 2 });
    expect(slack.current.callsTo("reactions.add")).toHaveLength(2); // the duplicate, counted
  });

  it("a message the queue gives up on (max_retries) reaches the dead-letter queue; its row, with attempts left, is left waiting for its retry", async () => {
    // In this test project ackbox-outbox has max_retries = 1 (vitest.config.ts): two deliveries, then the DLQ.
    // Jitter pinned to its top: the second failure's retry is due 2 s after it (BACKOFF_BASE_SECONDS = 1,
    // doubled), and the DLQ delivers at once (max_batch_timeout 0.05 s): the row is not yet due when the
    // dead-letter consumer sees it, so it is left alone, and the sweep sends it when its retry is due.
    vi.spyOn(Math, "random").mockReturnValue(1);
    slack.current.always("reactions.add", reply.status(500));
    const lines: string[] = [];
    const capture = (...args: unknown[]) => lines.push(args.map(String).join(" "));
    const spies = [vi.spyOn(console, "log").mockImplementation(capture), vi.spyOn(console, "warn").mockImplementation(capture)];
    try {
      const id = await insertRow(env.DB, { status: "pending", payload: eyes, createdAt: Date.now() - 1000 });
      await env.OUTBOX_QUEUE.send({ id });
      const settled = (line: string) => line.includes(`"outbox_id":${id}`) && /dead.letter/.test(line);
      const handled = await waitFor(
        async () => lines.filter(settled),
        (found) => found.length > 0,
        8_000,
      );
      expect(handled).toHaveLength(1);
      expect(handled[0]).toContain("waiting for its retry; left alone");
      const row = await readRow(env.DB, id);
      expect(row).toMatchObject({ status: "pending", attempts: 2 });
      // The pinned jitter reached the consumer: due the whole 2 s after the decision (a jitter of 0.5 would make it 1 s).
      // The decision and the fenced write read the clock apart, so updated_at may be a few ms after the decision's time.
      const due = row.next_attempt_at - row.updated_at;
      expect(due).toBeGreaterThan(1_900);
      expect(due).toBeLessThanOrEqual(2_000);
      expect((await attemptsOf(env.DB, id)).map((a) => `${a.attempt}:${a.outcome}`)).toEqual(["1:retry", "2:retry"]);
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
  }, 15_000);
});
