import type { ClaimedRow } from "./model.ts";

/**
 * Every write that follows a claim, fenced on the claim's token.
 *
 * `WHERE id = ? AND claim_token = ?` is the fence: if this worker overran its
 * lease and another worker has since claimed the row under a new token, the
 * write matches nothing and cannot mark the other worker's work done (which
 * would turn a duplicate into a loss). A lease that expired but was not yet
 * re-claimed still completes: the effect was performed and nobody else holds
 * the row, so accepting it prevents a certain duplicate.
 *
 * Each write is one batch: the fenced UPDATE, then an audit row whose outcome
 * reads changes() of that UPDATE (D1 runs a batch in order, in one
 * transaction), so a lost fence is recorded without a second round trip.
 */

export type Finish =
  | { readonly kind: "done"; readonly result: unknown }
  | { readonly kind: "retry"; readonly nextAttemptAt: number; readonly error: string }
  | { readonly kind: "dead"; readonly error: string };

export interface FinishOutcome {
  /** false: the fence rejected the write; another claim owns the row now. */
  readonly applied: boolean;
}

/** Rows written: the row and its index entries (done: leaves outbox_sweepable, enters outbox_done_by_age). */
const completeIfClaimed = `
UPDATE outbox
   SET status = 'done', claim_expires_at = NULL, sweep_at = NULL,
       result = ?3, completed_at = ?4, updated_at = ?4
 WHERE id = ?1 AND claim_token = ?2`;

/**
 * Back to pending, due at next_attempt_at. enqueued_at is the time the delayed
 * queue message is due, and sweep_at a grace period after it: the sweeper
 * never touches a row that is waiting for its retry time.
 */
const retryIfClaimed = `
UPDATE outbox
   SET status = 'pending', claim_expires_at = NULL,
       next_attempt_at = ?3, enqueued_at = ?3, sweep_at = ?3 + ?4,
       last_error = ?5, updated_at = ?6
 WHERE id = ?1 AND claim_token = ?2`;

const parkIfClaimed = `
UPDATE outbox
   SET status = 'dead', claim_expires_at = NULL, sweep_at = NULL,
       last_error = ?3, completed_at = ?4, updated_at = ?4
 WHERE id = ?1 AND claim_token = ?2`;

/**
 * The audit row of a failed attempt, or of a completion the fence rejected.
 * ?8 = 1 records it only when the UPDATE matched nothing (a success writes no
 * audit row); ?8 = 0 records it either way, as 'fence_lost' if it matched nothing.
 */
const recordAttempt = `
INSERT INTO outbox_attempts (outbox_id, attempt, outcome, error, claim_token, started_at, finished_at)
SELECT ?1, ?2, CASE WHEN changes() = 1 THEN ?3 ELSE 'fence_lost' END, ?4, ?5, ?6, ?7
 WHERE ?8 = 0 OR changes() = 0
ON CONFLICT DO NOTHING`;

const verdict = "SELECT changes() AS changes";

export async function finishClaim(
  db: D1Database,
  row: ClaimedRow,
  finish: Finish,
  now: number,
  sweepGraceMs: number,
  startedAt: number,
): Promise<FinishOutcome> {
  let update: D1PreparedStatement;
  let audit: D1PreparedStatement;
  switch (finish.kind) {
    case "done":
      update = db.prepare(completeIfClaimed).bind(row.id, row.claimToken, JSON.stringify(finish.result ?? null), now);
      audit = db
        .prepare(recordAttempt)
        .bind(row.id, row.attempts, "fence_lost", "performed, but the lease was lost before completion", row.claimToken, startedAt, now, 1);
      break;
    case "retry":
      update = db.prepare(retryIfClaimed).bind(row.id, row.claimToken, finish.nextAttemptAt, sweepGraceMs, finish.error, now);
      audit = db.prepare(recordAttempt).bind(row.id, row.attempts, "retry", finish.error, row.claimToken, startedAt, now, 0);
      break;
    case "dead":
      update = db.prepare(parkIfClaimed).bind(row.id, row.claimToken, finish.error, now);
      audit = db.prepare(recordAttempt).bind(row.id, row.attempts, "dead", finish.error, row.claimToken, startedAt, now, 0);
      break;
  }
  // verdict sits directly after the UPDATE: it must read that statement's count.
  const [, changed] = await db.batch<{ changes: number }>([update, db.prepare(verdict), audit]);
  return { applied: changed?.results[0]?.changes === 1 };
}
