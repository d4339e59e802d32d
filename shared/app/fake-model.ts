/**
 * A fake OpenAI-compatible chat completions endpoint: `(Request) → Promise<Response>` answering
 * `POST <base>/chat/completions` as OpenAI does — with `stream: true`, server-sent events of
 * `chat.completion.chunk`s ending in `data: [DONE]`; without, one `chat.completion` — and failing as providers
 * fail: an HTTP error in OpenAI's error shape (400, 401, 429 with Retry-After, 500), an error event mid-stream,
 * a stall, a dropped connection, a refusal, an answer cut by its length. Scripted per call (a queue of turns,
 * then a default), it records every call: the JSON body, the Idempotency-Key, whether the key matched (a
 * boolean: the key itself is never kept), when the call started and when its first content was sent.
 *
 * Web-standard only, so one fake serves the engine's tests in workerd and the local stand-in in Node. Delays go
 * through an injected `sleep` (default: none), so a test runs a slow model without waiting and the stand-in
 * passes a real one.
 *
 * The stream's shape (OpenAI's API reference and openai-python's _streaming.py): each event is
 * `data: {"id","object":"chat.completion.chunk","created","model","choices":[{"index":0,"delta":…,
 * "logprobs":null,"finish_reason":null|"stop"|"length"}]}` and a blank line; the first delta carries the role,
 * the last is `{}` with the finish_reason, and `data: [DONE]` ends it. An error mid-stream is
 * `data: {"error":{"message","type","param","code"}}`; a cut connection simply ends without [DONE].
 */

export interface ChatMessage {
  readonly role: string;
  readonly content?: unknown;
  readonly [field: string]: unknown;
}

/** OpenAI's error object: {"error":{message, type, param, code}}. */
export interface ModelError {
  readonly message: string;
  readonly type: string;
  readonly param?: string | null;
  readonly code?: string | null;
}

/** How a turn ends. */
export type ModelEnd =
  /** Every chunk, finish_reason "stop", [DONE]. */
  | { readonly kind: "stop" }
  /** Every chunk, finish_reason "length" (the answer cut at max_tokens), [DONE]. */
  | { readonly kind: "length" }
  /** An HTTP error before any stream: OpenAI's error body; a 429 with Retry-After. */
  | { readonly kind: "status"; readonly status: number; readonly error: ModelError; readonly retryAfterSeconds?: number }
  /** `afterChunks` content chunks, then an error event, then the body ends. */
  | { readonly kind: "error_event"; readonly afterChunks: number; readonly error: ModelError }
  /** `afterChunks` content chunks, then nothing: the body never ends until the request is aborted. */
  | { readonly kind: "stall"; readonly afterChunks: number }
  /** `afterChunks` content chunks, then the body ends without a finish_reason or [DONE] (a cut connection). */
  | { readonly kind: "drop"; readonly afterChunks: number }
  /** The model declines: `delta.refusal` pieces instead of content, finish_reason "stop". */
  | { readonly kind: "refusal"; readonly refusal: string };

/** One call's behaviour. */
export interface ModelTurn {
  /** The answer, or a function of the request's messages. Default: one naming the last user message. */
  readonly answer?: string | ((messages: readonly ChatMessage[]) => string);
  /** How the answer is cut: into this many near-equal pieces, or by a function. Default: word by word. */
  readonly chunks?: number | ((answer: string) => readonly string[]);
  /** Before the first content chunk (the model's own time to first token). */
  readonly firstChunkDelayMs?: number;
  /** Between content chunks. */
  readonly betweenChunksMs?: number;
  readonly end?: ModelEnd;
}

const errorOf = (message: string, type: string, code: string | null = null, param: string | null = null): ModelError => ({
  message,
  type,
  param,
  code,
});

/** Turns to script, in OpenAI's real shapes. */
export const modelTurn = {
  answer: (answer: ModelTurn["answer"], more: Omit<ModelTurn, "answer"> = {}): ModelTurn => ({ ...more, answer }),
  status: (status: number, error: ModelError): ModelTurn => ({ end: { kind: "status", status, error } }),
  serverError: (): ModelTurn =>
    modelTurn.status(500, errorOf("The server had an error while processing your request. Sorry about that!", "server_error")),
  badRequest: (message = "Invalid value for 'messages'.", param: string | null = "messages"): ModelTurn =>
    modelTurn.status(400, errorOf(message, "invalid_request_error", null, param)),
  unauthorized: (): ModelTurn => modelTurn.status(401, INCORRECT_KEY),
  rateLimited: (retryAfterSeconds: number): ModelTurn => ({
    end: {
      kind: "status",
      status: 429,
      retryAfterSeconds,
      error: errorOf("Rate limit reached for requests. Please try again later.", "requests", "rate_limit_exceeded"),
    },
  }),
  errorEvent: (
    afterChunks: number,
    error: ModelError = errorOf("The server had an error while processing your request.", "server_error"),
  ) => ({ end: { kind: "error_event", afterChunks, error } }) satisfies ModelTurn,
  stall: (afterChunks: number, more: Omit<ModelTurn, "end"> = {}): ModelTurn => ({ ...more, end: { kind: "stall", afterChunks } }),
  drop: (afterChunks: number, more: Omit<ModelTurn, "end"> = {}): ModelTurn => ({ ...more, end: { kind: "drop", afterChunks } }),
  refusal: (refusal = "I'm sorry, I can't help with that."): ModelTurn => ({ end: { kind: "refusal", refusal } }),
  length: (answer: ModelTurn["answer"], more: Omit<ModelTurn, "answer" | "end"> = {}): ModelTurn => ({
    ...more,
    answer,
    end: { kind: "length" },
  }),
};

const INCORRECT_KEY = errorOf(
  "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.",
  "invalid_request_error",
  "invalid_api_key",
);
const NO_KEY = errorOf(
  "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
  "invalid_request_error",
);

export type ModelOutcome =
  | "stop"
  | "length"
  | "refusal"
  | "status"
  | "error_event"
  | "stall"
  | "drop"
  | "aborted"
  | "unauthorized"
  | "invalid";

/** One call, as the fake saw it (times from its `now`). */
export interface ModelCall {
  readonly n: number;
  /** The parsed JSON body (model, messages, stream, …), or undefined when it was not JSON. */
  readonly body:
    | { readonly model?: unknown; readonly messages?: unknown; readonly stream?: unknown; readonly [field: string]: unknown }
    | undefined;
  readonly idempotencyKey: string | null;
  /** Whether Authorization was `Bearer <the expected key>` (with no key expected: any Bearer). Never the key. */
  readonly authorized: boolean;
  readonly startedAt: number;
  /** When the first content (or refusal) chunk was sent: time to first token = firstContentAt − startedAt. */
  readonly firstContentAt?: number;
  readonly endedAt?: number;
  readonly status: number;
  /** How it ended (undefined while it streams). */
  readonly outcome?: ModelOutcome;
  /** Content chunks sent. */
  readonly chunksSent: number;
  /** The content sent so far. */
  readonly text: string;
}

export interface FakeModelOptions {
  /** The key a call must carry as `Authorization: Bearer <key>`; a wrong one is answered 401. Default: any key. */
  readonly apiKey?: string;
  /** Waits `ms` (resolving early, or rejecting, when `signal` aborts). Default: no wait at all. */
  readonly sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** Milliseconds since the epoch, for the records and `created`. Default Date.now. */
  readonly now?: () => number;
  /** The turn after the scripted ones run out. */
  readonly default?: ModelTurn;
}

export interface FakeModel {
  /** Answers one request: POST …/chat/completions. */
  readonly fetch: (request: Request) => Promise<Response>;
  /** Queue turns for the next calls, in order. */
  script(...turns: ModelTurn[]): FakeModel;
  /** The turn for every call after the scripted ones. */
  always(turn: ModelTurn): FakeModel;
  readonly calls: readonly ModelCall[];
  /** Scripted turns no call used yet. */
  pending(): number;
}

export function fakeModel(options: FakeModelOptions = {}): FakeModel {
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? (() => Promise.resolve());
  const queue: ModelTurn[] = [];
  let fallback: ModelTurn = options.default ?? {};
  const calls: { -readonly [K in keyof ModelCall]: ModelCall[K] }[] = [];

  const fetch = async (request: Request): Promise<Response> => {
    const auth = request.headers.get("authorization");
    const bearer = auth?.match(/^Bearer (.+)$/)?.[1];
    const call: (typeof calls)[number] = {
      n: calls.length + 1,
      body: undefined,
      idempotencyKey: request.headers.get("idempotency-key"),
      authorized: bearer !== undefined && (options.apiKey === undefined || bearer === options.apiKey),
      startedAt: now(),
      status: 200,
      chunksSent: 0,
      text: "",
    };
    calls.push(call);
    const finish = (outcome: ModelOutcome, status = call.status) => {
      call.outcome = outcome;
      call.status = status;
      call.endedAt = now();
    };
    const raw = await request.text();
    call.body = parseObject(raw);

    const path = new URL(request.url).pathname;
    if (request.method !== "POST" || !path.endsWith("/chat/completions")) {
      finish("invalid", 404);
      return errorResponse(404, errorOf(`Invalid URL (${request.method} ${path})`, "invalid_request_error"));
    }
    if (!call.authorized) {
      finish("unauthorized", 401);
      return errorResponse(401, bearer === undefined ? NO_KEY : INCORRECT_KEY);
    }
    if (call.body === undefined) {
      finish("invalid", 400);
      return errorResponse(
        400,
        errorOf(
          "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly.)",
          "invalid_request_error",
        ),
      );
    }
    for (const field of ["model", "messages"] as const) {
      const value = call.body[field];
      if (field === "model" ? typeof value !== "string" : !Array.isArray(value)) {
        finish("invalid", 400);
        return errorResponse(
          400,
          errorOf(`Missing required parameter: '${field}'.`, "invalid_request_error", "missing_required_parameter", field),
        );
      }
    }

    const turn = queue.shift() ?? fallback;
    const messages = call.body.messages as ChatMessage[];
    const end = turn.end ?? { kind: "stop" };
    const model = call.body.model as string;
    if (end.kind === "status") {
      finish("status", end.status);
      return errorResponse(
        end.status,
        end.error,
        end.retryAfterSeconds === undefined
          ? {}
          : {
              "retry-after": String(end.retryAfterSeconds),
              "x-ratelimit-remaining-requests": "0",
              "x-ratelimit-reset-requests": `${end.retryAfterSeconds}s`,
            },
      );
    }
    const answer = typeof turn.answer === "function" ? turn.answer(messages) : (turn.answer ?? defaultAnswer(messages));
    const pieces = end.kind === "refusal" ? splitWords(end.refusal) : split(answer, turn.chunks);
    const id = `chatcmpl-fake${call.n}`;
    const created = Math.floor(call.startedAt / 1000);

    // The caller giving up (its signal) or cancelling the body ends the turn, stall or not.
    const stop = new AbortController();
    const onAbort = () => stop.abort(request.signal.reason);
    if (request.signal.aborted) onAbort();
    else request.signal.addEventListener("abort", onAbort, { once: true });

    if (call.body.stream !== true)
      return completion(call, turn, end, answer, messages, { id, created, model, stop: stop.signal, sleep, now, finish });

    const usage = (call.body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;
    const event = (delta: Record<string, unknown>, finishReason: string | null) =>
      `data: ${JSON.stringify({
        id,
        object: "chat.completion.chunk",
        created,
        model,
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
        ...(usage ? { usage: null } : {}),
      })}\n\n`;

    async function* events(): AsyncGenerator<string> {
      const limit = end.kind === "error_event" || end.kind === "stall" || end.kind === "drop" ? end.afterChunks : pieces.length;
      let roleSent = false;
      for (let i = 0; i < Math.min(limit, pieces.length); i += 1) {
        await sleep(i === 0 ? (turn.firstChunkDelayMs ?? 0) : (turn.betweenChunksMs ?? 0), stop.signal);
        if (stop.signal.aborted) return;
        // The role comes with the first delta OpenAI sends, just before the content.
        if (!roleSent) {
          roleSent = true;
          yield event({ role: "assistant", ...(end.kind === "refusal" ? { content: null, refusal: "" } : {}) }, null);
        }
        const piece = pieces[i] ?? "";
        call.firstContentAt ??= now();
        call.chunksSent += 1;
        if (end.kind !== "refusal") call.text += piece;
        yield event(end.kind === "refusal" ? { refusal: piece } : { content: piece }, null);
      }
      switch (end.kind) {
        case "stall":
          await new Promise<void>((resolve) => {
            if (stop.signal.aborted) resolve();
            stop.signal.addEventListener("abort", () => resolve(), { once: true });
          });
          return;
        case "drop":
          finish("drop");
          return;
        case "error_event":
          finish("error_event");
          yield `data: ${JSON.stringify({ error: { param: null, code: null, ...end.error } })}\n\n`;
          return;
        default:
          if (!roleSent) yield event({ role: "assistant", content: "" }, null);
          yield event({}, end.kind === "length" ? "length" : "stop");
          if (usage) yield usageEvent(id, created, model, messages, call.text);
          // Finished as [DONE] goes out: a reader may stop at [DONE] and cancel the rest.
          finish(end.kind === "length" ? "length" : end.kind === "refusal" ? "refusal" : "stop");
          yield "data: [DONE]\n\n";
      }
    }

    const source = events();
    const encoder = new TextEncoder();
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        // A fetch whose signal aborts errors its body with the signal's reason, as a real one does.
        const abort = () => {
          if (call.outcome === undefined) finish("aborted");
          try {
            controller.error(stop.signal.reason ?? new DOMException("The operation was aborted.", "AbortError"));
          } catch {
            // already closed
          }
        };
        if (stop.signal.aborted) abort();
        else stop.signal.addEventListener("abort", abort, { once: true });
      },
      async pull(controller) {
        const next = await source.next();
        if (stop.signal.aborted) return;
        if (next.done) controller.close();
        else controller.enqueue(encoder.encode(next.value));
      },
      cancel() {
        if (call.outcome === undefined) finish("aborted");
        stop.abort();
      },
    });
    return new Response(body, {
      status: 200,
      headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", "x-request-id": `req_fake${call.n}` },
    });
  };

  const fake: FakeModel = {
    fetch,
    script(...turns) {
      queue.push(...turns);
      return fake;
    },
    always(turn) {
      fallback = turn;
      return fake;
    },
    calls,
    pending: () => queue.length,
  };
  return fake;
}

/** `stream: false`: one chat.completion, after the whole turn's delays. */
async function completion(
  call: { firstContentAt?: number; chunksSent: number; text: string },
  turn: ModelTurn,
  end: Exclude<ModelEnd, { kind: "status" }>,
  answer: string,
  messages: readonly ChatMessage[],
  at: {
    id: string;
    created: number;
    model: string;
    stop: AbortSignal;
    sleep: (ms: number, signal: AbortSignal) => Promise<void>;
    now: () => number;
    finish: (outcome: ModelOutcome, status?: number) => void;
  },
): Promise<Response> {
  await at.sleep(turn.firstChunkDelayMs ?? 0, at.stop);
  if (end.kind === "stall") {
    await new Promise<void>((resolve) => {
      if (at.stop.aborted) resolve();
      at.stop.addEventListener("abort", () => resolve(), { once: true });
    });
    at.finish("aborted");
    throw at.stop.reason ?? new DOMException("The operation was aborted.", "AbortError");
  }
  if (end.kind === "drop") {
    at.finish("drop");
    throw new TypeError("Network connection lost.");
  }
  if (end.kind === "error_event") {
    at.finish("error_event", 500);
    return errorResponse(500, end.error);
  }
  const refused = end.kind === "refusal";
  if (!refused) call.text = answer;
  call.firstContentAt = at.now();
  at.finish(end.kind === "length" ? "length" : refused ? "refusal" : "stop");
  return Response.json({
    id: at.id,
    object: "chat.completion",
    created: at.created,
    model: at.model,
    choices: [
      {
        index: 0,
        message: { role: "assistant", content: refused ? null : answer, refusal: refused ? end.refusal : null },
        logprobs: null,
        finish_reason: end.kind === "length" ? "length" : "stop",
      },
    ],
    usage: usageOf(messages, refused ? "" : answer),
  });
}

function errorResponse(status: number, error: ModelError, headers: Record<string, string> = {}): Response {
  return Response.json(
    { error: { message: error.message, type: error.type, param: error.param ?? null, code: error.code ?? null } },
    { status, headers: { ...headers } },
  );
}

/** The answer when none is scripted: it names the question, so a test sees which history was asked. */
function defaultAnswer(messages: readonly ChatMessage[]): string {
  const question = [...messages].reverse().find((m) => m.role === "user")?.content;
  return `The fake model's answer to ${JSON.stringify(typeof question === "string" ? question : "")}.`;
}

function split(answer: string, chunks: ModelTurn["chunks"]): readonly string[] {
  if (typeof chunks === "function") return chunks(answer);
  if (chunks === undefined) return splitWords(answer);
  // Near-equal pieces by code point (a surrogate pair is never cut); never more pieces than code points.
  const points = Array.from(answer);
  const n = Math.max(1, Math.min(Math.floor(chunks), points.length));
  if (points.length === 0) return [];
  return Array.from({ length: n }, (_, i) =>
    points.slice(Math.floor((i * points.length) / n), Math.floor(((i + 1) * points.length) / n)).join(""),
  );
}

/** Each word with the whitespace after it, as a tokenizer roughly streams. */
const splitWords = (text: string): readonly string[] => text.match(/\s*\S+\s*/g) ?? (text === "" ? [] : [text]);

/** Rough token counts (4 characters a token): a figure in the usage shape, not a tokenizer. */
function usageOf(messages: readonly ChatMessage[], answer: string) {
  const prompt = Math.ceil(messages.reduce((sum, m) => sum + String(m.content ?? "").length, 0) / 4);
  const completion = Math.ceil(answer.length / 4);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** stream_options.include_usage: one chunk with no choices and the usage, before [DONE]. */
function usageEvent(id: string, created: number, model: string, messages: readonly ChatMessage[], answer: string): string {
  return `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, choices: [], usage: usageOf(messages, answer) })}\n\n`;
}

function parseObject(raw: string): ModelCall["body"] {
  try {
    const value = JSON.parse(raw) as unknown;
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as ModelCall["body"]) : undefined;
  } catch {
    return undefined;
  }
}
