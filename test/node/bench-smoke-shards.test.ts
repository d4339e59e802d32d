/**
 * The shards section of the benchmark in CI: `npm run bench -- --smoke --only
 * shards --json` with tiny counts (seconds), so the tool cannot rot. It checks
 * that every shard count ran the product's pipeline to the end with sane
 * figures, never the performance targets (the full run is `npm run bench`).
 */
import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import type { BenchResult } from "../../scripts/bench/report.ts";

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "../..");

describe("npm run bench -- --smoke --only shards", () => {
  it("delivers every accepted event at N = 1, 2, 4 and reports rate, ack latency, rows per event and CPU", {
    timeout: 90_000,
  }, async () => {
    const { stdout } = await run(process.execPath, ["scripts/bench/run.ts", "--smoke", "--only", "shards", "--json", "--no-write"], {
      cwd: ROOT,
      timeout: 80_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    const result = JSON.parse(stdout) as BenchResult;
    const shards = result.shards;
    const events = shards?.config.events ?? 0;
    expect(events).toBeGreaterThan(0);
    expect(shards?.rows.map((r) => r.shards)).toEqual([1, 2, 4]);
    for (const row of shards?.rows ?? []) {
      // Every event acked 200 and its effect arrived at the fake Slack, once per event.
      expect(row.accepted).toBe(events * (shards?.config.rounds ?? 0));
      expect(row.delivered).toBe(row.accepted);
      expect(row.duplicates).toBe(0);
      expect(row.deliveredPerSecond).toBeGreaterThan(0);
      expect(row.ackP99Ms).toBeGreaterThanOrEqual(row.ackP50Ms);
      expect(row.rowsWrittenPerEvent).toBeGreaterThan(0);
      expect(row.statementsPerEvent).toBeGreaterThan(0);
      // The real routing spread the workspaces over every shard, and each shard's writer served some of them.
      expect(row.shardShares).toHaveLength(row.shards);
      expect(row.shardShares.every((share) => share > 0)).toBe(true);
      expect(row.writerBusy.every((busy) => busy > 0)).toBe(true);
      expect(row.cpuShare).toBeGreaterThan(0);
      expect(row.retried).toBe(0);
    }
    const [one, , four] = shards?.rows ?? [];
    // Sharding must not make an event dearer: the same statements and rows per event.
    expect(four?.rowsWrittenPerEvent).toBe(one?.rowsWrittenPerEvent);
    expect(four?.statementsPerEvent).toBe(one?.statementsPerEvent);
    expect(shards?.localStatementMicros).toBeGreaterThan(0);
    expect(result.verdicts.filter((v) => v.section === "shards").length).toBeGreaterThanOrEqual(3);
  });
});
