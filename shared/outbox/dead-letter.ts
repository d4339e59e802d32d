/**
 * A message that exhausted the outbox queue's retries (its handler kept
 * failing before it could record an outcome) lands on the dead-letter queue.
 * Its row is parked unless it is done, or validly leased: a live lease means a
 * worker is on it right now, and parking under it would strand an effect that
 * is being performed. An expired lease is fair game.
 *
 * Rows read: 1. Rows written: the row and its index entries, plus one audit row.
 */
const parkDeadLettered = `
UPDATE outbox
   SET status = 'dead', claim_expires_at = NULL, sweep_at = NULL,
       last_error = ?3, completed_at = ?2, updated_at = ?2
 WHERE id = ?1
   AND (status = 'pending' OR (status = 'leased' AND claim_expires_at <= ?2))`;

const recordDeadLetter = `
INSERT INTO outbox_attempts (outbox_id, attempt, outcome, error, finished_at)
SELECT id, attempts, 'dead_letter', ?3, ?2 FROM outbox WHERE id = ?1 AND changes() = 1
ON CONFLICT DO NOTHING`;

export async function parkDeadLetter(db: D1Database, id: number, reason: string, now: number): Promise<{ readonly parked: boolean }> {
  const [, changed] = await db.batch<{ changes: number }>([
    db.prepare(parkDeadLettered).bind(id, now, reason),
    db.prepare("SELECT changes() AS changes"),
    db.prepare(recordDeadLetter).bind(id, now, reason),
  ]);
  return { parked: changed?.results[0]?.changes === 1 };
}
