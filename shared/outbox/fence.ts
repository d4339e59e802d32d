import { scrubStoredPayload } from "../credentials.ts";
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
 * A completion is one UPDATE, whose own row count is the verdict; only when
 * the fence rejects it is an audit row written, by a second statement. A
 * retry or a parking is one batch: the fenced UPDATE, then an audit row whose
 * outcome reads changes() of that UPDATE (D1 runs a batch in order, in one
 * transaction: 'fence_lost' if the UPDATE matched nothing).
 *
 * A finished row stops carrying credentials (shared/credentials.ts: a
 * response_url, a token) in the same fenced UPDATE: a completion always, a
 * parking once the row's deadline has passed (before it, a replay may still
 * need the URL: the row is scheduled for scrubbing at its deadline instead,
 * one more statement in the parking batch; a row with no deadline keeps it
 * until it is pruned, redacted in every operator answer). The cost on the happy path: no
 * statement and no row written more — the payload column is rewritten in the
 * row the completion writes anyway, and only for a payload that holds a
 * credential (otherwise ?5 is NULL and the stored text stays as it was).
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
       result = ?3, completed_at = ?4, updated_at = ?4, payload = COALESCE(?5, payload)
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
       last_error = ?3, completed_at = ?4, updated_at = ?4, payload = COALESCE(?5, payload)
 WHERE id = ?1 AND claim_token = ?2`;

/**
 * A dead row whose credential a replay may still use (its deadline is ahead):
 * due for scrubbing at the deadline (migration 0004, shared/outbox/scrub.ts).
 * Runs last in the parking batch and checks the row itself, so a rejected
 * fence schedules nothing.
 */
const scrubAtDeadline = `
INSERT INTO outbox_scrub_due (due_at, outbox_id)
SELECT expires_at, id FROM outbox WHERE id = ?1 AND claim_token = ?2 AND status = 'dead' AND expires_at IS NOT NULL
ON CONFLICT DO NOTHING`;

/**
 * The audit row of a failed attempt. It runs right after the fenced UPDATE in
 * the same batch, so changes() is that UPDATE's count: 'fence_lost' if it
 * matched nothing. (Only inside a batch: a standalone changes() would read
 * whatever statement last ran on the connection.)
 */
const recordAttempt = `
INSERT INTO outbox_attempts (outbox_id, attempt, outcome, error, claim_token, started_at, finished_at)
VALUES (?1, ?2, CASE WHEN changes() = 1 THEN ?3 ELSE 'fence_lost' END, ?4, ?5, ?6, ?7)
ON CONFLICT DO NOTHING`;

/** The audit row of a completion the fence rejected: the effect happened, its row belongs to another claim. */
const recordLostCompletion = `
INSERT INTO outbox_attempts (outbox_id, attempt, outcome, error, claim_token, started_at, finished_at)
VALUES (?1, ?2, 'fence_lost', 'performed, but the lease was lost before completion', ?3, ?4, ?5)
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
  if (finish.kind === "done") {
    // The happy path is one statement: its own meta.changes is the verdict.
    // Only a rejected completion (rare) writes its audit row, in a second one.
    const scrubbed = (await scrubStoredPayload(row.payload)) ?? null;
    const { meta } = await db
      .prepare(completeIfClaimed)
      .bind(row.id, row.claimToken, JSON.stringify(finish.result ?? null), now, scrubbed)
      .run();
    if (meta.changes === 1) return { applied: true };
    await db.prepare(recordLostCompletion).bind(row.id, row.attempts, row.claimToken, startedAt, now).run();
    return { applied: false };
  }
  let update: D1PreparedStatement;
  let audit: D1PreparedStatement;
  const later: D1PreparedStatement[] = [];
  if (finish.kind === "retry") {
    update = db.prepare(retryIfClaimed).bind(row.id, row.claimToken, finish.nextAttemptAt, sweepGraceMs, finish.error, now);
    audit = db.prepare(recordAttempt).bind(row.id, row.attempts, "retry", finish.error, row.claimToken, startedAt, now);
  } else {
    const scrubbed = (await scrubStoredPayload(row.payload)) ?? null;
    // No deadline: a replay may need the credential any time until the row is pruned (DEAD_RETENTION_DAYS).
    const deadlinePassed = row.expiresAt !== null && now >= row.expiresAt;
    update = db.prepare(parkIfClaimed).bind(row.id, row.claimToken, finish.error, now, deadlinePassed ? scrubbed : null);
    audit = db.prepare(recordAttempt).bind(row.id, row.attempts, "dead", finish.error, row.claimToken, startedAt, now);
    if (scrubbed !== null && !deadlinePassed) later.push(db.prepare(scrubAtDeadline).bind(row.id, row.claimToken));
  }
  // verdict sits directly after the UPDATE: it must read that statement's count.
  const [, changed] = await db.batch<{ changes: number }>([update, db.prepare(verdict), audit, ...later]);
  return { applied: changed?.results[0]?.changes === 1 };
}
