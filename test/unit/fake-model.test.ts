/**
 * The fake OpenAI-compatible model (shared/app/fake-model.ts) streams as OpenAI streams and fails as providers
 * fail; each case is one shape or one failure, read back with a plain SSE reader, its delays on an injected
 * clock (no wall clock).
 */
import { describe, expect, it } from "vitest";
import { type FakeModelOptions, fakeModel, modelTurn } from "../../shared/app/fake-model.ts";

const URL_ = "https://model.test/v1/chat/completions";
const KEY = "sk-test-model-key-123";
const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);

function setup(options: FakeModelOptions = {}) {
  const clock = { now: T0, slept: [] as number[] };
  const model = fakeModel({
    apiKey: KEY,
    now: () => clock.now,
    sleep: async (ms) => {
      clock.slept.push(ms);
      clock.now += ms;
    },
    ...options,
  });
  return { clock, model };
}

const ask = (
  body: Record<string, unknown> = {},
  headers: Record<string, string> = {},
  init: { signal?: AbortSignal; url?: string; raw?: string } = {},
) =>
  new Request(init.url ?? URL_, {
    method: "POST",
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json", ...headers },
    body: init.raw ?? JSON.stringify({ model: "gpt-test", messages: [{ role: "user", content: "Why?" }], stream: true, ...body }),
    ...(init.signal ? { signal: init.signal } : {}),
  });

/** Every `data:` payload of an SSE body, in order ("[DONE]" kept as the string). */
async function events(response: Response): Promise<unknown[]> {
  const text = await response.text();
  expect(text.endsWith("\n\n") || text === "").toBe(true);
  return text
    .split("\n\n")
    .filter((block) => block !== "")
    .map((block) => {
      expect(block.startsWith("data: ")).toBe(true);
      const data = block.slice("data: ".length);
      return data === "[DONE]" ? data : JSON.parse(data);
    });
}

type Chunk = {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: { index: number; delta: Record<string, unknown>; finish_reason: string | null }[];
};
const deltas = (all: unknown[]) => (all.filter((e) => e !== "[DONE]") as Chunk[]).map((c) => c.choices[0]?.delta);
const contentOf = (all: unknown[]) =>
  deltas(all)
    .map((d) => (d?.content as string | undefined) ?? "")
    .join("");

describe("a streamed answer", () => {
  it("is OpenAI's server-sent events: a role delta, content deltas, an empty delta with finish_reason stop, then [DONE]", async () => {
    const { model } = setup();
    model.script(modelTurn.answer("Because it is.", { chunks: 3 }));
    const response = await model.fetch(ask());
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const all = await events(response);
    expect(all.at(-1)).toBe("[DONE]");
    const chunks = all.slice(0, -1) as Chunk[];
    for (const chunk of chunks) {
      expect(chunk).toMatchObject({ id: "chatcmpl-fake1", object: "chat.completion.chunk", created: T0 / 1000, model: "gpt-test" });
      expect(chunk.choices).toHaveLength(1);
      expect(chunk.choices[0]?.index).toBe(0);
    }
    expect(chunks.map((c) => c.choices[0]?.finish_reason)).toEqual([null, null, null, null, "stop"]);
    expect(deltas(all)).toEqual([{ role: "assistant" }, { content: "Beca" }, { content: "use i" }, { content: "t is." }, {}]);
    expect(model.calls[0]).toMatchObject({ outcome: "stop", status: 200, chunksSent: 3, text: "Because it is." });
  });

  it("cuts the answer word by word by default, or by a function; the default answer names the last question", async () => {
    const { model } = setup();
    model.script(modelTurn.answer("a b  c", { chunks: (text) => [...text] }));
    expect(contentOf(await events(await model.fetch(ask())))).toBe("a b  c");
    const all = await events(
      await model.fetch(
        ask({
          messages: [
            { role: "user", content: "first" },
            { role: "assistant", content: "x" },
            { role: "user", content: "second" },
          ],
        }),
      ),
    );
    expect(deltas(all).slice(1, -1)).toEqual([
      { content: "The " },
      { content: "fake " },
      { content: "model's " },
      { content: "answer " },
      { content: "to " },
      { content: '"second".' },
    ]);
  });

  it("answers with a function of the messages, and scripted turns before the default", async () => {
    const { model } = setup();
    model.always(modelTurn.answer((messages) => `seen ${messages.length}`));
    model.script(modelTurn.serverError());
    expect((await model.fetch(ask())).status).toBe(500);
    expect(contentOf(await events(await model.fetch(ask())))).toBe("seen 1");
    expect(model.pending()).toBe(0);
  });

  it("waits through the injected sleep before the first chunk and between chunks, and records the time to first token", async () => {
    const { clock, model } = setup();
    model.script(modelTurn.answer("one two three", { firstChunkDelayMs: 700, betweenChunksMs: 50 }));
    await events(await model.fetch(ask()));
    expect(clock.slept).toEqual([700, 50, 50]);
    const call = model.calls[0];
    expect((call?.firstContentAt ?? 0) - (call?.startedAt ?? 0)).toBe(700);
    expect(call?.endedAt).toBe(T0 + 800);
  });

  it("records the body, the Idempotency-Key and whether the key matched, never the key itself", async () => {
    const { model } = setup();
    await (await model.fetch(ask({}, { "idempotency-key": "row-42" }))).text();
    await (await model.fetch(ask({}, { authorization: "Bearer sk-wrong" }))).text();
    expect(model.calls.map((c) => [c.idempotencyKey, c.authorized])).toEqual([
      ["row-42", true],
      [null, false],
    ]);
    expect(model.calls[0]?.body).toEqual({ model: "gpt-test", messages: [{ role: "user", content: "Why?" }], stream: true });
    expect(JSON.stringify(model.calls)).not.toContain(KEY);
  });

  it("adds a usage chunk with no choices before [DONE] when stream_options.include_usage is set", async () => {
    const { model } = setup();
    const all = await events(await model.fetch(ask({ stream_options: { include_usage: true } })));
    expect(all.at(-2)).toMatchObject({ choices: [], usage: { total_tokens: expect.any(Number) } });
    expect((all[0] as { usage: unknown }).usage).toBeNull();
  });
});

describe("the model's failures", () => {
  it("answers a wrong key 401 invalid_api_key and a missing one 401, in OpenAI's error shape", async () => {
    const { model } = setup();
    const wrong = await model.fetch(ask({}, { authorization: "Bearer sk-wrong" }));
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toEqual({
      error: { message: expect.stringContaining("Incorrect API key"), type: "invalid_request_error", param: null, code: "invalid_api_key" },
    });
    const none = await model.fetch(new Request(URL_, { method: "POST", body: "{}" }));
    expect(none.status).toBe(401);
    expect(model.calls.map((c) => c.outcome)).toEqual(["unauthorized", "unauthorized"]);
  });

  it("answers 500, 400 and 429 with Retry-After as scripted", async () => {
    const { model } = setup();
    model.script(modelTurn.serverError(), modelTurn.badRequest("context_length_exceeded"), modelTurn.rateLimited(7));
    const server = await model.fetch(ask());
    expect([server.status, await server.json()]).toEqual([
      500,
      { error: { message: expect.any(String), type: "server_error", param: null, code: null } },
    ]);
    const bad = await model.fetch(ask());
    expect([bad.status, ((await bad.json()) as { error: { type: string } }).error.type]).toEqual([400, "invalid_request_error"]);
    const limited = await model.fetch(ask());
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toBe("7");
    expect(((await limited.json()) as { error: { code: string } }).error.code).toBe("rate_limit_exceeded");
  });

  it("answers a body that is not JSON, or has no messages, 400", async () => {
    const { model } = setup();
    expect((await model.fetch(ask({}, {}, { raw: "{nope" }))).status).toBe(400);
    const missing = await model.fetch(ask({ messages: undefined }));
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as { error: { param: string } }).error.param).toBe("messages");
    expect((await model.fetch(ask({}, {}, { url: "https://model.test/v1/completions" }))).status).toBe(404);
  });

  it("sends an error event mid-stream, then ends without [DONE]", async () => {
    const { model } = setup();
    model.script(modelTurn.errorEvent(2));
    const all = await events(await model.fetch(ask()));
    expect(all).not.toContain("[DONE]");
    expect(all.at(-1)).toEqual({ error: { message: expect.any(String), type: "server_error", param: null, code: null } });
    expect(deltas(all.slice(0, -1))).toHaveLength(3); // role + two content chunks
    expect(model.calls[0]).toMatchObject({ outcome: "error_event", chunksSent: 2 });
  });

  it("stalls after N chunks: the body never ends until the request's signal aborts, and the reader sees the abort", async () => {
    const { model } = setup();
    model.script(modelTurn.stall(2, { answer: "one two three four" }));
    const controller = new AbortController();
    const response = await model.fetch(ask({}, {}, { signal: controller.signal }));
    const reader = (response.body as ReadableStream<Uint8Array>).pipeThrough(new TextDecoderStream()).getReader();
    let seen = "";
    while ((seen.match(/"content"/g) ?? []).length < 2) seen += (await reader.read()).value ?? "";
    const next = reader.read();
    const state = await Promise.race([next.then(() => "read"), new Promise((resolve) => setTimeout(resolve, 0, "pending"))]);
    expect(state).toBe("pending");
    controller.abort(new DOMException("timed out", "TimeoutError"));
    await expect(next).rejects.toMatchObject({ name: "TimeoutError" });
    expect(model.calls[0]).toMatchObject({ outcome: "aborted", chunksSent: 2, text: "one two " });
  });

  it("ends a stall when the reader cancels the body", async () => {
    const { model } = setup();
    model.script(modelTurn.stall(0));
    const response = await model.fetch(ask());
    await response.body?.cancel();
    expect(model.calls[0]?.outcome).toBe("aborted");
  });

  it("drops the connection after N chunks: the body ends with no finish_reason and no [DONE]", async () => {
    const { model } = setup();
    model.script(modelTurn.drop(1, { answer: "one two" }));
    const all = await events(await model.fetch(ask()));
    expect(deltas(all)).toEqual([{ role: "assistant" }, { content: "one " }]);
    expect(model.calls[0]?.outcome).toBe("drop");
  });

  it("refuses with delta.refusal and no content", async () => {
    const { model } = setup();
    model.script(modelTurn.refusal("I can't help with that."));
    const all = await events(await model.fetch(ask()));
    const ds = deltas(all);
    expect(ds[0]).toEqual({ role: "assistant", content: null, refusal: "" });
    expect(ds.map((d) => d?.refusal ?? "").join("")).toBe("I can't help with that.");
    expect(contentOf(all)).toBe("");
    expect(((all.at(-2) as Chunk).choices[0] as { finish_reason: string }).finish_reason).toBe("stop");
    expect(model.calls[0]?.outcome).toBe("refusal");
  });

  it("ends an answer cut at max_tokens with finish_reason length", async () => {
    const { model } = setup();
    model.script(modelTurn.length("Cut sh"));
    const all = await events(await model.fetch(ask()));
    expect(((all.at(-2) as Chunk).choices[0] as { finish_reason: string }).finish_reason).toBe("length");
    expect(all.at(-1)).toBe("[DONE]");
    expect(contentOf(all)).toBe("Cut sh");
  });
});

describe("stream: false", () => {
  it("answers one chat.completion", async () => {
    const { model } = setup();
    model.script(modelTurn.answer("Whole."));
    const response = await model.fetch(ask({ stream: false }));
    expect(await response.json()).toEqual({
      id: "chatcmpl-fake1",
      object: "chat.completion",
      created: T0 / 1000,
      model: "gpt-test",
      choices: [{ index: 0, message: { role: "assistant", content: "Whole.", refusal: null }, logprobs: null, finish_reason: "stop" }],
      usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 },
    });
  });
});
