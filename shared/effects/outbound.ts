/**
 * THE ONE PLACE that decides what an effect's outbound HTTP may reach and how
 * much of the answer it reads. The response_url effect uses it; custom
 * effects get `guardedFetch(policy, label, edge)` as their ctx.fetch (any host: their URLs
 * are the app author's code, not a request's input — but https on 443, no
 * redirect followed, at most DEFAULT_MAX_BODY_BYTES read); the Slack Web API
 * client (shared/slack/web-api.ts) reads its answers through readBounded.
 *
 * Every call goes out through an `edge` (EffectContext.edge): the one fetch a
 * row's outbound calls use, handed to each builder. The Workers' entries give
 * `networkEdge`, the real network; the test kit (shared/app/testing.ts) gives
 * its fakes, per run — never by replacing globalThis.fetch.
 *
 * The rules, for any URL an effect is handed (a response_url comes from the
 * request Slack signed, but an effect must not trust where a URL points):
 *
 * - the host must be in the allowed list (`*` allows any host);
 * - https on the default port (443) — except loopback hosts (127.0.0.1,
 *   localhost, [::1]), which exist only in a local run (a deployed Worker
 *   cannot reach them), where a stand-in listens on plain http and any port;
 * - no URL credentials (user:pass@);
 * - redirects are not followed (`redirect: "manual"`): only the first URL is
 *   checked, so a followed redirect could lead anywhere. A 3xx is a failure
 *   that says where it pointed (host only);
 * - at most `maxBodyBytes` of the answer is read; the rest is cancelled, so
 *   a huge or endless answer costs neither memory nor time.
 *
 * Refusals and redirects park (a retry would repeat them); no answer or a
 * timeout is transient, as for any Slack call.
 */
import { fatal, transient } from "../delivery/failure.ts";

export interface OutboundPolicy {
  /** Hosts that may be reached (lower case); `*` allows any. */
  readonly hosts: readonly string[];
  /** Per-request timeout. */
  readonly timeoutMs: number;
  /** Most bytes of an answer that are read. */
  readonly maxBodyBytes: number;
}

/** What an effect's own fetch may read of an answer: plenty for any API's JSON, not a download. */
export const DEFAULT_MAX_BODY_BYTES = 64 * 1024;

/**
 * The real network: globalThis.fetch, read at each call — the edge the Workers' entries default to (the engine's
 * own tests replace globalThis.fetch under it). A wrapper, not fetch itself: workerd refuses fetch called as a
 * method of another object (ctx.edge(…)): "Illegal invocation".
 */
export const networkEdge: typeof fetch = (input, init) => globalThis.fetch(input, init);

const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]"]);

/** Why `url` may not be reached under `hosts`, or undefined when it may. */
export function outboundRefusal(url: string, hosts: readonly string[]): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "not a valid URL";
  }
  const host = parsed.hostname.toLowerCase();
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") return `scheme ${parsed.protocol} is not https`;
  if (parsed.username !== "" || parsed.password !== "") return `${parsed.protocol}//${host} carries credentials in the URL`;
  if (!LOOPBACK.has(host)) {
    if (parsed.protocol !== "https:") return `http://${host} is not https`;
    if (parsed.port !== "") return `https://${host}:${parsed.port} is not on the default port`;
  }
  if (!hosts.includes("*") && !hosts.includes(host)) return `host ${host} is not allowed`;
  return undefined;
}

/** May `url` be reached under `hosts`? */
export function outboundAllowed(url: string, hosts: readonly string[]): boolean {
  return outboundRefusal(url, hosts) === undefined;
}

export interface BoundedBody {
  readonly bytes: Uint8Array<ArrayBuffer>;
  /** The answer was longer than the limit; what was read is its prefix. */
  readonly truncated: boolean;
}

/** Reads at most `limit` bytes of a body and cancels the rest. */
export async function readBounded(body: ReadableStream<Uint8Array> | null, limit: number): Promise<BoundedBody> {
  if (body === null) return { bytes: new Uint8Array(0), truncated: false };
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let truncated = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const room = limit - size;
      if (value.byteLength > room) {
        chunks.push(value.subarray(0, room));
        size = limit;
        truncated = true;
        break;
      }
      chunks.push(value);
      size += value.byteLength;
    }
  } finally {
    if (truncated) await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return { bytes, truncated };
}

/**
 * A fetch as an effect may use it: a URL, not a Request (so the URL checked is
 * the URL sent). `redirect` is always "manual"; a `signal` given (the engine's
 * abort at the effect's timeout) is combined with the policy's own timeout.
 */
export type EffectFetch = (url: string | URL, init?: Omit<RequestInit, "redirect">) => Promise<Response>;

/**
 * A fetch that applies the policy: refuses what it may not reach before
 * sending, never follows a redirect, times out, and hands back an answer
 * whose body is at most maxBodyBytes (header `x-ackbox-truncated: 1` when
 * cut). `label` starts every failure message (the effect's name); `edge` is
 * what it sends through (the row's EffectContext.edge).
 * Throws EffectErrors: fatal for a refusal or a redirect, transient for no
 * answer in time.
 */
export function guardedFetch(policy: OutboundPolicy, label: string, edge: typeof fetch): EffectFetch {
  return async (input, init) => {
    const url = String(input);
    const refusal = outboundRefusal(url, policy.hosts);
    if (refusal !== undefined) throw fatal(`${label}: refused to call ${safeOrigin(url)}: ${refusal}`);
    let response: Response;
    try {
      const timeout = AbortSignal.timeout(policy.timeoutMs);
      const signal = init?.signal ? AbortSignal.any([init.signal, timeout]) : timeout;
      response = await edge(url, { ...init, redirect: "manual", signal });
    } catch (error) {
      const name = error instanceof Error ? error.name : "Error";
      throw transient(`${label}: ${name === "TimeoutError" ? `no answer within ${policy.timeoutMs} ms` : `no answer (${String(error)})`}`);
    }
    if (response.status >= 300 && response.status < 400) {
      await response.body?.cancel().catch(() => {});
      throw fatal(
        `${label}: answered HTTP ${response.status}, a redirect to ${safeOrigin(response.headers.get("location") ?? "", url)}; redirects are not followed`,
      );
    }
    const body = await readBounded(response.body, policy.maxBodyBytes);
    const headers = new Headers(response.headers);
    headers.delete("content-length");
    if (body.truncated) headers.set("x-ackbox-truncated", "1");
    return new Response(response.status === 204 || response.status === 205 ? null : body.bytes, {
      status: response.status,
      statusText: response.statusText,
      headers,
    });
  };
}

/** The origin of a URL, never its path or query (where a response_url's secret is). */
export function safeOrigin(url: string, base?: string): string {
  try {
    return new URL(url, base).origin;
  } catch {
    return "an invalid URL";
  }
}
