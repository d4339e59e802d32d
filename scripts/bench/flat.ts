/**
 * Section 4, flat cost: the rows one sweep tick and one claim read, with 0,
 * 100 000 and 1 000 000 done rows of history in the outbox, for ackbox and
 * for the design note's claim. Rows are seeded in bulk (recursive-CTE
 * INSERTs inside the probe), never through the ingress.
 */
import type { Probe, StatementRecord } from "./probe-host.ts";
import { startProbe } from "./probe-host.ts";
import { byStatement, type StatementCost, totals } from "./statements.ts";
import { round } from "./stats.ts";

export interface FlatOptions {
  /** Done rows in the outbox at each measurement, ascending. */
  readonly levels: readonly number[];
  /** Stale pending rows the sweep tick finds (one batch: SWEEP_BATCH_SIZE). */
  readonly staleRows: number;
  /** Rows one consumer claim names (the queue's max_batch_size). */
  readonly claimRows: number;
  /** The design note's claim LIMIT (its sweepOutbox claims 25). */
  readonly noteClaimLimit: number;
}

export interface FlatLevel {
  readonly doneRows: number;
  readonly ackbox: {
    /** A tick that finds `staleRows` stale rows: all its statements. */
    readonly tick: Measured & { readonly taken: number; readonly sweepRowsRead: number };
    /** A tick with nothing stale. */
    readonly idleTick: Measured;
    readonly claim: Measured & { readonly claimed: number };
  };
  readonly note: {
    readonly claim: Measured & { readonly claimed: number };
    /** The note's cron tick with nothing pending. */
    readonly idleTick: Measured;
  };
}

interface Measured {
  readonly rowsRead: number;
  readonly rowsWritten: number;
  readonly statements: number;
  readonly byStatement: readonly StatementCost[];
}

export interface FlatResult {
  readonly config: FlatOptions;
  readonly levels: readonly FlatLevel[];
  readonly verdicts: readonly { readonly name: string; readonly measured: string; readonly target: string; readonly met: boolean }[];
  readonly seedSeconds: number;
}

const SWEEP_STATEMENTS = new Set(["sweep: staleCandidates", "sweep: takeIfStale (per row)"]);

function measured(records: readonly StatementRecord[], schema: "ackbox" | "note"): Measured {
  const t = totals(records);
  return { rowsRead: t.rowsRead, rowsWritten: t.rowsWritten, statements: t.statements, byStatement: byStatement(records, schema) };
}

export async function benchFlat(options: FlatOptions, progress: (line: string) => void): Promise<FlatResult> {
  const probe = await startProbe("flat");
  let seeded = 0;
  let seedMs = 0;
  let pendingFrom = 100_000_000;
  const levels: FlatLevel[] = [];
  try {
    for (const level of options.levels) {
      if (level > seeded) {
        progress(`flat: seeding done rows ${seeded} → ${level} (both schemas)`);
        const at = Date.now();
        const a = await probe.call("/seed", { db: "ackbox", status: "done", count: level - seeded, at, from: seeded });
        const b = await probe.call("/seed", { db: "note", status: "done", count: level - seeded, at, from: seeded });
        seedMs += a.ms + b.ms;
        seeded = level;
      }
      levels.push(await measureLevel(probe, options, level, pendingFrom));
      pendingFrom += 1_000_000;
      const last = levels.at(-1) as FlatLevel;
      progress(
        `flat: ${level} done rows: ackbox tick reads ${last.ackbox.tick.rowsRead} (sweep part ${last.ackbox.tick.sweepRowsRead} for ${last.ackbox.tick.taken} rows), claim of ${last.ackbox.claim.claimed} reads ${last.ackbox.claim.rowsRead}; design note claim reads ${last.note.claim.rowsRead}`,
      );
    }
  } finally {
    await probe.close();
  }
  return { config: options, levels, verdicts: verdicts(options, levels), seedSeconds: round(seedMs / 1000, 1) };
}

async function measureLevel(probe: Probe, options: FlatOptions, doneRows: number, from: number): Promise<FlatLevel> {
  type Rec = { records: StatementRecord[] };
  // ackbox: a batch of stale pending rows (lost messages), then one tick, one idle tick, one claim.
  await probe.call("/reset", { db: "ackbox" });
  const now = Date.now();
  await probe.call("/seed", { db: "ackbox", status: "pending", count: options.staleRows, at: now, from });
  const tick = await probe.call<Rec & { ids: number[] }>("/ackbox/tick", { at: now });
  const idle = await probe.call<Rec>("/ackbox/tick", { at: now });
  const claim = await probe.call<Rec & { claimed: number }>("/ackbox/claim", { ids: tick.ids.slice(0, options.claimRows) });
  const t = measured(tick.records, "ackbox");
  const sweepRowsRead = t.byStatement.filter((s) => SWEEP_STATEMENTS.has(s.name)).reduce((n, s) => n + s.rowsRead, 0);

  // The design note: the same number of pending rows, one claimBatch, then an idle tick.
  await probe.call("/reset", { db: "note" });
  await probe.call("/seed", { db: "note", status: "pending", count: options.staleRows, at: now, from });
  const noteClaim = await probe.call<Rec & { claimed: number }>("/note/claim", { limit: options.noteClaimLimit });
  await probe.call("/reset", { db: "note" });
  const noteIdle = await probe.call<Rec>("/note/tick");
  return {
    doneRows,
    ackbox: {
      tick: { ...t, taken: tick.ids.length, sweepRowsRead },
      idleTick: measured(idle.records, "ackbox"),
      claim: { ...measured(claim.records, "ackbox"), claimed: claim.claimed },
    },
    note: {
      claim: { ...measured(noteClaim.records, "note"), claimed: noteClaim.claimed },
      idleTick: measured(noteIdle.records, "note"),
    },
  };
}

function verdicts(options: FlatOptions, levels: readonly FlatLevel[]): FlatResult["verdicts"] {
  const first = levels[0];
  const last = levels.at(-1);
  if (!first || !last) return [];
  const out: { name: string; measured: string; target: string; met: boolean }[] = [];
  const growth = (a: number, b: number) => (a === 0 ? Number.NaN : round(b / a, 2));
  const tickMax = Math.max(...levels.map((l) => l.ackbox.tick.rowsRead));
  const sweepMax = Math.max(...levels.map((l) => l.ackbox.tick.sweepRowsRead));
  const claimMax = Math.max(...levels.map((l) => l.ackbox.claim.rowsRead));
  out.push({
    name: `sweep re-enqueue (candidates + takes), ${options.staleRows} stale rows`,
    measured: `≤ ${sweepMax} rows read at every level (${levels.map((l) => l.ackbox.tick.sweepRowsRead).join(" / ")})`,
    target: `≤ ${2 * options.staleRows} (2 × batch), flat`,
    met: sweepMax <= 2 * options.staleRows && last.ackbox.tick.sweepRowsRead <= first.ackbox.tick.sweepRowsRead * 1.05 + 2,
  });
  const middle = levels.length > 2 ? levels[levels.length - 2] : undefined;
  out.push({
    name: "whole sweep tick (re-enqueue + prune + backlog sample + alerts)",
    measured: `${levels.map((l) => l.ackbox.tick.rowsRead).join(" / ")} rows read; ×${growth(first.ackbox.tick.rowsRead, last.ackbox.tick.rowsRead)} from ${first.doneRows} to ${last.doneRows} done rows${middle ? `, ×${growth(middle.ackbox.tick.rowsRead, last.ackbox.tick.rowsRead)} from ${middle.doneRows}` : ""}`,
    target: `≤ ${2 * options.staleRows} (2 × batch), flat`,
    met: tickMax <= 2 * options.staleRows,
  });
  out.push({
    name: `consumer claim of ${options.claimRows} rows`,
    measured: `${levels.map((l) => l.ackbox.claim.rowsRead).join(" / ")} rows read`,
    target: `≤ ${2 * options.claimRows} (2 × batch), flat`,
    met: claimMax <= 2 * options.claimRows,
  });
  out.push({
    name: `design note claimBatch (LIMIT ${options.noteClaimLimit})`,
    measured: `${levels.map((l) => l.note.claim.rowsRead).join(" / ")} rows read; ×${growth(first.note.claim.rowsRead, last.note.claim.rowsRead)}`,
    target: `≤ ${2 * options.noteClaimLimit} (2 × batch), flat`,
    met: Math.max(...levels.map((l) => l.note.claim.rowsRead)) <= 2 * options.noteClaimLimit,
  });
  return out;
}
