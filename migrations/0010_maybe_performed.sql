-- Migration number: 0010 	 a parked row says when its effect may already have happened
--
-- maybe_performed: 1 when a row was parked while its effect may have been performed — parked under a
-- holder still performing it (an uninstall's park of a leased row, a dead letter for a row whose lease
-- expired), refused after a claim that ended without a result, or parked after the effect ran (the
-- follow-up depth limit). A filter replay (`ackbox dead replay --filter`, the dashboard's button) leaves
-- such rows out; an operator replays one by naming its id. A replay clears it.
ALTER TABLE outbox ADD COLUMN maybe_performed INTEGER NOT NULL DEFAULT 0;
