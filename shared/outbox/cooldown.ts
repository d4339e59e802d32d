/**
 * COOLDOWNS: Slack's 429, shared by every lane, batch and invocation.
 *
 * A 429 writes a cooldown for the row's rate key (shared/delivery/pacing.ts):
 * until Retry-After has passed, the claim (shared/outbox/claim.ts) takes no
 * row of that key — the check is a NOT EXISTS by primary key in the claim's
 * own UPDATE, a read and no write, so the happy path costs nothing more.
 *
 * A message whose claim a cooldown refused takes the key's next release slot
 * (one pace after the previous one, never before the cooldown ends): its row
 * is rescheduled to the slot and the message comes back then. So a burst of
 * rows waiting on one channel comes back at Slack's rate, one a second, not
 * all at once into the next 429. Slots are written only while a key is
 * cooling, never on the happy path.
 */
import { paceMsSql, rateKeySql } from "../delivery/pacing.ts";

/** The claim's gate, over the outbox row being claimed: true while its key is cooling at ?now. */
export function coolingSql(now: string): string {
  return `EXISTS (SELECT 1 FROM rate_cooldowns WHERE key = ${rateKeySql("outbox")} AND until > ${now})`;
}

/**
 * A 429 on row ?1 at ?2, Retry-After (capped) ?3: the key cools until ?2 + ?3,
 * and the first slot after it belongs to this row's own retry, so refused rows
 * queue behind it. Never shortens a cooldown already running. A row without a
 * key (a response_url post) writes nothing.
 */
const coolDown = `
INSERT INTO rate_cooldowns (key, until, next_slot, pace_ms, updated_at)
SELECT key, ?2 + ?3, ?2 + ?3 + ${paceMsSql("key")}, ${paceMsSql("key")}, ?2
  FROM (SELECT ${rateKeySql("outbox")} AS key FROM outbox WHERE id = ?1)
 WHERE key IS NOT NULL
ON CONFLICT (key) DO UPDATE SET
  until = max(until, excluded.until),
  next_slot = max(next_slot, excluded.next_slot),
  updated_at = excluded.updated_at`;

export function coolDownStatement(db: D1Database, outboxId: number, now: number, retryAfterMs: number): D1PreparedStatement {
  return db.prepare(coolDown).bind(outboxId, now, retryAfterMs);
}

/**
 * A refused claim: if row ?1 is pending and due at ?2 and its key is cooling,
 * take the key's next slot (the later of next_slot and until) and move
 * next_slot one pace on. Returns the slot; nothing when the row was refused
 * for another reason (done, dead, leased, not due).
 */
const takeSlot = `
UPDATE rate_cooldowns
   SET next_slot = max(next_slot, until) + pace_ms, updated_at = ?2
 WHERE key = (SELECT ${rateKeySql("outbox")} FROM outbox WHERE id = ?1 AND status = 'pending' AND next_attempt_at <= ?2)
   AND until > ?2
RETURNING next_slot - pace_ms AS slot`;

/** The slot takeSlot just handed out, read back from the cooldown of the row's key. */
const slotOfRow = `(SELECT next_slot - pace_ms FROM rate_cooldowns WHERE key = ${rateKeySql("outbox")})`;

/**
 * The row waits for its slot: due then, its message expected then, and the
 * sweep's grace counted from then (as a fenced retry sets them). Runs right
 * after takeSlot in one batch, and only if it took one (changes()).
 */
const waitForSlot = `
UPDATE outbox
   SET next_attempt_at = ${slotOfRow}, enqueued_at = ${slotOfRow}, sweep_at = ${slotOfRow} + ?3, updated_at = ?2
 WHERE id = ?1 AND status = 'pending' AND changes() = 1`;

/**
 * Returns the slot's time, or undefined if the row was not refused by a
 * cooldown. Rows read: a few (the outbox row, the cooldown); written: none
 * unless a slot is taken, then the cooldown, the outbox row and its
 * outbox_sweepable entry.
 */
export async function takeReleaseSlot(db: D1Database, outboxId: number, now: number, sweepGraceMs: number): Promise<number | undefined> {
  const [taken] = await db.batch<{ slot: number }>([
    db.prepare(takeSlot).bind(outboxId, now),
    db.prepare(waitForSlot).bind(outboxId, now, sweepGraceMs),
  ]);
  return taken?.results[0]?.slot;
}
