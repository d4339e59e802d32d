/**
 * THE SWEEP's statements. The queue is the fast path; these make delivery a
 * guarantee: any row that is still pending or leased after its sweep_at is
 * handed to the queue again, whether its message was lost, never sent, or its
 * worker died holding the lease.
 *
 * sweep_at (see the migration) is the one column that says when a row is
 * stale: a pending row's expected delivery + grace, a leased row's lease
 * expiry. A row waiting for a future retry has its sweep_at after that retry
 * time, so the sweep never jumps a backoff.
 *
 * Every statement reads through a partial index and stops at LIMIT: its cost
 * is the rows it touches, not the size of the table (invariant 6).
 */

/**
 * Re-enqueue step, in two parts. The candidates are the stalest rows, read
 * through outbox_sweepable. Then each is moved with its own conditional UPDATE
 * (check and act in one statement: it re-checks status and sweep_at), so a row
 * that finished or was re-sent by an overlapping sweep in between is skipped,
 * and changes() says which rows this sweep actually took.
 *
 * A re-sent row is looked at again one grace period later; if it has still
 * not been claimed by then, every further look-in is two periods apart: a
 * row re-sent without being claimed is most likely sitting behind a queue
 * backlog, and re-sending it every period would only grow that backlog. Not
 * more than two: the longer the wait, the longer a row whose message a crash
 * lost stays unsent (the fault-injection suite measured over a minute to
 * quiesce after a restart with a back-off of up to eight periods). A claim
 * resets the count. (In the UPDATE, `sweeps` on the right is the old value.)
 *
 * Cost, in D1's accounting: rows read = 2 per row taken (1 by the candidate
 * scan, 1 by its UPDATE), whatever the table's history; rows written = 2 per
 * row (the row and its outbox_sweepable entry). One UPDATE over the whole list
 * would read 3 to 6 per row. The price is one statement per row, which is why
 * settings cap SWEEP_BATCH_SIZE × SWEEP_MAX_STEPS well under D1's 1 000
 * queries per invocation.
 */
const staleCandidates = `
SELECT id FROM outbox
 WHERE status IN ('pending', 'leased') AND sweep_at <= ?1
 ORDER BY sweep_at
 LIMIT ?2`;

const takeIfStale = `
UPDATE outbox
   SET enqueued_at = ?4,
       sweeps = sweeps + 1,
       sweep_at = ?4 + ?2 * (1 << MIN(sweeps, 1)),
       updated_at = ?4
 WHERE id = ?3 AND status IN ('pending', 'leased') AND sweep_at <= ?1`;

/**
 * `now` decides what is stale (a tick's scheduledTime); `takenAt`, the clock read at the take, is when a
 * taken row was re-sent and what its next look-in counts from (the clock rule, shared/outbox/model.ts).
 */
export async function takeStaleRows(db: D1Database, now: number, graceMs: number, limit: number, takenAt = now): Promise<number[]> {
  const { results } = await db.prepare(staleCandidates).bind(now, limit).all<{ id: number }>();
  if (results.length === 0) return [];
  const taken = await db.batch(results.map(({ id }) => db.prepare(takeIfStale).bind(now, graceMs, id, takenAt)));
  return results
    .filter((_, i) => taken[i]?.meta.changes === 1)
    .map(({ id }) => id)
    .sort((a, b) => a - b);
}

/** Receipts past retention, oldest first. Rows read and written: at most ?2 (+ index entries). */
const pruneReceipts = `
DELETE FROM receipts
 WHERE id IN (SELECT id FROM receipts WHERE received_at < ?1 ORDER BY received_at LIMIT ?2)`;

/**
 * Finished rows past retention, with their audit rows. Two statements in one
 * batch over the same bounded selection (same transaction, so the same rows).
 */
const pruneAttemptsOf = (status: "done" | "dead") => `
DELETE FROM outbox_attempts
 WHERE outbox_id IN (SELECT id FROM outbox WHERE status = '${status}' AND completed_at < ?1 ORDER BY completed_at LIMIT ?2)`;
const pruneFinished = (status: "done" | "dead") => `
DELETE FROM outbox
 WHERE id IN (SELECT id FROM outbox WHERE status = '${status}' AND completed_at < ?1 ORDER BY completed_at LIMIT ?2)`;

/** What cancels found (migration 0014), kept as long as done rows, oldest first through outbox_cancels_by_age. */
const pruneCancels = `
DELETE FROM outbox_cancels
 WHERE (receipt_id, by_row, name) IN
       (SELECT receipt_id, by_row, name FROM outbox_cancels WHERE at < ?1 ORDER BY at LIMIT ?2)`;

/** Gaps that ended before the backlog's lookback (shared/ops/backfill-gaps.ts), oldest first, bounded. */
const pruneGaps = `
DELETE FROM delivery_gaps
 WHERE (gap_until, team_id) IN
       (SELECT gap_until, team_id FROM delivery_gaps WHERE gap_until < ?1 ORDER BY gap_until LIMIT ?2)`;

export interface PruneCutoffs {
  readonly receiptsBefore: number;
  readonly gapsBefore: number;
  readonly doneBefore: number;
  readonly deadBefore: number;
}

export interface PruneCounts {
  readonly receipts: number;
  readonly done: number;
  readonly dead: number;
  readonly gaps: number;
  /** Cancels' verdicts (outbox_cancels). */
  readonly cancels: number;
}

export async function pruneOld(db: D1Database, cutoffs: PruneCutoffs, limit: number): Promise<PruneCounts> {
  const results = await db.batch([
    db.prepare(pruneReceipts).bind(cutoffs.receiptsBefore, limit),
    db.prepare(pruneAttemptsOf("done")).bind(cutoffs.doneBefore, limit),
    db.prepare(pruneFinished("done")).bind(cutoffs.doneBefore, limit),
    db.prepare(pruneAttemptsOf("dead")).bind(cutoffs.deadBefore, limit),
    db.prepare(pruneFinished("dead")).bind(cutoffs.deadBefore, limit),
    db.prepare(pruneGaps).bind(cutoffs.gapsBefore, limit),
    db.prepare(pruneCancels).bind(cutoffs.doneBefore, limit),
  ]);
  const changed = (i: number) => results[i]?.meta.changes ?? 0;
  return { receipts: changed(0), done: changed(2), dead: changed(4), gaps: changed(5), cancels: changed(6) };
}
