/**
 * Slack, faked at the network edge: the global fetch that slack-web-api-client
 * and the response_url effect call. Each Web API method (or response_url) gets
 * a scripted sequence of answers in Slack's real shapes: HTTP 200 with
 * ok:true/ok:false, 429 with Retry-After, 5xx, a hang, a dropped connection.
 * A call the script did not expect is recorded as unexpected, answered with an
 * error, and fails the test; so does a scripted answer no call used (a test
 * that scripts a retry the code never made proves less than it says).
 * useFakeSlack checks both after each test.
 *
 * For assistant answers (issue 39), two stateful fakes join the script:
 *   withStreams()  the streaming and assistant methods (chat.startStream, appendStream, stopStream, update,
 *                  postMessage, assistant.threads.*, conversations.replies) are answered by a model of Slack's
 *                  side (shared/app/fake-slack-streams.ts) once their scripted answers run out; a scripted
 *                  `reply.lost()` is applied by that model and its answer lost, `reply.slack()` is the model's
 *                  answer at a chosen place in a script, and `nth(method, n, answer)` picks one call by number.
 *                  Every call to those methods is a flight of the model, so two at once on one stream are an
 *                  overlap, which fails the test like an unexpected call.
 *   withModel()    requests under TEST_MODEL_URL are answered by a fake OpenAI-compatible model
 *                  (shared/app/fake-model.ts); its scripted turns no call used fail the test too.
 */
import { afterEach, beforeEach, expect } from "vitest";
import { type FakeModel, type FakeModelOptions, fakeModel } from "../../shared/app/fake-model.ts";
import {
  type FakeMessage,
  type FakeSlackStreams,
  type FakeSlackStreamsOptions,
  type Flight,
  fakeSlackStreams,
  isStreamsMethod,
} from "../../shared/app/fake-slack-streams.ts";
import { TEST_SLACK_API_URL } from "./settings.ts";

/** Where the engine's tests point MODEL_URL: the fake model answers POST <this>/chat/completions. */
export const TEST_MODEL_URL = "https://model.test/v1";
/** The MODEL_API_KEY the fake model expects (a wrong one is answered 401). */
export const TEST_MODEL_KEY = "sk-test-model-key-0123456789";

export type Answer =
  | { readonly kind: "http"; readonly status: number; readonly body: string; readonly headers: Record<string, string> }
  | { readonly kind: "hang" }
  | { readonly kind: "network_error" }
  | { readonly kind: "held"; readonly gate: Gate; readonly then: Answer }
  | { readonly kind: "endless"; readonly status: number; readonly chunks: { pulled: number } }
  /** An answer computed from the call's form params (a paged read, like conversations.history). */
  | { readonly kind: "computed"; readonly answer: (params: Record<string, string>) => Answer }
  /** The streams model's answer (withStreams): applied, then delivered. */
  | { readonly kind: "slack" }
  /** Applied by the streams model, its answer lost: the caller gets a dropped connection, or no answer until it gives up. */
  | { readonly kind: "lost"; readonly as: "network_error" | "hang" };

/** A gate a test opens when it chooses: answers held on it wait for the signal, not for elapsed time. */
export interface Gate {
  readonly opened: Promise<void>;
  open(): void;
}

export function gate(): Gate {
  let open = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}): Answer => ({
  kind: "http",
  status,
  body: JSON.stringify(body),
  headers: { "content-type": "application/json; charset=utf-8", ...headers },
});

export const reply = {
  ok: (fields: Record<string, unknown> = {}): Answer => json(200, { ok: true, ...fields }),
  error: (code: string): Answer => json(200, { ok: false, error: code }),
  rateLimited: (retryAfterSeconds: number): Answer =>
    json(429, { ok: false, error: "ratelimited" }, { "retry-after": String(retryAfterSeconds) }),
  status: (status: number, body = ""): Answer => ({ kind: "http", status, body, headers: { "content-type": "text/plain" } }),
  /** A response_url's plain "ok". */
  text: (status: number, body: string): Answer => ({ kind: "http", status, body, headers: { "content-type": "text/plain" } }),
  hang: (): Answer => ({ kind: "hang" }),
  /** `then`, once the test opens `gate` (concurrency is tested on signals, never on elapsed time). */
  held: (gate: Gate, then: Answer): Answer => ({ kind: "held", gate, then }),
  networkError: (): Answer => ({ kind: "network_error" }),
  /** The streams model's answer (withStreams), at this place in a script. */
  slack: (): Answer => ({ kind: "slack" }),
  /**
   * Applied by the streams model (withStreams), its answer lost on the way: the caller sees a dropped connection
   * ("network_error", the default) or nothing until its own timeout ("hang"). A caller must not re-send it blindly.
   */
  lost: (as: "network_error" | "hang" = "network_error"): Answer => ({ kind: "lost", as }),
  /** A body that never ends (1 KiB of "x" per pull); `chunks.pulled` counts what the reader took. */
  endless: (status: number, chunks: { pulled: number }): Answer => ({ kind: "endless", status, chunks }),
  /**
   * conversations.history over `messages`, paged as Slack pages it: newest first, within oldest/latest
   * (inclusive only with inclusive=true), at most `limit` a page (Slack's default 100), `has_more` and
   * `response_metadata.next_cursor` (empty on the last page); an unknown cursor is invalid_cursor.
   */
  history: (messages: readonly Record<string, unknown>[]): Answer => ({
    kind: "computed",
    answer: (params) => {
      const inclusive = params.inclusive === "true" || params.inclusive === "1";
      const oldest = Number(params.oldest ?? "0");
      const latest = params.latest === undefined ? Number.POSITIVE_INFINITY : Number(params.latest);
      const window = messages
        .filter((m) => {
          const ts = Number(m.ts);
          return (inclusive ? ts >= oldest : ts > oldest) && (inclusive ? ts <= latest : ts < latest);
        })
        .toSorted((a, b) => Number(b.ts) - Number(a.ts));
      let start = 0;
      if (params.cursor !== undefined && params.cursor !== "") {
        const at = window.findIndex((m) => btoa(`next_ts:${m.ts}`) === params.cursor);
        if (at < 0) return json(200, { ok: false, error: "invalid_cursor" });
        start = at;
      }
      const limit = Math.min(Number(params.limit ?? "100") || 100, 999);
      const page = window.slice(start, start + limit);
      const after = window[start + limit];
      return json(200, {
        ok: true,
        messages: page,
        has_more: after !== undefined,
        pin_count: 0,
        response_metadata: { next_cursor: after ? btoa(`next_ts:${after.ts}`) : "" },
      });
    },
  }),
};

export interface SlackCall {
  /** The Web API method, or the full URL for anything else (response_url). */
  readonly target: string;
  readonly params: Record<string, string>;
  readonly json: unknown;
  readonly authorization: string | null;
  /** Every request header (lower-case names), e.g. a custom effect's idempotency-key. */
  readonly headers: Record<string, string>;
  /** Whether the caller has aborted the request (a client that gives up on a call must cancel it). */
  readonly aborted: () => boolean;
}

export interface FakeSlack {
  /** Queue answers for a method (or URL), used in order. */
  script(target: string, ...answers: Answer[]): FakeSlack;
  /** Answer every call to a method (or URL) the same way, after any scripted ones. */
  always(target: string, answer: Answer): FakeSlack;
  /** Answer the n-th call (1, 2, … counted from the fake's start) to a method this way; the others as before. */
  nth(target: string, n: number, answer: Answer): FakeSlack;
  /** Answer the streaming and assistant methods with a model of Slack's side (after their scripted answers). */
  withStreams(options?: Partial<FakeSlackStreamsOptions>): FakeSlack;
  /** The streams model, once withStreams was called. */
  readonly streams: FakeSlackStreams | undefined;
  /** Answer requests under `base` (default TEST_MODEL_URL) with a fake model (default: expecting TEST_MODEL_KEY). */
  withModel(model?: FakeModel | FakeModelOptions, base?: string): FakeSlack;
  /** The fake model, once withModel was called. */
  readonly model: FakeModel | undefined;
  readonly calls: SlackCall[];
  readonly unexpected: SlackCall[];
  /** The most calls that were waiting for their answer at the same moment. */
  readonly maxInFlight: () => number;
  /** Calls waiting for their answer now. */
  readonly inFlight: () => number;
  callsTo(target: string): SlackCall[];
  /** Scripted answers not yet used. */
  pending(): string[];
  restore(): void;
}

export function fakeSlack(apiBase: string = TEST_SLACK_API_URL): FakeSlack {
  const scripts = new Map<string, Answer[]>();
  const fallbacks = new Map<string, Answer>();
  const numbered = new Map<string, Map<number, Answer>>();
  const seen = new Map<string, number>();
  let streams: FakeSlackStreams | undefined;
  let model: { fake: FakeModel; base: string } | undefined;
  const calls: SlackCall[] = [];
  const unexpected: SlackCall[] = [];
  const original = globalThis.fetch;
  let inFlight = 0;
  let maxInFlight = 0;

  globalThis.fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = new Request(input as RequestInfo, init);
    // As a real fetch: a request whose signal is aborted already is never sent.
    if (request.signal.aborted) throw request.signal.reason;
    if (model && (request.url === model.base || request.url.startsWith(`${model.base}/`))) return model.fake.fetch(request);
    const target = request.url.startsWith(apiBase) ? request.url.slice(apiBase.length) : request.url;
    // Answers are handed out in the order calls arrive, before any await.
    const n = (seen.get(target) ?? 0) + 1;
    seen.set(target, n);
    const picked = numbered.get(target)?.get(n);
    if (picked) numbered.get(target)?.delete(n);
    const modelled = streams !== undefined && isStreamsMethod(target);
    const answer = picked ?? scripts.get(target)?.shift() ?? fallbacks.get(target) ?? (modelled ? reply.slack() : undefined);
    const text = new TextDecoder().decode(await request.arrayBuffer());
    const contentType = request.headers.get("content-type") ?? "";
    const call: SlackCall = {
      target,
      params: contentType.includes("form") ? Object.fromEntries(new URLSearchParams(text)) : {},
      json: contentType.includes("json") ? safeJson(text) : undefined,
      authorization: request.headers.get("authorization"),
      headers: Object.fromEntries(request.headers),
      aborted: () => request.signal.aborted,
    };
    calls.push(call);
    if (!answer) {
      unexpected.push(call);
      return new Response(JSON.stringify({ ok: false, error: "unexpected_call_in_test" }), { status: 200 });
    }
    inFlight += 1;
    maxInFlight = Math.max(maxInFlight, inFlight);
    // Every call to a modelled method is a flight of the model, whatever answers it: a 429 sent while another
    // append to the stream waits is still two at once.
    const flight =
      streams && modelled ? endOnce(streams.begin(target, (call.json as Record<string, unknown> | undefined) ?? call.params)) : undefined;
    try {
      return await respond(answer, request, call.params, flight);
    } catch (error) {
      flight?.drop();
      throw error;
    } finally {
      flight?.deliver();
      inFlight -= 1;
    }
  };

  const respond = async (answer: Answer, request: Request, params: Record<string, string>, flight?: Flight): Promise<Response> => {
    switch (answer.kind) {
      case "computed":
        return respond(answer.answer(params), request, params, flight);
      case "slack":
      case "lost": {
        if (!flight) throw new Error(`reply.${answer.kind}() answers a method the streams model answers, after withStreams()`);
        // A turn of the event loop between arrival and answer, as over a network: a caller's second call sent
        // before this one's answer arrives then begins inside this flight, and the overlap check sees it.
        await new Promise((resolve) => setTimeout(resolve, 0));
        const body = flight.apply();
        if (answer.kind === "slack") return jsonResponse(body);
        if (answer.as === "network_error") throw new TypeError("Network connection lost.");
        // Its answer never comes: the flight lasts until the caller gives up (then it is dropped, above).
        return new Promise<Response>((_, reject) => {
          if (request.signal.aborted) reject(request.signal.reason);
          request.signal.addEventListener("abort", () => reject(request.signal.reason));
        });
      }
      case "http":
        return new Response(answer.body, { status: answer.status, headers: answer.headers });
      case "network_error":
        throw new TypeError("Network connection lost.");
      case "hang":
        return new Promise<Response>((_, reject) => {
          // A caller may have given up already, before the body was read: an abort event would never come.
          if (request.signal.aborted) reject(request.signal.reason);
          request.signal.addEventListener("abort", () => reject(request.signal.reason));
        });
      case "held":
        await answer.gate.opened;
        return respond(answer.then, request, params, flight);
      case "endless": {
        const chunk = new TextEncoder().encode("x".repeat(1024));
        const body = new ReadableStream<Uint8Array>({
          pull(controller) {
            answer.chunks.pulled += 1;
            controller.enqueue(chunk);
          },
        });
        return new Response(body, { status: answer.status, headers: { "content-type": "text/plain" } });
      }
    }
  };

  const fake: FakeSlack = {
    script(target, ...answers) {
      scripts.set(target, [...(scripts.get(target) ?? []), ...answers]);
      return fake;
    },
    always(target, answer) {
      fallbacks.set(target, answer);
      return fake;
    },
    nth(target, n, answer) {
      if (!Number.isInteger(n) || n < 1) throw new Error(`nth: the call's number is 1, 2, …, not ${n}`);
      const forTarget = numbered.get(target) ?? new Map<number, Answer>();
      forTarget.set(n, answer);
      numbered.set(target, forTarget);
      return fake;
    },
    withStreams(options = {}) {
      streams = fakeSlackStreams({ now: Date.now, ...options });
      return fake;
    },
    get streams() {
      return streams;
    },
    withModel(given = { apiKey: TEST_MODEL_KEY }, base = TEST_MODEL_URL) {
      model = { fake: "fetch" in given ? given : fakeModel(given), base: base.replace(/\/+$/, "") };
      return fake;
    },
    get model() {
      return model?.fake;
    },
    calls,
    unexpected,
    maxInFlight: () => maxInFlight,
    inFlight: () => inFlight,
    callsTo: (target) => calls.filter((call) => call.target === target),
    pending: () => [
      ...[...scripts.entries()].flatMap(([target, answers]) => answers.map(() => target)),
      ...[...numbered.entries()].flatMap(([target, answers]) => [...answers.keys()].map((n) => `${target} (call ${n})`)),
    ],
    restore() {
      globalThis.fetch = original;
    },
  };
  return fake;
}

/** A fake Slack per test; after each test, no call may have been unexpected and no scripted answer left unused. */
export function useFakeSlack(): { readonly current: FakeSlack } {
  const holder: { current: FakeSlack } = { current: undefined as unknown as FakeSlack };
  beforeEach(() => {
    holder.current = fakeSlack();
  });
  afterEach(() => {
    holder.current.restore();
    expectSettled(holder.current);
  });
  return holder;
}

/**
 * Fails unless every call was scripted and every scripted answer was used; with withStreams, unless calls to one
 * stream were one at a time; with withModel, unless every scripted model turn was used.
 */
export function expectSettled(fake: FakeSlack): void {
  expect(fake.unexpected, "calls to Slack that the test did not script").toEqual([]);
  expect(fake.pending(), "scripted Slack answers that no call used").toEqual([]);
  if (fake.streams)
    expect(fake.streams.overlaps(), "calls to one Slack stream that overlapped (appends must be one at a time)").toEqual([]);
  if (fake.model) expect(fake.model.pending(), "scripted model turns that no call used").toBe(0);
}

/**
 * Issue 39's verdict on one question: exactly one answer from the app in the thread after the question, with
 * this text, not left streaming (stopped, or repaired by chat.update after its lifetime or the user's stop), and
 * no overlapping calls. Returns the answer's message for further checks (its counts, its lost answers).
 */
export function expectOneCompleteAnswer(
  streams: FakeSlackStreams,
  where: { readonly channel: string; readonly thread_ts: string; readonly after: string },
  text: string,
): FakeMessage {
  const after = micros(where.after);
  const answers = streams
    .thread(where.channel, where.thread_ts)
    .messages.filter((m) => m.from === "app" && m.subtype === undefined && micros(m.ts) > after);
  expect(
    answers.map((m) => m.ts),
    "the app's answers after the question",
  ).toHaveLength(1);
  const [answer] = answers as [FakeMessage];
  expect(answer.text, "the answer's text").toBe(text);
  expect(answer.leftStreaming, "the answer left streaming (or a broken pill)").toBe(false);
  expect(streams.overlaps(), "calls to one Slack stream that overlapped").toEqual([]);
  return answer;
}

/** A ts as microseconds, exactly. */
function micros(ts: string): bigint {
  const [seconds = "0", fraction = ""] = ts.split(".");
  return BigInt(seconds) * 1_000_000n + BigInt(fraction.padEnd(6, "0").slice(0, 6));
}

const jsonResponse = (body: unknown): Response =>
  new Response(JSON.stringify(body), { status: 200, headers: { "content-type": "application/json; charset=utf-8" } });

/** A flight that ends once: the first of deliver() and drop() counts (the fetch above calls both ways out). */
function endOnce(flight: Flight): Flight {
  let ended = false;
  return {
    method: flight.method,
    ...(flight.key !== undefined ? { key: flight.key } : {}),
    apply: () => flight.apply(),
    deliver: () => {
      if (!ended) flight.deliver();
      ended = true;
    },
    drop: () => {
      if (!ended) flight.drop();
      ended = true;
    },
  };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
