/**
 * The scrub step of the sweeper's tick: dead rows whose deadline has come
 * lose the credentials in their stored payload (shared/credentials.ts).
 *
 * Which rows: those with an entry in outbox_scrub_due (migration 0004),
 * written when a row holding a credential was parked before its deadline —
 * by the fence (shared/outbox/fence.ts), the dead-letter queue
 * (shared/outbox/dead-letter.ts) or the ingress cancelling a 500'd
 * command's late rows (shared/outbox/cancel.ts) — and every row an app's
 * cancel(name) ended (shared/outbox/cancel-named.ts), due at once: no replay
 * will need what it carries. Done rows and rows parked after their
 * deadline were scrubbed in the write that finished them.
 *
 * Bounded: at most `limit` entries per tick, oldest due first; one SELECT,
 * one UPDATE per row that still holds a credential, one DELETE of the
 * entries handled — at most limit + 2 statements, in two round trips. A row
 * replayed since (pending, leased, or done) is not touched: it is live again,
 * or was scrubbed when it completed; its entry just goes.
 */

import { scrubStoredPayload } from "../credentials.ts";

/** Entries one tick handles: ≤ SCRUB_BATCH_SIZE + 2 D1 statements, well inside the tick's budget. */
export const SCRUB_BATCH_SIZE = 50;

const dueEntries = `
SELECT d.due_at, d.outbox_id, o.status, o.payload, o.expires_at, o.cancelled_by
  FROM outbox_scrub_due AS d LEFT JOIN outbox AS o ON o.id = d.outbox_id
 WHERE d.due_at <= ?1
 ORDER BY d.due_at
 LIMIT ?2`;

/** Re-checks what the SELECT saw: still dead, deadline passed; or cancelled (done, never performed). */
const scrubIfDead = `
UPDATE outbox SET payload = ?2
 WHERE id = ?1
   AND ((status = 'dead' AND expires_at IS NOT NULL AND expires_at <= ?3) OR (status = 'done' AND cancelled_by IS NOT NULL))`;

const dropEntries = `
DELETE FROM outbox_scrub_due
 WHERE due_at <= ?1 AND outbox_id IN (SELECT value FROM json_each(?2))`;

interface DueEntry {
  due_at: number;
  outbox_id: number;
  status: string | null;
  payload: string | null;
  expires_at: number | null;
  cancelled_by: string | null;
}

/** Scrubs what is due at `now`; returns the rows whose stored payload changed. */
export async function scrubDueRows(db: D1Database, now: number, limit = SCRUB_BATCH_SIZE): Promise<number> {
  const { results } = await db.prepare(dueEntries).bind(now, limit).all<DueEntry>();
  if (results.length === 0) return 0;
  const updates: D1PreparedStatement[] = [];
  for (const entry of results) {
    const cancelled = entry.status === "done" && entry.cancelled_by !== null;
    if ((entry.status !== "dead" && !cancelled) || entry.payload === null) continue;
    const scrubbed = await scrubStoredPayload(entry.payload);
    if (scrubbed !== undefined) updates.push(db.prepare(scrubIfDead).bind(entry.outbox_id, scrubbed, now));
  }
  const ids = JSON.stringify(results.map((e) => e.outbox_id));
  const done = await db.batch([...updates, db.prepare(dropEntries).bind(now, ids)]);
  return done.slice(0, updates.length).filter((r) => r.meta.changes === 1).length;
}
