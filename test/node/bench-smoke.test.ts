/**
 * The benchmark suite in CI: `npm run bench -- --smoke --json` with tiny
 * counts, so the tool cannot rot. It checks that every section runs and
 * produces sane, non-empty figures, never the performance targets (CI
 * machines are too noisy for those; the full run is `npm run bench`).
 */
import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import type { BenchResult } from "../../scripts/bench/report.ts";

const run = promisify(execFile);

/** A figure the report must carry: a finite number, so an equality between two figures cannot pass as undefined === undefined. */
function figure(value: number | undefined, what: string): number {
  expect(value, `${what} is missing from the report`).toBeTypeOf("number");
  expect(Number.isFinite(value), `${what} is not finite`).toBe(true);
  return value as number;
}
const ROOT = resolve(import.meta.dirname, "../..");

describe("npm run bench -- --smoke", () => {
  it("runs every section and reports sane figures", { timeout: 360_000 }, async () => {
    const { stdout } = await run(process.execPath, ["scripts/bench/run.ts", "--smoke", "--json", "--no-write"], {
      cwd: ROOT,
      timeout: 350_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    const result = JSON.parse(stdout) as BenchResult;

    // 1. Ack path: five variants (the ingress with and without its first attempt), all answered 200, measured,
    // and every ack has its durable row.
    const ack = result.ack;
    expect(ack?.variants.map((v) => v.name)).toEqual(["floor", "bare-insert", "slack-edge", "ingress", "ingress-off"]);
    for (const v of ack?.variants ?? []) {
      expect(v.requests, `ack ${v.name} requests`).toBeGreaterThan(0);
      expect(v.statuses).toEqual({ 200: v.requests });
      expect(v.rps, `ack ${v.name} rps`).toBeGreaterThan(0);
      expect(v.p99Ms).toBeGreaterThanOrEqual(v.p50Ms);
      expect(v.runtimeCpuMsPerRequest, `ack ${v.name} runtime CPU ms per request`).toBeGreaterThan(0);
    }
    for (const name of ["ingress", "ingress-off"]) {
      const ingress = ack?.variants.find((v) => v.name === name);
      const answered200 = figure(ingress?.durable?.answered200, `ack.${name}.durable.answered200`);
      expect(answered200).toBeGreaterThan(0);
      expect(figure(ingress?.durable?.outboxRows, `ack.${name}.durable.outboxRows`)).toBe(answered200);
    }
    // The off variant's acks all said so; the ingress's each have a first-attempt verdict.
    expect(ack?.said["ingress-off"]?.firstAttempt).toEqual({
      off: figure(ack?.variants.find((v) => v.name === "ingress-off")?.requests, "ingress-off requests"),
    });
    const verdicts = Object.values(ack?.said.ingress?.firstAttempt ?? {}).reduce((a, b) => a + b, 0);
    expect(verdicts).toBe(ack?.variants.find((v) => v.name === "ingress")?.requests);
    expect(ack?.targets).toHaveLength(8);
    // The sustained pair: both measured, and a first-attempt verdict for each of the ingress's requests there.
    const sustained = ack?.sustained;
    expect(figure(sustained?.ingress.rps, "ack.sustained.ingress.rps")).toBeGreaterThan(0);
    expect(figure(sustained?.off.rps, "ack.sustained.off.rps")).toBeGreaterThan(0);
    const sustainedRequests = figure(sustained?.ingress.requests, "ack.sustained.ingress.requests");
    expect(sustainedRequests).toBeGreaterThan(0);
    expect(Object.values(sustained?.said.firstAttempt ?? {}).reduce((a, b) => a + b, 0)).toBe(sustainedRequests);
    expect(sustained?.offSaid.firstAttempt).toEqual({ off: sustained?.off.requests });
    for (const t of ack?.targets ?? []) expect(Number.isFinite(t.measured)).toBe(true);

    // Ack → effect beside slack-edge: both variants at both rates, steady and in rushes, every accepted event's effect arrived.
    const latency = result.latency;
    expect(latency?.runs.map((r) => `${r.variant} ${r.load}`)).toEqual(
      ["light (10/s)", "light (10/s), per-second rushes", "half saturation", "half saturation, per-second rushes"].flatMap((load) => [
        `ackbox ${load}`,
        `slack-edge ${load}`,
      ]),
    );
    for (const r of latency?.runs ?? []) {
      expect(r.accepted, `latency ${r.variant} ${r.load} accepted`).toBeGreaterThan(0);
      expect(r.delivered).toBe(r.accepted);
      expect(r.failed, `latency ${r.variant} ${r.load} failed`).toBe(0);
      expect(figure(r.ackToEffectMs.p99, `latency ${r.variant} p99`)).toBeGreaterThanOrEqual(r.ackToEffectMs.p50);
    }
    expect(latency?.targets).toHaveLength(8);

    // 2. End to end: every accepted event's effect arrived, once.
    const e2e = result.e2e?.run;
    const accepted = figure(e2e?.accepted, "e2e.run.accepted");
    expect(accepted).toBeGreaterThan(0);
    expect(figure(e2e?.delivered, "e2e.run.delivered")).toBe(accepted);
    expect(figure(e2e?.duplicates, "e2e.run.duplicates")).toBe(0);
    expect(e2e?.sendToEffectMs.p99, "e2e send→effect p99").toBeGreaterThan(0);
    expect(e2e?.sendToEffectMs.p50).toBeGreaterThanOrEqual(0);

    // 3. Cost: both designs priced; ackbox's happy path is 3 queue operations and its statements are the expected ones.
    const [ackbox, note] = result.cost?.designs ?? [];
    expect(ackbox?.design).toBe("ackbox");
    expect(note?.design).toBe("design note");
    expect(ackbox?.perEvent.queue).toEqual({ writes: 1, reads: 1, deletes: 1, retries: 0 });
    for (const d of [ackbox, note]) {
      expect(d?.perEvent.rowsWritten, `cost ${d?.design} rows written`).toBeGreaterThan(0);
      expect(d?.dollarsPerMillionEvents.total, `cost ${d?.design} dollars`).toBeGreaterThan(0);
    }
    const names = ackbox?.phases.flatMap((p) => p.statements.map((s) => s.name));
    expect(names).toEqual(
      expect.arrayContaining(["insertReceipt", "insertOutboxRow", "claimById (per row)", "completeIfClaimed (fenced)"]),
    );
    expect(result.cost?.recovery.slackCalls, "cost recovery Slack calls").toBeGreaterThan(0);
    expect(result.cost?.accounting.length).toBeGreaterThan(0);

    // 4. Flat: three levels measured; the sweep's own statements read the same at every level.
    const levels = result.flat?.levels ?? [];
    expect(levels.map((l) => l.doneRows)).toEqual(result.flat?.config.levels);
    expect(levels.length).toBeGreaterThanOrEqual(3);
    const sweepReads = levels.map((l, i) => figure(l.ackbox.tick.sweepRowsRead, `flat.levels[${i}].ackbox.tick.sweepRowsRead`));
    expect(new Set(sweepReads).size).toBe(1);
    expect(levels.at(-1)?.note.claim.rowsRead).toBeGreaterThan(levels[0]?.note.claim.rowsRead ?? 0);

    // 5. Drain: every lost row delivered by the sweeper and the consumer, within the per-tick bound.
    expect(result.drain?.drained).toBe(true);
    const lost = figure(result.drain?.config.rows, "drain.config.rows");
    expect(lost).toBeGreaterThan(0);
    expect(figure(result.drain?.delivered, "drain.delivered")).toBe(lost);
    const bound = figure(result.drain?.settings.rowsPerTickBound, "drain.settings.rowsPerTickBound");
    expect(bound).toBeGreaterThan(0);
    expect(figure(result.drain?.fullTick.taken, "drain.fullTick.taken")).toBe(bound);

    // 6. Burst: both scenarios, three policies each; ackbox's delivers every row once and parks none,
    // and the policy before issue 11 is measured beside it (it parks rows in one channel even at 40 events).
    const runs = result.burst?.runs ?? [];
    expect(runs.map((r) => `${r.channels} ${r.variant}`)).toEqual(
      [1, 10].flatMap((c) =>
        ["before (issue 11's policy absent)", "ackbox (PACE_AHEAD off, the default)", "ackbox, PACE_AHEAD on"].map((v) => `${c} ${v}`),
      ),
    );
    for (const run of runs.filter((r) => r.variant !== "before (issue 11's policy absent)")) {
      expect(run).toMatchObject({ delivered: run.events, dead: 0, unfinished: 0, duplicates: 0 });
      expect(run.drainOverIdeal, `burst ${run.channels} ${run.variant} drain ÷ ideal`).toBeGreaterThan(0);
    }
    expect(runs.find((r) => r.channels === 1 && r.variant.startsWith("before"))?.dead, "burst before-policy dead rows").toBeGreaterThan(0);

    // 7. The whole pipeline: ackbox both ways and the two floors (each refused a forged signature before its rounds,
    // or it would be in `failed`), every accepted event's effect arrived; npm start's lines gave a first-attempt
    // verdict for every event ackbox accepted.
    const pipeline = result.pipeline;
    expect(pipeline?.runs.map((r) => r.variant)).toEqual([
      "ackbox as built",
      "ackbox, FIRST_ATTEMPT=off (every effect via the queue)",
      "floor: queue before the ack, no outbox (wrangler dev)",
      "durable floor: a row before the ack, claim, fenced finish, no log line (wrangler dev)",
    ]);
    expect(pipeline?.failed).toEqual([]);
    for (const r of pipeline?.runs ?? []) {
      expect(r.accepted, `pipeline ${r.variant} accepted`).toBeGreaterThan(0);
      expect(r.delivered, `pipeline ${r.variant} delivered`).toBe(r.accepted);
      expect(figure(r.ratio, `pipeline ${r.variant} ratio`)).toBeGreaterThan(0);
      const gross = figure(r.cpuMsPerEvent, `pipeline ${r.variant} CPU`);
      expect(gross).toBeGreaterThan(0);
      expect(figure(r.cpuNetOfIdleMsPerEvent, `pipeline ${r.variant} CPU net of idle`)).toBeLessThanOrEqual(gross);
    }
    const [built, off] = pipeline?.runs ?? [];
    expect(Object.values(built?.firstAttempt ?? {}).reduce((a, b) => a + b, 0)).toBe(built?.accepted);
    expect(off?.firstAttempt).toEqual({ queue: off?.accepted });
    expect(figure(pipeline?.versusFloor.delivered ?? undefined, "pipeline.versusFloor.delivered")).toBeGreaterThan(0);
    expect(figure(pipeline?.versusDurableFloor.delivered ?? undefined, "pipeline.versusDurableFloor.delivered")).toBeGreaterThan(0);

    expect(result.verdicts.length).toBeGreaterThan(0);
  });
});
