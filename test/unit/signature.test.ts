import { describe, expect, it } from "vitest";
import { checkSignatureHeaders, signatureFor, verifySignature } from "../../shared/slack/signature.ts";

const NOW = 1_531_420_618_000;
const headers = (signature: string | null, timestamp: string | null) => {
  const h = new Headers();
  if (signature !== null) h.set("X-Slack-Signature", signature);
  if (timestamp !== null) h.set("X-Slack-Request-Timestamp", timestamp);
  return h;
};
const hex64 = "a".repeat(64);

describe("checkSignatureHeaders", () => {
  it.each([
    [null, "1531420618", "missing X-Slack-Signature"],
    [`v0=${hex64}`, null, "missing X-Slack-Request-Timestamp"],
    [`v0=${hex64}`, "1531420618.5", "garbled X-Slack-Request-Timestamp"],
    [`v0=${hex64}`, "-5", "garbled X-Slack-Request-Timestamp"],
    [`v1=${hex64}`, "1531420618", "garbled X-Slack-Signature"],
    [`v0=${hex64.toUpperCase()}`, "1531420618", "garbled X-Slack-Signature"],
    [`v0=${hex64.slice(1)}`, "1531420618", "garbled X-Slack-Signature"],
    [`v0=${hex64}0`, "1531420618", "garbled X-Slack-Signature"],
    [`v0=${hex64}`, "1531420317", "timestamp too old (301 s away, limit 300 s)"],
    [`v0=${hex64}`, "1531420919", "timestamp in the future (301 s away, limit 300 s)"],
  ])("refuses signature %s, timestamp %s: %s", (signature, timestamp, reason) => {
    const result = checkSignatureHeaders(headers(signature, timestamp), NOW);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toContain(reason);
  });

  it("accepts a timestamp exactly 300 s away in either direction", () => {
    expect(checkSignatureHeaders(headers(`v0=${hex64}`, "1531420318"), NOW).ok).toBe(true);
    expect(checkSignatureHeaders(headers(`v0=${hex64}`, "1531420918"), NOW).ok).toBe(true);
  });
});

describe("verifySignature", () => {
  const body = new TextEncoder().encode("token=x&team_id=T1");
  it("accepts the current or the previous secret, and nothing else", async () => {
    const ts = 1_531_420_618;
    const byPrevious = await signatureFor("old-secret", ts, "token=x&team_id=T1");
    expect(await verifySignature({ signature: byPrevious, timestamp: ts }, body, ["new-secret", "old-secret"])).toEqual({ ok: true });
    expect(await verifySignature({ signature: byPrevious, timestamp: ts }, body, ["new-secret"])).toEqual({
      ok: false,
      reason: "signature mismatch",
    });
    expect(await verifySignature({ signature: byPrevious, timestamp: ts }, body, [])).toEqual({
      ok: false,
      reason: "no signing secret configured",
    });
  });

  it("binds the timestamp: the same body signed at another time does not verify", async () => {
    const signature = await signatureFor("s", 1_531_420_618, "token=x&team_id=T1");
    expect(await verifySignature({ signature, timestamp: 1_531_420_619 }, body, ["s"])).toEqual({
      ok: false,
      reason: "signature mismatch",
    });
  });
});
