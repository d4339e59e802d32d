import { SlackAPIClient, SlackAPIConnectionError, SlackAPIError } from "slack-web-api-client";
import { EffectError, fatal, rateLimited, transient } from "../delivery/failure.ts";
import { withTimeout } from "../timeout.ts";

/**
 * The Slack Web API client: slack-web-api-client (fetch-based, runs on
 * Workers), with its retry handlers switched off. Its default handler sleeps
 * through a 429 inside the call, which would hold a Worker invocation for as
 * long as Slack asks; ackbox instead records the wait in the row and hands it
 * to the queue (message.retry({ delaySeconds })).
 */
export function slackWebApi(token: string | undefined, baseUrl: string): SlackAPIClient {
  return new SlackAPIClient(token, { baseUrl, retryHandlers: [], logLevel: "ERROR", throwSlackAPIError: true });
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

/** Slack's Retry-After when a 429 omits it (it never should). */
const DEFAULT_RETRY_AFTER_MS = 60_000;

/**
 * Turns whatever a Web API call threw into a classified EffectError: a
 * transport failure (no answer, non-200) or an API answer (ok:false).
 */
export function classifySlackError(method: string, error: unknown): EffectError {
  if (error instanceof EffectError) return error;
  if (error instanceof SlackAPIError) {
    const message = `${method}: ${error.error}`;
    return RETRYABLE_API_ERRORS.has(error.error) ? transient(message) : fatal(message);
  }
  if (error instanceof SlackAPIConnectionError) {
    if (error.status === 429) {
      return rateLimited(retryAfterMs(error.headers?.get("retry-after") ?? null), `${method}: HTTP 429 rate limited`);
    }
    if (error.status === -1) return transient(`${method}: no answer (${String(error.cause ?? "connection failed")})`);
    if (error.status >= 500 || error.status === 408) return transient(`${method}: HTTP ${error.status}`);
    return fatal(`${method}: HTTP ${error.status}`);
  }
  if (error instanceof Error && error.name === "TimeoutError") return transient(`${method}: ${error.message}`);
  return transient(`${method}: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`);
}

/** Retry-After is whole seconds; anything else falls back to a minute. */
export function retryAfterMs(header: string | null): number {
  if (header !== null && /^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  return DEFAULT_RETRY_AFTER_MS;
}

/**
 * One Web API call as an effect makes it: bounded by `timeoutMs`, and with any
 * failure classified. `absorb` may turn an ok:false answer into a success
 * (reactions.add's already_reacted).
 */
export async function callWebApi<T>(
  method: string,
  timeoutMs: number,
  call: () => Promise<T>,
  absorb?: (error: SlackAPIError) => T | undefined,
): Promise<T> {
  try {
    return await withTimeout(call(), timeoutMs, method);
  } catch (error) {
    const absorbed = error instanceof SlackAPIError ? absorb?.(error) : undefined;
    if (absorbed !== undefined) return absorbed;
    throw classifySlackError(method, error);
  }
}
