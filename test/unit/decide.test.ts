import { describe, expect, it } from "vitest";
import { backoffMs } from "../../shared/delivery/backoff.ts";
import { decideOnFailure, mayHavePerformed, queueDelaySeconds } from "../../shared/delivery/decide.ts";
import type { EffectFailure } from "../../shared/delivery/failure.ts";

const policy = { maxAttempts: 5, backoffBaseMs: 2000, backoffCapMs: 60_000, rateLimitMaxWaitMs: 6 * 3600_000, rateLimitJitterMs: 1000 };
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
      decideOnFailure(
        { attempts: 1, expiresAt: null, rateLimitedSince: null },
        { kind: "fatal", message: "channel_not_found" },
        NOW,
        policy,
        () => 0.5,
      ),
    ).toEqual({
      action: "park",
      reason: "channel_not_found",
    });
  });

  it("retries a transient failure with backoff until the attempt that reaches maxAttempts, which parks", () => {
    expect(decideOnFailure({ attempts: 4, expiresAt: null, rateLimitedSince: null }, transient, NOW, policy, () => 0)).toEqual({
      action: "retry",
      delayMs: 8000,
      reason: "HTTP 500",
    });
    expect(decideOnFailure({ attempts: 5, expiresAt: null, rateLimitedSince: null }, transient, NOW, policy, () => 0)).toEqual({
      action: "park",
      reason: "attempts exhausted (5 of 5): HTTP 500",
    });
  });

  it("spends no attempt on a 429: a row whose attempts are all spent still retries after Retry-After", () => {
    const limited: EffectFailure = { kind: "rate_limited", retryAfterMs: 1000, message: "429" };
    for (const attempts of [1, policy.maxAttempts, policy.maxAttempts + 3]) {
      expect(decideOnFailure({ attempts, expiresAt: null, rateLimitedSince: null }, limited, NOW, policy, () => 0)).toEqual({
        action: "retry",
        delayMs: 1000,
        reason: "429",
        rateLimited: { retryAfterMs: 1000 },
      });
    }
  });

  it("adds a jitter of at least 0 and under one pace to Retry-After, so rows released together spread", () => {
    const limited: EffectFailure = { kind: "rate_limited", retryAfterMs: 1000, message: "429" };
    const delay = (r: number) => {
      const decision = decideOnFailure({ attempts: 1, expiresAt: null, rateLimitedSince: null }, limited, NOW, policy, () => r);
      return decision.action === "retry" ? decision.delayMs : -1;
    };
    expect(delay(0)).toBe(1000);
    expect(delay(0.5)).toBe(1500);
    expect(delay(0.999_999)).toBe(1999);
    expect(new Set([0, 0.25, 0.5, 0.75].map(delay)).size).toBe(4);
  });

  it("caps Retry-After at the backoff cap and says what Slack asked for", () => {
    const hostile: EffectFailure = { kind: "rate_limited", retryAfterMs: 99_999_999_000, message: "429" };
    expect(decideOnFailure({ attempts: 1, expiresAt: null, rateLimitedSince: null }, hostile, NOW, policy, () => 0)).toEqual({
      action: "retry",
      delayMs: policy.backoffCapMs,
      reason: "429",
      rateLimited: { retryAfterMs: policy.backoffCapMs, cappedFromMs: 99_999_999_000 },
    });
    const atCap: EffectFailure = { kind: "rate_limited", retryAfterMs: policy.backoffCapMs, message: "429" };
    expect(decideOnFailure({ attempts: 1, expiresAt: null, rateLimitedSince: null }, atCap, NOW, policy, () => 0)).toMatchObject({
      rateLimited: { retryAfterMs: policy.backoffCapMs },
    });
  });

  it("parks a row rate limited past the wall-clock limit, with a reason that says so, and retries one just inside it", () => {
    const limited: EffectFailure = { kind: "rate_limited", retryAfterMs: 1000, message: "chat.postMessage: HTTP 429 rate limited" };
    const inside = { attempts: 1, expiresAt: null, rateLimitedSince: NOW - policy.rateLimitMaxWaitMs + 1 };
    const outside = { attempts: 1, expiresAt: null, rateLimitedSince: NOW - policy.rateLimitMaxWaitMs };
    expect(decideOnFailure(inside, limited, NOW, policy, () => 0).action).toBe("retry");
    expect(decideOnFailure(outside, limited, NOW, policy, () => 0)).toEqual({
      action: "park",
      reason:
        "rate limited for longer than the wall-clock limit (21600 s since the first 429, limit 21600 s): chat.postMessage: HTTP 429 rate limited",
    });
    // The first 429 starts the clock: however old the row, it is not parked by it.
    expect(decideOnFailure({ attempts: 1, expiresAt: null, rateLimitedSince: null }, limited, NOW, policy, () => 0).action).toBe("retry");
  });

  it("parks rather than retry past a deadline, and retries when the retry lands exactly on it", () => {
    const limited: EffectFailure = { kind: "rate_limited", retryAfterMs: 10_000, message: "429" };
    expect(decideOnFailure({ attempts: 1, expiresAt: NOW + 10_000, rateLimitedSince: null }, limited, NOW, policy, () => 0).action).toBe(
      "retry",
    );
    expect(decideOnFailure({ attempts: 1, expiresAt: NOW + 9_999, rateLimitedSince: null }, limited, NOW, policy, () => 0)).toEqual({
      action: "park",
      reason: "deadline passed before the next attempt could run: 429",
    });
  });
});

describe("queueDelaySeconds", () => {
  it("rounds up so a message is never early, and stays within Queues' 12 hours", () => {
    expect(queueDelaySeconds(1)).toBe(1);
    expect(queueDelaySeconds(7000)).toBe(7);
    expect(queueDelaySeconds(7001)).toBe(8);
    expect(queueDelaySeconds(0)).toBe(0);
    expect(queueDelaySeconds(100 * 3600 * 1000)).toBe(43_200);
  });
});

describe("mayHavePerformed: the one rule for a park's maybe_performed mark", () => {
  const fatal: EffectFailure = { kind: "fatal", message: "channel_not_found" };
  const fatalAfter: EffectFailure = { kind: "fatal", message: "follow-ups refused", performed: true };
  const limited: EffectFailure = { kind: "rate_limited", retryAfterMs: 1000, message: "429" };
  const timedOut: EffectFailure = { kind: "transient", message: "chat.postMessage: no result within 10000 ms" };

  it("on a first attempt: unmarked only for an outright refusal (a fatal answer, a 429) or no attempt at all", () => {
    const first = { attempts: 1 };
    expect(mayHavePerformed(first, fatal)).toBe(false);
    expect(mayHavePerformed(first, limited)).toBe(false);
    expect(mayHavePerformed(first)).toBe(false);
    expect(mayHavePerformed(first, timedOut)).toBe(true);
    expect(mayHavePerformed(first, transient)).toBe(true);
    expect(mayHavePerformed(first, fatalAfter)).toBe(true);
    expect(mayHavePerformed(first, "performed")).toBe(true);
  });

  it("after an earlier attempt: always marked, a fatal answer now included (the earlier one may have timed out after performing)", () => {
    for (const attempt of [fatal, limited, timedOut, transient, fatalAfter, "performed" as const, undefined]) {
      expect(mayHavePerformed({ attempts: 2 }, attempt)).toBe(true);
    }
  });
});
