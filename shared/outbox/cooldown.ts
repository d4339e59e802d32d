/**
 * COOLDOWNS: Slack's 429, shared by every lane, batch and invocation.
 *
 * A 429 writes a cooldown for the row's rate key (shared/delivery/pacing.ts),
 * and from then on the key is *hot*: its rows are released one pace apart
 * through slots, whoever claims them.
 *
 * - until:     no row of the key is claimed before it (Retry-After, capped).
 * - next_slot: the next free release time. Every row that must wait — the
 *              one that got the 429, one whose claim the key refused, one a
 *              lane gives back before calling — takes the slot (never before
 *              `until`), moves next_slot one pace on, and is rescheduled to
 *              its slot. So a burst waiting on one channel comes back at
 *              Slack's rate, one a second, not all at once into the next 429.
 *
 * The claim's gate (claim.ts) refuses a row of a hot key while the key cools
 * (until > now), and, while slots are queued ahead (next_slot > now), a row
 * that holds none (scheduled before the cooldown's end) — a pending row or one
 * whose lease expired alike; either then takes a slot. It is a NOT EXISTS
 * by primary key in the claim's own UPDATE: a read and no write, so the happy
 * path costs nothing more. Slots are written only while a key is hot.
 *
 * A row recorded after the cooldown's end may claim past the queued slots;
 * if Slack then answers 429, it takes a slot like any other.
 */
import { paceMsSql, rateKeySql } from "../delivery/pacing.ts";
import type { ClaimedRow } from "./model.ts";

/** Over the outbox row: its key has release slots queued at `now` (the claim returns it, for in-batch pacing). */
export function hotSql(now: string): string {
  return `EXISTS (SELECT 1 FROM rate_cooldowns WHERE key = ${rateKeySql("outbox")} AND next_slot > ${now})`;
}

/** The claim's gate, over the outbox row being claimed: true while its key holds it back at `now`. */
export function heldBackSql(now: string): string {
  return `EXISTS (SELECT 1 FROM rate_cooldowns
                   WHERE key = ${rateKeySql("outbox")}
                     AND (until > ${now} OR (next_slot > ${now} AND outbox.next_attempt_at < until)))`;
}

/** The slot just handed out for the row's key (next_slot moved one pace past it). NULL for a row without a key. */
const slotOfRow = `(SELECT next_slot - pace_ms FROM rate_cooldowns WHERE key = ${rateKeySql("outbox")})`;

/**
 * A 429 on row ?1 at ?2, Retry-After (capped) ?3: the key cools until at
 * least ?2 + ?3 (never shortened), and this row takes the next slot from
 * then. (In DO UPDATE, the right-hand sides read the row as it was.) A row
 * without a key (a response_url post) writes nothing.
 */
const coolDown = `
INSERT INTO rate_cooldowns (key, until, next_slot, pace_ms, updated_at)
SELECT key, ?2 + ?3, ?2 + ?3 + ${paceMsSql("key")}, ${paceMsSql("key")}, ?2
  FROM (SELECT ${rateKeySql("outbox")} AS key FROM outbox WHERE id = ?1)
 WHERE key IS NOT NULL
ON CONFLICT (key) DO UPDATE SET
  until = max(until, excluded.until),
  next_slot = max(next_slot, until, excluded.until, ?2) + pace_ms,
  updated_at = excluded.updated_at`;

/** The cooldown and slot of a 429, to run first in the fence's batch (fence.ts); the row's retry then reads its slot. */
export function coolDownStatement(db: D1Database, outboxId: number, now: number, retryAfterMs: number): D1PreparedStatement {
  return db.prepare(coolDown).bind(outboxId, now, retryAfterMs);
}

/** The retry time of a rate-limited row: the later of what decide.ts asked for (?) and its slot, if it has a key. */
export function slotOrSql(decided: string): string {
  return `max(${decided}, coalesce(${slotOfRow}, ${decided}))`;
}

/**
 * A row that must wait for a hot key takes its next slot: the later of
 * next_slot, until and now; next_slot moves one pace on. ?1 the row, ?2 now.
 * `rowCondition` says which rows may take one (see the uses below);
 * `keyCondition`, when: by default, while the key holds the row back (the
 * claim's gate, over the row).
 */
const HELD_BACK = "(until > ?2 OR (next_slot > ?2 AND (SELECT next_attempt_at FROM outbox WHERE id = ?1) < until))";
const takeSlot = (rowCondition: string, keyCondition = HELD_BACK) => `
UPDATE rate_cooldowns
   SET next_slot = max(next_slot, until, ?2) + pace_ms, updated_at = ?2
 WHERE key = (SELECT ${rateKeySql("outbox")} FROM outbox WHERE id = ?1 AND ${rowCondition})
   AND ${keyCondition}
RETURNING next_slot - pace_ms AS slot`;

/** What the claim could take: pending and due, or leased with an expired lease (claim.ts). */
const CLAIMABLE = "((status = 'pending' AND next_attempt_at <= ?2) OR (status = 'leased' AND claim_expires_at <= ?2))";

/**
 * A refused claim: the row waits for its slot, pending (due then; the sweep's
 * grace counted from then). A row whose lease expired is pending again too —
 * else it would never hold a slot and be refused for as long as the key stays
 * busy — and keeps its claim token: its holder, if it is still performing the
 * effect, completes it (the fence accepts an expired lease nobody re-claimed).
 * Such a row is marked maybe_performed, as the parks mark a leased row: a park
 * that takes it pending later (an uninstall, a dead letter) must still say so.
 */
const waitForSlot = `
UPDATE outbox
   SET status = 'pending', claim_expires_at = NULL,
       maybe_performed = CASE WHEN status = 'leased' THEN 1 ELSE maybe_performed END,
       next_attempt_at = ${slotOfRow}, enqueued_at = ${slotOfRow}, sweep_at = ${slotOfRow} + ?3, updated_at = ?2
 WHERE id = ?1 AND ${CLAIMABLE} AND changes() = 1`;

/**
 * A claim the key refused: if row ?1 is claimable (pending and due, or its
 * lease expired) and its key holds it back, it takes the next slot and is
 * rescheduled to it; the first statement returns the slot. Two statements,
 * run right after the claim in the claim's own batch (claim.ts,
 * claimOrTakeSlot): they match nothing when the claim took the row (it is
 * leased now) or when the row was not claimable for another reason (done,
 * dead, validly leased, not due), and write only when a slot is taken (the
 * cooldown, the row and its outbox_sweepable entry).
 */
export function releaseSlotStatements(db: D1Database, outboxId: number, now: number, sweepGraceMs: number): D1PreparedStatement[] {
  return [db.prepare(takeSlot(CLAIMABLE)).bind(outboxId, now), db.prepare(waitForSlot).bind(outboxId, now, sweepGraceMs)];
}

/**
 * A claimed row goes back to pending without calling Slack, due at its
 * key's next slot, its attempt given back, fenced on the claim. Runs after
 * takeSlot in a batch and only if it took one.
 */
const giveBackForSlot = `
UPDATE outbox
   SET status = 'pending', claim_expires_at = NULL, attempts = max(attempts - 1, 0),
       next_attempt_at = ${slotOfRow}, enqueued_at = ${slotOfRow}, sweep_at = ${slotOfRow} + ?4, updated_at = ?2
 WHERE id = ?1 AND claim_token = ?3 AND status = 'leased' AND changes() = 1`;

/**
 * A row a lane claimed and then waited on (in-batch pacing) is given back
 * without calling Slack if its key now holds it back — another lane or
 * invocation met a 429 on it meanwhile: it takes the next slot instead.
 * Returns that slot, or undefined: call Slack. Only after a wait: the happy
 * path never runs it.
 */
export async function giveBackIfHeldBack(db: D1Database, row: ClaimedRow, now: number, sweepGraceMs: number): Promise<number | undefined> {
  if (row.rateKey === null) return undefined;
  return giveBack(db, row, now, sweepGraceMs, [], HELD_BACK);
}

/**
 * Marks a key busy: a batch holds a second row of a key that is not hot, so
 * one call on the key is being made now and the next may go a pace later.
 * The key turns hot (slots start one pace from now; `until` moves to now if
 * the key was cold, so rows recorded before now queue for slots whoever
 * claims them), and this row takes the first slot. Written only when a batch
 * holds more than one row of a key: the busy path, never the happy one.
 */
const markBusy = `
INSERT INTO rate_cooldowns (key, until, next_slot, pace_ms, updated_at)
SELECT key, ?2, ?2 + ${paceMsSql("key")}, ${paceMsSql("key")}, ?2
  FROM (SELECT ${rateKeySql("outbox")} AS key FROM outbox WHERE id = ?1)
 WHERE key IS NOT NULL
ON CONFLICT (key) DO UPDATE SET
  until = CASE WHEN next_slot <= ?2 AND until <= ?2 THEN ?2 ELSE until END,
  next_slot = max(next_slot, ?2 + pace_ms),
  updated_at = ?2`;

/** Returns the slot the row now waits for; undefined if the give-back did not apply (the fence): then call Slack. */
export async function giveBackBusy(db: D1Database, row: ClaimedRow, now: number, sweepGraceMs: number): Promise<number | undefined> {
  if (row.rateKey === null) return undefined;
  // Just marked busy: the row takes a slot whatever the gate says of it (it may hold an earlier slot itself).
  return giveBack(db, row, now, sweepGraceMs, [db.prepare(markBusy).bind(row.id, now)], "1");
}

async function giveBack(
  db: D1Database,
  row: ClaimedRow,
  now: number,
  sweepGraceMs: number,
  before: D1PreparedStatement[],
  keyCondition: string,
): Promise<number | undefined> {
  const results = await db.batch<{ slot: number }>([
    ...before,
    db.prepare(takeSlot("claim_token = ?3", keyCondition)).bind(row.id, now, row.claimToken),
    db.prepare(giveBackForSlot).bind(row.id, now, row.claimToken, sweepGraceMs),
  ]);
  const [taken, given] = results.slice(before.length);
  return given?.meta.changes === 1 ? taken?.results[0]?.slot : undefined;
}
