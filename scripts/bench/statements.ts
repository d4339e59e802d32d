/**
 * Names and explanations for the statements the probe meters. A statement
 * is recognised by the start of its SQL; one the table does not know is
 * shown by its own first words, so a new statement in the product shows up
 * in the figures without anyone editing this file.
 *
 * The explanations say why a statement reads and writes what it does
 * (D1 bills a row written for the table row and for each index entry a write
 * adds; index entries a write removes are not counted, as the cost section's
 * accounting check measures). They
 * are the expected accounting; the figures beside them in the report are
 * measured, and the report flags any statement whose measured rows written
 * differ from `expectWritten` here.
 */
import type { StatementRecord } from "./probe-host.ts";

interface Known {
  readonly pattern: RegExp;
  readonly name: string;
  readonly expectWritten?: number;
  readonly why?: string;
}

const ACKBOX: readonly Known[] = [
  {
    pattern: /^INSERT INTO receipts/,
    name: "insertReceipt",
    expectWritten: 2,
    why: "the receipts row (WITHOUT ROWID: the table is its primary-key b-tree, no separate key index) + its receipts_by_age entry; reads the key probe of ON CONFLICT",
  },
  {
    pattern: /^SELECT changes\(\)/,
    name: "SELECT changes()",
    expectWritten: 0,
    why: "the row count of the statement just before it (the receipt's verdict at the ack, the fence's at a finish); touches no table",
  },
  {
    pattern: /^INSERT INTO outbox \(idempotency_key, receipt_id/,
    name: "insertOutboxRow",
    expectWritten: 4,
    why: "the outbox row + its idempotency_key UNIQUE-index entry + its outbox_sweepable entry (partial index: live rows) + its outbox_pending_by_age entry (migration 0004: the exact oldest-pending age); reads the receipt by primary key and the unique-key probe",
  },
  {
    pattern: /^UPDATE outbox SET status = 'leased'/,
    name: "claimById (per row)",
    expectWritten: 2,
    why: "the row + its new outbox_sweepable entry (sweep_at moves to the lease expiry; the old entry's removal is not counted); reads the row by id and its index entries",
  },
  {
    pattern: /^UPDATE outbox SET status = 'done', claim_expires_at = NULL, sweep_at = NULL/,
    name: "completeIfClaimed (fenced)",
    expectWritten: 2,
    why: "the row + its new outbox_done_by_age entry (leaving outbox_sweepable is an index deletion, which D1 does not count)",
  },
  {
    pattern: /^INSERT INTO outbox_attempts/,
    name: "recordAttempt",
    why: "an audit row only when something went wrong (retry, dead, lost fence); on success its WHERE is false and it writes nothing",
  },
  {
    pattern: /^SELECT id FROM outbox WHERE status IN \('pending', 'leased'\) AND sweep_at/,
    name: "sweep: staleCandidates",
    expectWritten: 0,
  },
  {
    pattern: /^UPDATE outbox SET enqueued_at = \?1, sweeps = sweeps \+ 1/,
    name: "sweep: takeIfStale (per row)",
    expectWritten: 2,
    why: "the row + its new outbox_sweepable entry (sweep_at moves forward)",
  },
  { pattern: /^UPDATE outbox SET enqueued_at = NULL/, name: "markNotEnqueued" },
  { pattern: /^DELETE FROM receipts/, name: "prune: receipts" },
  { pattern: /^DELETE FROM outbox_attempts/, name: "prune: audit rows" },
  { pattern: /^DELETE FROM outbox WHERE/, name: "prune: finished rows" },
];

const NOTE: readonly Known[] = [
  {
    pattern: /^INSERT INTO slack_event_receipts/,
    name: "note: receipt insert",
    expectWritten: 2,
    why: "the row + the automatic index of its TEXT PRIMARY KEY (a rowid table keeps the key in a separate b-tree)",
  },
  { pattern: /^SELECT changes\(\)/, name: "note: SELECT changes()", expectWritten: 0 },
  {
    pattern: /^INSERT INTO outbox \(idempotency_key, effect, payload, created_at\)/,
    name: "note: outbox insert",
    expectWritten: 4,
    why: "the row + the UNIQUE idempotency_key index + outbox_claimable (every row, done ones included) + sqlite_sequence (AUTOINCREMENT)",
  },
  {
    pattern: /^UPDATE outbox SET claim_token = \?, claim_expires_at = \?/,
    name: "note: claimBatch UPDATE",
    why: "per claimed row: the row + its new outbox_claimable entry (claim_expires_at is in the index); reads the pending range of outbox_claimable (sorted by id), then each row",
  },
  {
    pattern: /^SELECT id, effect, payload, attempts FROM outbox WHERE claim_token = \?/,
    name: "note: claimBatch SELECT",
    expectWritten: 0,
    why: "claim_token has no index: a full scan of the outbox, done rows included",
  },
  {
    pattern: /^UPDATE outbox SET status = 'done', claim_token = NULL/,
    name: "note: completeClaimed",
    expectWritten: 2,
    why: "the row + its new outbox_claimable entry (status and claim_expires_at change)",
  },
];

export type Schema = "ackbox" | "note";

function normalize(sql: string): string {
  return sql.replace(/\s+/g, " ").replace(/\( /g, "(").replace(/ \)/g, ")").trim();
}

export function identify(sql: string, schema: Schema): Known {
  const text = normalize(sql);
  const found = (schema === "note" ? NOTE : ACKBOX).find((k) => k.pattern.test(text));
  return found ?? { pattern: /$^/, name: text.length > 64 ? `${text.slice(0, 61)}…` : text };
}

export interface StatementCost {
  readonly name: string;
  readonly calls: number;
  readonly rowsRead: number;
  readonly rowsWritten: number;
  readonly readPerCall: number;
  readonly writtenPerCall: number;
  readonly why?: string;
  /** Set when the measured rows written per call differ from the expected accounting. */
  readonly unexpected?: string;
}

/** Groups statement records by statement, in first-seen order. */
export function byStatement(records: readonly StatementRecord[], schema: Schema): StatementCost[] {
  const groups = new Map<string, { known: Known; calls: number; read: number; written: number; perCall: Set<number> }>();
  for (const r of records) {
    const known = identify(r.sql, schema);
    const g = groups.get(known.name) ?? { known, calls: 0, read: 0, written: 0, perCall: new Set<number>() };
    g.calls += 1;
    g.read += r.rowsRead;
    g.written += r.rowsWritten;
    g.perCall.add(r.rowsWritten);
    groups.set(known.name, g);
  }
  return [...groups.values()].map(({ known, calls, read, written, perCall }) => {
    const writtenPerCall = written / calls;
    const unexpected =
      known.expectWritten !== undefined && (perCall.size > 1 || writtenPerCall !== known.expectWritten)
        ? `expected ${known.expectWritten} rows written per call, measured ${[...perCall].join("/")}`
        : undefined;
    return {
      name: known.name,
      calls,
      rowsRead: read,
      rowsWritten: written,
      readPerCall: read / calls,
      writtenPerCall,
      ...(known.why ? { why: known.why } : {}),
      ...(unexpected ? { unexpected } : {}),
    };
  });
}

export function totals(records: readonly StatementRecord[]): { statements: number; rowsRead: number; rowsWritten: number } {
  let rowsRead = 0;
  let rowsWritten = 0;
  for (const r of records) {
    rowsRead += r.rowsRead;
    rowsWritten += r.rowsWritten;
  }
  return { statements: records.length, rowsRead, rowsWritten };
}
