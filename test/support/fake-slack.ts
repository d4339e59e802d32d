/**
 * Slack, faked at the network edge: the global fetch that slack-web-api-client
 * and the response_url effect call. Each Web API method (or response_url) gets
 * a scripted sequence of answers in Slack's real shapes: HTTP 200 with
 * ok:true/ok:false, 429 with Retry-After, 5xx, a hang, a dropped connection.
 * A call the script did not expect is recorded as unexpected, answered with an
 * error, and fails the test; so does a scripted answer no call used (a test
 * that scripts a retry the code never made proves less than it says).
 * useFakeSlack checks both after each test.
 */
import { afterEach, beforeEach, expect } from "vitest";
import { TEST_SLACK_API_URL } from "./settings.ts";

export type Answer =
  | { readonly kind: "http"; readonly status: number; readonly body: string; readonly headers: Record<string, string> }
  | { readonly kind: "hang" }
  | { readonly kind: "network_error" }
  | { readonly kind: "held"; readonly gate: Gate; readonly then: Answer }
  | { readonly kind: "endless"; readonly status: number; readonly chunks: { pulled: number } }
  /** An answer computed from the call's form params (a paged read, like conversations.history). */
  | { readonly kind: "computed"; readonly answer: (params: Record<string, string>) => Answer };

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
  const calls: SlackCall[] = [];
  const unexpected: SlackCall[] = [];
  const original = globalThis.fetch;
  let inFlight = 0;
  let maxInFlight = 0;

  globalThis.fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = new Request(input as RequestInfo, init);
    const target = request.url.startsWith(apiBase) ? request.url.slice(apiBase.length) : request.url;
    // Answers are handed out in the order calls arrive, before any await.
    const answer = scripts.get(target)?.shift() ?? fallbacks.get(target);
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
    try {
      return await respond(answer, request, call.params);
    } finally {
      inFlight -= 1;
    }
  };

  const respond = async (answer: Answer, request: Request, params: Record<string, string>): Promise<Response> => {
    switch (answer.kind) {
      case "computed":
        return respond(answer.answer(params), request, params);
      case "http":
        return new Response(answer.body, { status: answer.status, headers: answer.headers });
      case "network_error":
        throw new TypeError("Network connection lost.");
      case "hang":
        return new Promise<Response>((_, reject) => {
          request.signal.addEventListener("abort", () => reject(request.signal.reason));
        });
      case "held":
        await answer.gate.opened;
        return respond(answer.then, request, params);
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
    calls,
    unexpected,
    maxInFlight: () => maxInFlight,
    inFlight: () => inFlight,
    callsTo: (target) => calls.filter((call) => call.target === target),
    pending: () => [...scripts.entries()].flatMap(([target, answers]) => answers.map(() => target)),
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

/** Fails unless every call was scripted and every scripted answer was used. */
export function expectSettled(fake: FakeSlack): void {
  expect(fake.unexpected, "calls to Slack that the test did not script").toEqual([]);
  expect(fake.pending(), "scripted Slack answers that no call used").toEqual([]);
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
