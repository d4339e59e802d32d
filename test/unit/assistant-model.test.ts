/**
 * The model client (shared/assistant/model.ts): an OpenAI-compatible chat completions stream read as server-sent
 * events, and every way it can end told apart — text, the end, a failure worth asking again, a refusal.
 */
import { describe, expect, it } from "vitest";
import { askModel, MODEL_MAX_BYTES, type ModelFailure, type ModelPart, serverSentData } from "../../shared/assistant/model.ts";

const KEY = "sk-test-model-key-0123456789";
const SETTINGS = { url: "https://model.test/v1", apiKey: KEY, name: "test-model" };

/** A response whose body is `parts`, each a chunk of bytes as the network cuts them. */
function streamOf(parts: readonly string[], { end = true }: { end?: boolean } = {}): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const part of parts) controller.enqueue(encoder.encode(part));
      if (end) controller.close();
    },
  });
}

const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;

function edgeAnswering(response: () => Response, seen: Request[] = []): typeof fetch {
  return async (input, init) => {
    seen.push(new Request(String(input), init));
    return response();
  };
}

async function collect(edge: typeof fetch, options: { idleMs?: number; signal?: AbortSignal } = {}): Promise<ModelPart[]> {
  const parts: ModelPart[] = [];
  for await (const part of askModel({
    settings: SETTINGS,
    messages: [{ role: "user", content: "hi" }],
    idempotencyKey: "message:T0:D0:1.000001:answer",
    edge,
    signal: options.signal ?? new AbortController().signal,
    idleMs: options.idleMs ?? 5_000,
  })) {
    parts.push(part);
  }
  return parts;
}

async function failureOf(promise: Promise<unknown>): Promise<ModelFailure> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect((error as Error)?.name).toBe("ModelFailure");
  return error as ModelFailure;
}

describe("serverSentData", () => {
  it("reads events however the bytes are cut, CRLF or LF, multi-line data joined, comments skipped", async () => {
    const events: string[] = [];
    const body = streamOf([": keep-alive\r\n\r\nda", "ta: one\r\n", "\r\ndata: two\ndata: lines\n\nevent: x\ndata: three\n\ndata: last"]);
    for await (const data of serverSentData(body)) events.push(data);
    expect(events).toEqual(["one", "two\nlines", "three", "last"]);
  });
});

describe("askModel", () => {
  it("asks with the model, the messages, stream: true, the key as a bearer and the row's idempotency key", async () => {
    const seen: Request[] = [];
    const parts = await collect(
      edgeAnswering(
        () =>
          new Response(
            streamOf([
              chunk({ role: "assistant" }),
              chunk({ content: "Hel" }),
              chunk({ content: "lo" }),
              chunk({}, "stop"),
              "data: [DONE]\n\n",
            ]),
            { status: 200 },
          ),
        seen,
      ),
    );
    expect(parts).toEqual([
      { kind: "text", text: "Hel" },
      { kind: "text", text: "lo" },
      { kind: "finish", reason: "stop" },
    ]);
    const request = seen[0] as Request;
    expect(request.url).toBe("https://model.test/v1/chat/completions");
    expect(request.headers.get("authorization")).toBe(`Bearer ${KEY}`);
    expect(request.headers.get("idempotency-key")).toBe("message:T0:D0:1.000001:answer");
    expect(await request.json()).toEqual({ model: "test-model", messages: [{ role: "user", content: "hi" }], stream: true });
  });

  it("a stream that ends at [DONE] without a finish_reason is complete; one that ends before either is not", async () => {
    expect(await collect(edgeAnswering(() => new Response(streamOf([chunk({ content: "ok" }), "data: [DONE]\n\n"]))))).toEqual([
      { kind: "text", text: "ok" },
    ]);
    const failure = await failureOf(collect(edgeAnswering(() => new Response(streamOf([chunk({ content: "half" })])))));
    expect(failure.kind).toBe("transient");
    expect(failure.message).toMatch(/ended before its answer did/);
  });

  it("a 5xx, a 408 and a 429 are worth asking again (with Retry-After); any other 4xx is a refusal, its text without the key", async () => {
    const answer = (status: number, headers: Record<string, string> = {}) =>
      edgeAnswering(() =>
        Response.json({ error: { message: `bad key ${KEY} for you`, type: "invalid_request_error" } }, { status, headers }),
      );
    expect((await failureOf(collect(answer(500)))).kind).toBe("transient");
    expect((await failureOf(collect(answer(408)))).kind).toBe("transient");
    const limited = await failureOf(collect(answer(429, { "retry-after": "7" })));
    expect([limited.kind, limited.retryAfterMs]).toEqual(["transient", 7_000]);
    const refused = await failureOf(collect(answer(401)));
    expect(refused.kind).toBe("refused");
    expect(refused.message).toBe("the model answered HTTP 401: bad key [secret MODEL_API_KEY] for you");
    expect(refused.message).not.toContain(KEY);
  });

  it("an error event mid-stream is worth asking again; a refusal or a content filter is not", async () => {
    const midStream = await failureOf(
      collect(
        edgeAnswering(
          () => new Response(streamOf([chunk({ content: "a" }), `data: ${JSON.stringify({ error: { message: "overloaded" } })}\n\n`])),
        ),
      ),
    );
    expect([midStream.kind, midStream.message]).toEqual(["transient", "the model's stream failed: overloaded"]);
    const refusal = await failureOf(collect(edgeAnswering(() => new Response(streamOf([chunk({ refusal: "I can't help with that." })])))));
    expect([refusal.kind, refusal.message]).toEqual(["refused", "the model refused: I can't help with that."]);
    const filtered = await failureOf(
      collect(edgeAnswering(() => new Response(streamOf([chunk({ content: "a" }), chunk({}, "content_filter")])))),
    );
    expect(filtered.kind).toBe("refused");
  });

  it("a model that goes quiet past the idle time has stalled: the call ends, worth asking again", async () => {
    let cancelled = false;
    const quiet = () =>
      new Response(
        new ReadableStream({
          start(controller) {
            controller.enqueue(new TextEncoder().encode(chunk({ content: "thinking" })));
          },
          cancel() {
            cancelled = true;
          },
        }),
      );
    const edge: typeof fetch = async (_input, init) => {
      const response = quiet();
      init?.signal?.addEventListener("abort", () => void response.body?.cancel().catch(() => {}));
      return response;
    };
    const failure = await failureOf(collect(edge, { idleMs: 50 }));
    expect(failure.kind).toBe("transient");
    expect(failure.message).toMatch(/no answer from the model for 50 ms/);
    expect(cancelled).toBe(true);
  });

  it("no answer at all is worth asking again; the caller's abort ends it with the caller's reason", async () => {
    const refusedConnection: typeof fetch = async () => {
      throw new TypeError("connection refused");
    };
    expect((await failureOf(collect(refusedConnection))).kind).toBe("transient");
    const stop = new AbortController();
    const reason = new Error("the user stopped it");
    const hanging: typeof fetch = (_input, init) =>
      new Promise((_, reject) => init?.signal?.addEventListener("abort", () => reject(init.signal?.reason)));
    const asking = collect(hanging, { signal: stop.signal });
    stop.abort(reason);
    await expect(asking).rejects.toBe(reason);
  });

  it("refuses a MODEL_URL a Worker must not call: plain http off loopback", async () => {
    const called: Request[] = [];
    const parts: ModelPart[] = [];
    const failure = await failureOf(
      (async () => {
        for await (const part of askModel({
          settings: { ...SETTINGS, url: "http://model.example.com/v1" },
          messages: [],
          idempotencyKey: "k",
          edge: edgeAnswering(() => new Response(""), called),
          signal: new AbortController().signal,
          idleMs: 1_000,
        }))
          parts.push(part);
      })(),
    );
    expect(failure.kind).toBe("refused");
    expect(called).toEqual([]);
  });
});

describe("serverSentData against a hostile stream", () => {
  it("scans each chunk once: MODEL_MAX_BYTES with no line break, in 1 KiB chunks, is read in linear time", async () => {
    // Re-scanning the whole pending text on every chunk took 13.8 s here (a Worker's CPU limit is 30 s by default,
    // with four answers an invocation); one scan of each chunk takes milliseconds. The bound is the gap between them.
    const CHUNK = 1024;
    const piece = new TextEncoder().encode("x".repeat(CHUNK));
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= MODEL_MAX_BYTES) return controller.close();
        sent += CHUNK;
        controller.enqueue(piece);
      },
    });
    const started = performance.now();
    let bytes = 0;
    const events: string[] = [];
    for await (const event of serverSentData(body, (n) => {
      bytes += n;
    }))
      events.push(event);
    expect(bytes).toBe(MODEL_MAX_BYTES);
    expect(events).toEqual([]);
    expect(performance.now() - started).toBeLessThan(2_000);
  }, 60_000);

  it("a line break split across chunks, and one of each kind, still ends each line where it should", async () => {
    const parts = ["data: a\r", "\n\r\ndata: b\n", "\ndata: c\r\rdata: d", "\n\n"];
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const part of parts) controller.enqueue(new TextEncoder().encode(part));
        controller.close();
      },
    });
    const events: string[] = [];
    for await (const event of serverSentData(body)) events.push(event);
    expect(events).toEqual(["a", "b", "c", "d"]);
  });
});
