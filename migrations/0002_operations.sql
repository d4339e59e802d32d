-- Migration number: 0002 	 operations: replay markers, backlog samples, alert state
--
-- What the operator surfaces (shared/ops/*, workers/ingress/admin/*) need
-- beyond 0001. As in 0001, times are integer milliseconds bound by the caller.

-- 1. outbox_attempts, rebuilt (SQLite cannot alter a CHECK or a primary key).
--
-- - outcome 'replay': an operator moved the row from dead back to pending.
--   The row's own history stays: its earlier attempts are not deleted, and the
--   replay marker keeps the attempt count and the error the row died with.
-- - finished_at joins the primary key. A replay gives the row a fresh attempt
--   budget (attempts = 0: the consumer parks a row whose count is spent), so
--   its next failed attempt 1 would otherwise collide with the attempt 1 of
--   its first life and be dropped by ON CONFLICT DO NOTHING. A re-run of one
--   fenced write binds the same finished_at (shared/outbox/fence.ts reads the
--   clock once per finish), so that re-run is still absorbed.
-- - outbox_attempts_by_time: failure counts over recent windows (backlog,
--   metrics, the failure-rate alert) read a time range instead of the table.
--   Only failures write here, so the happy path's cost is unchanged; a failure
--   now writes 2 rows (the row and this index entry) instead of 1.
--
-- The copy is a one-off read of the table, whose size is bounded by the
-- retention of done and dead rows.
CREATE TABLE outbox_attempts_v2 (
  outbox_id   INTEGER NOT NULL,
  attempt     INTEGER NOT NULL,
  outcome     TEXT    NOT NULL
              CHECK (outcome IN ('retry', 'dead', 'fence_lost', 'dead_letter', 'replay')),
  error       TEXT,
  claim_token TEXT,
  started_at  INTEGER,
  finished_at INTEGER NOT NULL,
  PRIMARY KEY (outbox_id, attempt, outcome, finished_at)
) WITHOUT ROWID;

INSERT INTO outbox_attempts_v2 (outbox_id, attempt, outcome, error, claim_token, started_at, finished_at)
SELECT outbox_id, attempt, outcome, error, claim_token, started_at, finished_at FROM outbox_attempts;

DROP TABLE outbox_attempts;
ALTER TABLE outbox_attempts_v2 RENAME TO outbox_attempts;

CREATE INDEX outbox_attempts_by_time ON outbox_attempts (finished_at);

-- 2. One backlog sample per sweeper tick, for the dashboard's picture of the
-- backlog over time. Keyed by the tick's scheduled time, so a re-run tick
-- writes nothing new. Pruned in the same tick, oldest first, LIMIT rows at a
-- time (SAMPLE_RETENTION_HOURS).
--
-- Counts are those of shared/ops/backlog.ts: each capped (counts_capped = 1
-- when any count hit the cap, so the figure is a lower bound).
--
-- Insert: 1 row written (the rowid table; `at` is the rowid).
CREATE TABLE backlog_samples (
  at                     INTEGER PRIMARY KEY,
  pending                INTEGER NOT NULL,
  leased                 INTEGER NOT NULL,
  dead                   INTEGER NOT NULL,
  stale_leases           INTEGER NOT NULL,
  never_enqueued         INTEGER NOT NULL,
  oldest_pending_age_ms  INTEGER,
  done_in_window         INTEGER NOT NULL,
  failed_in_window       INTEGER NOT NULL,
  window_ms              INTEGER NOT NULL,
  queue_backlog          INTEGER,
  counts_capped          INTEGER NOT NULL DEFAULT 0 CHECK (counts_capped IN (0, 1))
);

-- 3. Alert state: one row per alert kind, written only when it changes
-- (never on a quiet tick). `firing` is what the checks measure now;
-- `announced_firing` is the state last announced (posted to ALERT_CHANNEL
-- through the outbox, or logged). While the two differ the sweeper tries to
-- announce; the message's operation id names its window, so a state that
-- flaps inside one window is announced at most once per window, and the last
-- state is announced in the next.
--
-- Write: 1 row (WITHOUT ROWID), and only on a change.
CREATE TABLE alert_state (
  kind             TEXT    NOT NULL PRIMARY KEY
                   CHECK (kind IN ('oldest_pending', 'new_dead', 'failure_rate')),
  firing           INTEGER NOT NULL CHECK (firing IN (0, 1)),
  since            INTEGER NOT NULL,
  announced_firing INTEGER NOT NULL CHECK (announced_firing IN (0, 1)),
  announced_at     INTEGER,
  last_value       REAL,
  updated_at       INTEGER NOT NULL
) WITHOUT ROWID;
