import { describe, expect, it } from "vitest";
import { adminTokenWeakness, generateAdminToken } from "../../shared/admin-token.ts";
import { parseSettings, SETTINGS, SHARD_COUNT_PREVIOUS_REFUSED } from "../../shared/settings.ts";

describe("parseSettings", () => {
  it("gives every documented default when nothing is set", () => {
    const result = parseSettings({});
    if (!result.ok) throw new Error(result.errors.join("; "));
    expect(result.settings).toMatchObject({
      signingSecrets: [],
      slackApiUrl: "https://slack.com/api/",
      responseUrlHosts: ["hooks.slack.com"],
      maxBodyBytes: 524_288,
      ackBudgetMs: 2000,
      leaseMs: 300_000,
      effectTimeoutMs: 10_000,
      maxAttempts: 8,
      sweepGraceMs: 60_000,
      receiptRetentionMs: 72 * 3_600_000,
    });
  });

  it("reads lists, secrets and overrides", () => {
    const result = parseSettings({
      SLACK_SIGNING_SECRET: " current ",
      SLACK_SIGNING_SECRET_PREVIOUS: "previous",
      SLACK_SCOPES: "chat:write, commands,,",
      SLACK_API_URL: "http://127.0.0.1:9000",
      LEASE_SECONDS: "60",
      EFFECT_TIMEOUT_SECONDS: "30",
    });
    if (!result.ok) throw new Error(result.errors.join("; "));
    expect(result.settings.signingSecrets).toEqual(["current", "previous"]);
    expect(result.settings.oauth).toBeUndefined(); // SLACK_SCOPES is read with SLACK_CLIENT_ID only
    expect(result.settings.slackApiUrl).toBe("http://127.0.0.1:9000/");
    expect(result.settings.leaseMs).toBe(60_000);
  });

  it("reports every bad value at once, with its name and what it wanted", () => {
    const result = parseSettings({ LEASE_SECONDS: "ten", MAX_ATTEMPTS: "0", SLACK_API_URL: "slack.com", ALERT_FAILURE_RATE: "2" });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.errors).toEqual([
      'SLACK_API_URL must be an http(s) URL, got "slack.com"',
      'LEASE_SECONDS must be a whole number from 5 to 3600, got "ten"',
      'MAX_ATTEMPTS must be a whole number from 1 to 100, got "0"',
      'ALERT_FAILURE_RATE must be a number from 0 to 1, got "2"',
    ]);
  });

  it.each([
    [{ LEASE_SECONDS: "20", EFFECT_TIMEOUT_SECONDS: "11" }, "EFFECT_TIMEOUT_SECONDS must be at most half of LEASE_SECONDS"],
    [{ RECEIPT_RETENTION_HOURS: "200", DONE_RETENTION_HOURS: "100" }, "DONE_RETENTION_HOURS must be at least RECEIPT_RETENTION_HOURS"],
    [{ SWEEP_BATCH_SIZE: "500", SWEEP_MAX_STEPS: "2" }, "SWEEP_BATCH_SIZE × SWEEP_MAX_STEPS must be at most 800"],
    [{ RECEIPT_RETENTION_HOURS: "12" }, "RECEIPT_RETENTION_HOURS must be a whole number from 48"],
    // Exactly Slack's 24 h of delayed events leaves no margin: the floor is twice that.
    [{ RECEIPT_RETENTION_HOURS: "24" }, "RECEIPT_RETENTION_HOURS must be a whole number from 48"],
    [{ RECEIPT_RETENTION_HOURS: "47" }, "RECEIPT_RETENTION_HOURS must be a whole number from 48"],
  ])("refuses settings that would break an invariant: %j", (raw, message) => {
    const result = parseSettings(raw);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.errors.join("\n")).toContain(message);
  });

  it.each(["2", " 1 ", "0"])(
    "refuses an older ackbox's shard add left open (SHARD_COUNT_PREVIOUS %j), saying to finish it with that version first",
    (previous) => {
      const result = parseSettings({ SHARD_COUNT: "3", SHARD_COUNT_PREVIOUS: previous });
      expect(result).toEqual({ ok: false, errors: [SHARD_COUNT_PREVIOUS_REFUSED] });
      expect(SHARD_COUNT_PREVIOUS_REFUSED).toContain("wait the 48 hours, then empty SHARD_COUNT_PREVIOUS");
    },
  );

  it("takes SHARD_COUNT_PREVIOUS left empty (an older ackbox's wrangler files after its move) as unset", () => {
    expect(parseSettings({ SHARD_COUNT: "2", SHARD_COUNT_PREVIOUS: "" }).ok).toBe(true);
    expect(parseSettings({ SHARD_COUNT: "2", SHARD_COUNT_PREVIOUS: "  " }).ok).toBe(true);
  });

  it("documents every setting it reads", () => {
    const names = SETTINGS.map((s) => s.name);
    expect(new Set(names).size).toBe(names.length);
    for (const spec of SETTINGS) expect(spec.doc.length).toBeGreaterThan(10);
  });
});

describe("ADMIN_TOKEN strength, checked at settings time", () => {
  it.each([
    ["x9", "too short (2 characters; want at least 32)"],
    ["0123456789abcdef0123456789abcde", "too short (31 characters"],
    ["a".repeat(40), "too little variety"],
    ["aaaaaaaaaaaaaaaaaaaaaaaaaaabcdefghij", "too little variety"],
    ["abcdefghijkl".repeat(3), "repeats itself"],
    ["password-password-password-12345", "repeats itself"],
    ["with spaces in it 0123456789abcdefghij", "contains whitespace"],
  ])("refuses %j, and says how to make a good one", (token, problem) => {
    const result = parseSettings({ ADMIN_TOKEN: token });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.errors).toHaveLength(1);
    expect(result.errors[0]).toContain(problem);
    expect(result.errors[0]).toContain("openssl rand -hex 32");
    expect(result.errors[0]).not.toContain(token); // the error never echoes the secret
  });

  it("accepts what openssl rand -hex 32 makes, and a 32-character boundary case", () => {
    for (const token of [generateAdminToken(), "k3J9x-Qm2Lp8Zr7Tn4Vb6Wc1Yd5Fg0Hs"]) {
      const result = parseSettings({ ADMIN_TOKEN: token });
      expect(result.ok, JSON.stringify(result)).toBe(true);
    }
  });

  it("exports the one check, for the local run and npm run setup", () => {
    expect(adminTokenWeakness(generateAdminToken())).toBeUndefined();
    expect(generateAdminToken()).toMatch(/^[0-9a-f]{64}$/);
    expect(adminTokenWeakness("short")).toMatch(/too short/);
  });

  it("leaves the operator API off, with no error, when ADMIN_TOKEN is unset", () => {
    const result = parseSettings({});
    expect(result.ok && result.settings.adminToken).toBe(undefined);
  });
});
