import { describe, expect, it } from "vitest";
import { backoffMs } from "../../shared/delivery/backoff.ts";
import { decideOnFailure, queueDelaySeconds } from "../../shared/delivery/decide.ts";
import type { EffectFailure } from "../../shared/delivery/failure.ts";

const policy = { maxAttempts: 5, backoffBaseMs: 2000, backoffCapMs: 60_000 };
const NOW = 1_000_000;
const transient: EffectFailure = { kind: "transient", message: "HTTP 500" };

describe("backoffMs", () => {
  it("doubles per attempt, keeps half of each step fixed and jitters the other half", () => {
    expect([1, 2, 3, 4].map((a) => backoffMs(a, policy, () => 0))).toEqual([1000, 2000, 4000, 8000]);
    expect([1, 2, 3, 4].map((a) => backoffMs(a, policy, () => 1))).toEqual([2000, 4000, 8000, 16_000]);
  });

  it("is capped", () => {
    expect(backoffMs(30, policy, () => 1)).toBe(60_000);
    expect(backoffMs(10_000, policy, () => 1)).toBe(60_000);
  });
});

describe("decideOnFailure", () => {
  it("parks a fatal failure at once, whatever the attempt count", () => {
    expect(
      decideOnFailure({ attempts: 1, expiresAt: null }, { kind: "fatal", message: "channel_not_found" }, NOW, policy, () => 0.5),
    ).toEqual({
      action: "park",
      reason: "channel_not_found",
    });
  });

  it("retries a transient failure with backoff until the attempt that reaches maxAttempts, which parks", () => {
    expect(decideOnFailure({ attempts: 4, expiresAt: null }, transient, NOW, policy, () => 0)).toEqual({
      action: "retry",
      delayMs: 8000,
      reason: "HTTP 500",
    });
    expect(decideOnFailure({ attempts: 5, expiresAt: null }, transient, NOW, policy, () => 0)).toEqual({
      action: "park",
      reason: "attempts exhausted (5 of 5): HTTP 500",
    });
  });

  it("waits exactly Retry-After on a 429, even beyond the backoff cap", () => {
    const limited: EffectFailure = { kind: "rate_limited", retryAfterMs: 120_000, message: "429" };
    expect(decideOnFailure({ attempts: 1, expiresAt: null }, limited, NOW, policy, () => 0.9)).toEqual({
      action: "retry",
      delayMs: 120_000,
      reason: "429",
    });
  });

  it("parks rather than retry past a deadline, and retries when the retry lands exactly on it", () => {
    const limited: EffectFailure = { kind: "rate_limited", retryAfterMs: 10_000, message: "429" };
    expect(decideOnFailure({ attempts: 1, expiresAt: NOW + 10_000 }, limited, NOW, policy, () => 0).action).toBe("retry");
    expect(decideOnFailure({ attempts: 1, expiresAt: NOW + 9_999 }, limited, NOW, policy, () => 0)).toEqual({
      action: "park",
      reason: "deadline passed before the next attempt could run: 429",
    });
  });
});

describe("queueDelaySeconds", () => {
  it("rounds up so a message is never early, and stays within Queues' 24 hours", () => {
    expect(queueDelaySeconds(1)).toBe(1);
    expect(queueDelaySeconds(7000)).toBe(7);
    expect(queueDelaySeconds(7001)).toBe(8);
    expect(queueDelaySeconds(0)).toBe(0);
    expect(queueDelaySeconds(100 * 3600 * 1000)).toBe(86_400);
  });
});
