// Bench-only variant of shared/outbox/record.ts (ack profiling, a design
// question rather than a tweak): no receipts table on the ack path. The
// outbox row's unique idempotency key (<event id>:<effect key>) is the dedupe,
// and its RETURNING row is the verdict. One statement per effect instead of
// three statements, and 3 rows written instead of 5. What it gives up: the
// receipt (the audit trail's "received" record, retry_num, and the
// delivery_id guard against a routing change between two deliveries).
import { idempotencyKey } from "../../../shared/outbox/model.ts";

const insertOutboxRow = `
INSERT INTO outbox (idempotency_key, receipt_id, team_id, effect, payload,
                    next_attempt_at, expires_at, enqueued_at, sweep_at, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?6, ?8, ?6, ?6)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING id`;

export async function recordIntent(db, receipt, effects, now, sweepGraceMs) {
  if (effects.length === 0) return { firstDelivery: true, outboxIds: [] };
  const results = await db.batch(
    effects.map((effect) =>
      db
        .prepare(insertOutboxRow)
        .bind(
          idempotencyKey(receipt.id, effect.key),
          receipt.id,
          receipt.teamId ?? null,
          effect.effect,
          JSON.stringify(effect.payload),
          now,
          effect.expiresAt ?? null,
          now + sweepGraceMs,
        ),
    ),
  );
  const outboxIds = results.flatMap((result) => result.results.map((row) => Number(row.id)));
  if (outboxIds.length === 0) return { firstDelivery: false };
  return { firstDelivery: true, outboxIds };
}
