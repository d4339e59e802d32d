/**
 * The benchmark's command line and its runtime harness, so they cannot rot:
 * `npm run bench -- --smoke --only ack --json --no-write` (a few seconds:
 * the product's ingress built and run in one local workerd with and without
 * its first attempt). It checks what the run must get right at any count —
 * every 200 has its outbox row, every ack's verdict is read back, the
 * verdicts are computed — never a performance figure (those are
 * `npm run bench`'s; the report's arithmetic is bench-report.test.ts's, the
 * burst figures bench-burst.test.ts's).
 */
import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import type { BenchResult } from "../../scripts/bench/report.ts";

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "../..");

describe("npm run bench -- --smoke --only ack", () => {
  it("runs the ingress with and without its first attempt, and at workspaces' first sight, and accounts for every request", {
    timeout: 90_000,
  }, async () => {
    const { stdout } = await run(process.execPath, ["scripts/bench/run.ts", "--smoke", "--only", "ack", "--json", "--no-write"], {
      cwd: ROOT,
      timeout: 80_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    const result = JSON.parse(stdout) as BenchResult;
    expect(Object.keys(result).filter((k) => ["ack", "latency", "pipeline", "burst"].includes(k))).toEqual(["ack"]);
    const ack = result.ack;
    expect(ack?.variants.map((v) => v.name)).toEqual(["ingress", "ingress-off", "first-sight", "first-sight-2"]);
    for (const v of ack?.variants ?? []) {
      expect(v.statuses, v.name).toEqual({ 200: ack?.config.requests });
      // Every 200 (the sanity request and, for the first attempt's pair, the sustained rounds included) has its
      // durable row, on whichever shard its workspace was placed.
      const sustained = v.name.startsWith("first-sight") ? 0 : (ack?.config.sustained.requests ?? 0);
      expect(v.durable.answered200, v.name).toBe(1 + (ack?.config.requests ?? 0) + sustained);
      expect(v.durable.outboxRows, v.name).toBe(v.durable.answered200);
    }
    for (const name of ["first-sight", "first-sight-2"]) expect(ack?.said[name]?.firstAttempt).toEqual({ off: ack?.config.requests });
    // Each measured ack's own line was read back: a verdict per request, and "off" for every one with FIRST_ATTEMPT=off.
    const verdicts = (tally: Readonly<Record<string, number>> | undefined) => Object.values(tally ?? {}).reduce((a, b) => a + b, 0);
    expect(verdicts(ack?.said.ingress?.firstAttempt)).toBe(ack?.config.requests);
    expect(ack?.said["ingress-off"]?.firstAttempt).toEqual({ off: ack?.config.requests });
    expect(verdicts(ack?.sustained?.said.firstAttempt)).toBe(ack?.config.sustained.requests);
    expect(ack?.sustained?.offSaid.firstAttempt).toEqual({ off: ack?.config.sustained.requests });
    // Four ratio verdicts and four durability verdicts, each with a finite figure; the durability ones met.
    expect(result.verdicts.map((v) => v.section)).toEqual(Array(8).fill("ack"));
    for (const v of result.verdicts.slice(0, 4)) expect(Number.isFinite(Number(v.measured)), v.name).toBe(true);
    expect(result.verdicts.slice(4).every((v) => v.met)).toBe(true);
  });
});
