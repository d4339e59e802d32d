/**
 * The burst figures the README quotes, pinned: a 300-event run of the burst
 * section (the consumer's own modules over SQLite under a virtual clock, so
 * the figures are the policy's, the same on any machine) must give exactly
 * what the README says, read from the README itself — a change to the
 * pacing policy that moves them fails here until the README says the truth.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { benchBurst } from "../../scripts/bench/burst.ts";
import type { BurstRun } from "../../scripts/bench/burst-types.ts";
import { round } from "../../scripts/bench/stats.ts";

const README = readFileSync(join(import.meta.dirname, "../../README.md"), "utf8").replace(/\s+/g, " ");

const QUOTE =
  /300 events sent at once into one channel against Slack's 1 message a second are delivered whole, (\d+) dead, in ([\d.]+)× the ideal time, ([\d.]+) % of calls answered 429 \(([\d.]+) % with `PACE_AHEAD` on\); over 10 channels, (\d+) dead, ([\d.]+)× the ideal time, ([\d.]+) % answered 429 \(([\d.]+) % with `PACE_AHEAD` on\)/;

/** `value` shown with as many decimals as `quoted` has. */
function asQuoted(value: number, quoted: string): number {
  return round(value, quoted.split(".")[1]?.length ?? 0);
}

describe("the README's burst figures", () => {
  it("are what a 300-event burst into one channel and over 10 gives", { timeout: 60_000 }, async () => {
    const quoted = QUOTE.exec(README);
    expect(quoted, "the README's burst sentence (its wording is this test's pattern)").not.toBeNull();
    const [, dead1, drain1, share1, sharePace1, dead10, drain10, share10, sharePace10] = quoted as unknown as string[];
    const { runs } = await benchBurst(
      { eventCounts: [300], channelCounts: [1, 10], perChannelPerSecond: 1, burst: 3, callLatencyMs: 50, capSeconds: 7200 },
      () => {},
    );
    const run = (channels: number, paceAhead: boolean) =>
      runs.find((r) => r.channels === channels && r.variant.includes("PACE_AHEAD on") === paceAhead) as BurstRun;
    for (const r of runs)
      expect(r, `${r.channels} channel(s), ${r.variant}`).toMatchObject({ delivered: 300, unfinished: 0, duplicates: 0 });

    const one = run(1, false);
    expect(one.dead).toBe(Number(dead1));
    expect(asQuoted(one.drainOverIdeal ?? Number.NaN, drain1 as string)).toBe(Number(drain1));
    expect(asQuoted(one.rateLimitedShare * 100, share1 as string)).toBe(Number(share1));
    expect(asQuoted(run(1, true).rateLimitedShare * 100, sharePace1 as string)).toBe(Number(sharePace1));

    const ten = run(10, false);
    expect(ten.dead).toBe(Number(dead10));
    expect(asQuoted(ten.drainOverIdeal ?? Number.NaN, drain10 as string)).toBe(Number(drain10));
    expect(asQuoted(ten.rateLimitedShare * 100, share10 as string)).toBe(Number(share10));
    expect(asQuoted(run(10, true).rateLimitedShare * 100, sharePace10 as string)).toBe(Number(sharePace10));
  });
});
