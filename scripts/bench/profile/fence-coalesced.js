// Bench-only variant of shared/outbox/fence.ts (end-to-end profiling): the
// same fenced statements, but the finishes of rows that complete together
// (one queue batch's rows, performed in parallel) share one D1 batch instead
// of one D1 round trip each. Each row keeps its own UPDATE, its own
// `SELECT changes()` right after it, and its own audit statement, in that
// order inside the shared batch, so each fence verdict is still its own.
const completeIfClaimed = `
UPDATE outbox
   SET status = 'done', claim_expires_at = NULL, sweep_at = NULL,
       result = ?3, completed_at = ?4, updated_at = ?4
 WHERE id = ?1 AND claim_token = ?2`;

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

const recordAttempt = `
INSERT INTO outbox_attempts (outbox_id, attempt, outcome, error, claim_token, started_at, finished_at)
SELECT ?1, ?2, CASE WHEN changes() = 1 THEN ?3 ELSE 'fence_lost' END, ?4, ?5, ?6, ?7
 WHERE ?8 = 0 OR changes() = 0
ON CONFLICT DO NOTHING`;

const verdict = "SELECT changes() AS changes";
const WINDOW_MS = 5;

let pending = null;

function submit(db, statements) {
  if (!pending || pending.db !== db) {
    const group = { db, entries: [] };
    pending = group;
    setTimeout(() => {
      if (pending === group) pending = null;
      group.db.batch(group.entries.flatMap((e) => e.statements)).then(
        (results) => {
          let i = 0;
          for (const e of group.entries) {
            e.resolve(results[i + 1]);
            i += e.statements.length;
          }
        },
        (error) => {
          for (const e of group.entries) e.reject(error);
        },
      );
    }, WINDOW_MS);
  }
  return new Promise((resolve, reject) => pending.entries.push({ statements, resolve, reject }));
}

export async function finishClaim(db, row, finish, now, sweepGraceMs, startedAt) {
  let update;
  let audit;
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
  const changed = await submit(db, [update, db.prepare(verdict), audit]);
  return { applied: changed?.results[0]?.changes === 1 };
}
