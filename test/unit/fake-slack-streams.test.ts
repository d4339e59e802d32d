/**
 * The model of Slack's assistant threads and message streams (shared/app/fake-slack-streams.ts) behaves as
 * Slack documents and as the SDKs' users found it behaves: each case is one of those behaviours, on a clock the
 * test moves.
 */
import { describe, expect, it } from "vitest";
import { type FakeSlackStreams, fakeSlackStreams, STATUS_TIMEOUT_MS, STREAM_LIFETIME_MS } from "../../shared/app/fake-slack-streams.ts";

const DM = "D0ASSIST";
const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);

function setup(options: { streamLifetimeMs?: number; knownThreadsOnly?: boolean } = {}) {
  const clock = { now: T0 };
  const slack = fakeSlackStreams({ now: () => clock.now, ...options });
  const { thread_ts } = slack.assistantThread({ channel: DM, user: "U0ASKER" });
  const question = slack.userMessage({ channel: DM, user: "U0ASKER", text: "What is ackbox?", thread_ts });
  return { clock, slack, thread_ts, question };
}

const start = (slack: FakeSlackStreams, thread_ts: string, markdown_text?: string) => {
  const answer = slack.answer("chat.startStream", { channel: DM, thread_ts, ...(markdown_text ? { markdown_text } : {}) });
  expect(answer.ok, JSON.stringify(answer)).toBe(true);
  return String(answer.ts);
};

describe("chat.startStream", () => {
  it("answers {ok, channel, ts} and leaves a new message from the bot in the thread, streaming", () => {
    const { slack, thread_ts } = setup();
    const answer = slack.answer("chat.startStream", { channel: DM, thread_ts, markdown_text: "Hello" });
    expect(answer).toEqual({ ok: true, channel: DM, ts: expect.stringMatching(/^\d+\.\d{6}$/) });
    const message = slack.message(DM, String(answer.ts));
    expect(message).toMatchObject({
      thread_ts,
      from: "app",
      user: slack.bot.user,
      bot_id: slack.bot.bot_id,
      text: "Hello",
      streaming: true,
    });
    expect(message?.counts).toEqual({ started: 1, appended: 0, stopped: 0, updated: 0, lostAnswers: 0 });
    expect(slack.thread(DM, thread_ts).messages.map((m) => m.from)).toEqual(["app", "user", "app"]); // root, question, answer
  });

  it("outside a DM needs recipient_user_id, then recipient_team_id", () => {
    const { slack } = setup();
    const thread = slack.userMessage({ channel: "C0GENERAL", user: "U0ASKER", text: "@ackbox hi" });
    const base = { channel: "C0GENERAL", thread_ts: thread.ts, markdown_text: "Hi" };
    expect(slack.answer("chat.startStream", base)).toEqual({ ok: false, error: "missing_recipient_user_id" });
    expect(slack.answer("chat.startStream", { ...base, recipient_user_id: "U0ASKER" })).toEqual({
      ok: false,
      error: "missing_recipient_team_id",
    });
    expect(slack.answer("chat.startStream", { ...base, recipient_user_id: "U0ASKER", recipient_team_id: "T0LOCAL" }).ok).toBe(true);
  });

  it("refuses markdown_text over 12 000 characters (and takes 12 000) and a missing thread_ts as invalid_arguments, a malformed one as invalid_thread_ts", () => {
    const { slack, thread_ts } = setup();
    expect(slack.answer("chat.startStream", { channel: DM, thread_ts, markdown_text: "x".repeat(12_001) })).toMatchObject({
      ok: false,
      error: "invalid_arguments",
      response_metadata: { messages: [expect.stringContaining("markdown_text")] },
    });
    expect(slack.answer("chat.startStream", { channel: DM, thread_ts, markdown_text: "x".repeat(12_000) }).ok).toBe(true);
    expect(slack.answer("chat.startStream", { channel: DM, markdown_text: "x" })).toMatchObject({ ok: false, error: "invalid_arguments" });
    expect(slack.answer("chat.startStream", { channel: DM, thread_ts: "yesterday" })).toEqual({ ok: false, error: "invalid_thread_ts" });
    expect(slack.answer("chat.postMessage", { channel: DM, thread_ts: "yesterday", text: "x" })).toEqual({
      ok: false,
      error: "invalid_thread_ts",
    });
  });

  it("takes chunks as slack-web-api-client sends them (JSON in a form field): markdown_text chunks join the text, others are kept", () => {
    const { slack, thread_ts } = setup();
    const chunks = JSON.stringify([
      { type: "markdown_text", text: "Looking" },
      { type: "task_update", id: "t1", title: "Search", status: "in_progress" },
    ]);
    const ts = String(slack.answer("chat.startStream", { channel: DM, thread_ts, chunks }).ts);
    expect(slack.message(DM, ts)).toMatchObject({ text: "Looking", chunks: [{ type: "task_update", id: "t1" }] });
    expect(slack.answer("chat.appendStream", { channel: DM, ts, chunks: "not json" })).toMatchObject({ error: "invalid_arguments" });
  });
});

describe("chat.appendStream", () => {
  it("appends in order to the message", () => {
    const { slack, thread_ts } = setup();
    const ts = start(slack, thread_ts, "One");
    expect(slack.answer("chat.appendStream", { channel: DM, ts, markdown_text: ", two" })).toEqual({ ok: true, channel: DM, ts });
    slack.answer("chat.appendStream", { channel: DM, ts, markdown_text: ", three" });
    expect(slack.message(DM, ts)).toMatchObject({ text: "One, two, three", streaming: true, counts: { appended: 2 } });
  });

  it("answers no_text for empty text, message_not_found for an unknown ts, and message_not_owned_by_app for a user's message", () => {
    const { slack, thread_ts, question } = setup();
    const ts = start(slack, thread_ts);
    expect(slack.answer("chat.appendStream", { channel: DM, ts, markdown_text: "" })).toEqual({ ok: false, error: "no_text" });
    expect(slack.answer("chat.appendStream", { channel: DM, ts })).toEqual({ ok: false, error: "no_text" });
    expect(slack.answer("chat.appendStream", { channel: DM, ts: "1700000000.000001", markdown_text: "x" })).toEqual({
      ok: false,
      error: "message_not_found",
    });
    expect(slack.answer("chat.appendStream", { channel: DM, ts: question.ts, markdown_text: "x" })).toEqual({
      ok: false,
      error: "message_not_owned_by_app",
    });
    expect(slack.message(DM, ts)?.counts.appended).toBe(0);
  });

  it("answers message_not_in_streaming_state for a posted message", () => {
    const { slack, thread_ts } = setup();
    const posted = slack.answer("chat.postMessage", { channel: DM, thread_ts, text: "plain" });
    expect(slack.answer("chat.appendStream", { channel: DM, ts: posted.ts, markdown_text: "x" })).toEqual({
      ok: false,
      error: "message_not_in_streaming_state",
    });
  });
});

describe("chat.stopStream", () => {
  it("appends the final text, ends the stream, and answers with the message; a second stop and a later append are refused", () => {
    const { slack, thread_ts } = setup();
    const ts = start(slack, thread_ts, "Most of it");
    const blocks = JSON.stringify([{ type: "context", elements: [{ type: "mrkdwn", text: "AI answer" }] }]);
    const metadata = JSON.stringify({ event_type: "answer", event_payload: { turn: 1 } });
    expect(slack.answer("chat.stopStream", { channel: DM, ts, markdown_text: ", the end.", blocks, metadata })).toEqual({
      ok: true,
      channel: DM,
      ts,
      message: {
        type: "message",
        subtype: "bot_message",
        text: "Most of it, the end.",
        user: slack.bot.user,
        bot_id: slack.bot.bot_id,
        ts,
        thread_ts,
        blocks: JSON.parse(blocks),
      },
    });
    expect(slack.message(DM, ts)).toMatchObject({
      streaming: false,
      ended: "stopStream",
      leftStreaming: false,
      metadata: { event_type: "answer" },
      counts: { started: 1, stopped: 1 },
    });
    expect(slack.answer("chat.stopStream", { channel: DM, ts })).toEqual({ ok: false, error: "message_not_in_streaming_state" });
    expect(slack.answer("chat.appendStream", { channel: DM, ts, markdown_text: "more" })).toEqual({
      ok: false,
      error: "message_not_in_streaming_state",
    });
    expect(slack.message(DM, ts)?.text).toBe("Most of it, the end.");
  });

  it("answers message_not_found for an unknown ts and invalid_metadata_format for metadata without event_type", () => {
    const { slack, thread_ts } = setup();
    const ts = start(slack, thread_ts);
    expect(slack.answer("chat.stopStream", { channel: DM, ts: "1700000000.000001" })).toEqual({ ok: false, error: "message_not_found" });
    expect(slack.answer("chat.stopStream", { channel: DM, ts, metadata: "{}" })).toEqual({ ok: false, error: "invalid_metadata_format" });
    expect(slack.message(DM, ts)?.streaming).toBe(true);
  });
});

describe("a stream's lifetime", () => {
  it("ends five minutes after startStream however busy the stream was: appends and the stop are refused, the message left a broken pill", () => {
    const { clock, slack, thread_ts } = setup();
    const ts = start(slack, thread_ts, "a");
    for (let minute = 1; minute <= 4; minute += 1) {
      clock.now = T0 + minute * 60_000;
      expect(slack.answer("chat.appendStream", { channel: DM, ts, markdown_text: "b" }).ok).toBe(true);
    }
    clock.now = T0 + STREAM_LIFETIME_MS - 1;
    expect(slack.answer("chat.appendStream", { channel: DM, ts, markdown_text: "c" }).ok).toBe(true);
    clock.now = T0 + STREAM_LIFETIME_MS;
    expect(slack.answer("chat.appendStream", { channel: DM, ts, markdown_text: "d" })).toEqual({
      ok: false,
      error: "message_not_in_streaming_state",
    });
    expect(slack.answer("chat.stopStream", { channel: DM, ts, markdown_text: "d" })).toEqual({
      ok: false,
      error: "message_not_in_streaming_state",
    });
    expect(slack.message(DM, ts)).toMatchObject({ text: "abbbbc", streaming: false, ended: "expired", leftStreaming: true });
    expect(slack.leftStreaming().map((m) => m.ts)).toEqual([ts]);
  });

  it("is repaired by chat.update of the same message with the whole text (the SDKs' recovery)", () => {
    const { clock, slack, thread_ts } = setup();
    const ts = start(slack, thread_ts, "partial");
    clock.now = T0 + STREAM_LIFETIME_MS + 1;
    expect(slack.answer("chat.update", { channel: DM, ts, markdown_text: "the whole answer" })).toMatchObject({
      ok: true,
      channel: DM,
      ts,
    });
    expect(slack.message(DM, ts)).toMatchObject({ text: "the whole answer", ended: "expired", repaired: true, leftStreaming: false });
    expect(slack.leftStreaming()).toEqual([]);
  });

  it("is configurable", () => {
    const { clock, slack, thread_ts } = setup({ streamLifetimeMs: 1000 });
    const ts = start(slack, thread_ts);
    clock.now = T0 + 1000;
    expect(slack.answer("chat.appendStream", { channel: DM, ts, markdown_text: "late" })).toMatchObject({
      error: "message_not_in_streaming_state",
    });
  });
});

describe("chat.update", () => {
  it("answers streaming_state_conflict while the message streams, and replaces the text once it stopped", () => {
    const { slack, thread_ts } = setup();
    const ts = start(slack, thread_ts, "draft");
    expect(slack.answer("chat.update", { channel: DM, ts, markdown_text: "final" })).toEqual({
      ok: false,
      error: "streaming_state_conflict",
    });
    slack.answer("chat.stopStream", { channel: DM, ts });
    const answer = slack.answer("chat.update", { channel: DM, ts, markdown_text: "final" });
    expect(answer).toMatchObject({ ok: true, channel: DM, ts, text: "final", message: { text: "final", user: slack.bot.user } });
    expect(slack.message(DM, ts)).toMatchObject({ text: "final", counts: { updated: 1 }, repaired: false });
  });

  it("answers markdown_text_conflict, no_text, message_not_found, msg_too_long (text over 4 000) and cant_update_message", () => {
    const { slack, thread_ts, question } = setup();
    const posted = String(slack.answer("chat.postMessage", { channel: DM, thread_ts, text: "x" }).ts);
    const update = (p: Record<string, unknown>) => slack.answer("chat.update", { channel: DM, ts: posted, ...p }).error;
    expect(update({ markdown_text: "a", text: "b" })).toBe("markdown_text_conflict");
    expect(update({ markdown_text: "a", blocks: "[]" })).toBe("markdown_text_conflict");
    expect(update({})).toBe("no_text");
    expect(update({ ts: "1700000000.000001", text: "a" })).toBe("message_not_found");
    expect(update({ text: "x".repeat(4001) })).toBe("msg_too_long");
    expect(update({ markdown_text: "x".repeat(4001) })).toBeUndefined(); // markdown_text takes 12 000
    expect(update({ ts: question.ts, text: "edited" })).toBe("cant_update_message");
  });
});

describe("chat.postMessage", () => {
  it("posts into the thread, with markdown_text too, in the answer's shape", () => {
    const { slack, thread_ts } = setup();
    const answer = slack.answer("chat.postMessage", { channel: DM, thread_ts, markdown_text: "**hi**" });
    expect(answer).toMatchObject({
      ok: true,
      channel: DM,
      ts: expect.any(String),
      message: { type: "message", text: "**hi**", user: slack.bot.user, bot_id: slack.bot.bot_id, thread_ts },
    });
    expect(slack.answer("chat.postMessage", { channel: DM, thread_ts })).toEqual({ ok: false, error: "no_text" });
    expect(slack.answer("chat.postMessage", { channel: DM, markdown_text: "a", text: "b" }).error).toBe("markdown_text_conflict");
  });
});

describe("assistant.threads.setStatus", () => {
  const status = (slack: FakeSlackStreams, thread_ts: string, value: string, more: Record<string, unknown> = {}) =>
    slack.answer("assistant.threads.setStatus", { channel_id: DM, thread_ts, status: value, ...more });

  it("shows the status until cleared with an empty string", () => {
    const { slack, thread_ts } = setup();
    expect(status(slack, thread_ts, "is thinking…", { loading_messages: JSON.stringify(["Reading", "Writing"]) })).toEqual({ ok: true });
    expect(slack.thread(DM, thread_ts).status).toEqual({ status: "is thinking…", loading_messages: ["Reading", "Writing"], setAt: T0 });
    status(slack, thread_ts, "");
    expect(slack.thread(DM, thread_ts).status).toBeUndefined();
    expect(slack.thread(DM, thread_ts).statusLog.map((c) => [c.status, c.cause])).toEqual([
      ["is thinking…", "setStatus"],
      ["", "setStatus"],
    ]);
  });

  it("is cleared when the app starts a stream or posts in the thread", () => {
    const { slack, thread_ts } = setup();
    status(slack, thread_ts, "is thinking…");
    start(slack, thread_ts);
    expect(slack.thread(DM, thread_ts).status).toBeUndefined();
    status(slack, thread_ts, "is still thinking…");
    slack.answer("chat.postMessage", { channel: DM, thread_ts, text: "done" });
    expect(slack.thread(DM, thread_ts).statusLog.map((c) => c.cause)).toEqual(["setStatus", "reply", "setStatus", "reply"]);
  });

  it("is cleared two minutes after it was set without a message, and a refresh starts the two minutes again", () => {
    const { clock, slack, thread_ts } = setup();
    status(slack, thread_ts, "is thinking…");
    clock.now = T0 + STATUS_TIMEOUT_MS - 1;
    expect(slack.thread(DM, thread_ts).status?.status).toBe("is thinking…");
    status(slack, thread_ts, "is still thinking…"); // the refresh
    clock.now = T0 + STATUS_TIMEOUT_MS + 1000;
    expect(slack.thread(DM, thread_ts).status?.status).toBe("is still thinking…");
    clock.now = T0 + 2 * STATUS_TIMEOUT_MS - 1;
    expect(slack.thread(DM, thread_ts).status).toBeUndefined();
    expect(slack.thread(DM, thread_ts).statusLog.at(-1)).toEqual({ at: T0 + 2 * STATUS_TIMEOUT_MS - 1, status: "", cause: "timeout" });
  });

  it("takes 1 to 10 loading_messages of at most 50 characters (JSON, or comma-joined as slack-web-api-client sends them)", () => {
    const { slack, thread_ts } = setup();
    expect(status(slack, thread_ts, "s", { loading_messages: "Reading,Writing" })).toEqual({ ok: true });
    expect(slack.thread(DM, thread_ts).status?.loading_messages).toEqual(["Reading", "Writing"]);
    const refused = (loading_messages: unknown) => status(slack, thread_ts, "s", { loading_messages }).error;
    expect(refused([])).toBe("invalid_arguments");
    expect(refused(Array.from({ length: 11 }, (_, i) => `m${i}`))).toBe("invalid_arguments");
    expect(refused(["x".repeat(51)])).toBe("invalid_arguments");
    expect(refused(Array.from({ length: 10 }, () => "x".repeat(50)))).toBeUndefined();
  });
});

describe("assistant.threads.setSuggestedPrompts and setTitle", () => {
  it("keeps up to four prompts with their title, and refuses five", () => {
    const { slack, thread_ts } = setup();
    const prompts = (n: number) => JSON.stringify(Array.from({ length: n }, (_, i) => ({ title: `P${i}`, message: `Ask ${i}` })));
    expect(slack.answer("assistant.threads.setSuggestedPrompts", { channel_id: DM, thread_ts, title: "Try", prompts: prompts(4) })).toEqual(
      {
        ok: true,
      },
    );
    expect(slack.thread(DM, thread_ts).suggestedPrompts).toEqual({ title: "Try", prompts: JSON.parse(prompts(4)) });
    expect(slack.answer("assistant.threads.setSuggestedPrompts", { channel_id: DM, thread_ts, prompts: prompts(5) }).error).toBe(
      "invalid_arguments",
    );
    expect(slack.answer("assistant.threads.setTitle", { channel_id: DM, thread_ts, title: "About ackbox" })).toEqual({ ok: true });
    expect(slack.thread(DM, thread_ts).title).toBe("About ackbox");
  });

  it("answers invalid_thread_ts and channel_not_found for a thread or channel Slack does not know (knownThreadsOnly)", () => {
    const { slack, thread_ts } = setup({ knownThreadsOnly: true });
    const title = (channel_id: string, ts: string) => slack.answer("assistant.threads.setTitle", { channel_id, thread_ts: ts, title: "t" });
    expect(title(DM, thread_ts)).toEqual({ ok: true });
    expect(title(DM, "1700000000.000001")).toEqual({ ok: false, error: "invalid_thread_ts" });
    expect(title(DM, "not-a-ts")).toEqual({ ok: false, error: "invalid_thread_ts" });
    expect(title("D0NOWHERE", "1700000000.000001")).toEqual({ ok: false, error: "channel_not_found" });
    expect(slack.answer("assistant.threads.setStatus", { thread_ts, status: "x" })).toEqual({ ok: false, error: "channel_not_found" });
  });
});

describe("conversations.replies", () => {
  it("answers the thread oldest first: the root, the user's messages and the app's own (user = the bot, bot_id)", () => {
    const { clock, slack, thread_ts, question } = setup();
    clock.now += 1000;
    const answer = start(slack, thread_ts, "An engine.");
    slack.answer("chat.stopStream", { channel: DM, ts: answer });
    const replies = slack.answer("conversations.replies", { channel: DM, ts: thread_ts });
    expect(replies).toMatchObject({ ok: true, has_more: false, response_metadata: { next_cursor: "" } });
    const messages = replies.messages as Record<string, unknown>[];
    expect(messages.map((m) => m.ts)).toEqual([thread_ts, question.ts, answer]);
    expect(messages[0]).toMatchObject({ subtype: "assistant_app_thread", user: slack.bot.user, reply_count: 2, latest_reply: answer });
    expect(messages[1]).toEqual({
      type: "message",
      user: "U0ASKER",
      team: slack.bot.team,
      text: "What is ackbox?",
      ts: question.ts,
      thread_ts,
      parent_user_id: slack.bot.user,
    });
    expect(messages[2]).toMatchObject({ user: slack.bot.user, bot_id: slack.bot.bot_id, text: "An engine.", thread_ts });
    expect(messages[2]).not.toHaveProperty("subtype");
  });

  it("finds the app's message after a question (oldest = the question's ts), pages by limit and cursor, and names the thread from any of its ts", () => {
    const { slack, thread_ts, question } = setup();
    const answers = [start(slack, thread_ts, "a"), start(slack, thread_ts, "b"), start(slack, thread_ts, "c")];
    const after = slack.answer("conversations.replies", { channel: DM, ts: thread_ts, oldest: question.ts });
    expect((after.messages as { ts: string }[]).map((m) => m.ts)).toEqual(answers);
    const inclusive = slack.answer("conversations.replies", { channel: DM, ts: thread_ts, oldest: question.ts, inclusive: "true" });
    expect((inclusive.messages as { ts: string }[])[0]?.ts).toBe(question.ts);
    const first = slack.answer("conversations.replies", { channel: DM, ts: answers[1], limit: "2" });
    expect((first.messages as { ts: string }[]).map((m) => m.ts)).toEqual([thread_ts, question.ts]);
    expect(first.has_more).toBe(true);
    const cursor = (first.response_metadata as { next_cursor: string }).next_cursor;
    const second = slack.answer("conversations.replies", { channel: DM, ts: thread_ts, limit: "2", cursor });
    expect((second.messages as { ts: string }[]).map((m) => m.ts)).toEqual(answers.slice(0, 2));
  });

  it("answers thread_not_found, invalid_ts_oldest and invalid_cursor", () => {
    const { slack, thread_ts } = setup();
    expect(slack.answer("conversations.replies", { channel: DM, ts: "1700000000.000001" }).error).toBe("thread_not_found");
    expect(slack.answer("conversations.replies", { channel: DM, ts: thread_ts, oldest: "yesterday" }).error).toBe("invalid_ts_oldest");
    expect(slack.answer("conversations.replies", { channel: DM, ts: thread_ts, cursor: "bm9wZQ==" }).error).toBe("invalid_cursor");
  });
});

describe("the user's stop button", () => {
  it("stops the thread's stream and returns agent_session_stopped's fields; later appends and stops are refused", () => {
    const { clock, slack, thread_ts } = setup();
    const ts = start(slack, thread_ts, "Half an ans");
    clock.now += 2000;
    const event = slack.stopByUser(DM, ts);
    expect(event).toEqual({
      type: "agent_session_stopped",
      channel: DM,
      thread_ts,
      user: "U0ASKER",
      event_ts: expect.stringMatching(/^\d+\.\d{6}$/),
      streaming_message_ts: [ts],
    });
    expect(slack.answer("chat.appendStream", { channel: DM, ts, markdown_text: "wer" })).toEqual({
      ok: false,
      error: "message_not_in_streaming_state",
    });
    expect(slack.answer("chat.stopStream", { channel: DM, ts })).toEqual({ ok: false, error: "message_not_in_streaming_state" });
    expect(slack.message(DM, ts)).toMatchObject({ text: "Half an ans", ended: "stopped_by_user", leftStreaming: false });
  });

  it("lists no stream when none was streaming", () => {
    const { slack, thread_ts } = setup();
    const ts = start(slack, thread_ts);
    slack.answer("chat.stopStream", { channel: DM, ts });
    expect(slack.stopByUser(DM, thread_ts).streaming_message_ts).toEqual([]);
  });
});

describe("the overlap check: one call at a time per stream", () => {
  it("records an append that begins while another append to the same stream is in flight", () => {
    const { slack, thread_ts } = setup();
    const ts = start(slack, thread_ts);
    const first = slack.begin("chat.appendStream", { channel: DM, ts, markdown_text: "a" });
    const second = slack.begin("chat.appendStream", { channel: DM, ts, markdown_text: "b" });
    first.apply();
    second.apply();
    first.deliver();
    second.deliver();
    expect(slack.overlaps()).toEqual([{ key: `${DM} ${ts}`, first: "chat.appendStream", second: "chat.appendStream", at: T0 }]);
  });

  it("records nothing for calls one after another, or at once on different streams", () => {
    const { slack, thread_ts } = setup();
    const a = start(slack, thread_ts);
    const b = start(slack, thread_ts);
    for (let i = 0; i < 3; i += 1) {
      const flight = slack.begin("chat.appendStream", { channel: DM, ts: a, markdown_text: "x" });
      flight.apply();
      flight.deliver();
    }
    const onA = slack.begin("chat.appendStream", { channel: DM, ts: a, markdown_text: "x" });
    const onB = slack.begin("chat.stopStream", { channel: DM, ts: b });
    onA.deliver(); // refused before applying (a 429): still one call at a time
    onB.deliver();
    expect(slack.overlaps()).toEqual([]);
  });

  it("counts a stop or an update racing an append, and two starts at once in one thread", () => {
    const { slack, thread_ts } = setup();
    const ts = start(slack, thread_ts);
    const append = slack.begin("chat.appendStream", { channel: DM, ts, markdown_text: "x" });
    slack.begin("chat.stopStream", { channel: DM, ts }).deliver();
    append.deliver();
    slack.begin("chat.startStream", { channel: DM, thread_ts });
    slack.begin("chat.startStream", { channel: DM, thread_ts });
    expect(slack.overlaps().map((o) => [o.first, o.second])).toEqual([
      ["chat.appendStream", "chat.stopStream"],
      ["chat.startStream", "chat.startStream"],
    ]);
  });
});

describe("a lost answer: applied by Slack, never delivered", () => {
  it("a lost startStream leaves the message in the thread, found again after the question; re-sending it would post a second", () => {
    const { slack, thread_ts, question } = setup();
    const flight = slack.begin("chat.startStream", { channel: DM, thread_ts, markdown_text: "Hel" });
    const answer = flight.apply();
    flight.drop();
    const ts = String(answer.ts);
    expect(slack.message(DM, ts)).toMatchObject({ text: "Hel", streaming: true, counts: { started: 1, lostAnswers: 1 } });
    expect(slack.flights().at(-1)).toMatchObject({ method: "chat.startStream", applied: true, lost: true, answer });
    // What a caller reconciling it reads: the app's own message after the question.
    const after = slack.answer("conversations.replies", { channel: DM, ts: thread_ts, oldest: question.ts });
    expect((after.messages as { ts: string; user: string }[]).filter((m) => m.user === slack.bot.user).map((m) => m.ts)).toEqual([ts]);
    start(slack, thread_ts, "Hel");
    expect(slack.thread(DM, thread_ts).messages.filter((m) => m.from === "app" && m.subtype === undefined)).toHaveLength(2);
  });

  it("a lost appendStream has appended once; re-sending it repeats the chunk", () => {
    const { slack, thread_ts } = setup();
    const ts = start(slack, thread_ts, "One");
    const flight = slack.begin("chat.appendStream", { channel: DM, ts, markdown_text: " two" });
    expect(flight.apply()).toEqual({ ok: true, channel: DM, ts });
    flight.drop();
    expect(slack.message(DM, ts)).toMatchObject({ text: "One two", counts: { appended: 1, lostAnswers: 1 } });
    slack.answer("chat.appendStream", { channel: DM, ts, markdown_text: " two" });
    expect(slack.message(DM, ts)?.text).toBe("One two two");
  });

  it("refuses to end a flight twice or apply it twice (a fake wired wrongly fails loudly)", () => {
    const { slack, thread_ts } = setup();
    const flight = slack.begin("chat.startStream", { channel: DM, thread_ts });
    flight.apply();
    expect(() => flight.apply()).toThrow(/applied twice/);
    flight.deliver();
    expect(() => flight.drop()).toThrow(/already/);
  });
});
