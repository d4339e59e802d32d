/**
 * cancel(name): an intent that is not a row. It rides in the batch of the
 * input that asks — the ack's one batch (record.ts), or the fenced batch of
 * the completion of an effect that returns it as a follow-up (fence.ts) —
 * and is three statements there:
 *
 * 1. ONE UPDATE that checks and acts: the workspace's row of that name
 *    (namedKey), if it is still pending and was never attempted, ends as
 *    cancelled. Anything else is too late and left as it is: a row claimed
 *    (a worker may be performing it right now), attempted (a failed attempt
 *    may have performed it), done or dead — never half-cancelled. A 429 or
 *    an installation wait gives its attempt back (fence.ts), so a row that
 *    only waited is still cancellable. The guard is the batch's own: at the
 *    ack, that this delivery won the receipt (a duplicate delivery cancels
 *    nothing and records nothing); at a completion, that the completion's
 *    fence held (the parent is done under this claim's token), so a
 *    rejected completion cancels nothing.
 * 2. Its verdict, read from the UPDATE's own row count (changes(), so it must
 *    follow the UPDATE directly): one row of outbox_cancels (migration 0014)
 *    saying what the cancel found — cancelled, too late, cancelled already,
 *    or nothing to cancel — for the log line and the asking input's audit
 *    trail. Keyed by (input, asking row, name): a re-run of the same batch (a
 *    retried write that had committed) keeps the first verdict.
 * 3. A cancelled row's payload is due for scrubbing now (outbox_scrub_due):
 *    no replay will need the response_url it may carry.
 *
 * How a cancelled row ends, and why: status 'done' with cancelled_by set to
 * the asking input's receipt id. Done, because a cancelled row is finished as
 * the app asked: it never alerts as dead, a filter replay (which takes dead
 * rows only) never brings it back, it is never a failure in the backlog's
 * failure rate, and it is pruned with the done rows. A new status would need
 * a rebuild of the whole outbox table (a CHECK cannot be altered in SQLite)
 * for what one nullable column says; the price of the column is that the
 * readers of done rows that mean "performed" leave cancelled ones out (the
 * backlog's done-in-window, shared/ops/backlog.ts) and the operator answers
 * show them as "cancelled" (shared/ops/audit.ts, shared/ops/timers.ts).
 *
 * Cost per cancel: the UPDATE reads the row by its key (unique index) and,
 * when it cancels, writes the row and its outbox_done_by_age entry; the
 * verdict writes 2 rows (outbox_cancels and its by-age index, which pruning
 * reads); the scrub entry 1.
 */
import { type CancelOutcome, type CancelResult, namedKey } from "./model.ts";

/** Where a cancel is asked from: the ack of an input, or the completion of one of its rows (its follow-ups). */
export type CancelSource =
  | {
      readonly kind: "ack";
      readonly receiptId: string;
      readonly deliveryId: string;
      /**
       * Only rows recorded by this time (ms): a backfilled message's, when it was sent. Its live delivery, if it had
       * one, cancelled what existed then; a row recorded since by another input is not its to end (shared/ops/backfill.ts).
       */
      readonly recordedBy?: number | undefined;
    }
  | { readonly kind: "completion"; readonly receiptId: string; readonly rowId: number; readonly claimToken: string };

/** The batch's guard on ?4, ?5: this delivery won the receipt, or this claim's completion holds. */
function guardOf(source: CancelSource): { readonly sql: string; readonly args: readonly [string | number, string] } {
  return source.kind === "ack"
    ? { sql: "EXISTS (SELECT 1 FROM receipts WHERE id = ?4 AND delivery_id = ?5)", args: [source.receiptId, source.deliveryId] }
    : {
        sql: "EXISTS (SELECT 1 FROM outbox AS p WHERE p.id = ?4 AND p.claim_token = ?5 AND p.status = 'done')",
        args: [source.rowId, source.claimToken],
      };
}

/** ?6: recordedBy, or NULL (any row). */
const cancelIfUntouched = (guard: string) => `
UPDATE outbox
   SET status = 'done', cancelled_by = ?3, claim_expires_at = NULL, sweep_at = NULL, completed_at = ?2, updated_at = ?2
 WHERE idempotency_key = ?1 AND status = 'pending' AND attempts = 0 AND created_at <= coalesce(?6, created_at)
   AND ${guard}`;

/** Directly after cancelIfUntouched: changes() is its count. ?8: recordedBy (a row recorded after it is none to cancel). */
const recordVerdict = (guard: string) => `
INSERT INTO outbox_cancels (receipt_id, by_row, name, outcome, outbox_id, row_status, at)
SELECT ?3, ?6, ?7,
       CASE WHEN changes() = 1 THEN 'cancelled'
            WHEN o.id IS NULL THEN 'nothing_to_cancel'
            WHEN o.cancelled_by IS NOT NULL THEN 'already_cancelled'
            ELSE 'too_late' END,
       o.id,
       CASE WHEN changes() = 1 THEN 'pending' ELSE o.status END,
       ?2
  FROM (SELECT 1) LEFT JOIN outbox AS o ON o.idempotency_key = ?1 AND o.created_at <= coalesce(?8, o.created_at)
 WHERE ${guard}
ON CONFLICT DO NOTHING
RETURNING outcome, outbox_id, row_status`;

const scrubCancelled = `
INSERT INTO outbox_scrub_due (due_at, outbox_id)
SELECT ?2, id FROM outbox WHERE idempotency_key = ?1 AND status = 'done' AND cancelled_by = ?3 AND completed_at = ?2
ON CONFLICT DO NOTHING`;

/** The three statements of one cancel, in batch order; the second's result is the verdict (cancelResultOf). */
export function cancelStatements(
  db: D1Database,
  teamId: string,
  name: string,
  source: CancelSource,
  now: number,
): [D1PreparedStatement, D1PreparedStatement, D1PreparedStatement] {
  const key = namedKey(teamId, name);
  const guard = guardOf(source);
  const byRow = source.kind === "ack" ? 0 : source.rowId;
  const recordedBy = (source.kind === "ack" ? source.recordedBy : undefined) ?? null;
  return [
    db.prepare(cancelIfUntouched(guard.sql)).bind(key, now, source.receiptId, ...guard.args, recordedBy),
    db.prepare(recordVerdict(guard.sql)).bind(key, now, source.receiptId, ...guard.args, byRow, name, recordedBy),
    db.prepare(scrubCancelled).bind(key, now, source.receiptId),
  ];
}

/** The verdict statement's RETURNING, or undefined when it recorded nothing (a guard that failed, or a re-run). */
export function cancelResultOf(name: string, rows: readonly Record<string, unknown>[]): CancelResult | undefined {
  const row = rows[0];
  if (!row) return undefined;
  return {
    name,
    outcome: row.outcome as CancelOutcome,
    rowId: row.outbox_id === null || row.outbox_id === undefined ? null : Number(row.outbox_id),
    rowStatus: (row.row_status as string | null) ?? null,
  };
}

/** A cancel's results for a log line: "<name>: <outcome>" each. */
export function cancelsText(results: readonly CancelResult[]): string[] {
  return results.map((r) => `${r.name}: ${r.outcome}${r.outcome === "too_late" && r.rowStatus ? ` (${r.rowStatus})` : ""}`);
}
