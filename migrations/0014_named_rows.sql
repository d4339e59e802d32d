-- Migration number: 0014 	 named rows, and cancelling them
--
-- A row the app names (IntentOptions.name, shared/app/intents.ts) is keyed "name:<team>:<name>"
-- (shared/outbox/model.ts, namedKey): one row per name and workspace, whichever input or effect records it
-- first; a later intent of the same name is a repeat and records nothing. cancel(name) ends such a row, if it
-- is still pending and never attempted, in the batch of the input that asks (shared/outbox/cancel-named.ts).

-- cancelled_by: the receipt id of the input that cancelled the row (an effect's follow-up cancel: its row's
-- receipt). A cancelled row is status 'done' with this set: finished as the app asked, so it never alerts as
-- dead, is never replayed, never counts as a failure and is pruned with the done rows (cancel-named.ts says
-- why not a status of its own). Not indexed: nothing looks rows up by it.
ALTER TABLE outbox ADD COLUMN cancelled_by TEXT;

-- The audit trail finds an input's rows by its fact's key prefix (shared/ops/audit.ts); a named row's key is
-- not under it, so named rows are found by their fact through this partial index (the fact of the input, or of
-- the chain, that recorded it; its receipt's id when that is the fact): one entry per named row (+1 row written
-- to insert one), none for any other row.
CREATE INDEX outbox_named_by_fact ON outbox (coalesce(fact, receipt_id)) WHERE idempotency_key >= 'name:' AND idempotency_key < 'name;';

-- What each cancel found, for the asking input's audit trail and its log line: cancelled, too_late (claimed,
-- attempted, done or dead), already_cancelled, or nothing_to_cancel (no row of that name: not an error).
-- by_row: 0 for a cancel asked at the ack, else the row whose completion asked for it (its receipt_id is that
-- row's). row_status: the named row's status when the cancel looked. Written by the cancel's own batch, keyed by
-- who asked, so a re-run of that batch keeps the first verdict; pruned after DONE_RETENTION_HOURS by `at`.
-- Insert: 2 rows written (WITHOUT ROWID, and outbox_cancels_by_age).
CREATE TABLE outbox_cancels (
  receipt_id TEXT    NOT NULL,
  by_row     INTEGER NOT NULL,
  name       TEXT    NOT NULL,
  outcome    TEXT    NOT NULL CHECK (outcome IN ('cancelled', 'too_late', 'already_cancelled', 'nothing_to_cancel')),
  outbox_id  INTEGER,
  row_status TEXT,
  at         INTEGER NOT NULL,
  PRIMARY KEY (receipt_id, by_row, name)
) WITHOUT ROWID;
CREATE INDEX outbox_cancels_by_age ON outbox_cancels (at);
