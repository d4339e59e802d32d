/**
 * Tokens at rest: AES-GCM (crypto.subtle) under TOKEN_ENCRYPTION_KEY, 32
 * random bytes as 64 hex digits (`openssl rand -hex 32`). A sealed value is
 * "<12-byte iv hex>.<ciphertext+tag hex>"; the row that holds it records the
 * key's id (the first 8 hex digits of the key's SHA-256 — names the key,
 * reveals nothing of it), so a reader picks the right key: the current one,
 * or TOKEN_ENCRYPTION_KEY_PREVIOUS while a rotation is under way. Writes
 * always seal under the current key, so every write re-encrypts.
 *
 * The install key is bound as additional data: a ciphertext copied into
 * another installation's row does not open there.
 */

export interface TokenKey {
  readonly id: string;
  readonly key: CryptoKey;
}

export interface TokenKeys {
  /** Seals every write. */
  readonly current: TokenKey;
  /** Opens rows sealed before a rotation. */
  readonly previous: TokenKey | undefined;
}

const HEX_KEY = /^[0-9a-f]{64}$/i;

/** Whether `text` is a usable key (for settings validation): 64 hex digits. */
export function isTokenKeyText(text: string): boolean {
  return HEX_KEY.test(text);
}

export async function importTokenKey(hex: string): Promise<TokenKey> {
  if (!isTokenKeyText(hex)) throw new Error("a token encryption key must be 64 hex digits (openssl rand -hex 32)");
  const raw = hexToBytes(hex);
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", raw));
  const key = await crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]);
  return { id: bytesToHex(digest.slice(0, 4)), key };
}

export async function tokenKeys(current: string, previous: string | undefined): Promise<TokenKeys> {
  return { current: await importTokenKey(current), previous: previous ? await importTokenKey(previous) : undefined };
}

/** `plain` sealed under the current key, bound to `installKey`. */
export async function seal(keys: TokenKeys, installKey: string, plain: string): Promise<string> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = await crypto.subtle.encrypt(
    { name: "AES-GCM", iv, additionalData: new TextEncoder().encode(installKey) },
    keys.current.key,
    new TextEncoder().encode(plain),
  );
  return `${bytesToHex(iv)}.${bytesToHex(new Uint8Array(sealed))}`;
}

/** Opens a value sealed under the key `keyId`. Throws when that key is not configured or the value was tampered with. */
export async function open(keys: TokenKeys, keyId: string, installKey: string, sealed: string): Promise<string> {
  const key = [keys.current, keys.previous].find((k) => k?.id === keyId);
  if (!key) throw new Error(`no configured token encryption key has id ${keyId} (set it as TOKEN_ENCRYPTION_KEY_PREVIOUS)`);
  const [ivHex, dataHex] = sealed.split(".");
  if (!ivHex || !dataHex) throw new Error("a sealed token is not <iv>.<ciphertext>");
  const plain = await crypto.subtle.decrypt(
    { name: "AES-GCM", iv: hexToBytes(ivHex), additionalData: new TextEncoder().encode(installKey) },
    key.key,
    hexToBytes(dataHex),
  );
  return new TextDecoder().decode(plain);
}

function hexToBytes(hex: string): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Number.parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return bytes;
}

function bytesToHex(bytes: Uint8Array): string {
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}
