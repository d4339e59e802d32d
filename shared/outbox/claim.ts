import { rateKeySql } from "../delivery/pacing.ts";
import { heldBackSql, hotSql, releaseSlotStatements } from "./cooldown.ts";
import type { ClaimedRow } from "./model.ts";

/**
 * The claim: one UPDATE that checks claimability and stamps the lease, so the
 * database serialises claimers and no two can hold a row at once. A SELECT
 * followed by an UPDATE would reopen exactly the check-then-act gap the
 * receipt closes.
 *
 * Claimable: pending and due, or leased with an expired lease (its worker died
 * or overran; the lease expires rather than being released, because a
 * cancelled invocation releases nothing). Done, dead, validly leased and
 * not-yet-due rows are left alone: the row's state decides, not the message.
 *
 * A row whose rate key is hot after a 429 — cooling down, or with release
 * slots queued ahead of it (shared/outbox/cooldown.ts) — is not claimable
 * either: the gate is part of this same statement, a primary-key read of
 * rate_cooldowns that finds nothing unless Slack has said 429 for the key.
 * The claim returns the key, so the consumer can space calls.
 *
 * A claim also resets `sweeps`: a message reached the row, so the sweep's
 * back-off for consecutive re-sends (shared/outbox/sweep.ts) starts over.
 *
 * Rows read, in D1's accounting: 3 per claimed row, whatever the table holds
 * — the row by primary key, one more because the status changes (SQLite
 * re-evaluates the partial indexes keyed on status), and one for RETURNING.
 * A claim that finds the row not claimable reads 1. Rows written: 2 (the row,
 * and its outbox_sweepable entry as sweep_at moves to the lease expiry).
 * claimRows sends its claims as one batch (one round trip); the consumer's
 * lanes claim one row at a time, just before its effect (claimOrTakeSlot).
 */
function claimWhere(row: string): string {
  return `
UPDATE outbox
   SET status = 'leased',
       claim_token = ?1,
       claim_expires_at = ?2 + ?3,
       sweep_at = ?2 + ?3,
       attempts = attempts + 1,
       sweeps = 0,
       updated_at = ?2
 WHERE ${row}
   AND ((status = 'pending' AND next_attempt_at <= ?2)
        OR (status = 'leased' AND claim_expires_at <= ?2))
   AND NOT ${heldBackSql("?2")}
RETURNING id, receipt_id, idempotency_key, depth, effect, payload, attempts, expires_at, created_at, claim_token, claim_expires_at,
          rate_limited_since, ${rateKeySql("outbox")} AS rate_key, ${hotSql("?2")} AS key_hot, team_id, waiting_since, execution_id`;
}

const claimById = claimWhere("id = ?4");

/**
 * The same claim, for a row the durable write has just inserted, in the same
 * batch (shared/outbox/record.ts): the first attempt at the ack takes its rows
 * in the write itself, so after the answer the ingress calls Slack at once,
 * with no claim round trip between. Every gate of the claim above holds — it
 * is the same statement — so a row whose rate key is cooling down after a 429
 * is inserted pending and left to the queue. The row is found by its
 * idempotency key, and only if THIS delivery's receipt inserted it (the
 * receipt's delivery id, ?5): on a duplicate delivery the key names the first
 * delivery's row, which this claim must never take. Rows read: 2 more than a
 * claim by id (the key's index entry, the receipt by primary key).
 */
export const claimInsertedRow = claimWhere(
  "idempotency_key = ?4 AND receipt_id = ?5 AND EXISTS (SELECT 1 FROM receipts WHERE id = ?5 AND delivery_id = ?6)",
);

export interface ClaimedRecord {
  id: number;
  receipt_id: string;
  idempotency_key: string;
  depth: number;
  effect: string;
  payload: string;
  attempts: number;
  expires_at: number | null;
  created_at: number;
  claim_token: string;
  claim_expires_at: number;
  rate_limited_since: number | null;
  rate_key: string | null;
  key_hot: number;
  team_id: string | null;
  waiting_since: number | null;
  execution_id?: string | null;
}

/**
 * The consumer's claim of one row, in one round trip: the claim, then in the same batch (one transaction) the
 * release slot that a row its key holds back takes (cooldown.ts). The slot's two statements match nothing
 * unless the claim left the row claimable and held back, so a row with no cooldown to respect — the common
 * case — pays no second round trip for the check, nor does a message that finds its row done or leased. Rows
 * read: the claim's (above), and 3 more for the slot's two statements (which find the row leased: no write); 5
 * in all for a row it finds done. At D1's $0.001 a million rows read, 3 million more a million rows cost $0.003.
 * Returns the claimed row, or the slot the row was given, or neither.
 */
export async function claimOrTakeSlot(
  db: D1Database,
  id: number,
  token: string,
  now: number,
  leaseMs: number,
  sweepGraceMs: number,
): Promise<{ readonly row?: ClaimedRow; readonly slot?: number }> {
  const [claimed, taken] = await db.batch<Record<string, unknown>>([
    db.prepare(claimById).bind(token, now, leaseMs, id),
    ...releaseSlotStatements(db, id, now, sweepGraceMs),
  ]);
  const record = claimed?.results[0] as ClaimedRecord | undefined;
  if (record) return { row: claimedRowOf(record) };
  const slot = taken?.results[0]?.slot;
  return typeof slot === "number" ? { slot } : {};
}

/** Claims those of `ids` that are claimable, under `token`, until now + lease. One round trip. */
export async function claimRows(
  db: D1Database,
  ids: readonly number[],
  token: string,
  now: number,
  leaseMs: number,
): Promise<ClaimedRow[]> {
  if (ids.length === 0) return [];
  const results = await db.batch<ClaimedRecord>(ids.map((id) => db.prepare(claimById).bind(token, now, leaseMs, id)));
  return results
    .flatMap((result) => result.results)
    .map(claimedRowOf)
    .sort((a, b) => a.id - b.id);
}

/** A claim's RETURNING row, as the delivery code reads it. */
export function claimedRowOf(r: ClaimedRecord): ClaimedRow {
  return {
    id: r.id,
    receiptId: r.receipt_id,
    idempotencyKey: r.idempotency_key,
    depth: r.depth,
    effect: r.effect,
    payload: r.payload,
    attempts: r.attempts,
    expiresAt: r.expires_at,
    createdAt: r.created_at,
    claimToken: r.claim_token,
    claimExpiresAt: r.claim_expires_at,
    rateLimitedSince: r.rate_limited_since,
    rateKey: r.rate_key,
    keyHot: r.key_hot === 1,
    teamId: r.team_id,
    waitingSince: r.waiting_since,
    executionId: r.execution_id ?? null,
  };
}

/** A fresh claim token: random, so a token can only ever fence its own claim. */
export function newClaimToken(): string {
  return crypto.randomUUID();
}
