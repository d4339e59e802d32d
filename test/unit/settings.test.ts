import { describe, expect, it } from "vitest";
import { parseSettings, responseUrlAllowed, SETTINGS } from "../../shared/settings.ts";

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
    expect(result.settings.watchedChannels.size).toBe(0);
  });

  it("reads lists, secrets and overrides", () => {
    const result = parseSettings({
      SLACK_SIGNING_SECRET: " current ",
      SLACK_SIGNING_SECRET_PREVIOUS: "previous",
      WATCHED_CHANNELS: "C1, C2,,",
      SLACK_API_URL: "http://127.0.0.1:9000",
      LEASE_SECONDS: "60",
      EFFECT_TIMEOUT_SECONDS: "30",
    });
    if (!result.ok) throw new Error(result.errors.join("; "));
    expect(result.settings.signingSecrets).toEqual(["current", "previous"]);
    expect([...result.settings.watchedChannels]).toEqual(["C1", "C2"]);
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
    [{ RECEIPT_RETENTION_HOURS: "12" }, "RECEIPT_RETENTION_HOURS must be a whole number from 24"],
  ])("refuses settings that would break an invariant: %j", (raw, message) => {
    const result = parseSettings(raw);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.errors.join("\n")).toContain(message);
  });

  it("documents every setting it reads", () => {
    const names = SETTINGS.map((s) => s.name);
    expect(new Set(names).size).toBe(names.length);
    for (const spec of SETTINGS) expect(spec.doc.length).toBeGreaterThan(10);
  });
});

describe("responseUrlAllowed", () => {
  const hosts = ["hooks.slack.com", "127.0.0.1"];
  it.each([
    ["https://hooks.slack.com/commands/T1/2/x", true],
    ["https://HOOKS.slack.com/commands/T1/2/x", true],
    ["http://hooks.slack.com/commands/T1/2/x", false],
    ["https://evil.example/commands", false],
    ["http://127.0.0.1:9000/respond/1", true],
    ["http://localhost:9000/respond/1", false],
    ["ftp://hooks.slack.com/x", false],
    ["not a url", false],
  ])("%s → %s", (url, allowed) => {
    expect(responseUrlAllowed(url, hosts)).toBe(allowed);
  });

  it("allows any https host with *", () => {
    expect(responseUrlAllowed("https://anything.example/x", ["*"])).toBe(true);
  });
});
