/**
 * A model, asked the one way most providers speak: an OpenAI-compatible chat
 * completions endpoint with `stream: true` (OpenAI, Workers AI's
 * `…/ai/v1`, AI Gateway's compatible endpoints, vLLM, llama.cpp…). POST
 * `{MODEL_URL}/chat/completions`, `Authorization: Bearer MODEL_API_KEY`,
 * and the answer read as server-sent events: `data: {chat.completion.chunk}`
 * lines (choices[0].delta.content, finish_reason) until `data: [DONE]`; an
 * error may come as `data: {"error": {…}}` mid-stream.
 *
 * What an answer may be told apart by, for the effect that streams it
 * (answer.ts): text as it comes, the end (`finish`), or a ModelFailure —
 * `transient` (no answer, a 5xx, a 408/409/429, a stream that stalled or
 * ended without [DONE]: ask again later) or `refused` (any other 4xx, a
 * refusal, a content filter: asking again gets the same answer). The key is
 * sent in a header and never quoted: a failure's text names the status and
 * the provider's own message, scrubbed of the key.
 *
 * The row's idempotency key is sent as `Idempotency-Key` (providers that
 * honour one answer a repeat from their record; OpenAI's chat completions
 * ignore it) — the engine's own guarantee is that the model is asked again
 * only when no answer of it was kept (answer.ts).
 */
import { outboundRefusal, safeOrigin } from "../effects/outbound.ts";

export interface ModelSettings {
  /** The endpoint's base URL: `{url}/chat/completions` is asked. */
  readonly url: string;
  readonly apiKey: string | undefined;
  /** Sent as `model` when given (a server with one model may need none). */
  readonly name: string | undefined;
}

export interface ChatMessage {
  readonly role: "system" | "user" | "assistant";
  readonly content: string;
}

export type ModelPart =
  | { readonly kind: "text"; readonly text: string }
  /** The answer is complete: finish_reason (stop, length, …) or [DONE]. */
  | { readonly kind: "finish"; readonly reason: string };

export class ModelFailure extends Error {
  readonly kind: "transient" | "refused";
  /** A 429's Retry-After, when the provider said one (ms). */
  readonly retryAfterMs: number | undefined;
  constructor(kind: "transient" | "refused", message: string, retryAfterMs?: number) {
    super(message);
    this.name = "ModelFailure";
    this.kind = kind;
    this.retryAfterMs = retryAfterMs;
  }
}

export interface AskOptions {
  readonly settings: ModelSettings;
  readonly messages: readonly ChatMessage[];
  readonly idempotencyKey: string;
  /** The network edge (the Workers' fetch, or a test's fake). */
  readonly edge: typeof fetch;
  /** Ends the call (the attempt's signal, or the user's stop). */
  readonly signal: AbortSignal;
  /** No byte of the answer for this long is a stall: the call is ended (transient). */
  readonly idleMs: number;
}

/** Most of a model's answer that is read (bytes of its event stream): far above an answer a Slack message holds. */
export const MODEL_MAX_BYTES = 4 * 1024 * 1024;

/**
 * Asks the model and yields its answer as it streams. Throws ModelFailure for what the answer says went wrong;
 * an abort of `signal` ends it with the signal's reason.
 */
export async function* askModel(options: AskOptions): AsyncGenerator<ModelPart> {
  const { settings } = options;
  const endpoint = `${settings.url.replace(/\/+$/, "")}/chat/completions`;
  // The deployer's own setting, not a request's input; still https on 443 (loopback in a local run), no redirect.
  const refusal = outboundRefusal(endpoint, ["*"]);
  if (refusal !== undefined) throw new ModelFailure("refused", `MODEL_URL ${safeOrigin(endpoint)}: ${refusal}`);
  const scrub = (text: string) => (settings.apiKey ? text.replaceAll(settings.apiKey, "[secret MODEL_API_KEY]") : text);
  const idle = new AbortController();
  let idleTimer: ReturnType<typeof setTimeout> | undefined;
  const touch = () => {
    if (idleTimer !== undefined) clearTimeout(idleTimer);
    idleTimer = setTimeout(
      () => idle.abort(new DOMException(`no answer from the model for ${options.idleMs} ms`, "TimeoutError")),
      options.idleMs,
    );
  };
  const signal = AbortSignal.any([options.signal, idle.signal]);
  touch();
  try {
    let response: Response;
    try {
      response = await options.edge(endpoint, {
        method: "POST",
        redirect: "manual",
        signal,
        headers: {
          "content-type": "application/json",
          accept: "text/event-stream",
          "idempotency-key": options.idempotencyKey,
          ...(settings.apiKey ? { authorization: `Bearer ${settings.apiKey}` } : {}),
        },
        body: JSON.stringify({ ...(settings.name ? { model: settings.name } : {}), messages: options.messages, stream: true }),
      });
    } catch (error) {
      if (options.signal.aborted) throw options.signal.reason;
      throw new ModelFailure("transient", `the model gave no answer (${scrub(reasonOf(error, idle.signal))})`);
    }
    touch();
    if (response.status !== 200) {
      const text = await response.text().catch(() => "");
      const detail = scrub(errorMessageOf(text) ?? "").slice(0, 300);
      const about = `the model answered HTTP ${response.status}${detail ? `: ${detail}` : ""}`;
      const again = response.status >= 500 || [408, 409, 429].includes(response.status);
      const retryAfter = response.headers.get("retry-after");
      throw new ModelFailure(
        again ? "transient" : "refused",
        about,
        retryAfter && /^\d+$/.test(retryAfter.trim()) ? Number(retryAfter.trim()) * 1000 : undefined,
      );
    }
    if (!response.body) throw new ModelFailure("transient", "the model answered with no body");
    let read = 0;
    let done = false;
    const counted = (bytes: number) => {
      read += bytes;
      if (read > MODEL_MAX_BYTES) throw new ModelFailure("refused", `the model's answer is over ${MODEL_MAX_BYTES} bytes`);
      touch();
    };
    for await (const event of serverSentData(response.body, counted, signal)) {
      if (event === "[DONE]") {
        done = true;
        break;
      }
      const chunk = parseJson(event);
      if (chunk === undefined) continue; // a line that is not JSON: ignored, as the SDKs do
      if (isObject(chunk.error)) {
        const message = typeof chunk.error.message === "string" ? chunk.error.message : "an error";
        throw new ModelFailure("transient", `the model's stream failed: ${scrub(message).slice(0, 300)}`);
      }
      const choice = Array.isArray(chunk.choices) && isObject(chunk.choices[0]) ? chunk.choices[0] : undefined;
      const delta = choice && isObject(choice.delta) ? choice.delta : undefined;
      if (delta && typeof delta.refusal === "string" && delta.refusal !== "") {
        throw new ModelFailure("refused", `the model refused: ${scrub(delta.refusal).slice(0, 300)}`);
      }
      if (delta && typeof delta.content === "string" && delta.content !== "") yield { kind: "text", text: delta.content };
      const reason = choice?.finish_reason;
      if (typeof reason === "string") {
        if (reason === "content_filter") throw new ModelFailure("refused", "the model's content filter stopped the answer");
        yield { kind: "finish", reason };
        done = true;
        break;
      }
    }
    if (!done) throw new ModelFailure("transient", "the model's stream ended before its answer did");
  } catch (error) {
    if (error instanceof ModelFailure) throw error;
    if (options.signal.aborted) throw options.signal.reason;
    throw new ModelFailure("transient", `the model's stream broke (${scrub(reasonOf(error, idle.signal))})`);
  } finally {
    if (idleTimer !== undefined) clearTimeout(idleTimer);
  }
}

/** The `data:` payloads of an event stream, one per event (multi-line data joined by "\n"), comments and other fields skipped. */
export async function* serverSentData(
  body: ReadableStream<Uint8Array>,
  onBytes: (bytes: number) => void = () => {},
  /** Ends the reading, with its reason: a stall, or the caller's stop (whatever the body's source does on it). */
  signal?: AbortSignal,
): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let pending = "";
  // Each chunk's text is searched for line breaks once, on its own: searching what is pending (a line not yet
  // ended) again on every chunk would make a stream with no line break quadratic in MODEL_MAX_BYTES.
  const lineBreak = /\r\n|\r|\n/g;
  let data: string[] = [];
  const cancel = () => void reader.cancel(signal?.reason).catch(() => {});
  signal?.addEventListener("abort", cancel, { once: true });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (signal?.aborted) throw signal.reason;
      if (done) break;
      onBytes(value.byteLength);
      const text = decoder.decode(value, { stream: true });
      let from = 0;
      lineBreak.lastIndex = 0;
      for (let found = lineBreak.exec(text); found !== null; found = lineBreak.exec(text)) {
        const line = pending + text.slice(from, found.index);
        pending = "";
        from = found.index + found[0].length;
        if (line === "") {
          if (data.length > 0) yield data.join("\n");
          data = [];
        } else if (line.startsWith("data:")) {
          data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
        }
      }
      pending += text.slice(from);
    }
    pending += decoder.decode();
    if (pending.startsWith("data:")) data.push(pending.slice(pending.startsWith("data: ") ? 6 : 5));
    if (data.length > 0) yield data.join("\n");
  } finally {
    signal?.removeEventListener("abort", cancel);
    await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
}

function parseJson(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The provider's own message in an OpenAI-shaped error body ({"error":{"message"}}), if it has one. */
function errorMessageOf(text: string): string | undefined {
  const body = parseJson(text);
  const error = body?.error;
  if (isObject(error) && typeof error.message === "string") return error.message;
  return typeof error === "string" ? error : undefined;
}

function reasonOf(error: unknown, idle: AbortSignal): string {
  if (idle.aborted && idle.reason instanceof Error) return idle.reason.message;
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
