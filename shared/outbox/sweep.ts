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
 * Re-enqueue step: picks the stalest rows and moves their sweep_at forward in
 * one statement (check and act), so two overlapping sweeps never pick the same
 * row twice. The next look-in backs off with each consecutive re-send (grace ×
 * 2^sweeps, at most ×8): a row that keeps being re-sent is one sitting behind a
 * long queue backlog, and re-sending it every minute would only grow that backlog.
 *
 * Rows read: at most ?3, through outbox_sweepable. Rows written: as many, each
 * with its outbox_sweepable entry.
 */
const reenqueueStale = `
UPDATE outbox
   SET enqueued_at = ?1,
       sweeps = sweeps + 1,
       sweep_at = ?1 + ?2 * (1 << MIN(sweeps, 3)),
       updated_at = ?1
 WHERE id IN (SELECT id FROM outbox
               WHERE status IN ('pending', 'leased') AND sweep_at <= ?1
               ORDER BY sweep_at
               LIMIT ?3)
RETURNING id`;

export async function takeStaleRows(db: D1Database, now: number, graceMs: number, limit: number): Promise<number[]> {
  const { results } = await db.prepare(reenqueueStale).bind(now, graceMs, limit).all<{ id: number }>();
  return results.map((row) => row.id).sort((a, b) => a - b);
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

export interface PruneCutoffs {
  readonly receiptsBefore: number;
  readonly doneBefore: number;
  readonly deadBefore: number;
}

export interface PruneCounts {
  readonly receipts: number;
  readonly done: number;
  readonly dead: number;
}

export async function pruneOld(db: D1Database, cutoffs: PruneCutoffs, limit: number): Promise<PruneCounts> {
  const results = await db.batch([
    db.prepare(pruneReceipts).bind(cutoffs.receiptsBefore, limit),
    db.prepare(pruneAttemptsOf("done")).bind(cutoffs.doneBefore, limit),
    db.prepare(pruneFinished("done")).bind(cutoffs.doneBefore, limit),
    db.prepare(pruneAttemptsOf("dead")).bind(cutoffs.deadBefore, limit),
    db.prepare(pruneFinished("dead")).bind(cutoffs.deadBefore, limit),
  ]);
  const changed = (i: number) => results[i]?.meta.changes ?? 0;
  return { receipts: changed(0), done: changed(2), dead: changed(4) };
}
