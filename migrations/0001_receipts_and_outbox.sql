-- Migration number: 0001 	 receipts and outbox
--
-- Times are integer milliseconds since the epoch, always bound by the caller
-- (`now` is a parameter, never unixepoch() in SQL), so tests can move the clock.
--
-- D1 bills every row written, index entries included. The figures after each
-- table are the rows one write costs; docs/benchmarks.md measures them.

-- One row per Slack delivery id: the Events API's event_id, or the operation id
-- of a slash command or interaction (see shared/slack/inputs.ts). The primary
-- key is the dedupe: INSERT ... ON CONFLICT DO NOTHING decides.
--
-- delivery_id is a random id of the HTTP request that inserted the receipt:
-- the outbox inserts in the same batch select it, so they write rows only when
-- this very request won the receipt (see shared/outbox/record.ts).
--
-- Insert: 2 rows written (the table, which is its own primary-key b-tree since
-- it is WITHOUT ROWID, and receipts_by_age).
CREATE TABLE receipts (
  id          TEXT    NOT NULL PRIMARY KEY,
  kind        TEXT    NOT NULL CHECK (kind IN ('event', 'command', 'interaction', 'alert')),
  type        TEXT    NOT NULL,
  team_id     TEXT,
  retry_num   INTEGER,
  delivery_id TEXT    NOT NULL,
  received_at INTEGER NOT NULL
) WITHOUT ROWID;

-- Pruning walks receipts oldest first, LIMIT rows at a time.
CREATE INDEX receipts_by_age ON receipts (received_at);

-- One row per intended side effect.
--
-- status: pending -> leased -> done | dead; leased -> pending again on a
-- retryable failure; dead -> pending only by an operator's replay.
--
-- sweep_at is when the sweeper should next look at the row if nothing else
-- has moved it: a pending row's expected delivery plus a grace period, or a
-- leased row's lease expiry. Keeping that one column means the sweep is a
-- single index range scan, whatever mix of reasons a row is stale for.
--
-- No AUTOINCREMENT: it costs a write to sqlite_sequence on every insert, and
-- rowid reuse is harmless here (a stale queue message naming a reused id
-- claims a row that is pending anyway: the row's state decides).
--
-- Insert (pending): 3 rows written (the table, the idempotency_key unique
-- index, outbox_sweepable).
CREATE TABLE outbox (
  id               INTEGER PRIMARY KEY,
  idempotency_key  TEXT    NOT NULL UNIQUE,
  receipt_id       TEXT    NOT NULL,
  team_id          TEXT,
  effect           TEXT    NOT NULL,
  payload          TEXT    NOT NULL,
  status           TEXT    NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'leased', 'done', 'dead')),
  attempts         INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  claim_token      TEXT,
  claim_expires_at INTEGER,
  next_attempt_at  INTEGER NOT NULL,
  expires_at       INTEGER,
  enqueued_at      INTEGER,
  sweeps           INTEGER NOT NULL DEFAULT 0,
  sweep_at         INTEGER,
  last_error       TEXT,
  result           TEXT,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  completed_at     INTEGER,
  -- Only a leased row has a lease expiry, and a leased row has a token.
  -- claim_token is kept after the lease ends: it names the claim that last
  -- wrote the row, which makes a re-run of that claim's fenced write idempotent.
  CHECK ((status = 'leased') = (claim_expires_at IS NOT NULL)),
  CHECK (status <> 'leased' OR claim_token IS NOT NULL),
  -- Rows the sweeper may need carry sweep_at; finished rows carry completed_at.
  CHECK ((status IN ('pending', 'leased')) = (sweep_at IS NOT NULL)),
  CHECK ((status IN ('done', 'dead')) = (completed_at IS NOT NULL))
);

-- The sweep's index. Partial: done and dead rows leave it, so its size is the
-- live backlog, not the table's history.
CREATE INDEX outbox_sweepable ON outbox (sweep_at) WHERE status IN ('pending', 'leased');

-- Pruning of done rows and the operator's dead-row listing, oldest first.
-- Each is entered once, when a row finishes.
CREATE INDEX outbox_done_by_age ON outbox (completed_at) WHERE status = 'done';
CREATE INDEX outbox_dead_by_age ON outbox (completed_at) WHERE status = 'dead';

-- No index on receipt_id: an idempotency key is "<receipt id>:<effect key>",
-- so the audit trail finds a receipt's rows by a prefix range on the unique
-- index the table already has, and inserts stay at 3 rows written.

-- Failed attempts, fence rejections and dead-letterings, for the audit trail.
-- A successful attempt writes nothing here: the row's own completed_at,
-- attempts and result say it, and the happy path stays cheap.
--
-- Insert: 1 row written (WITHOUT ROWID, keyed by its primary key).
CREATE TABLE outbox_attempts (
  outbox_id   INTEGER NOT NULL,
  attempt     INTEGER NOT NULL,
  outcome     TEXT    NOT NULL
              CHECK (outcome IN ('retry', 'dead', 'fence_lost', 'dead_letter')),
  error       TEXT,
  claim_token TEXT,
  started_at  INTEGER,
  finished_at INTEGER NOT NULL,
  PRIMARY KEY (outbox_id, attempt, outcome)
) WITHOUT ROWID;
