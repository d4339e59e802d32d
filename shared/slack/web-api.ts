import { type EffectError, fatal, rateLimited, transient } from "../delivery/failure.ts";
import { readBounded } from "../effects/outbound.ts";
import { isObject, type JsonObject } from "./inputs.ts";

/** Most of a Web API answer that is read: Slack's largest answers (a long message echoed back) are far smaller. */
export const SLACK_ANSWER_MAX_BYTES = 1024 * 1024;

/**
 * The Slack Web API, as ackbox calls it: one POST per method, form-encoded
 * (as Slack's SDKs send it), `Authorization: Bearer <bot token>`, and an
 * AbortSignal that ends the request at its timeout.
 *
 * Written here, in a few lines, rather than with slack-web-api-client (which
 * the project used at first): that client cannot abort a call. A call it
 * gave up on kept its connection, and since a Worker holds at most six, the
 * next calls queued behind it, timed out before they were sent, were
 * recorded as failed — and were then sent anyway when a connection freed:
 * an effect performed after its failure was written down, outside the
 * at-least-once window. (An independent review found it.) Its default retry
 * handler also sleeps through a 429 inside the call; here a 429 is returned
 * to the queue as a delay instead.
 */
export interface SlackWebApi {
  /**
   * Calls `method`. Slack's answer is returned as a value: `{ ok: true, body }`
   * or `{ ok: false, error }` (its ok:false error string). No answer, a
   * timeout, a 429 or another non-200 is thrown as a classified EffectError.
   * `signal`, the attempt's (deliver.ts aborts it at the effect's timeout),
   * ends the call too: a call an effect starts late must not outlive its attempt.
   */
  call(method: string, params: Readonly<Record<string, unknown>>, timeoutMs: number, signal?: AbortSignal): Promise<SlackAnswer>;
}

export type SlackAnswer = { readonly ok: true; readonly body: JsonObject } | { readonly ok: false; readonly error: string };

/** `edge`: the fetch its calls go out through (the row's EffectContext.edge; shared/effects/outbound.ts). */
export function slackWebApi(token: string | undefined, baseUrl: string, edge: typeof fetch): SlackWebApi {
  const base = baseUrl.endsWith("/") ? baseUrl : `${baseUrl}/`;
  return {
    async call(method, params, timeoutMs, signal) {
      const headers: Record<string, string> = { "content-type": "application/x-www-form-urlencoded" };
      if (token) headers.authorization = `Bearer ${token}`;
      let response: Response;
      try {
        response = await edge(`${base}${method}`, {
          method: "POST",
          headers,
          body: formOf(params),
          // outbound.ts's rules for what an effect reads: no redirect followed (a 3xx is a non-200 below).
          redirect: "manual",
          signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs),
        });
      } catch (error) {
        // A timeout is a TimeoutError whether the call's own timer or the attempt's (deliver.ts) fired first.
        const name = error instanceof Error ? error.name : "";
        throw transient(
          name === "TimeoutError" ? `${method}: no answer within ${timeoutMs} ms` : `${method}: no answer (${String(error)})`,
        );
      }
      if (response.status !== 200) {
        await response.body?.cancel().catch(() => {});
        throw httpFailure(method, response.status, response.headers.get("retry-after"));
      }
      const answer = await readBounded(response.body, SLACK_ANSWER_MAX_BYTES);
      if (answer.truncated) throw transient(`${method}: an answer over ${SLACK_ANSWER_MAX_BYTES} bytes`);
      let body: unknown;
      try {
        body = JSON.parse(new TextDecoder().decode(answer.bytes));
      } catch {
        throw transient(`${method}: an answer that is not JSON`);
      }
      if (!isObject(body)) throw transient(`${method}: an answer that is not a JSON object`);
      if (body.ok === true) return { ok: true, body };
      return { ok: false, error: typeof body.error === "string" ? body.error : "unknown_error" };
    },
  };
}

/**
 * ok:false errors a retry can cure, per Slack's Web API docs. Every other
 * ok:false (channel_not_found, not_in_channel, invalid_auth, account_inactive,
 * message_not_found, …) is an answer a retry would only repeat: it parks.
 */
export const RETRYABLE_API_ERRORS: ReadonlySet<string> = new Set([
  "ratelimited",
  "internal_error",
  "fatal_error",
  "service_unavailable",
  "request_timeout",
]);

/** An ok:false answer as a failure: retried if Slack says a retry can help, parked otherwise. */
export function refusal(method: string, error: string, retryable: readonly string[] = []): EffectError {
  const message = `${method}: ${error}`;
  return RETRYABLE_API_ERRORS.has(error) || retryable.includes(error) ? transient(message) : fatal(message);
}

/** A non-200 as a failure: a 429 waits Retry-After, a 5xx or 408 retries, any other 4xx parks. */
export function httpFailure(method: string, status: number, retryAfter: string | null): EffectError {
  if (status === 429) return rateLimited(retryAfterMs(retryAfter), `${method}: HTTP 429 rate limited`);
  if (status >= 500 || status === 408) return transient(`${method}: HTTP ${status}`);
  return fatal(`${method}: HTTP ${status}`);
}

/** Slack's Retry-After when a 429 omits it (it never should). */
const DEFAULT_RETRY_AFTER_MS = 60_000;

/** Retry-After is whole seconds; anything else falls back to a minute. */
export function retryAfterMs(header: string | null): number {
  if (header !== null && /^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  return DEFAULT_RETRY_AFTER_MS;
}

/** Form fields as Slack expects them: objects and arrays JSON-encoded, absent values left out. */
function formOf(params: Readonly<Record<string, unknown>>): URLSearchParams {
  const form = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null) continue;
    form.set(key, typeof value === "object" ? JSON.stringify(value) : String(value));
  }
  return form;
}
