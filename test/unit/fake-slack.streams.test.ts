/**
 * The engine tests' fake Slack with its stateful fakes (test/support/fake-slack.ts: withStreams, withModel):
 * driven through the engine's own Slack client (shared/slack/web-api.ts), the streaming methods are answered
 * by the model of Slack's side, scripted answers still come first, a lost answer is applied but never
 * delivered, and overlapping calls to one stream fail the end-of-test check.
 */
import { afterEach, describe, expect, it } from "vitest";
import { modelTurn } from "../../shared/app/fake-model.ts";
import { networkEdge } from "../../shared/effects/outbound.ts";
import { slackWebApi } from "../../shared/slack/web-api.ts";
import {
  expectOneCompleteAnswer,
  expectSettled,
  type FakeSlack,
  fakeSlack,
  reply,
  TEST_MODEL_KEY,
  TEST_MODEL_URL,
} from "../support/fake-slack.ts";
import { TEST_BOT_TOKEN, TEST_SLACK_API_URL } from "../support/settings.ts";

const DM = "D0ASSIST";
let fake: FakeSlack | undefined;
afterEach(() => fake?.restore());

const slack = slackWebApi(TEST_BOT_TOKEN, TEST_SLACK_API_URL, networkEdge);
const call = (method: string, params: Record<string, unknown>, signal?: AbortSignal) => slack.call(method, params, 60_000, signal);

function setup() {
  fake = fakeSlack().withStreams();
  const streams = fake.streams;
  if (!streams) throw new Error("withStreams gave no model");
  const { thread_ts } = streams.assistantThread({ channel: DM, user: "U0ASKER" });
  const question = streams.userMessage({ channel: DM, user: "U0ASKER", text: "Why?", thread_ts });
  return { fake, streams, thread_ts, question };
}

const startTs = async (thread_ts: string) => {
  const answer = await call("chat.startStream", { channel: DM, thread_ts, markdown_text: "One" });
  if (!answer.ok) throw new Error(answer.error);
  return String(answer.body.ts);
};

describe("withStreams", () => {
  it("answers startStream, appendStream and stopStream statefully: one complete answer after the question", async () => {
    const { fake, streams, thread_ts, question } = setup();
    const ts = await startTs(thread_ts);
    expect(await call("chat.appendStream", { channel: DM, ts, markdown_text: ", two" })).toMatchObject({ ok: true });
    expect(await call("chat.stopStream", { channel: DM, ts, markdown_text: ", three." })).toMatchObject({
      ok: true,
      body: { message: { text: "One, two, three." } },
    });
    expect(await call("chat.appendStream", { channel: DM, ts, markdown_text: "late" })).toEqual({
      ok: false,
      error: "message_not_in_streaming_state",
    });
    const answer = expectOneCompleteAnswer(streams, { channel: DM, thread_ts, after: question.ts }, "One, two, three.");
    expect(answer.counts).toEqual({ started: 1, appended: 1, stopped: 1, updated: 0, lostAnswers: 0 });
    expect(fake.callsTo("chat.appendStream")).toHaveLength(2);
    expectSettled(fake);
  });

  it("loses the answer of the 3rd appendStream: Slack appended it, the caller saw a dropped connection", async () => {
    const { fake, streams, thread_ts } = setup();
    fake.nth("chat.appendStream", 3, reply.lost());
    const ts = await startTs(thread_ts);
    await call("chat.appendStream", { channel: DM, ts, markdown_text: " a" });
    await call("chat.appendStream", { channel: DM, ts, markdown_text: " b" });
    await expect(call("chat.appendStream", { channel: DM, ts, markdown_text: " c" })).rejects.toThrow(/no answer/);
    expect(streams.message(DM, ts)).toMatchObject({ text: "One a b c", counts: { appended: 3, lostAnswers: 1 } });
    expect(streams.flights().filter((f) => f.lost)).toMatchObject([{ method: "chat.appendStream", applied: true }]);
    await call("chat.appendStream", { channel: DM, ts, markdown_text: " d" }); // the 4th: the model again
    expect(streams.message(DM, ts)?.text).toBe("One a b c d");
    expectSettled(fake);
  });

  it("loses a startStream's answer as a hang: the message exists, and the call lasts until the caller gives up", async () => {
    const { fake, streams, thread_ts, question } = setup();
    fake.script("chat.startStream", reply.lost("hang"));
    const caller = new AbortController();
    const started = call("chat.startStream", { channel: DM, thread_ts, markdown_text: "Hel" }, caller.signal);
    await new Promise((resolve) => setTimeout(resolve, 0));
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(fake.inFlight()).toBe(1);
    caller.abort(new DOMException("the attempt's timeout", "TimeoutError"));
    await expect(started).rejects.toThrow(/no answer/);
    const found = streams.thread(DM, thread_ts).messages.filter((m) => m.from === "app" && m.subtype === undefined);
    expect(found).toMatchObject([{ text: "Hel", streaming: true, counts: { started: 1, lostAnswers: 1 } }]);
    // Found again as a reconciling caller would: the app's message after the question.
    const replies = await call("conversations.replies", { channel: DM, ts: thread_ts, oldest: question.ts });
    expect(replies.ok && (replies.body.messages as { ts: string }[]).map((m) => m.ts)).toEqual([found[0]?.ts]);
    expectSettled(fake);
  });

  it("answers scripted 429s (with Retry-After) and hangs first, unapplied, then the model", async () => {
    const { fake, streams, thread_ts } = setup();
    const ts = await startTs(thread_ts);
    fake.script("chat.appendStream", reply.rateLimited(3), reply.hang());
    await expect(call("chat.appendStream", { channel: DM, ts, markdown_text: " x" })).rejects.toMatchObject({
      failure: { kind: "rate_limited", retryAfterMs: 3000 },
    });
    const caller = new AbortController();
    const hung = call("chat.appendStream", { channel: DM, ts, markdown_text: " x" }, caller.signal);
    caller.abort();
    await expect(hung).rejects.toThrow();
    expect(streams.message(DM, ts)?.text).toBe("One");
    expect(await call("chat.appendStream", { channel: DM, ts, markdown_text: " x" })).toMatchObject({ ok: true });
    expect(streams.message(DM, ts)).toMatchObject({ text: "One x", counts: { appended: 1, lostAnswers: 0 } });
    expectSettled(fake);
  });

  it("fails the end-of-test check when two appends to one stream were in flight at once", async () => {
    const { fake, thread_ts } = setup();
    const ts = await startTs(thread_ts);
    await Promise.all([
      call("chat.appendStream", { channel: DM, ts, markdown_text: " a" }),
      call("chat.appendStream", { channel: DM, ts, markdown_text: " b" }),
    ]);
    expect(() => expectSettled(fake)).toThrow(/overlapped/);
  });

  it("passes it for appends one after another, and for two streams at once", async () => {
    const { fake, thread_ts } = setup();
    const [a, b] = [await startTs(thread_ts), await startTs(thread_ts)];
    for (const text of [" a", " b", " c"]) await call("chat.appendStream", { channel: DM, ts: a, markdown_text: text });
    await Promise.all([
      call("chat.appendStream", { channel: DM, ts: a, markdown_text: " d" }),
      call("chat.appendStream", { channel: DM, ts: b, markdown_text: " d" }),
    ]);
    expect(() => expectSettled(fake)).not.toThrow();
  });

  it("still needs a script for a method the model does not answer", async () => {
    const { fake } = setup();
    await call("reactions.add", { channel: DM, timestamp: "1.000001", name: "eyes" });
    expect(() => expectSettled(fake)).toThrow(/did not script/);
  });

  it("refuses reply.lost() for a method the model does not answer (a test wired wrongly fails loudly)", async () => {
    fake = fakeSlack().script("reactions.add", reply.lost());
    await expect(call("reactions.add", { channel: DM, timestamp: "1.000001", name: "eyes" })).rejects.toThrow();
  });
});

describe("withModel", () => {
  const ask = (key = TEST_MODEL_KEY) =>
    fetch(`${TEST_MODEL_URL}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "idempotency-key": "row-1" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "Why?" }], stream: true }),
    });

  it("answers the model's URL with the fake model, expecting TEST_MODEL_KEY; Slack's calls are untouched", async () => {
    fake = fakeSlack().withModel();
    const streamed = await (await ask()).text();
    expect(streamed).toContain('"object":"chat.completion.chunk"');
    expect(streamed.endsWith("data: [DONE]\n\n")).toBe(true);
    expect((await ask("sk-wrong")).status).toBe(401);
    expect(fake.model?.calls.map((c) => [c.idempotencyKey, c.authorized])).toEqual([
      ["row-1", true],
      ["row-1", false],
    ]);
    expect(fake.calls).toEqual([]);
    expectSettled(fake);
  });

  it("fails the end-of-test check on a scripted model turn no call used", () => {
    fake = fakeSlack().withModel();
    fake.model?.script(modelTurn.serverError());
    expect(() => expectSettled(fake as FakeSlack)).toThrow(/model turns/);
  });
});
