// Bench-only variant of shared/outbox/record.ts (ack profiling): the same
// rows, the same transaction, one statement fewer. The receipt insert returns
// its key when it inserted (RETURNING on an upsert that did nothing returns no
// row), so the verdict needs no `SELECT changes()` statement after it.
import { idempotencyKey } from "../../../shared/outbox/model.ts";

const insertReceipt = `
INSERT INTO receipts (id, kind, type, team_id, retry_num, delivery_id, received_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
ON CONFLICT (id) DO NOTHING
RETURNING id`;

const insertOutboxRow = `
INSERT INTO outbox (idempotency_key, receipt_id, team_id, effect, payload,
                    next_attempt_at, expires_at, enqueued_at, sweep_at, created_at, updated_at)
SELECT ?1, r.id, r.team_id, ?2, ?3, ?4, ?5, ?4, ?6, ?4, ?4
  FROM receipts AS r
 WHERE r.id = ?7 AND r.delivery_id = ?8
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING id`;

export async function recordIntent(db, receipt, effects, now, sweepGraceMs, deliveryId = crypto.randomUUID()) {
  const statements = [
    db
      .prepare(insertReceipt)
      .bind(receipt.id, receipt.kind, receipt.type, receipt.teamId ?? null, receipt.retryNum ?? null, deliveryId, now),
    ...effects.map((effect) =>
      db
        .prepare(insertOutboxRow)
        .bind(
          idempotencyKey(receipt.id, effect.key),
          effect.effect,
          JSON.stringify(effect.payload),
          now,
          effect.expiresAt ?? null,
          now + sweepGraceMs,
          receipt.id,
          deliveryId,
        ),
    ),
  ];
  const results = await db.batch(statements);
  const firstDelivery = (results[0]?.results.length ?? 0) === 1;
  if (!firstDelivery) return { firstDelivery: false };
  const outboxIds = results.slice(1).flatMap((result) => result.results.map((row) => Number(row.id)));
  return { firstDelivery: true, outboxIds };
}
