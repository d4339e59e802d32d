/**
 * The first attempt at the ack (shared/delivery/first-attempt.ts): after the
 * durable write and the answer, the ingress performs the new rows itself with
 * the consumer's own claim → perform → fenced finish, over real local D1 and
 * the real queue binding, Slack faked at the network edge. The consumer then
 * finds the row done; the lease keeps the two triggers apart.
 */

import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createApp } from "../../shared/app/app.ts";
import { defineEffect } from "../../shared/app/effects.ts";
import { run, slack } from "../../shared/app/intents.ts";
import { type DeliveryDeps, deliverBatch } from "../../shared/delivery/deliver.ts";
import {
  firstAttemptOf,
  INLINE_MAX_IN_FLIGHT,
  INLINE_MAX_REQUESTS,
  INLINE_MAX_ROWS,
  INLINE_MAX_WAIT_MS,
  inlineBounds,
} from "../../shared/delivery/first-attempt.ts";
import { InlineGate } from "../../shared/delivery/inline-gate.ts";
import { slackForOf } from "../../shared/effects/context.ts";
import { networkEdge } from "../../shared/effects/outbound.ts";
import { tokenKeys } from "../../shared/installations/crypto.ts";
import { saveInstallation } from "../../shared/installations/store.ts";
import { recordingLog } from "../../shared/log.ts";
import { CANCELLED_AFTER_500 } from "../../shared/outbox/cancel.ts";
import { claimRows } from "../../shared/outbox/claim.ts";
import type { OutboxMessage } from "../../shared/outbox/model.ts";
import { sweep } from "../../workers/consumer/sweep.ts";
import { handleSlackRequest } from "../../workers/ingress/ack.ts";
import { inlineGate } from "../../workers/ingress/isolate.ts";
import { captureLog } from "../support/console-capture.ts";
import { deliveryDeps, testSettings } from "../support/consumer.ts";
import worker from "../support/entries/ingress.ts";
import { gate, reply, useFakeSlack } from "../support/fake-slack.ts";
import { ingressDeps } from "../support/ingress.ts";
import { testInstallation } from "../support/installations.ts";
import { meteredDb } from "../support/metered-db.ts";
import { allRows, readRow, resetAllShards, resetTables, shardDbs } from "../support/rows.ts";
import { TEST_SLACK_API_URL } from "../support/settings.ts";
import { blockActions, eventRequest, FORM, interactionForm, mention, NOW, signed } from "../support/slack-requests.ts";
import { testApp } from "../support/test-app.ts";

const slackFake = useFakeSlack();
beforeEach(() => resetTables(env.DB));

const settings = testSettings();
const bounds = inlineBounds(settings);

/** The real queue binding, with what was sent (and its delay) written down in order. */
function watchedQueue(order: string[] = []) {
  const sent: { id: number; delaySeconds: number }[] = [];
  return {
    sent,
    async sendBatch(messages: Iterable<MessageSendRequest<OutboxMessage>>) {
      const list = [...messages];
      for (const m of list) {
        sent.push({ id: m.body.id, delaySeconds: m.delaySeconds ?? 0 });
        order.push(`queue send ${m.body.id} +${m.delaySeconds ?? 0}s`);
      }
      await env.OUTBOX_QUEUE.sendBatch(list);
    },
  };
}

/** The isolate's in-flight bound as the ingress builds it, with `maxInFlight` slots. */
function slotsFor(maxInFlight: number): InlineGate {
  return new InlineGate(maxInFlight, INLINE_MAX_REQUESTS, INLINE_MAX_WAIT_MS);
}

/** The ack path with the first attempt wired as the ingress Worker wires it (http.ts), on a manual clock. */
function ackWithFirstAttempt(
  app = testApp(),
  order: string[] = [],
  {
    gate = slotsFor(INLINE_MAX_IN_FLIGHT),
    db = env.DB,
    onSlackCall = () => {},
    slackFor,
  }: { gate?: InlineGate; db?: D1Database; onSlackCall?: () => void; slackFor?: DeliveryDeps["slackFor"] } = {},
) {
  const queue = watchedQueue(order);
  const inline = deliveryDeps(NOW, { db, queue, effects: app.effects, settings: { leaseMs: bounds.leaseMs } });
  const slack = inline.deps.context.slack;
  const context = {
    ...inline.deps.context,
    timeoutMs: bounds.timeoutMs,
    slack: {
      call: (...args: Parameters<typeof slack.call>) => {
        order.push(`Slack ${args[0]}`);
        onSlackCall();
        return slack.call(...args);
      },
    },
  };
  const harness = ingressDeps({
    app,
    db,
    queue,
    firstAttempt: firstAttemptOf({ ...inline.deps, context, ...(slackFor ? { slackFor } : {}) }, gate),
  });
  return { ...harness, queue, inline, gate };
}

/** The consumer, later, on the backup message. */
function consumerAt(at: number) {
  return deliveryDeps(at, { queue: watchedQueue() });
}

describe("the ingress performs inline rows after the answer", () => {
  it("performs the reply once and sends the queue nothing; a message that reaches the row later finds it done and calls Slack no more", async () => {
    slackFake.current.script("chat.postMessage", reply.ok({ ts: "1.1" }));
    const { deps, settled, queue } = ackWithFirstAttempt();
    const response = await handleSlackRequest(await eventRequest(mention()), deps, NOW);
    expect(response.status).toBe(200);
    await settled();

    const [row] = await allRows(env.DB);
    expect(row).toMatchObject({ status: "done", attempts: 1 });
    expect(slackFake.current.callsTo("chat.postMessage")).toHaveLength(1);
    // No message: an inline row the ingress did not finish is the sweep's at its lease's expiry.
    expect(queue.sent).toEqual([]);

    const consumer = consumerAt(NOW + bounds.leaseMs);
    const actions = await deliverBatch(consumer.deps, [row?.id ?? 0]);
    expect(actions.get(row?.id ?? 0)).toEqual({ action: "ack" });
    expect(slackFake.current.callsTo("chat.postMessage")).toHaveLength(1);
  });

  it("claims the row in the durable write: the Slack call is issued in the answer's own turn, after the write and with no D1 round trip between", async () => {
    const order: string[] = [];
    const held = gate();
    slackFake.current.script("chat.postMessage", reply.held(held, reply.ok({ ts: "1.1" })));
    const { db, meter } = meteredDb(env.DB);
    const { deps, settled } = ackWithFirstAttempt(testApp(), order, {
      db,
      onSlackCall: () => order.push(`D1 statements so far ${meter.statements}`),
    });
    const response = await handleSlackRequest(await eventRequest(mention()), deps, NOW);
    order.push(`answered ${response.status}, D1 statements ${meter.statements}, Slack calls ${slackFake.current.calls.length}`);
    // The next request's work would start a macrotask later at the earliest.
    await new Promise((resolve) => setTimeout(resolve, 0));
    order.push("a macrotask after the answer");
    // Leased to the ingress by the write itself, under the inline lease, before the answer.
    const [row] = await allRows(env.DB);
    expect(row).toMatchObject({ status: "leased", attempts: 1, claim_expires_at: NOW + bounds.leaseMs, sweep_at: NOW + bounds.leaseMs });
    held.open();
    await settled();
    const id = row?.id ?? 0;
    // The write: receipt, changes(), the row, its claim — one batch, four statements.
    // The call is issued in the answer's own turn (before it has reached Slack, before any macrotask: the next request's
    // work), and nothing is sent to the queue.
    expect(order).toEqual([
      "answered 200, D1 statements 4, Slack calls 0",
      "Slack chat.postMessage",
      "D1 statements so far 4",
      "a macrotask after the answer",
    ]);
    // Then the fenced finish, one statement.
    expect(meter.statements).toBe(5);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "done", attempts: 1 });
  });

  it("leaves an effect with inline:false to the queue, sent at once", async () => {
    const slow = defineEffect("slow", async () => {
      throw new Error("performed inline although it opted out");
    });
    const app = createApp()
      .effect(slow)
      .event("app_mention", () => [run(slow, {})]);
    const { deps, settled, queue } = ackWithFirstAttempt(app);
    expect((await handleSlackRequest(await eventRequest(mention()), deps, NOW)).status).toBe(200);
    await settled();
    const [row] = await allRows(env.DB);
    expect(row).toMatchObject({ status: "pending", attempts: 0 });
    expect(queue.sent).toEqual([{ id: row?.id, delaySeconds: 0 }]);
  });

  it("performs an app effect that opts in with inline:true", async () => {
    let performed = 0;
    const quick = defineEffect(
      "quick",
      async () => {
        performed += 1;
        return { ok: true };
      },
      { inline: true },
    );
    const app = createApp()
      .effect(quick)
      .event("app_mention", () => [run(quick, {})]);
    const { deps, settled } = ackWithFirstAttempt(app);
    await handleSlackRequest(await eventRequest(mention()), deps, NOW);
    await settled();
    expect(performed).toBe(1);
    expect((await allRows(env.DB))[0]).toMatchObject({ status: "done", attempts: 1 });
  });

  it(`attempts at most ${INLINE_MAX_ROWS} rows of a request inline; the rest go to the queue at once`, async () => {
    const calls = Array.from({ length: INLINE_MAX_ROWS + 2 }, (_, i) => i);
    const app = createApp()
      .uses("reactions.add")
      .event("app_mention", ({ payload: e }) =>
        calls.map((i) => slack("reactions.add", { channel: e.channel, timestamp: e.ts, name: `n${i}` }, { key: `r${i}` })),
      );
    slackFake.current.script("reactions.add", ...calls.slice(0, INLINE_MAX_ROWS).map(() => reply.ok()));
    const { deps, settled, queue } = ackWithFirstAttempt(app);
    expect((await handleSlackRequest(await eventRequest(mention()), deps, NOW)).status).toBe(200);
    await settled();
    const rows = await allRows(env.DB);
    expect(rows.map((r) => r.status)).toEqual([...calls.slice(0, INLINE_MAX_ROWS).map(() => "done"), "pending", "pending"]);
    expect(queue.sent.filter((m) => m.delaySeconds === 0).map((m) => m.id)).toEqual(rows.slice(INLINE_MAX_ROWS).map((r) => r.id));
  });
});

describe("a distributed app (OAuth installs)", () => {
  it("performs the inline row at once with the team's installation's token, resolved as the consumer resolves it", async () => {
    const tokenKey = "4a".repeat(32);
    await env.DB.prepare("DELETE FROM installations").run();
    await saveInstallation(env.DB, await tokenKeys(tokenKey, undefined), testInstallation("T0TEAM", "xoxb-team-token"), NOW);
    const oauth = {
      clientId: "1.2",
      clientSecret: "s",
      scopes: [],
      redirectUrl: "https://x.test/r",
      tokenKey,
      previousTokenKey: undefined,
    };
    const slackFor = slackForOf(env.DB, { oauth, slackBotToken: undefined, slackApiUrl: TEST_SLACK_API_URL }, env.DB, {
      edge: networkEdge,
    });
    slackFake.current.script("chat.postMessage", reply.ok({ ts: "1.9" }));
    const { deps, settled } = ackWithFirstAttempt(testApp(), [], { slackFor });
    expect((await handleSlackRequest(await eventRequest(mention()), deps, NOW)).status).toBe(200);
    await settled();
    expect(slackFake.current.callsTo("chat.postMessage").map((c) => c.authorization)).toEqual(["Bearer xoxb-team-token"]);
    expect((await allRows(env.DB))[0]).toMatchObject({ status: "done", attempts: 1 });
  });
});

describe("the write's claim keeps every gate of the consumer's claim", () => {
  it("a row whose rate key is cooling down after a 429 is not claimed by the write: it is inserted pending and sent to the queue at once", async () => {
    // Slack said 429 for this channel a moment ago: the key holds rows back until NOW + 30 s.
    await env.DB.prepare("INSERT INTO rate_cooldowns (key, until, next_slot, pace_ms, updated_at) VALUES (?1, ?2, ?2, 1000, ?3)")
      .bind("T0TEAM/channel/C0WATCHED", NOW + 30_000, NOW)
      .run();
    const { deps, settled, queue, gate: slots } = ackWithFirstAttempt();
    expect((await handleSlackRequest(await eventRequest(mention()), deps, NOW)).status).toBe(200);
    await settled();
    const [row] = await allRows(env.DB);
    expect(row).toMatchObject({ status: "pending", attempts: 0, claim_token: null });
    expect(queue.sent).toEqual([{ id: row?.id, delaySeconds: 0 }]);
    expect(slackFake.current.calls).toHaveLength(0);
    expect(slots.inFlight).toBe(0);
  });

  it("a duplicate delivery's write claims nothing: the first delivery's pending row is left to the queue", async () => {
    const eventId = "EvDUPCLAIM";
    // The first delivery went to the queue (this isolate's in-flight budget was spent): its row is pending.
    const busy = ackWithFirstAttempt(testApp(), [], { gate: slotsFor(0) });
    await handleSlackRequest(await eventRequest(mention(), { eventId }), busy.deps, NOW);
    await busy.settled();
    const { deps, settled, gate: slots } = ackWithFirstAttempt();
    const retry = await handleSlackRequest(await eventRequest(mention(), { eventId, retryNum: 1, retryReason: "http_timeout" }), deps, NOW);
    expect(retry.status).toBe(200);
    await settled();
    expect(await allRows(env.DB)).toEqual([expect.objectContaining({ status: "pending", attempts: 0, claim_token: null })]);
    expect(slackFake.current.calls).toHaveLength(0);
    expect(slots.inFlight).toBe(0);
  });

  it(`past the isolate's in-flight budget (${INLINE_MAX_IN_FLIGHT} rows), a request's rows go to the queue at once, and the budget comes back as rows finish`, async () => {
    const held = gate();
    slackFake.current.script("chat.postMessage", reply.held(held, reply.ok({ ts: "1.6" })));
    const { deps, settled, queue, gate: slots, log } = ackWithFirstAttempt(testApp(), [], { gate: slotsFor(1) });
    await handleSlackRequest(await eventRequest(mention()), deps, NOW);
    expect(slots.inFlight).toBe(1);
    await handleSlackRequest(await eventRequest(mention()), deps, NOW);
    held.open();
    await settled();
    const [inline, queued] = await allRows(env.DB);
    expect(inline).toMatchObject({ status: "done", attempts: 1 });
    expect(queued).toMatchObject({ status: "pending", attempts: 0 });
    expect(queue.sent).toContainEqual({ id: queued?.id, delaySeconds: 0 });
    expect(slots.inFlight).toBe(0);
    expect(log.records.filter((r) => r.msg === "slack request").map((r) => r.fields.first_attempt)).toEqual(["inline", "in_flight"]);
  });

  it(`the ${INLINE_MAX_IN_FLIGHT + 1}th concurrent inline row goes to the queue at once: ${INLINE_MAX_IN_FLIGHT + 1} requests at once while Slack holds every call`, async () => {
    const held = gate();
    const n = INLINE_MAX_IN_FLIGHT + 1;
    slackFake.current.script(
      "chat.postMessage",
      ...Array.from({ length: INLINE_MAX_IN_FLIGHT }, (_, i) => reply.held(held, reply.ok({ ts: `3.${i}` }))),
    );
    const slots = slotsFor(INLINE_MAX_IN_FLIGHT);
    const { deps, settled, queue, log } = ackWithFirstAttempt(testApp(), [], { gate: slots });
    const requests = await Promise.all(Array.from({ length: n }, () => eventRequest(mention())));
    const responses = await Promise.all(requests.map((request) => handleSlackRequest(request, deps, NOW)));
    expect(responses.map((r) => r.status)).toEqual(Array(n).fill(200));
    expect(slots.inFlight).toBe(INLINE_MAX_IN_FLIGHT);
    const verdicts = log.records.filter((r) => r.msg === "slack request").map((r) => r.fields.first_attempt);
    expect(verdicts.filter((v) => v === "inline")).toHaveLength(INLINE_MAX_IN_FLIGHT);
    expect(verdicts.filter((v) => v === "in_flight")).toHaveLength(1);
    held.open();
    await settled();
    const rows = await allRows(env.DB);
    expect(rows.filter((row) => row.status === "done")).toHaveLength(INLINE_MAX_IN_FLIGHT);
    const queued = rows.filter((row) => row.status === "pending");
    expect(queued).toHaveLength(1);
    expect(queue.sent).toContainEqual({ id: queued[0]?.id, delaySeconds: 0 });
    expect(slots.inFlight).toBe(0);
  });

  it("a burst within the in-flight bound goes inline whole: ten acks at once through the ack path, each request's row performed by the ingress", async () => {
    slackFake.current.script("chat.postMessage", ...Array.from({ length: 10 }, (_, i) => reply.ok({ ts: `2.${i}` })));
    const slots = slotsFor(INLINE_MAX_IN_FLIGHT);
    const { deps, settled, queue } = ackWithFirstAttempt(testApp(), [], { gate: slots });
    const requests = await Promise.all(Array.from({ length: 10 }, () => eventRequest(mention())));
    // All ten in progress together, on one clock. The ack path counts no requests (the Worker's entry does:
    // INLINE_MAX_REQUESTS, tested below through the deployed ingress), so none of them waits here.
    const responses = await Promise.all(requests.map((request) => handleSlackRequest(request, deps, NOW)));
    expect(responses.map((r) => r.status)).toEqual(Array(10).fill(200));
    await settled();
    expect((await allRows(env.DB)).map((row) => row.status)).toEqual(Array(10).fill("done"));
    expect(queue.sent).toEqual([]);
    expect(slackFake.current.callsTo("chat.postMessage")).toHaveLength(10);
  });

  it("an interaction whose write commits after its 500 has its rows cancelled, those the write claimed for the ingress included; nothing is performed", async () => {
    let release: () => void = () => {};
    const opened = new Promise<void>((resolve) => {
      release = resolve;
    });
    const slow = new Proxy(env.DB, {
      get(target, prop) {
        if (prop === "batch") return async (statements: D1PreparedStatement[]) => opened.then(() => target.batch(statements));
        const value = Reflect.get(target, prop);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const { deps, settled, queue, gate: slots } = ackWithFirstAttempt(testApp(), [], { db: slow });
    const response = await handleSlackRequest(
      await signed(interactionForm(blockActions()), FORM),
      { ...deps, settings: { ...deps.settings, ackBudgetMs: 20 } },
      NOW,
    );
    expect(response.status).toBe(500);
    release();
    await settled();
    const [row] = await allRows(env.DB);
    expect(row).toMatchObject({ status: "dead", last_error: CANCELLED_AFTER_500 });
    expect(queue.sent).toEqual([]);
    expect(slackFake.current.calls).toHaveLength(0);
    expect(slots.inFlight).toBe(0);
  });

  it("an event whose write commits after its 500 is performed by the ingress at once, under the claim the write took", async () => {
    slackFake.current.script("chat.postMessage", reply.ok({ ts: "1.7" }));
    let release: () => void = () => {};
    const opened = new Promise<void>((resolve) => {
      release = resolve;
    });
    const slow = new Proxy(env.DB, {
      get(target, prop) {
        if (prop === "batch") return async (statements: D1PreparedStatement[]) => opened.then(() => target.batch(statements));
        const value = Reflect.get(target, prop);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const { deps, settled } = ackWithFirstAttempt(testApp(), [], { db: slow });
    const response = await handleSlackRequest(
      await eventRequest(mention()),
      { ...deps, settings: { ...deps.settings, ackBudgetMs: 20 } },
      NOW,
    );
    expect(response.status).toBe(500);
    release();
    await settled();
    expect(await allRows(env.DB)).toEqual([expect.objectContaining({ status: "done", attempts: 1 })]);
    expect(slackFake.current.callsTo("chat.postMessage")).toHaveLength(1);
  });

  it("an event whose write commits so late that less than one effect timeout of the write's lease is left is not performed by the ingress: the row waits, due at once, for a claim with a whole lease (its message is sent), so a performance never outlives its lease", async () => {
    slackFake.current.script("chat.postMessage", reply.ok({ ts: "1.8" }));
    const lateCommit = async (leftMs: number) => {
      await resetTables(env.DB);
      let release: () => void = () => {};
      const opened = new Promise<void>((resolve) => {
        release = resolve;
      });
      const slow = new Proxy(env.DB, {
        get(target, prop) {
          if (prop === "batch") return async (statements: D1PreparedStatement[]) => opened.then(() => target.batch(statements));
          const value = Reflect.get(target, prop);
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
      const { deps, settled, inline, queue } = ackWithFirstAttempt(testApp(), [], { db: slow });
      const response = await handleSlackRequest(
        await eventRequest(mention()),
        { ...deps, settings: { ...deps.settings, ackBudgetMs: 20 } },
        NOW,
      );
      expect(response.status).toBe(500);
      // The batch commits (its claim taken at NOW) when only `leftMs` of the inline lease is left.
      inline.clock.set(NOW + bounds.leaseMs - leftMs);
      release();
      await settled();
      const [row] = await allRows(env.DB);
      return { row, sent: queue.sent.map((m) => m.id), calls: slackFake.current.callsTo("chat.postMessage").length };
    };
    const tooLate = await lateCommit(bounds.timeoutMs - 1);
    expect(tooLate.calls).toBe(0);
    expect(tooLate.row).toMatchObject({ status: "pending", attempts: 0, claim_expires_at: null });
    expect(tooLate.sent).toContain(tooLate.row?.id);
    const inTime = await lateCommit(bounds.timeoutMs + 1_000);
    expect(inTime.calls).toBe(1);
    expect(inTime.row).toMatchObject({ status: "done", attempts: 1 });
  });
});

describe(`the deployed ingress counts its requests in progress: with more than INLINE_MAX_REQUESTS (${INLINE_MAX_REQUESTS}), a request's inline rows wait for them`, () => {
  beforeEach(() => resetAllShards());
  afterEach(() => vi.restoreAllMocks());
  const rowsOnEveryShard = async () => (await Promise.all(shardDbs().map((db) => allRows(db)))).flat();
  const ackLine = (lines: readonly string[]) =>
    lines.map((line) => JSON.parse(line) as Record<string, unknown>).find((r) => r.msg === "slack request");

  /** An app_mention through the Worker's own fetch, with `others` requests in progress in the isolate beside it. */
  async function mentionBeside(others: number) {
    const lines = captureLog();
    const ends = Array.from({ length: others }, () => inlineGate.requestStarted(Date.now()));
    try {
      const ctx = createExecutionContext();
      const request = await eventRequest(mention(), { now: Date.now() });
      const response = await worker.fetch(request as Parameters<typeof worker.fetch>[0], env, ctx);
      await waitOnExecutionContext(ctx);
      expect(response.status).toBe(200);
    } finally {
      for (const end of ends) end();
    }
    return ackLine(lines)?.first_attempt;
  }

  it(`with ${INLINE_MAX_REQUESTS} others in progress (they stay) the reply goes inline at once: its own answer brings the count to ${INLINE_MAX_REQUESTS}`, async () => {
    slackFake.current.script("chat.postMessage", reply.ok({ ts: "4.1" }));
    expect(await mentionBeside(INLINE_MAX_REQUESTS)).toBe("inline");
    expect((await rowsOnEveryShard()).map((row) => row.status)).toEqual(["done"]);
  });

  it(`with ${INLINE_MAX_REQUESTS + 1} others in progress the reply is claimed for the ingress and waits; answering one of them starts it`, async () => {
    slackFake.current.script("chat.postMessage", reply.ok({ ts: "4.2" }));
    const lines = captureLog();
    const ends = Array.from({ length: INLINE_MAX_REQUESTS + 1 }, () => inlineGate.requestStarted(Date.now()));
    try {
      const ctx = createExecutionContext();
      const request = await eventRequest(mention(), { now: Date.now() });
      const response = await worker.fetch(request as Parameters<typeof worker.fetch>[0], env, ctx);
      expect(response.status).toBe(200);
      expect(ackLine(lines)?.first_attempt).toBe("inline");
      // Claimed with the ack (never the queue's), and waiting: no Slack call while the others are being answered.
      await vi.waitFor(() => expect(inlineGate.waitingCount).toBe(1));
      expect(await rowsOnEveryShard()).toEqual([expect.objectContaining({ status: "leased", attempts: 1 })]);
      expect(slackFake.current.calls).toHaveLength(0);
      ends.shift()?.();
      await waitOnExecutionContext(ctx);
      expect(inlineGate.waitingCount).toBe(0);
      expect((await rowsOnEveryShard()).map((row) => row.status)).toEqual(["done"]);
      expect(slackFake.current.callsTo("chat.postMessage")).toHaveLength(1);
    } finally {
      for (const end of ends) end();
    }
  });

  it("every request the Worker answers stops counting, the refused ones included", async () => {
    const ctx = createExecutionContext();
    await worker.fetch(
      new Request("https://ackbox.test/slack/events", { method: "POST", body: "{}" }) as Parameters<typeof worker.fetch>[0],
      env,
      ctx,
    );
    await worker.fetch(new Request("https://ackbox.test/healthz") as Parameters<typeof worker.fetch>[0], env, ctx);
    await waitOnExecutionContext(ctx);
    expect(inlineGate.requestsInProgress(Date.now())).toBe(0);
  });
});

describe("the sweep stays the guarantee, the queue takes what the first attempt leaves", () => {
  it("an inline attempt that fails is retried by the consumer per the normal policy", async () => {
    slackFake.current.script("chat.postMessage", reply.error("internal_error"), reply.ok({ ts: "1.2" }));
    const { deps, settled, queue } = ackWithFirstAttempt();
    await handleSlackRequest(await eventRequest(mention()), deps, NOW);
    await settled();
    const failed = (await allRows(env.DB))[0];
    expect(failed).toMatchObject({ status: "pending", attempts: 1 });
    const due = failed?.next_attempt_at ?? 0;
    expect(due).toBeGreaterThan(NOW);
    // A message with the retry's own delay, as the consumer would have given its message.
    expect(queue.sent).toEqual([{ id: failed?.id, delaySeconds: Math.ceil((due - NOW) / 1000) }]);

    expect((await deliverBatch(consumerAt(due - 1).deps, [failed?.id ?? 0])).get(failed?.id ?? 0)).toEqual({ action: "ack" });
    await deliverBatch(consumerAt(due).deps, [failed?.id ?? 0]);
    expect(await readRow(env.DB, failed?.id ?? 0)).toMatchObject({ status: "done", attempts: 2 });
  });

  it("a row leased by an inline attempt that never finishes is the consumer's once the inline lease expires, long before LEASE_SECONDS", async () => {
    // The ingress recorded the row and claimed it, then its isolate went away mid-effect.
    const harness = ingressDeps({ queue: watchedQueue() });
    await handleSlackRequest(await eventRequest(mention()), harness.deps, NOW);
    await harness.settled();
    const [row] = await allRows(env.DB);
    const id = row?.id ?? 0;
    expect(await claimRows(env.DB, [id], "ingress-that-died", NOW, bounds.leaseMs)).toHaveLength(1);
    expect(bounds.leaseMs).toBeLessThan(settings.leaseMs);

    expect((await deliverBatch(consumerAt(NOW + bounds.leaseMs - 1).deps, [id])).get(id)).toEqual({ action: "ack" });
    expect(await readRow(env.DB, id)).toMatchObject({ status: "leased", claim_token: "ingress-that-died" });

    slackFake.current.script("chat.postMessage", reply.ok({ ts: "1.3" }));
    await deliverBatch(consumerAt(NOW + bounds.leaseMs).deps, [id]);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "done", attempts: 2 });
  });

  it("the sweep re-sends a row whose inline lease expired, and not before", async () => {
    const harness = ingressDeps({ queue: watchedQueue() });
    await handleSlackRequest(await eventRequest(mention()), harness.deps, NOW);
    await harness.settled();
    const id = (await allRows(env.DB))[0]?.id ?? 0;
    await claimRows(env.DB, [id], "ingress-that-died", NOW, bounds.leaseMs);
    const sweepAt = async (at: number) => {
      const queue = watchedQueue();
      await sweep({ db: env.DB, queue, settings, log: recordingLog() }, at);
      return queue.sent.map((m) => m.id);
    };
    expect(await sweepAt(NOW + bounds.leaseMs - 1)).toEqual([]);
    expect(await sweepAt(NOW + bounds.leaseMs)).toEqual([id]);
  });

  it("a duplicate of the event performs nothing, and a message racing the inline attempt does not perform twice", async () => {
    const held = gate();
    slackFake.current.script("chat.postMessage", reply.held(held, reply.ok({ ts: "1.4" })));
    const { deps, settled } = ackWithFirstAttempt();
    const request = () => eventRequest(mention(), { eventId: "EvDUPINLINE" });
    const answers = await Promise.all([handleSlackRequest(await request(), deps, NOW), handleSlackRequest(await request(), deps, NOW)]);
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    // A message for the row (a sweep's, a replay's) arrives while the inline attempt still holds it.
    await new Promise((resolve) => setTimeout(resolve, 20));
    const id = (await allRows(env.DB))[0]?.id ?? 0;
    const racing = deliverBatch(consumerAt(NOW + 1).deps, [id]);
    expect((await racing).get(id)).toEqual({ action: "ack" });
    held.open();
    await settled();
    expect(await allRows(env.DB)).toHaveLength(1);
    expect(slackFake.current.callsTo("chat.postMessage")).toHaveLength(1);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "done", attempts: 1 });
  });
});

describe("what a message costs once the first attempt has finished the row", () => {
  it("the consumer's visit to a done row is one round trip: 5 rows read in 3 statements, nothing written (the claim that finds it done, and in its batch the cooldown check of a row it could not claim)", async () => {
    slackFake.current.script("chat.postMessage", reply.ok({ ts: "1.5" }));
    const { deps, settled } = ackWithFirstAttempt();
    await handleSlackRequest(await eventRequest(mention()), deps, NOW);
    await settled();
    const id = (await allRows(env.DB))[0]?.id ?? 0;
    const { db, meter } = meteredDb(env.DB);
    await deliverBatch({ ...consumerAt(NOW + bounds.leaseMs).deps, db }, [id]);
    expect({
      roundTrips: meter.roundTrips,
      statements: meter.statements,
      rowsRead: meter.rowsRead,
      rowsWritten: meter.rowsWritten,
    }).toEqual({
      roundTrips: 1,
      statements: 3,
      rowsRead: 5,
      rowsWritten: 0,
    });
  });
});
