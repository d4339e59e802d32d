/**
 * An assistant at the ack (app.assistant, shared/app/assistant.ts): what each assistant input records in the ack's
 * one batch — a thread's context, a question's turn beside its answer row, the user's stop — and what it refuses.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { createApp } from "../../shared/app/app.ts";
import { handleSlackRequest } from "../../workers/ingress/ack.ts";
import { ingressDeps } from "../support/ingress.ts";
import { allRows, resetTables } from "../support/rows.ts";
import { eventRequest, NOW, uniqueId, uniqueTs } from "../support/slack-requests.ts";

const DM = "D0ASSIST";
const PROMPTS = [{ title: "Hi", message: "Say hi" }];

/** Answers every question but "ignore me"; a question "twice" asks for two answers, "in started" is fine. */
function assistantApp() {
  return createApp().assistant({
    suggestedPrompts: PROMPTS,
    userMessage: ({ payload }, { thread }) => {
      if (payload.text === "ignore me") return undefined;
      if (payload.text === "twice") return [thread.answer(), { ...thread.answer(), key: "again" }];
      return [thread.answer({ instructions: "Be brief." })];
    },
  });
}

async function send(event: Record<string, unknown>, options: { eventId?: string; app?: ReturnType<typeof createApp> } = {}) {
  const { deps, log } = ingressDeps({ app: options.app ?? assistantApp() });
  const response = await handleSlackRequest(await eventRequest(event, { eventId: options.eventId ?? uniqueId("Ev") }), deps, NOW);
  return { response, log };
}

const started = (
  threadTs: string,
  context: Record<string, unknown> = { channel_id: "C0LOOK", team_id: "T0TEAM" },
  eventTs = "1764504000.000100",
) => ({
  type: "assistant_thread_started",
  assistant_thread: { user_id: "U0HUMAN", context, channel_id: DM, thread_ts: threadTs },
  event_ts: eventTs,
});

const question = (threadTs: string, text = "What is ackbox?", over: Record<string, unknown> = {}) => ({
  type: "message",
  user: "U0HUMAN",
  text,
  ts: uniqueTs(),
  thread_ts: threadTs,
  parent_user_id: "U0HUMAN",
  channel: DM,
  channel_type: "im",
  ...over,
});

const turns = () =>
  env.DB.prepare("SELECT * FROM assistant_turns ORDER BY message_ts")
    .all<Record<string, unknown>>()
    .then((r) => r.results);
const threads = () =>
  env.DB.prepare("SELECT * FROM assistant_threads")
    .all<Record<string, unknown>>()
    .then((r) => r.results);

beforeEach(async () => {
  await resetTables(env.DB);
  await env.DB.batch([env.DB.prepare("DELETE FROM assistant_turns"), env.DB.prepare("DELETE FROM assistant_threads")]);
});

describe("a question in an assistant thread", () => {
  it("records its turn beside its answer row, in the ack's batch", async () => {
    const threadTs = uniqueTs();
    const asked = question(threadTs);
    const { response } = await send(asked);
    expect(response.status).toBe(200);
    const [row, ...more] = await allRows(env.DB);
    expect(more).toEqual([]);
    expect(row?.effect).toBe("assistant_answer");
    expect(JSON.parse(row?.payload ?? "{}")).toEqual({
      team: "T0TEAM",
      channel: DM,
      thread_ts: threadTs,
      message_ts: asked.ts,
      user: "U0HUMAN",
      instructions: "Be brief.",
      status: null,
      loading_messages: null,
    });
    expect(await turns()).toEqual([
      expect.objectContaining({
        team_id: "T0TEAM",
        channel_id: DM,
        thread_ts: threadTs,
        message_ts: asked.ts,
        user_id: "U0HUMAN",
        question: "What is ackbox?",
        outbox_id: row?.id,
        state: "asked",
        answer: null,
        model_calls: 0,
      }),
    ]);
    // The thread exists even though Slack never said it started.
    expect(await threads()).toEqual([expect.objectContaining({ channel_id: DM, thread_ts: threadTs, context: null })]);
  });

  it("is one turn and one row whatever copies Slack sends: a retry, and the same message under another event_id", async () => {
    const threadTs = uniqueTs();
    const asked = question(threadTs);
    const eventId = uniqueId("Ev");
    expect((await send(asked, { eventId })).response.status).toBe(200);
    expect((await send(asked, { eventId })).response.status).toBe(200);
    expect((await send(asked)).response.status).toBe(200);
    expect(await allRows(env.DB)).toHaveLength(1);
    expect(await turns()).toHaveLength(1);
  });

  it("is not a user's top-level DM, a bot's message in the thread, or an edit: those are not questions", async () => {
    const threadTs = uniqueTs();
    for (const event of [
      question(threadTs, "top level", { thread_ts: undefined }),
      question(threadTs, "from a bot", { bot_id: "B0OTHER" }),
      question(threadTs, "edited", { subtype: "message_changed" }),
      question(threadTs, "elsewhere", { channel_type: "channel", channel: "C0WATCHED" }),
    ]) {
      const { response, log } = await send(event);
      expect(response.status).toBe(200);
      expect(log.records.find((r) => r.msg === "slack request")?.fields.verdict).toBe("ignored");
    }
    expect(await allRows(env.DB)).toEqual([]);
    expect(await turns()).toEqual([]);
  });

  it("a handler that answers nothing leaves the question ignored: nothing written", async () => {
    const { response, log } = await send(question(uniqueTs(), "ignore me"));
    expect(response.status).toBe(200);
    expect(log.records.find((r) => r.msg === "slack request")?.fields.verdict).toBe("ignored");
    expect(await allRows(env.DB)).toEqual([]);
    expect(await turns()).toEqual([]);
  });

  it("two answers for one question are refused with the reason, nothing written", async () => {
    const { response, log } = await send(question(uniqueTs(), "twice"));
    expect(response.status).toBe(500);
    expect(String(log.records.find((r) => r.msg === "slack request")?.fields.reason)).toMatch(/answered once/);
    expect(await allRows(env.DB)).toEqual([]);
    expect(await turns()).toEqual([]);
  });

  it("thread.answer() from a thread's start is refused (there is no question): nothing written", async () => {
    const app = createApp().assistant({
      threadStarted: (_, { thread }) => [thread.answer()],
      userMessage: () => undefined,
    });
    const { response, log } = await send(started(uniqueTs()), { app });
    expect(response.status).toBe(500);
    expect(String(log.records.find((r) => r.msg === "slack request")?.fields.reason)).toMatch(/userMessage/);
    expect(await allRows(env.DB)).toEqual([]);
    expect(await threads()).toEqual([]);
  });
});

describe("a thread's context", () => {
  it("is recorded when the thread starts, with the suggested prompts' row", async () => {
    const threadTs = uniqueTs();
    expect((await send(started(threadTs))).response.status).toBe(200);
    const rows = await allRows(env.DB);
    expect(rows.map((r) => r.effect)).toEqual(["assistant.threads.setSuggestedPrompts"]);
    expect(JSON.parse(rows[0]?.payload ?? "{}")).toEqual({ channel_id: DM, thread_ts: threadTs, prompts: PROMPTS });
    expect(await threads()).toEqual([
      expect.objectContaining({
        channel_id: DM,
        thread_ts: threadTs,
        user_id: "U0HUMAN",
        context: JSON.stringify({ channel_id: "C0LOOK", team_id: "T0TEAM" }),
      }),
    ]);
  });

  it("follows the user to another channel, and a late copy of an older event never replaces a newer context", async () => {
    const threadTs = uniqueTs();
    await send(started(threadTs, { channel_id: "C0FIRST" }, "1764504000.000100"));
    const changed = (channel: string, eventTs: string) => ({
      ...started(threadTs, { channel_id: channel }, eventTs),
      type: "assistant_thread_context_changed",
    });
    await send(changed("C0THIRD", "1764504000.000300"));
    await send(changed("C0SECOND", "1764504000.000200")); // delivered late (a retry of an earlier change)
    expect((await threads())[0]?.context).toBe(JSON.stringify({ channel_id: "C0THIRD" }));
  });

  it("an app whose handler ignores the thread writes nothing for it", async () => {
    const app = createApp().assistant({ threadStarted: () => undefined, userMessage: () => undefined });
    const { response } = await send(started(uniqueTs()), { app });
    expect(response.status).toBe(200);
    expect(await allRows(env.DB)).toEqual([]);
    expect(await threads()).toEqual([]);
  });
});

describe("the user's stop (agent_session_stopped)", () => {
  const stopAt = (threadTs: string, eventTs: string) => ({
    type: "agent_session_stopped",
    channel: DM,
    thread_ts: threadTs,
    user: "U0HUMAN",
    streaming_message_ts: ["1764504999.000001"],
    event_ts: eventTs,
  });
  const setState = (ts: string, state: string) =>
    env.DB.prepare("UPDATE assistant_turns SET state = ?2 WHERE message_ts = ?1").bind(ts, state).run();

  it("marks the answers at work of questions asked before it; not the finished, the waiting, another thread's", async () => {
    const threadTs = uniqueTs();
    const finished = question(threadTs, "finished");
    const working = question(threadTs, "working");
    const waiting = question(threadTs, "waiting its turn");
    for (const q of [finished, working, waiting]) await send(q);
    await setState(finished.ts, "delivered");
    await setState(working.ts, "streaming");
    const other = question(uniqueTs(), "another thread");
    await send(other);
    await setState(other.ts, "streaming");
    const { response } = await send(stopAt(threadTs, "1764504999.000002"));
    expect(response.status).toBe(200);
    const byTs = Object.fromEntries((await turns()).map((t) => [t.message_ts, t.stop_requested_at]));
    expect(byTs[working.ts]).toBe(NOW);
    expect(byTs[finished.ts]).toBeNull();
    expect(byTs[waiting.ts]).toBeNull();
    expect(byTs[other.ts]).toBeNull();
  });

  it("a late copy of a stop (Slack's retry, or out of order) leaves a question asked after it alone", async () => {
    const threadTs = uniqueTs();
    const eventId = uniqueId("Ev");
    const first = question(threadTs, "first", { ts: "1764504000.100000" });
    await send(first);
    await setState(first.ts, "streaming");
    await send(stopAt(threadTs, "1764504000.200000"), { eventId });
    await setState(first.ts, "stopped");
    const later = question(threadTs, "asked after the stop", { ts: "1764504000.300000" });
    await send(later);
    await setState(later.ts, "streaming");
    await send(stopAt(threadTs, "1764504000.200000"), { eventId }); // Slack's retry of the stop
    const byTs = Object.fromEntries((await turns()).map((t) => [t.message_ts, t.stop_requested_at]));
    expect(byTs[first.ts]).toBe(NOW);
    expect(byTs[later.ts]).toBeNull();
  });
});
