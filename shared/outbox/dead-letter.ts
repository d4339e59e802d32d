/**
 * A message that exhausted the outbox queue's retries lands on the
 * dead-letter queue. What that says about its row depends on the row:
 *
 * - Its attempts are spent (or its deadline passed): the row itself kept
 *   failing. It is parked, with the reason, unless it is done or validly
 *   leased (a live lease means a worker is on it right now; parking under it
 *   would strand an effect being performed). An expired lease is fair game.
 * - It still has attempts left: the retries were spent by something other
 *   than the row — D1 unavailable, a deploy with a bad setting. Parking it
 *   would kill a healthy effect, so it goes back to the sweep instead: a
 *   pending, due row gets sweep_at = now, and the next tick re-sends it with
 *   a fresh message (a row waiting for its retry time keeps waiting).
 *
 * The claim token is cleared when a row is parked, as replay does, so a late
 * fenced write of an overrunning worker can never touch it again. That
 * worker may still be performing the effect, so a row parked from an expired
 * lease is marked maybe_performed (migration 0010): a filter replay leaves it
 * out, and an operator who knows it did not happen names it by id. A pending
 * row attempted before is marked too (the one rule, shared/delivery/decide.ts
 * mayHavePerformed): its spent attempts each ended without a result the row
 * kept — a timeout, an unknown answer — and Slack may have performed one. Only
 * a row parked past its deadline before any attempt (attempts = 0) is not.
 *
 * Rows read: 1–2 per message. Rows written: the row and its index entries,
 * plus one audit row when parked.
 */

/** Attempts an effect may spend, as JSON {"effect": n}, for those stricter than MAX_ATTEMPTS. */
export type AttemptLimits = Readonly<Record<string, number>>;

const parkIfSpent = `
UPDATE outbox
   SET status = 'dead', claim_token = NULL, claim_expires_at = NULL, sweep_at = NULL,
       -- (the right-hand side reads the row as it was) a leased row's holder may still be performing it, and an
       -- attempted pending row's earlier attempt may have been performed
       maybe_performed = CASE WHEN status = 'leased' OR attempts > 0 THEN 1 ELSE maybe_performed END,
       last_error = ?3, completed_at = ?2, updated_at = ?2
 WHERE id = ?1
   AND (status = 'pending' OR (status = 'leased' AND claim_expires_at <= ?2))
   AND (attempts >= COALESCE((SELECT value FROM json_each(?4) WHERE key = outbox.effect), ?5)
        OR (expires_at IS NOT NULL AND expires_at <= ?2))`;

const recordDeadLetter = `
INSERT INTO outbox_attempts (outbox_id, attempt, outcome, error, finished_at)
SELECT id, attempts, 'dead_letter', ?3, ?2 FROM outbox WHERE id = ?1 AND changes() = 1
ON CONFLICT DO NOTHING`;

/**
 * A parked row with a deadline is due for scrubbing at its deadline (or now,
 * if that has passed): the dead-letter path cannot classify the payload in
 * SQL, so every row it parks with a deadline gets an entry, and the scrub
 * step (shared/outbox/scrub.ts) decides. A rare path: 1 row written.
 */
const scrubLater = `
INSERT INTO outbox_scrub_due (due_at, outbox_id)
SELECT MAX(expires_at, ?2), id FROM outbox
 WHERE id = ?1 AND status = 'dead' AND completed_at = ?2 AND expires_at IS NOT NULL
ON CONFLICT DO NOTHING`;

/** Not parked: a pending row that is due goes to the next sweep. */
const handBackToSweep = `
UPDATE outbox
   SET sweep_at = ?2, updated_at = ?2
 WHERE id = ?1 AND status = 'pending' AND next_attempt_at <= ?2 AND sweep_at > ?2`;

export type DeadLetterOutcome = "parked" | "handed_back" | "left_alone";

export async function settleDeadLetter(
  db: D1Database,
  id: number,
  reason: string,
  now: number,
  limits: { readonly maxAttempts: number; readonly byEffect: AttemptLimits },
): Promise<DeadLetterOutcome> {
  const [, changed, , handedBack] = await db.batch<{ changes: number }>([
    db.prepare(parkIfSpent).bind(id, now, reason, JSON.stringify(limits.byEffect), limits.maxAttempts),
    db.prepare("SELECT changes() AS changes"),
    db.prepare(recordDeadLetter).bind(id, now, reason),
    db.prepare(handBackToSweep).bind(id, now),
    db.prepare(scrubLater).bind(id, now),
  ]);
  if (changed?.results[0]?.changes === 1) return "parked";
  return handedBack?.meta.changes === 1 ? "handed_back" : "left_alone";
}
