/**
 * An assistant's answer (shared/assistant/answer.ts), recorded by the ack and performed by the consumer's own
 * delivery, against Slack's side of threads and streams (shared/app/fake-slack-streams.ts: the five-minute stream,
 * the two-minute status, the stop button, lost answers, overlapping calls) and a fake OpenAI-compatible model, on
 * virtual time. Each case is a failure the issue names, and its verdict is the user's: one message per question,
 * complete, never left streaming, the model asked again only when no answer of it was kept.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { createApp } from "../../shared/app/app.ts";
import { ASSISTANT_SETTINGS } from "../../shared/app/assistant.ts";
import { type FakeModel, fakeModel, modelTurn } from "../../shared/app/fake-model.ts";
import type { FakeSlackStreams } from "../../shared/app/fake-slack-streams.ts";
import { parseAppSettings } from "../../shared/app/settings.ts";
import { ANSWER_WORST_QUERIES, answerEffect, STATUS_REFRESH_MS } from "../../shared/assistant/answer.ts";
import { CUT_NOTE, fitted, MARKDOWN_MAX, STREAM_MAX_MS } from "../../shared/assistant/reply.ts";
import { deliverBatch } from "../../shared/delivery/deliver.ts";
import { countingDb } from "../../shared/delivery/query-budget.ts";
import { effectRegistry } from "../../shared/effects/registry.ts";
import { auditTrail } from "../../shared/ops/audit.ts";
import { handleSlackRequest } from "../../workers/ingress/ack.ts";
import { deliveryDeps } from "../support/consumer.ts";
import { expectOneCompleteAnswer, gate, reply, TEST_MODEL_KEY, TEST_MODEL_URL, useFakeSlack } from "../support/fake-slack.ts";
import { ingressDeps } from "../support/ingress.ts";
import { readRow, resetTables } from "../support/rows.ts";
import { eventRequest, NOW, uniqueId } from "../support/slack-requests.ts";
import { type VirtualTime, virtualTime } from "../support/virtual-time.ts";

const slack = useFakeSlack();
const DM = "D0ASSIST";
const USER = "U0ASKER";
const LEASE_MS = 300_000;

const app = createApp().assistant({ userMessage: (_, { thread }) => [thread.answer()] });
const appSettings = (() => {
  const parsed = parseAppSettings(ASSISTANT_SETTINGS, {
    MODEL_URL: TEST_MODEL_URL,
    MODEL_API_KEY: TEST_MODEL_KEY,
    MODEL_NAME: "test-model",
  });
  if (!parsed.ok) throw new Error(parsed.errors.join("; "));
  return parsed.settings;
})();

/** An answer of many words, so it streams in many appends. */
const LONG =
  "ackbox answers Slack within three seconds because the durable write comes first and the work after. " +
  "The receipt and the outbox rows commit in one D1 batch, the answer goes back, and the consumer performs the rows. ".repeat(8);

interface World {
  readonly time: VirtualTime;
  readonly streams: FakeSlackStreams;
  readonly model: FakeModel;
  readonly threadTs: string;
}

let world: World;

function setUp(options: { modelSleep?: (ms: number) => Promise<void> } = {}): World {
  const time = virtualTime(NOW);
  const fake = slack.current.withStreams({ now: time.clock });
  const model = fakeModel({ apiKey: TEST_MODEL_KEY, now: time.clock, sleep: options.modelSleep ?? ((ms) => time.sleep(ms)) });
  fake.withModel(model);
  const streams = fake.streams as FakeSlackStreams;
  const { thread_ts } = streams.assistantThread({ channel: DM, user: USER });
  world = { time, streams, model, threadTs: thread_ts };
  return world;
}

beforeEach(async () => {
  await resetTables(env.DB);
  await env.DB.batch([env.DB.prepare("DELETE FROM assistant_turns"), env.DB.prepare("DELETE FROM assistant_threads")]);
});

/** The user asks in the thread: the message Slack keeps, and the event the ingress records it from. */
async function ask(text: string, options: { eventId?: string; ts?: string } = {}) {
  const message = options.ts ? { ts: options.ts } : world.streams.userMessage({ channel: DM, user: USER, text, thread_ts: world.threadTs });
  const { deps, log } = ingressDeps({ app });
  const event = { type: "message", user: USER, text, ts: message.ts, thread_ts: world.threadTs, channel: DM, channel_type: "im" };
  const response = await handleSlackRequest(
    await eventRequest(event, { eventId: options.eventId ?? uniqueId("Ev") }),
    deps,
    world.time.clock(),
  );
  expect(response.status).toBe(200);
  const row = await env.DB.prepare("SELECT id FROM outbox WHERE json_extract(payload, '$.message_ts') = ?")
    .bind(message.ts)
    .first<{ id: number }>();
  return { ts: message.ts, rowId: row?.id as number, log };
}

/** The consumer delivers the rows, on virtual time: its claim, the answer, its fenced finish. */
async function deliver(ids: readonly number[], options: { modelIdleMs?: number; db?: D1Database } = {}) {
  const { time } = world;
  const effect = answerEffect({
    clock: time.clock,
    sleep: (ms, signal) => time.sleep(ms, signal),
    every: time.every,
    modelIdleMs: options.modelIdleMs ?? 60_000,
  });
  const harness = deliveryDeps(NOW, {
    effects: effectRegistry([effect]),
    settings: { leaseMs: LEASE_MS },
    ...(options.db ? { db: options.db } : {}),
  });
  const deps = { ...harness.deps, clock: time.clock, context: { ...harness.deps.context, appSettings } };
  const actions = await deliverBatch(deps, ids);
  return { actions, log: harness.log, queue: harness.queue };
}

/** What a worker killed mid-answer leaves: its claim (expired at `expired`), the turn as far as it wrote it, Slack's message. */
async function killedAt(
  state: "starting" | "streaming" | "generated",
  options: { partial?: string; answer?: string; messageExists?: boolean } = {},
) {
  const q = await ask("Killed?");
  let ts: string | null = null;
  if (options.messageExists ?? state !== "starting") {
    const started = world.streams.answer("chat.startStream", {
      channel: DM,
      thread_ts: world.threadTs,
      markdown_text: options.partial ?? "The first words",
    });
    ts = String(started.ts);
  }
  await env.DB.batch([
    env.DB.prepare("UPDATE outbox SET status = 'leased', claim_token = 'killed', claim_expires_at = ?2, attempts = 1 WHERE id = ?1").bind(
      q.rowId,
      NOW + 1_000,
    ),
    env.DB.prepare(
      "UPDATE assistant_turns SET state = ?2, stream_ts = ?3, stream_started_at = ?4, answer = ?5, model_calls = 1 WHERE message_ts = ?1",
    ).bind(q.ts, state, state === "starting" ? null : ts, ts === null ? null : NOW, options.answer ?? null),
  ]);
  await world.time.advanceTo(NOW + 2_000); // its lease has expired
  return q;
}

/** The user's stop, as Slack sends it once they press the stop button (after every question of these tests). */
async function pressStop() {
  const { deps } = ingressDeps({ app });
  const stop = {
    type: "agent_session_stopped",
    channel: DM,
    thread_ts: world.threadTs,
    user: USER,
    streaming_message_ts: [],
    event_ts: "2999999999.000000",
  };
  await handleSlackRequest(await eventRequest(stop), deps, NOW);
}

const turnOf = (messageTs: string) =>
  env.DB.prepare("SELECT * FROM assistant_turns WHERE message_ts = ?").bind(messageTs).first<Record<string, unknown>>();

const where = (after: string) => ({ channel: DM, thread_ts: world.threadTs, after });

describe("one answer per question", () => {
  it("is streamed into the thread once, complete, from one model call: status set, buffered appends, stopped", async () => {
    setUp().model.always(modelTurn.answer(LONG));
    const q = await ask("How does ackbox ack in time?");
    const { actions } = await deliver([q.rowId]);
    expect(actions.get(q.rowId)).toEqual({ action: "ack" });
    const message = expectOneCompleteAnswer(world.streams, where(q.ts), LONG);
    expect(message.ended).toBe("stopStream");
    expect(message.counts.started).toBe(1);
    // Buffered: tens of calls for a long answer, not one per word.
    expect(message.counts.appended).toBeGreaterThan(1);
    expect(message.counts.appended).toBeLessThan(LONG.length / 200);
    expect(world.model.calls).toHaveLength(1);
    expect(world.model.calls[0]?.authorized).toBe(true);
    const turn = await turnOf(q.ts);
    expect(turn).toMatchObject({ state: "delivered", stream_ts: message.ts, answer: LONG, model_calls: 1 });
    const row = await readRow(env.DB, q.rowId);
    expect(row.status).toBe("done");
    expect(JSON.parse(row.result ?? "{}")).toMatchObject({ ts: message.ts, chars: LONG.length, model_called: true });
    // The status line said the app was thinking; the answer itself cleared it.
    expect(world.streams.thread(DM, world.threadTs).statusLog.map((s) => s.cause)).toEqual(["setStatus", "reply"]);
  });

  it("is one row, one model call and one stream whatever copies Slack sends: its retry and another event_id", async () => {
    setUp().model.always(modelTurn.answer("Once."));
    const eventId = uniqueId("Ev");
    const q = await ask("Once?", { eventId });
    await ask("Once?", { eventId, ts: q.ts });
    await ask("Once?", { ts: q.ts });
    const rows = await env.DB.prepare("SELECT count(*) AS n FROM outbox").first<{ n: number }>();
    expect(rows?.n).toBe(1);
    await deliver([q.rowId]);
    await deliver([q.rowId]); // the message's second delivery: the row is done
    expectOneCompleteAnswer(world.streams, where(q.ts), "Once.");
    expect(world.model.calls).toHaveLength(1);
  });

  it("asks with the thread's history and context from D1, never conversations.replies, with the row's idempotency key", async () => {
    setUp().model.always(modelTurn.answer((messages) => `Answer ${messages.length}`));
    await env.DB.prepare(
      "INSERT INTO assistant_threads (team_id, channel_id, thread_ts, context, context_ts, updated_at) VALUES ('T0TEAM', ?1, ?2, ?3, '1', ?4)",
    )
      .bind(DM, world.threadTs, JSON.stringify({ channel_id: "C0LOOK" }), NOW)
      .run();
    const first = await ask("First?");
    await deliver([first.rowId]);
    const second = await ask("Second?");
    await deliver([second.rowId]);
    const asked = world.model.calls[1]?.body as { messages: { role: string; content: string }[] };
    expect(asked.messages.map((m) => [m.role, m.content])).toEqual([
      ["system", expect.stringContaining("<#C0LOOK>")],
      ["user", "First?"],
      ["assistant", "Answer 2"],
      ["user", "Second?"],
    ]);
    expect(world.model.calls[1]?.idempotencyKey).toBe((await readRow(env.DB, second.rowId)).idempotency_key);
    expect(slack.current.callsTo("conversations.replies")).toEqual([]);
  });
});

describe("no Slack call is retried blindly", () => {
  it("a start whose answer was lost is found in the thread and finished: never a second message", async () => {
    setUp().model.always(modelTurn.answer(LONG));
    slack.current.script("chat.startStream", reply.lost());
    const q = await ask("Lost start?");
    await deliver([q.rowId]);
    const message = expectOneCompleteAnswer(world.streams, where(q.ts), LONG);
    expect(message.counts.started).toBe(1);
    expect(slack.current.callsTo("chat.startStream")).toHaveLength(1);
    expect(slack.current.callsTo("conversations.replies")).toHaveLength(1);
    expect(world.model.calls).toHaveLength(1);
  });

  it("an append whose answer was lost is never sent again: the message is made whole by chat.update", async () => {
    setUp().model.always(modelTurn.answer(LONG));
    slack.current.nth("chat.appendStream", 2, reply.lost());
    const q = await ask("Lost append?");
    await deliver([q.rowId]);
    const message = expectOneCompleteAnswer(world.streams, where(q.ts), LONG);
    expect(message.counts.appended).toBe(2); // the lost one was applied; none after it
    expect(message.counts.updated).toBe(1);
    expect(world.model.calls).toHaveLength(1);
  });

  it("a 429 is waited out and the same text sent again (it was not applied)", async () => {
    setUp().model.always(modelTurn.answer(LONG));
    slack.current.nth("chat.appendStream", 1, reply.rateLimited(3));
    const q = await ask("Paced?");
    await deliver([q.rowId]);
    const message = expectOneCompleteAnswer(world.streams, where(q.ts), LONG);
    expect(message.counts.updated).toBe(0);
  });
});

describe("a stream's lifetime", () => {
  it("an answer longer than Slack's five minutes is stopped before them and finished by chat.update: one message", async () => {
    // 24 pieces 15 s apart: six minutes of answer.
    setUp().model.always(modelTurn.answer(LONG, { chunks: 24, betweenChunksMs: 15_000 }));
    const q = await ask("Slowly?");
    await deliver([q.rowId]);
    const message = expectOneCompleteAnswer(world.streams, where(q.ts), LONG);
    expect(message.ended).toBe("stopStream");
    expect(message.counts.updated).toBe(1);
    // No call met the end Slack puts on a stream: it was stopped at STREAM_MAX_MS.
    expect(world.streams.flights().filter((f) => f.answer?.error === "message_not_in_streaming_state")).toEqual([]);
    expect(STREAM_MAX_MS).toBeLessThan(5 * 60_000);
  });
});

describe("killed mid-answer: the next attempt finishes the same message", () => {
  it("killed after startStream: the model is asked again and the message made whole", async () => {
    setUp().model.always(modelTurn.answer(LONG));
    const q = await killedAt("streaming");
    await deliver([q.rowId]);
    const message = expectOneCompleteAnswer(world.streams, where(q.ts), LONG);
    expect(message.counts.started).toBe(1);
    expect(world.model.calls).toHaveLength(1);
    expect(await turnOf(q.ts)).toMatchObject({ state: "delivered", model_calls: 2 });
  });

  it("killed after some appends: the same message, made whole", async () => {
    setUp().model.always(modelTurn.answer(LONG));
    const q = await killedAt("streaming", { partial: `${LONG.slice(0, 600)}` });
    world.streams.answer("chat.appendStream", {
      channel: DM,
      ts: String((await turnOf(q.ts))?.stream_ts),
      markdown_text: LONG.slice(600, 900),
    });
    await deliver([q.rowId]);
    expectOneCompleteAnswer(world.streams, where(q.ts), LONG);
  });

  it("killed after the model finished: its kept answer is delivered, the model never asked again", async () => {
    setUp();
    const q = await killedAt("generated", { partial: LONG.slice(0, 300), answer: LONG });
    await deliver([q.rowId]);
    expectOneCompleteAnswer(world.streams, where(q.ts), LONG);
    expect(world.model.calls).toEqual([]);
  });

  it("killed after sending startStream, before reading its answer: the message Slack made is found, not doubled", async () => {
    setUp().model.always(modelTurn.answer(LONG));
    const q = await killedAt("starting", { messageExists: true });
    await deliver([q.rowId]);
    const message = expectOneCompleteAnswer(world.streams, where(q.ts), LONG);
    expect(message.counts.started).toBe(1);
    expect(slack.current.callsTo("chat.startStream")).toEqual([]);
  });

  it("killed after sending a startStream Slack never received: one message, started once", async () => {
    setUp().model.always(modelTurn.answer(LONG));
    const q = await killedAt("starting", { messageExists: false });
    await deliver([q.rowId]);
    expectOneCompleteAnswer(world.streams, where(q.ts), LONG);
    expect(slack.current.callsTo("chat.startStream")).toHaveLength(1);
  });
});

describe("when the model fails", () => {
  it("a 500 is asked again on the row's retry: one message in the end", async () => {
    setUp().model.script(modelTurn.serverError(), modelTurn.answer(LONG));
    const q = await ask("Flaky model?");
    const first = await deliver([q.rowId]);
    expect(first.actions.get(q.rowId)?.action).toBe("retry");
    const row = await readRow(env.DB, q.rowId);
    expect(row.status).toBe("pending");
    await world.time.advanceTo(row.next_attempt_at);
    await deliver([q.rowId]);
    expectOneCompleteAnswer(world.streams, where(q.ts), LONG);
    expect(world.model.calls).toHaveLength(2);
  });

  it("a stall past its idle time ends the call; the stream is stopped where it stands, the next attempt makes it whole", async () => {
    setUp().model.script(modelTurn.stall(40), modelTurn.answer(LONG));
    const q = await ask("Stalling model?");
    await deliver([q.rowId], { modelIdleMs: 50 });
    const afterStall = world.streams.thread(DM, world.threadTs).messages.filter((m) => m.from === "app" && m.subtype === undefined);
    expect(afterStall.map((m) => m.streaming)).toEqual([false]); // never left streaming while the row waits
    const row = await readRow(env.DB, q.rowId);
    expect([row.status, row.last_error]).toEqual(["pending", expect.stringMatching(/no answer from the model for 50 ms/)]);
    await world.time.advanceTo(row.next_attempt_at);
    await deliver([q.rowId]);
    expectOneCompleteAnswer(world.streams, where(q.ts), LONG);
  });

  it("a refusal parks the row with the reason, and the user is told in the thread", async () => {
    setUp().model.script(modelTurn.badRequest("This model does not answer that."));
    const q = await ask("Forbidden?");
    await deliver([q.rowId]);
    const row = await readRow(env.DB, q.rowId);
    expect(row.status).toBe("dead");
    expect(row.last_error).toMatch(/HTTP 400: This model does not answer that\./);
    const said = world.streams.thread(DM, world.threadTs).messages.filter((m) => m.from === "app" && m.subtype === undefined);
    expect(said.map((m) => m.text)).toEqual(["Sorry, I couldn't answer that: the model refused the request."]);
    expect(await turnOf(q.ts)).toMatchObject({ state: "failed" });
  });
});

describe("the user's stop", () => {
  it("ends the model call and completes the row with what was said: not dead, not retried", async () => {
    let pieces = 0;
    const w = setUp({
      modelSleep: async (ms) => {
        if (++pieces === 12) {
          // The user presses stop mid-answer; Slack stops the stream and tells the app.
          const stopped = world.streams.stopByUser(DM, world.threadTs, USER);
          const { deps } = ingressDeps({ app });
          await handleSlackRequest(await eventRequest({ ...stopped }), deps, world.time.clock());
        }
        await world.time.sleep(ms);
      },
    });
    w.model.always(modelTurn.answer(LONG, { chunks: 40, betweenChunksMs: 500 }));
    const q = await ask("Stop me?");
    const { actions } = await deliver([q.rowId]);
    expect(actions.get(q.rowId)).toEqual({ action: "ack" });
    const row = await readRow(env.DB, q.rowId);
    expect(row.status).toBe("done");
    expect(JSON.parse(row.result ?? "{}")).toMatchObject({ stopped: true });
    const turn = await turnOf(q.ts);
    expect(turn?.state).toBe("stopped");
    expect(turn?.stop_requested_at).not.toBeNull();
    const [message, ...more] = world.streams.thread(DM, world.threadTs).messages.filter((m) => m.from === "app" && m.subtype === undefined);
    expect(more).toEqual([]);
    expect(message?.leftStreaming).toBe(false);
    expect(LONG.startsWith(message?.text ?? "-")).toBe(true);
    expect((message?.text ?? "").length).toBeLessThan(LONG.length);
    // The model call ended with the stop: it never sent the rest.
    expect(world.model.calls[0]?.chunksSent).toBeLessThan(40);
  });

  it("a stop recorded while an earlier attempt asked the model: the next attempt asks nothing and completes the row", async () => {
    setUp();
    const q = await ask("Never mind?");
    // An attempt asked the model and died; meanwhile the user pressed stop.
    await env.DB.prepare("UPDATE assistant_turns SET state = 'answering', model_calls = 1 WHERE message_ts = ?").bind(q.ts).run();
    await pressStop();
    await deliver([q.rowId]);
    expect((await readRow(env.DB, q.rowId)).status).toBe("done");
    expect(world.model.calls).toEqual([]);
    expect(await turnOf(q.ts)).toMatchObject({ state: "stopped" });
  });

  it("a stop recorded while the model thinks is seen at the next heartbeat: the status is cleared, the row completes", async () => {
    let recorded = false;
    const w = setUp({
      modelSleep: async (ms) => {
        if (!recorded) {
          recorded = true;
          await pressStop();
        }
        await world.time.sleep(ms);
      },
    });
    w.model.always(modelTurn.answer("Too late.", { firstChunkDelayMs: 60_000 }));
    const q = await ask("Think long?");
    await deliver([q.rowId]);
    expect(JSON.parse((await readRow(env.DB, q.rowId)).result ?? "{}")).toMatchObject({ stopped: true });
    expect(await turnOf(q.ts)).toMatchObject({ state: "stopped", answer: null });
    const log = world.streams.thread(DM, world.threadTs).statusLog;
    expect(log.at(-1)).toMatchObject({ cause: "setStatus", status: "" });
    expect(world.streams.thread(DM, world.threadTs).messages.filter((m) => m.from === "app" && m.subtype === undefined)).toEqual([]);
  });

  it("a stream Slack ends early on its own (not the user) is repaired: the answer still arrives whole", async () => {
    const time = virtualTime(NOW);
    const fake = slack.current.withStreams({ now: time.clock, streamLifetimeMs: 20_000 });
    const model = fakeModel({ apiKey: TEST_MODEL_KEY, now: time.clock, sleep: (ms) => time.sleep(ms) });
    fake.withModel(model);
    const streams = fake.streams as FakeSlackStreams;
    const { thread_ts } = streams.assistantThread({ channel: DM, user: USER });
    world = { time, streams, model, threadTs: thread_ts };
    model.always(modelTurn.answer(LONG, { chunks: 12, betweenChunksMs: 5_000 }));
    const q = await ask("Long, but Slack ends the stream at 20 s?");
    await deliver([q.rowId]);
    const message = expectOneCompleteAnswer(world.streams, where(q.ts), LONG);
    expect(message.ended).toBe("expired");
    expect(message.repaired).toBe(true);
    expect(JSON.parse((await readRow(env.DB, q.rowId)).result ?? "{}")).not.toHaveProperty("stopped");
  });
});

describe("one turn at a time per thread", () => {
  it("a question asked while the previous answer streams waits, and is answered after it with it in its history", async () => {
    setUp().model.always(
      modelTurn.answer((messages) => `Answer to ${messages.at(-1)?.content} after ${messages.length - 2} earlier`, {
        chunks: 6,
        betweenChunksMs: 1_000,
      }),
    );
    const first = await ask("First");
    const second = await ask("Second");
    const { actions } = await deliver([first.rowId, second.rowId]);
    expect(actions.get(second.rowId)).toEqual({ action: "resend", delaySeconds: 2 });
    expect((await readRow(env.DB, second.rowId)).attempts).toBe(0);
    await world.time.advanceTo((await readRow(env.DB, second.rowId)).next_attempt_at);
    await deliver([second.rowId]);
    const texts = world.streams
      .thread(DM, world.threadTs)
      .messages.filter((m) => m.from === "app" && m.subtype === undefined)
      .map((m) => m.text);
    expect(texts).toEqual(["Answer to First after 0 earlier", "Answer to Second after 2 earlier"]);
  });
});

describe("the status line", () => {
  it("is set while a slow model thinks, and set again before Slack's two minutes clear it", async () => {
    setUp().model.always(modelTurn.answer("At last.", { firstChunkDelayMs: 250_000 }));
    const q = await ask("Think hard?");
    await deliver([q.rowId]);
    expectOneCompleteAnswer(world.streams, where(q.ts), "At last.");
    const log = world.streams.thread(DM, world.threadTs).statusLog;
    expect(log.map((s) => s.cause)).toEqual(["setStatus", "setStatus", "setStatus", "reply"]);
    expect(log.some((s) => s.cause === "timeout")).toBe(false);
    const sets = log.filter((s) => s.cause === "setStatus").map((s) => s.at - NOW);
    expect(sets[1]).toBeGreaterThanOrEqual(STATUS_REFRESH_MS);
    expect(sets[1]).toBeLessThan(120_000);
  });
});

describe("the model's key", () => {
  it("is found in no log line, row, attempt, turn, queue message or operator answer — even when the provider quotes it", async () => {
    setUp().model.script(
      modelTurn.status(401, {
        message: `Incorrect API key provided: ${TEST_MODEL_KEY}.`,
        type: "invalid_request_error",
        code: "invalid_api_key",
      }),
    );
    const q = await ask("Leak?");
    const { log, queue } = await deliver([q.rowId]);
    const everything = JSON.stringify([
      queue.sent,
      log.records,
      q.log.records,
      (await env.DB.prepare("SELECT * FROM outbox").all()).results,
      (await env.DB.prepare("SELECT * FROM outbox_attempts").all()).results,
      (await env.DB.prepare("SELECT * FROM assistant_turns").all()).results,
      await auditTrail(env.DB, `message:T0TEAM:${DM}:${q.ts}`),
      slack.current.calls,
      world.model.calls,
    ]);
    expect(everything).toContain("[secret MODEL_API_KEY]");
    expect(everything).not.toContain(TEST_MODEL_KEY);
  });
});

describe("what the review found: each a failure the answer must survive", () => {
  it("records 'starting' before a start goes out, so a kill while it is in flight is found again, not doubled", async () => {
    setUp().model.always(modelTurn.answer(LONG));
    const open = gate();
    slack.current.script("chat.startStream", reply.held(open, reply.slack()));
    const q = await ask("Starting?");
    const delivering = deliver([q.rowId]);
    // While Slack holds the start, the turn already says a start was sent.
    for (let i = 0; i < 50 && (await turnOf(q.ts))?.state !== "starting"; i++) await new Promise((r) => setTimeout(r, 5));
    expect((await turnOf(q.ts))?.state).toBe("starting");
    open.open();
    await delivering;
    expectOneCompleteAnswer(world.streams, where(q.ts), LONG);
  });

  it("writes nothing of its turn once another claim holds the row, and stops calling Slack", async () => {
    setUp().model.always(modelTurn.answer(LONG));
    const open = gate();
    slack.current.nth("chat.appendStream", 2, reply.held(open, reply.slack()));
    const q = await ask("Taken over?");
    const delivering = deliver([q.rowId]);
    for (let i = 0; i < 100 && slack.current.callsTo("chat.appendStream").length < 2; i++) await new Promise((r) => setTimeout(r, 5));
    // Another worker took the row (its lease was taken as expired) while this one waited on Slack.
    await env.DB.prepare("UPDATE outbox SET claim_token = 'another-worker' WHERE id = ?").bind(q.rowId).run();
    const before = await turnOf(q.ts);
    open.open();
    await delivering;
    const after = await turnOf(q.ts);
    expect(after).toEqual(before);
    expect(after?.state).toBe("streaming");
    expect(slack.current.callsTo("chat.appendStream").length).toBeLessThanOrEqual(3);
    expect(slack.current.callsTo("chat.update")).toEqual([]);
  });

  it("a lost start is never taken for another question's answer in the thread", async () => {
    setUp().model.always(modelTurn.answer((messages) => `Answer to ${messages.at(-1)?.content}`));
    const first = await ask("First");
    const second = await ask("Second");
    await deliver([first.rowId]); // its message comes after both questions
    slack.current.script("chat.startStream", reply.networkError(), reply.slack());
    await deliver([second.rowId]);
    const texts = world.streams
      .thread(DM, world.threadTs)
      .messages.filter((m) => m.from === "app" && m.subtype === undefined)
      .map((m) => m.text);
    expect(texts).toEqual(["Answer to First", "Answer to Second"]);
  });

  it("a start lost before Slack got it: the thread is read again after a call's timeout, then it starts once more", async () => {
    setUp().model.always(modelTurn.answer(LONG));
    slack.current.script("chat.startStream", reply.networkError(), reply.slack());
    const q = await ask("Lost on the way?");
    await deliver([q.rowId]);
    expectOneCompleteAnswer(world.streams, where(q.ts), LONG);
    const reads = world.streams.flights().filter((f) => f.method === "conversations.replies");
    expect(reads).toHaveLength(2);
    expect((reads[1]?.begunAt ?? 0) - (reads[0]?.begunAt ?? 0)).toBeGreaterThan(10_000);
  });

  it("an earlier question whose row is dead does not hold the next one", async () => {
    setUp().model.always(modelTurn.answer("Still answered."));
    const first = await ask("Doomed");
    await env.DB.batch([
      env.DB.prepare("UPDATE outbox SET status = 'dead', sweep_at = NULL, completed_at = ?2, last_error = 'parked' WHERE id = ?1").bind(
        first.rowId,
        NOW,
      ),
      env.DB.prepare("UPDATE assistant_turns SET state = 'streaming' WHERE message_ts = ?").bind(first.ts),
    ]);
    const second = await ask("Next");
    await deliver([second.rowId]);
    expectOneCompleteAnswer(world.streams, where(second.ts), "Still answered.");
  });

  it("an answer longer than one message's limit ends the same, cut with a note, whichever way it is finished", async () => {
    const huge = "word ".repeat(3_000); // 15 000 characters
    setUp().model.always(modelTurn.answer(huge, { chunks: 60 }));
    const streamed = await ask("Everything, streamed?");
    await deliver([streamed.rowId]);
    const a = expectOneCompleteAnswer(world.streams, where(streamed.ts), fitted(huge));
    expect(a.text.length).toBe(MARKDOWN_MAX);
    expect(a.text.endsWith(CUT_NOTE)).toBe(true);
    // What the turn keeps (for a later attempt and the thread's history) is what the user got, never the model's
    // whole output: a model could make that larger than a D1 row.
    expect((await turnOf(streamed.ts))?.answer).toBe(fitted(huge));
    slack.current.nth("chat.appendStream", slack.current.callsTo("chat.appendStream").length + 2, reply.lost());
    const repaired = await ask("Everything, repaired?");
    await deliver([repaired.rowId]);
    expectOneCompleteAnswer(world.streams, where(repaired.ts), fitted(huge));
  });

  it("a message made whole by chat.update clears the status it set (no reply of its own cleared it)", async () => {
    setUp().model.always(modelTurn.answer(LONG));
    const q = await killedAt("streaming", { partial: "Partial" });
    await deliver([q.rowId]);
    expectOneCompleteAnswer(world.streams, where(q.ts), LONG);
    expect(world.streams.thread(DM, world.threadTs).statusLog.at(-1)).toMatchObject({ cause: "setStatus", status: "" });
  });

  it(`spends at most ${ANSWER_WORST_QUERIES} D1 statements in an attempt as long as it may be`, async () => {
    setUp().model.always(modelTurn.answer(LONG, { chunks: 40, betweenChunksMs: 17_000 })); // about 11 minutes
    const q = await ask("Very long?");
    const counted = countingDb(env.DB, Number.POSITIVE_INFINITY);
    await deliver([q.rowId], { db: counted.db });
    expectOneCompleteAnswer(world.streams, where(q.ts), LONG);
    // The claim and the finish are the row's own (query-budget.ts counts them per row); the rest is the answer's.
    expect(counted.budget.used() - 2).toBeLessThanOrEqual(ANSWER_WORST_QUERIES);
  });
});

describe("a start whose answer was lost, found again in the thread", () => {
  it("is the message holding the text it sent, not the handler's own thread.say() posted after the question", async () => {
    setUp().model.always(modelTurn.answer(LONG));
    const q = await ask("Lost start after a say?");
    // What a userMessage handler returning [thread.say("Looking that up…"), thread.answer()] leaves: the say performed at the ack.
    world.streams.answer("chat.postMessage", { channel: DM, thread_ts: world.threadTs, markdown_text: "Looking that up…" });
    await world.time.advanceTo(NOW + 10);
    slack.current.script("chat.startStream", reply.lost());
    await deliver([q.rowId]);
    const texts = world.streams
      .thread(DM, world.threadTs)
      .messages.filter((m) => m.from === "app" && m.subtype === undefined)
      .map((m) => m.text);
    expect(texts).toEqual(["Looking that up…", LONG]);
  });
});
