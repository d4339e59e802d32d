/**
 * A local D1 read that meets the running Workers' lock (cli/local/d1.ts): which failures are tried again and how
 * often, with the command stood in for (no wrangler is started). The reads themselves run in local-run,
 * restart-recovery, remind and chaos.
 */
import { describe, expect, it } from "vitest";
import { databaseLocked, LOCKED_RETRY, type LockedRetry, retryWhileLocked } from "../../cli/local/d1.ts";
import type { RunResult } from "../../cli/local/processes.ts";

const HEADER = "🌀 Executing on local database ackbox (ackbox-local) from .wrangler/state/v3/d1:\n";
const finished = (code: number, output: string): RunResult => ({ code, signal: null, output, timedOut: false });
const LOCKED = finished(1, `${HEADER}\n✘ [ERROR] database is locked: SQLITE_BUSY\n`);
const NO_TABLE = finished(1, `${HEADER}\n✘ [ERROR] no such table: outbox: SQLITE_ERROR\n`);
const ROWS = finished(0, `${HEADER}[{"results":[{"n":1}],"success":true}]`);
const QUICK: LockedRetry = { ...LOCKED_RETRY, minDelayMs: 1, maxDelayMs: 1 };

/** A stand-in for the command: its results in order, and how many times it ran. */
function scripted(...results: RunResult[]) {
  const run = async () => {
    run.count += 1;
    return results[Math.min(run.count, results.length) - 1] as RunResult;
  };
  run.count = 0;
  return run;
}

describe("a local D1 command's failure", () => {
  it("is the lock's when it failed on SQLITE_BUSY, and only then", () => {
    expect(databaseLocked(LOCKED)).toBe(true);
    expect(databaseLocked(NO_TABLE)).toBe(false);
    // A row whose text says so is an answer, not a failure.
    expect(databaseLocked(finished(0, `[{"results":[{"last_error":"database is locked"}]}]`))).toBe(false);
    // A command killed at its own timeout is not tried again: another minute of it is not a short backoff.
    expect(databaseLocked({ ...LOCKED, code: null, signal: "SIGKILL", timedOut: true })).toBe(false);
  });
});

describe("retryWhileLocked", () => {
  it("tries a locked command again until it answers", async () => {
    const run = scripted(LOCKED, LOCKED, ROWS);
    expect(await retryWhileLocked(run, QUICK)).toBe(ROWS);
    expect(run.count).toBe(3);
  });

  it("hands back any other failure at once", async () => {
    const run = scripted(NO_TABLE, ROWS);
    expect(await retryWhileLocked(run, QUICK)).toBe(NO_TABLE);
    expect(run.count).toBe(1);
  });

  it("stops after its tries, handing back the last lock failure for the caller to report", async () => {
    const run = scripted(LOCKED);
    expect(await retryWhileLocked(run, QUICK)).toBe(LOCKED);
    expect(run.count).toBe(LOCKED_RETRY.tries);
  });

  it("starts no try past its time, whatever tries are left", async () => {
    const run = scripted(LOCKED);
    expect(await retryWhileLocked(run, { ...QUICK, tries: 1_000, maxMs: 0 })).toBe(LOCKED);
    expect(run.count).toBe(1);
  });
});
