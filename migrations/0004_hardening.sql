-- Migration number: 0004 	 hardening: exact oldest-pending age, scrubbing dead rows' credentials
--
-- As in 0001, times are integer milliseconds bound by the caller, and the
-- figures are rows written in D1's accounting (index entries a write adds
-- count; entries a write removes do not).

-- 1. The oldest pending row, exactly. shared/ops/backlog.ts used to take the
-- minimum created_at over the first rows of outbox_sweepable by sweep_at —
-- and the sweep pushes a re-sent row's sweep_at back, so in a large backlog
-- the oldest rows dropped out of the figure exactly when it mattered. With
-- this index the figure is one index probe (MIN over it: 1 row read).
--
-- Partial on pending only, not on every live row: a row enters it once, at
-- its insert (+1 row written per outbox row: 3 → 4), and leaves it at its
-- claim (a removal, not billed). An index on pending and leased rows would
-- also be rewritten by every claim (its WHERE column changes), +2 per event.
-- Leased rows' ages still come from the bounded scan of outbox_sweepable,
-- where an expired lease sorts first (its sweep_at is its past expiry).
-- Measured per delivered event (test/consumer/cost.measure.test.ts): 9 rows
-- written before, 10 after.
CREATE INDEX outbox_pending_by_age ON outbox (created_at) WHERE status = 'pending';

-- 2. Dead rows whose payload still holds a credential they may need for a
-- replay (a response_url works until the row's deadline). A row parked before
-- its deadline gets an entry due at the deadline; the sweeper's scrub step
-- (shared/outbox/scrub.ts) then drops the credential from the stored payload
-- and deletes the entry. A done row is scrubbed in its own fenced completion
-- and never comes here; neither does a row parked after its deadline (scrubbed
-- in the parking write itself), nor one with no deadline.
--
-- Keyed by (due_at, outbox_id), WITHOUT ROWID: the table is its own index,
-- read oldest-due first. Insert: 1 row written, only when a row with a future
-- deadline is parked (never on the happy path).
CREATE TABLE outbox_scrub_due (
  due_at    INTEGER NOT NULL,
  outbox_id INTEGER NOT NULL,
  PRIMARY KEY (due_at, outbox_id)
) WITHOUT ROWID;
