/**
 * Slack request signatures (v0): HMAC-SHA256 over "v0:<timestamp>:<raw body>"
 * with the app's signing secret, sent as `X-Slack-Signature: v0=<64 hex>` with
 * `X-Slack-Request-Timestamp: <unix seconds>`.
 *
 * Two checks run before the body is read (see checkSignatureHeaders) so that an
 * unauthenticated sender cannot make us read or hash a large body; the HMAC
 * itself runs once the body is in hand.
 */

export type Verdict = { readonly ok: true } | { readonly ok: false; readonly reason: string };

/** Slack's replay window: requests more than five minutes away are refused, in either direction. */
export const MAX_SKEW_SECONDS = 300;

const SIGNATURE = /^v0=[0-9a-f]{64}$/;
const TIMESTAMP = /^\d{1,12}$/;

export interface SignatureHeaders {
  readonly signature: string;
  readonly timestamp: number;
}

/**
 * The header half of the check: both headers present and well formed, and the
 * timestamp within five minutes of `nowMs`, past or future. Slack's own SDKs
 * only refuse the past; a timestamp from the future is just as much a replay
 * (or a clock gone wrong), so it is refused too.
 */
export function checkSignatureHeaders(
  headers: Headers,
  nowMs: number,
): { ok: true; value: SignatureHeaders } | { ok: false; reason: string } {
  const signature = headers.get("x-slack-signature");
  const timestamp = headers.get("x-slack-request-timestamp");
  if (signature === null) return { ok: false, reason: "missing X-Slack-Signature" };
  if (timestamp === null) return { ok: false, reason: "missing X-Slack-Request-Timestamp" };
  if (!TIMESTAMP.test(timestamp)) return { ok: false, reason: "garbled X-Slack-Request-Timestamp" };
  if (!SIGNATURE.test(signature)) return { ok: false, reason: "garbled X-Slack-Signature (want v0= and 64 lowercase hex digits)" };
  const skew = Math.floor(nowMs / 1000) - Number(timestamp);
  if (Math.abs(skew) > MAX_SKEW_SECONDS) {
    return {
      ok: false,
      reason: `timestamp ${skew > 0 ? "too old" : "in the future"} (${Math.abs(skew)} s away, limit ${MAX_SKEW_SECONDS} s)`,
    };
  }
  return { ok: true, value: { signature, timestamp: Number(timestamp) } };
}

/**
 * The HMAC half. Tries each secret in turn (current, then previous during a
 * rotation). crypto.subtle.verify compares in constant time; the hex is only
 * decoded, never compared as a string.
 */
export async function verifySignature(headers: SignatureHeaders, rawBody: Uint8Array, secrets: readonly string[]): Promise<Verdict> {
  if (secrets.length === 0) return { ok: false, reason: "no signing secret configured" };
  const expected = hexToBytes(headers.signature.slice(3));
  const prefix = new TextEncoder().encode(`v0:${headers.timestamp}:`);
  // A fresh ArrayBuffer-backed view: what crypto.subtle takes under every lib typing (workerd's and the DOM's).
  const message = new Uint8Array(new ArrayBuffer(prefix.length + rawBody.length));
  message.set(prefix, 0);
  message.set(rawBody, prefix.length);
  for (const secret of secrets) {
    const key = await hmacKey(secret);
    if (await crypto.subtle.verify("HMAC", key, expected, message)) return { ok: true };
  }
  return { ok: false, reason: "signature mismatch" };
}

/** The signature Slack would send for this body; used by tests, the demo and the load tools. */
export async function signatureFor(secret: string, timestamp: number, rawBody: string): Promise<string> {
  const key = await hmacKey(secret);
  const mac = await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`v0:${timestamp}:${rawBody}`));
  return `v0=${[...new Uint8Array(mac)].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

const keys = new Map<string, Promise<CryptoKey>>();

/** Imported keys are cached per isolate: importKey is most of a verification's cost. */
function hmacKey(secret: string): Promise<CryptoKey> {
  let key = keys.get(secret);
  if (!key) {
    key = crypto.subtle.importKey("raw", new TextEncoder().encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
    keys.set(secret, key);
  }
  return key;
}

function hexToBytes(hex: string): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(new ArrayBuffer(hex.length / 2));
  for (let i = 0; i < bytes.length; i++) bytes[i] = Number.parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return bytes;
}
