/**
 * Cancelling the rows of an operation whose ack answered 500.
 *
 * Slack retries an event that got a 500, and the late-committed batch then
 * turns the retry into a harmless duplicate. It never retries a slash command
 * or an interaction: the user was shown an error and may well run it again —
 * so if that first batch commits after all and its effects run, the user gets
 * two. For those surfaces the ingress cancels the rows of a batch that
 * committed after its 500, before anyone performs them: they are parked dead
 * with the reason, visible to operators (and replayable, if someone decides
 * the first one should run after all).
 *
 * Nobody can have performed them: a late-committed row was never enqueued by
 * the ingress (it answered 500, so only this path runs), and the sweep leaves
 * it alone until its sweep_at: SWEEP_GRACE_SECONDS for an unclaimed row, the
 * inline lease's expiry (20 s) for a row the durable write claimed for the
 * first attempt at the ack (shared/delivery/first-attempt.ts). The UPDATE
 * re-checks, in one statement, that each row is still pending and
 * unattempted — or leased under the ingress's own claim token, whose first
 * attempt never ran since the ack answered 500; a row that was claimed by
 * anyone else in between (the sweep, after that lease expired: this path
 * normally runs well inside it) is left to finish. One batch; rows written:
 * 2 per row (the row and its
 * outbox_dead_by_age entry), plus 1 per row with a deadline: like every row
 * parked before its deadline (fence.ts, dead-letter.ts), a cancelled row
 * keeps its response_url for a replay until then, and is scheduled for the
 * sweeper's scrub step (scrub.ts) at it.
 */
import pRetry from "p-retry";

export const CANCELLED_AFTER_500 =
  "cancelled: the ack answered 500 (the durable write overran ACK_BUDGET_MS) and Slack does not retry commands or interactions; the user saw an error and may run it again";

const cancelUnattempted = `
UPDATE outbox
   SET status = 'dead', claim_expires_at = NULL, sweep_at = NULL, last_error = ?2, completed_at = ?3, updated_at = ?3
 WHERE id IN (SELECT value FROM json_each(?1))
   AND ((status = 'pending' AND attempts = 0) OR (status = 'leased' AND claim_token = ?4))`;

/** Runs after cancelUnattempted in its batch: the rows it just parked (their reason and time) that have a deadline. */
const scrubAtDeadline = `
INSERT INTO outbox_scrub_due (due_at, outbox_id)
SELECT expires_at, id FROM outbox
 WHERE id IN (SELECT value FROM json_each(?1)) AND status = 'dead' AND last_error = ?2 AND completed_at = ?3
   AND expires_at IS NOT NULL
ON CONFLICT DO NOTHING`;

/**
 * Cancels those of `ids` nobody has attempted; returns how many it cancelled.
 * A lost cancel means the sweep performs rows the user was told had failed,
 * so a D1 blip is retried (the batch checks and acts, so running it again is
 * safe); if D1 still refuses, it throws and the caller logs it.
 */
export async function cancelUnattemptedRows(
  db: D1Database,
  ids: readonly number[],
  now: number,
  /** The claim token the durable write itself took rows under (the first attempt at the ack): those rows are unattempted too. */
  ownClaimToken?: string,
): Promise<number> {
  if (ids.length === 0) return 0;
  const [cancelled] = await pRetry(
    () =>
      db.batch([
        db.prepare(cancelUnattempted).bind(JSON.stringify(ids), CANCELLED_AFTER_500, now, ownClaimToken ?? null),
        db.prepare(scrubAtDeadline).bind(JSON.stringify(ids), CANCELLED_AFTER_500, now),
      ]),
    { retries: 2, minTimeout: 25, maxTimeout: 100 },
  );
  return cancelled?.meta.changes ?? 0;
}
