-- Migration number: 0015 	 timers: rows performed at or after a time the app chose
--
-- An intent may carry a time (IntentOptions.at / after, shared/app/intents.ts): the row is recorded in the same
-- batch as ever, with next_attempt_at at that time, so the claim refuses it before then whoever asks, and
-- performed at or after it with the same retries, pacing and audit trail as any row (shared/outbox/model.ts,
-- scheduleOf, says how its message and the sweep bring it back on time).

-- due_at: the time the app asked for, kept as it was asked (next_attempt_at moves with retries); NULL for a row
-- that was due when it was recorded. What `ackbox events show` and `ackbox timers list` show as its time, and
-- what its lateness counts from.
ALTER TABLE outbox ADD COLUMN due_at INTEGER;

-- 1. The oldest pending row, by when it became owed: its time for a timer, its creation for any other row. A
-- future timer is not late, so the backlog's oldest-pending age (and its alert) must not count it from its
-- creation. Replaces outbox_pending_by_age (0004) one for one: one entry per pending row, written at the insert,
-- removed by the claim; the insert's cost is unchanged. MIN over it is still one index probe.
DROP INDEX outbox_pending_by_age;
CREATE INDEX outbox_pending_by_due ON outbox (coalesce(due_at, created_at)) WHERE status = 'pending';

-- 2. Timers, by their time: pending ones, and cancelled ones (cancel-named.ts: done with cancelled_by) until they
-- are pruned, for `ackbox timers list` (shared/ops/timers.ts), a bounded range read per page. One entry per timed
-- row (+1 row written to insert one), none for any other row; a claim takes a timer out, a retry puts it back.
CREATE INDEX outbox_timers ON outbox (due_at) WHERE due_at IS NOT NULL AND (status = 'pending' OR cancelled_by IS NOT NULL);
