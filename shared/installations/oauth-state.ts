/**
 * The OAuth install's state, signed instead of stored: "<expires_at>.<nonce>.<mac>",
 * the MAC an HMAC-SHA256 of "<expires_at>.<nonce>" under a key derived (HKDF)
 * from TOKEN_ENCRYPTION_KEY — never the AES key itself. /slack/install is
 * public: a state it had to store was a row per unauthenticated request, and a
 * global bound on those rows let anyone answer every real install 503. A signed
 * state costs nothing to issue; the redirect checks the signature and the expiry
 * before it touches D1, so only a state this app issued, within its 10 minutes,
 * reaches the single-use record (install-flow.ts).
 *
 * A state signed under TOKEN_ENCRYPTION_KEY_PREVIOUS is accepted too, so an
 * install under way survives a key rotation.
 */

const STATE_MAC_INFO = new TextEncoder().encode("ackbox oauth state v1");
const STATE_SHAPE = /^(\d{1,16})\.([0-9a-f]{32})\.([0-9a-f]{64})$/;

export interface StateKeys {
  readonly current: CryptoKey;
  readonly previous: CryptoKey | undefined;
}

export type StateCheck =
  | { readonly ok: true; readonly expiresAt: number }
  | { readonly ok: false; readonly reason: "malformed" | "forged" };

async function macKeyOf(hexKey: string): Promise<CryptoKey> {
  const raw = new Uint8Array(hexKey.length / 2);
  for (let i = 0; i < raw.length; i++) raw[i] = Number.parseInt(hexKey.slice(i * 2, i * 2 + 2), 16);
  const base = await crypto.subtle.importKey("raw", raw, "HKDF", false, ["deriveKey"]);
  return crypto.subtle.deriveKey(
    { name: "HKDF", hash: "SHA-256", salt: new Uint8Array(0), info: STATE_MAC_INFO },
    base,
    { name: "HMAC", hash: "SHA-256", length: 256 },
    false,
    ["sign", "verify"],
  );
}

/** The signing keys from TOKEN_ENCRYPTION_KEY (and its previous value, while a rotation is under way). */
export async function stateKeys(current: string, previous: string | undefined): Promise<StateKeys> {
  return { current: await macKeyOf(current), previous: previous ? await macKeyOf(previous) : undefined };
}

/** A fresh state that expires at `expiresAt`. */
export async function issueState(keys: StateKeys, expiresAt: number): Promise<string> {
  const nonce = toHex(crypto.getRandomValues(new Uint8Array(16)));
  const signed = `${expiresAt}.${nonce}`;
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", keys.current, new TextEncoder().encode(signed)));
  return `${signed}.${toHex(mac)}`;
}

/** Whether `state` was issued by this app (current or previous key); its expiry when it was. Expiry is the caller's check. */
export async function checkState(keys: StateKeys, state: string): Promise<StateCheck> {
  const parts = STATE_SHAPE.exec(state);
  if (!parts) return { ok: false, reason: "malformed" };
  const [, expires, nonce, macHex] = parts as unknown as [string, string, string, string];
  const signed = new TextEncoder().encode(`${expires}.${nonce}`);
  const mac = fromHex(macHex);
  for (const key of [keys.current, keys.previous]) {
    // crypto.subtle.verify compares in constant time.
    if (key && (await crypto.subtle.verify("HMAC", key, mac, signed))) return { ok: true, expiresAt: Number(expires) };
  }
  return { ok: false, reason: "forged" };
}

function toHex(bytes: Uint8Array): string {
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}

function fromHex(hex: string): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Number.parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return bytes;
}
