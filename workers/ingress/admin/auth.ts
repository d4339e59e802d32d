/**
 * The operator API's bearer check: `Authorization: Bearer <ADMIN_TOKEN>`.
 *
 * Constant time, whatever was sent: both the presented token and the
 * configured one are HMAC'd with a random key made once per isolate, and the
 * two 32-byte digests are compared with crypto.subtle.timingSafeEqual. A
 * token of another length, or none at all, takes the same path (an empty
 * string is digested too), so the time taken says nothing about how much of
 * the token matched or how long it is. The random key means the digests are
 * worthless outside this isolate.
 */

export type AuthVerdict = { readonly ok: true } | { readonly ok: false; readonly reason: "missing bearer token" | "token mismatch" };

let isolateKey: Promise<CryptoKey> | undefined;

function key(): Promise<CryptoKey> {
  isolateKey ??= crypto.subtle.generateKey({ name: "HMAC", hash: "SHA-256" }, false, ["sign"]) as Promise<CryptoKey>;
  return isolateKey;
}

async function digest(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.sign("HMAC", await key(), new TextEncoder().encode(text)));
}

/** The token of an `Authorization: Bearer …` header (scheme case-insensitive), or null. */
export function bearerToken(header: string | null): string | null {
  if (header === null) return null;
  const match = /^Bearer[ ]+([^\s]+)\s*$/i.exec(header);
  return match?.[1] ?? null;
}

export async function checkBearer(header: string | null, adminToken: string): Promise<AuthVerdict> {
  const presented = bearerToken(header);
  const [a, b] = await Promise.all([digest(presented ?? ""), digest(adminToken)]);
  const equal = constantTimeEqual(a, b);
  if (presented === null) return { ok: false, reason: "missing bearer token" };
  return equal ? { ok: true } : { ok: false, reason: "token mismatch" };
}

function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  const subtle = crypto.subtle as SubtleCrypto & { timingSafeEqual?: (x: ArrayBufferView, y: ArrayBufferView) => boolean };
  if (typeof subtle.timingSafeEqual === "function" && a.byteLength === b.byteLength) return subtle.timingSafeEqual(a, b);
  // Same-length digests, every byte visited: no early exit.
  let diff = a.byteLength ^ b.byteLength;
  for (let i = 0; i < Math.max(a.byteLength, b.byteLength); i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return diff === 0;
}

/** The one answer to every unauthenticated request: the same body and headers, whatever was wrong. */
export function unauthorized(): Response {
  return new Response("unauthorized\n", {
    status: 401,
    headers: {
      "www-authenticate": 'Bearer realm="ackbox-admin"',
      "content-type": "text/plain; charset=utf-8",
      "cache-control": "no-store",
    },
  });
}
