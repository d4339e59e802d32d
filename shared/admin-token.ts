/**
 * What makes an ADMIN_TOKEN strong enough, in one function: the settings
 * check (shared/settings.ts), `npm run setup` and the local run all use it.
 *
 * The token unlocks replay and every stored payload, so a guessable one is a
 * hole, not a taste. The rule: at least 32 characters, no whitespace, at
 * least 8 distinct characters, no character making up more than a third
 * of it, and no repeated stretches (at least 90 % of its 4-character windows
 * distinct). A token from `openssl rand -hex 32` (64 hex digits) passes with a
 * wide margin; so does `openssl rand -base64 32`. 32 × "a",
 * "abcdabcdabcd…" and "password-password-password-12345" do not. It is a
 * floor against the obviously guessable, not an entropy meter.
 */

export const ADMIN_TOKEN_MIN_LENGTH = 32;
const MIN_DISTINCT = 8;
const MAX_SHARE_OF_ONE = 1 / 3;
const MIN_DISTINCT_WINDOWS = 0.9;
export const ADMIN_TOKEN_HOWTO = "generate one with `openssl rand -hex 32`";

/** Why `token` is too weak to be ADMIN_TOKEN, or undefined when it is strong enough. */
export function adminTokenWeakness(token: string): string | undefined {
  const chars = [...token];
  if (chars.length < ADMIN_TOKEN_MIN_LENGTH) {
    return `ADMIN_TOKEN is too short (${chars.length} characters; want at least ${ADMIN_TOKEN_MIN_LENGTH}): ${ADMIN_TOKEN_HOWTO}`;
  }
  if (/\s/.test(token)) return `ADMIN_TOKEN contains whitespace: ${ADMIN_TOKEN_HOWTO}`;
  const counts = new Map<string, number>();
  for (const c of chars) counts.set(c, (counts.get(c) ?? 0) + 1);
  const most = Math.max(...counts.values());
  if (counts.size < MIN_DISTINCT || most > chars.length * MAX_SHARE_OF_ONE) {
    return `ADMIN_TOKEN has too little variety (${counts.size} distinct characters; want at least ${MIN_DISTINCT}, none more than a third of it): ${ADMIN_TOKEN_HOWTO}`;
  }
  const windows = chars.length - 3;
  const distinctWindows = new Set(Array.from({ length: windows }, (_, i) => chars.slice(i, i + 4).join(""))).size;
  if (distinctWindows < windows * MIN_DISTINCT_WINDOWS) {
    return `ADMIN_TOKEN repeats itself (${windows - distinctWindows} of its ${windows} 4-character stretches recur): ${ADMIN_TOKEN_HOWTO}`;
  }
  return undefined;
}

/** A fresh token as `openssl rand -hex 32` makes it: 32 random bytes, 64 hex digits. */
export function generateAdminToken(): string {
  for (;;) {
    const bytes = crypto.getRandomValues(new Uint8Array(32));
    const token = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
    // A random draw failing the variety rule is astronomically rare; never hand one out anyway.
    if (adminTokenWeakness(token) === undefined) return token;
  }
}
