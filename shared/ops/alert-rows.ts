/**
 * Which outbox rows are the sweeper's own alert posts. Their receipts are
 * operation ids `alert:<kind>:<phase>:<window>` (alerts.ts), so their rows'
 * idempotency keys share the prefix and are found by a range on the unique
 * index the table already has.
 *
 * Alerts must not feed themselves: an alert post that fails (ALERT_CHANNEL
 * deleted, the bot not in it) is not counted by the measures that raise
 * alerts (backlog.ts), or every dead alert post would raise the next one.
 */
export const ALERT_ID_PREFIX = "alert:";

/** Over outbox columns: the row is an alert post. A range on the idempotency_key index. */
export const ALERT_ROW_SQL = `(idempotency_key >= '${ALERT_ID_PREFIX}' AND idempotency_key < 'alert;')`;

/** Over outbox_attempts.outbox_id: the attempt is an alert post's (one primary-key read of its row). */
export const ALERT_ATTEMPT_SQL = `EXISTS (SELECT 1 FROM outbox o WHERE o.id = outbox_attempts.outbox_id AND o.idempotency_key >= '${ALERT_ID_PREFIX}' AND o.idempotency_key < 'alert;')`;
