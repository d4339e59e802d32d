import { describe, expect, it } from "vitest";
import { importTokenKey, open, seal, tokenKeys } from "../../shared/installations/crypto.ts";
import { parseSettings } from "../../shared/settings.ts";

const OLD = "a1".repeat(32);
const NEW = "b2".repeat(32);
const TOKEN = "xoxb-1234-secret-token";

describe("tokens at rest (AES-GCM)", () => {
  it("seals to text that holds no token, under the current key's id, and opens back", async () => {
    const keys = await tokenKeys(NEW, undefined);
    const sealed = await seal(keys, "T:T1", TOKEN);
    expect(sealed).toMatch(/^[0-9a-f]{24}\.[0-9a-f]+$/);
    expect(sealed).not.toContain("xoxb");
    expect(await open(keys, keys.current.id, "T:T1", sealed)).toBe(TOKEN);
  });

  it("names a key by 8 hex digits of its SHA-256: stable, and different per key", async () => {
    const [a, b, a2] = await Promise.all([importTokenKey(OLD), importTokenKey(NEW), importTokenKey(OLD.toUpperCase())]);
    expect(a.id).toMatch(/^[0-9a-f]{8}$/);
    expect(a.id).not.toBe(b.id);
    expect(a2.id).toBe(a.id);
  });

  it("keeps rows sealed under the previous key readable after a rotation, and re-seals under the new one", async () => {
    const before = await tokenKeys(OLD, undefined);
    const oldRow = { keyId: before.current.id, sealed: await seal(before, "T:T1", TOKEN) };
    const rotating = await tokenKeys(NEW, OLD);
    expect(await open(rotating, oldRow.keyId, "T:T1", oldRow.sealed)).toBe(TOKEN);
    const resealed = await seal(rotating, "T:T1", TOKEN);
    const after = await tokenKeys(NEW, undefined);
    expect(await open(after, rotating.current.id, "T:T1", resealed)).toBe(TOKEN);
    // Once the previous key is dropped, an un-rewritten old row says which key it needs.
    await expect(open(after, oldRow.keyId, "T:T1", oldRow.sealed)).rejects.toThrow(
      `no configured token encryption key has id ${oldRow.keyId}`,
    );
  });

  it("refuses a ciphertext moved to another installation's row, or altered", async () => {
    const keys = await tokenKeys(NEW, undefined);
    const sealed = await seal(keys, "T:T1", TOKEN);
    await expect(open(keys, keys.current.id, "T:T2", sealed)).rejects.toThrow();
    const flipped = sealed.slice(0, -1) + (sealed.endsWith("0") ? "1" : "0");
    await expect(open(keys, keys.current.id, "T:T1", flipped)).rejects.toThrow();
  });
});

describe("distributed-app settings", () => {
  const oauth = {
    SLACK_CLIENT_ID: "1.2",
    SLACK_CLIENT_SECRET: "s",
    SLACK_REDIRECT_URL: "https://ackbox.example/slack/oauth_redirect",
    TOKEN_ENCRYPTION_KEY: NEW,
  };

  it("is single-workspace mode when SLACK_CLIENT_ID is unset", () => {
    const result = parseSettings({});
    expect(result.ok && result.settings.oauth).toBe(undefined);
  });

  it("reads the OAuth settings, scopes as a list (empty = the manifest's)", () => {
    const result = parseSettings({ ...oauth, SLACK_SCOPES: "chat:write, commands" });
    if (!result.ok) throw new Error(result.errors.join("; "));
    expect(result.settings.oauth).toEqual({
      clientId: "1.2",
      clientSecret: "s",
      scopes: ["chat:write", "commands"],
      redirectUrl: "https://ackbox.example/slack/oauth_redirect",
      tokenKey: NEW,
      previousTokenKey: undefined,
    });
  });

  it("requires the secret, the redirect URL and the key with a client id, and names each", () => {
    const result = parseSettings({ SLACK_CLIENT_ID: "1.2" });
    expect(result.ok ? [] : result.errors).toEqual([
      "SLACK_CLIENT_SECRET is required when SLACK_CLIENT_ID is set",
      "SLACK_REDIRECT_URL is required when SLACK_CLIENT_ID is set",
      "TOKEN_ENCRYPTION_KEY is required when SLACK_CLIENT_ID is set",
    ]);
  });

  it("refuses a key that is not 64 hex digits without echoing it, and a redirect URL on another path", () => {
    const result = parseSettings({
      ...oauth,
      TOKEN_ENCRYPTION_KEY_PREVIOUS: "short-secret",
      SLACK_REDIRECT_URL: "https://x.example/callback",
    });
    const errors = result.ok ? [] : result.errors;
    expect(errors).toContain("TOKEN_ENCRYPTION_KEY_PREVIOUS must be 64 hex digits (openssl rand -hex 32)");
    expect(errors.join()).not.toContain("short-secret");
    expect(errors.some((e) => e.startsWith("SLACK_REDIRECT_URL must be an http(s) URL ending in /slack/oauth_redirect"))).toBe(true);
  });
});
