/**
 * shared/credentials.ts: the one rule for what in a payload is a credential.
 */
import { describe, expect, it } from "vitest";
import { isCredential, redactCredentials, scrubFreeText, scrubStoredPayload } from "../../shared/credentials.ts";

describe("isCredential", () => {
  it.each([
    // by name
    ["api_token", "abc123", true],
    ["clientSecret", "abc", true],
    ["password", "hunter2", true],
    ["Authorization", "Bearer x", true],
    ["apiKey", "k", true],
    ["signing_signature", "v0=ab", true],
    // URL fields holding a URL
    ["url", "https://hooks.slack.com/commands/T1/2/x", true],
    ["response_url", "https://example.com/r/abc", true],
    ["webhook", "https://example.com/hook/abc", true],
    ["callback_url", "http://127.0.0.1:9000/x", true],
    // by shape, whatever the name
    ["text", "xoxb-123-456-abc", true],
    ["note", "xapp-1-A1-2-abc", true],
    // a custom step's workflow token (bot_access_token)
    ["text", "xwfp-1325532282098-1322446258629-abc", true],
    ["link", "https://hooks.slack.com/services/T/B/x", true],
    // not credentials
    ["url", "not a url", false],
    ["channel", "C0123", false],
    ["text", "see https://example.com/docs", false],
    ["ts", "1764504000.000100", false],
    ["token", 42, false],
    ["token", "", false],
  ])("%s = %j → %s", (key, value, expected) => {
    expect(isCredential(key, value)).toBe(expected);
  });
});

describe("redactCredentials", () => {
  it("redacts at any depth, keeps everything else, and tells URLs apart by fingerprint", async () => {
    const payload = {
      url: "https://hooks.slack.com/commands/T1/2/first",
      body: { text: "hello", blocks: [{ type: "section", headers: { authorization: "Bearer abc" } }] },
      others: [{ webhook_url: "https://hooks.example.com/second" }],
    };
    const { value, changed } = await redactCredentials(payload);
    expect(changed).toBe(true);
    const text = JSON.stringify(value);
    for (const secret of ["first", "second", "Bearer abc"]) expect(text).not.toContain(secret);
    const v = value as typeof payload;
    expect(v.url).toMatch(/^\[redacted https:\/\/hooks\.slack\.com #[0-9a-f]{8}\]$/);
    expect(v.others[0]?.webhook_url).toMatch(/^\[redacted https:\/\/hooks\.example\.com #[0-9a-f]{8}\]$/);
    expect(v.body.blocks[0]?.headers.authorization).toMatch(/^\[redacted #[0-9a-f]{8}\]$/);
    expect(v.body.text).toBe("hello");
    const again = await redactCredentials({ url: "https://hooks.slack.com/commands/T1/2/other" });
    expect((again.value as { url: string }).url).not.toBe(v.url);
  });

  it("is idempotent: a redacted value is not redacted again", async () => {
    const once = await scrubStoredPayload(JSON.stringify({ url: "https://hooks.slack.com/commands/T1/2/x" }));
    expect(once).toBeDefined();
    expect(await scrubStoredPayload(once as string)).toBeUndefined();
  });

  it("leaves payloads without credentials, and text that is not JSON, untouched", async () => {
    expect(await scrubStoredPayload(JSON.stringify({ channel: "C1", text: "hi" }))).toBeUndefined();
    expect(await scrubStoredPayload("not json")).toBeUndefined();
  });
});

describe("scrubFreeText: an effect's error text, on its way to last_error, logs and operator answers", () => {
  it("replaces Slack tokens of every kind, wherever they sit in the text", () => {
    expect(scrubFreeText("auth with xoxb-1234-5678-abcdEFGH failed; user xoxp-9-9 too, app xapp-1-A0-1-ff")).toBe(
      "auth with [redacted token] failed; user [redacted token] too, app [redacted token]",
    );
    expect(scrubFreeText("the step's xwfp-1-2-abc was refused")).toBe("the step's [redacted token] was refused");
  });

  it("cuts every URL to its origin: a response_url, a hook, a third-party webhook's path and query, userinfo", () => {
    expect(scrubFreeText("could not post to https://hooks.slack.com/commands/T0/123/abcSECRET: 500")).toBe(
      "could not post to https://hooks.slack.com/[redacted]: 500",
    );
    expect(scrubFreeText('fetch "https://api.example.com/v1/send?key=sk_live_1" failed')).toBe(
      'fetch "https://api.example.com/[redacted]" failed',
    );
    expect(scrubFreeText("at http://user:pass@db.example.com:5432/x")).toBe("at http://db.example.com:5432/[redacted]");
  });

  it("a URL as JSON writes it with escaped slashes (a raw Slack body in an app's error) is cut to its origin too", () => {
    expect(scrubFreeText('{"ok":false,"response_url":"https:\\/\\/hooks.slack.com\\/actions\\/T1\\/123\\/SECRET"}')).toBe(
      '{"ok":false,"response_url":"https:\\/\\/hooks.slack.com/[redacted]"}',
    );
  });

  it("a token right after a letter or digit (URL-encoded: %3Dxoxb-…) is replaced too", () => {
    expect(scrubFreeText("body a%3D1%26token%3Dxoxb-123-456-abc")).toBe("body a%3D1%26token%3D[redacted token]");
  });

  it("leaves text without credentials as it is, a bare origin included (the engine's own messages name origins)", () => {
    for (const text of [
      "Slack answered ok:false channel_not_found",
      "outbound: refused to call https://internal.example: not in OUTBOUND_ALLOW",
      "TypeError: x is not a function",
      "",
    ]) {
      expect(scrubFreeText(text)).toBe(text);
    }
  });
});
