/**
 * Section 6, burst: Slack's rate limits are not failures. A burst of N events
 * into one channel, and the same burst over 10 channels, against a fake Slack
 * that allows 1 call per second per channel with a burst of 3 and answers
 * 429 + Retry-After: 1 beyond it; ackbox's policy with PACE_AHEAD off (the
 * default) and on (burst-sim.ts).
 *
 * The consumer's own modules run over SQLite with every migration
 * (sqlite-d1.ts) under a virtual clock: drain times are virtual seconds, so
 * they are figures of the policy, not of this machine.
 */
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { ROOT } from "./build.ts";
import type { BurstOptions, BurstResult, BurstRun } from "./burst-types.ts";
import { sqliteD1 } from "./sqlite-d1.ts";

export type { BurstOptions, BurstResult } from "./burst-types.ts";

interface Simulation {
  readonly VARIANTS: readonly { readonly name: BurstRun["variant"] }[];
  simulateBurst(db: unknown, options: BurstOptions, events: number, channels: number, variant: unknown): Promise<BurstRun>;
}

export async function benchBurst(options: BurstOptions, progress: (line: string) => void): Promise<BurstResult> {
  // Imported by path: burst-sim.ts is type-checked with the Workers' types, like the consumer code it runs.
  const sim = (await import(pathToFileURL(resolve(ROOT, "scripts/bench/burst-sim.ts")).href)) as Simulation;
  const runs: BurstRun[] = [];
  for (const events of options.eventCounts) {
    for (const channels of options.channelCounts) {
      for (const variant of sim.VARIANTS) {
        const db = sqliteD1(resolve(ROOT, "migrations"));
        const run = await sim.simulateBurst(db, options, events, channels, variant);
        progress(
          `burst: ${events} events over ${channels} channel(s), ${run.variant}: ${run.delivered} delivered, ${run.dead} dead, ` +
            `${(run.rateLimitedShare * 100).toFixed(1)} % 429s, drain ${run.drainSeconds ?? "-"} s (ideal ${run.idealSeconds} s)`,
        );
        runs.push(run);
      }
    }
  }
  return { config: options, runs };
}
