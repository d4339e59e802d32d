-- Migration number: 0019 	 custom steps: an execution's workflow token, and which rows are its execution's
--
-- A Workflow Builder custom step (app.function, shared/steps/) runs as an execution (function_execution_id, Fx…)
-- that must be completed exactly once, with the short-lived workflow token Slack sends with it
-- (bot_access_token). The rows of an execution are performed with that token while it lives
-- (shared/steps/tokens.ts), so each row says which execution it belongs to.

-- The execution an input belongs to (function_executed, or an interaction carrying function_data), for the
-- audit trail; its rows copy it from here in the same insert (shared/outbox/record.ts), follow-ups from their
-- parent (shared/outbox/fence.ts). NULL for every other input: no row written more, no index.
ALTER TABLE receipts ADD COLUMN execution_id TEXT;
ALTER TABLE outbox ADD COLUMN execution_id TEXT;

-- An execution's rows, for `ackbox events show <Fx…>` (shared/ops/audit.ts): one entry per row of an
-- execution (+1 row written to insert one), none for any other row.
CREATE INDEX outbox_by_execution ON outbox (execution_id) WHERE execution_id IS NOT NULL;

-- One row per execution whose input the ack recorded: its workflow token, sealed as installations' tokens are
-- (AES-GCM under TOKEN_ENCRYPTION_KEY, the execution id bound as additional data: shared/installations/crypto.ts),
-- written in the ack's one batch, gated on that delivery's receipt. The first input of an execution to be
-- recorded writes it; a later one (a retry, a click) finds it there (ON CONFLICT DO NOTHING): immutable.
--
-- The token is used until the execution ends, then scrubbed (token and key_id NULL, ended_at and end_reason
-- set) by the statement that learns it: 'completed' (Slack answered a completion ok, or that the execution is
-- no longer running), 'refused: <error>' (Slack refused the token), 'expired' (the cron's scrub at expires_at).
-- 'completed' replaces a refusal learnt a moment before (a token is revoked when its step completes); nothing
-- replaces 'completed'. The row itself stays, token-less, for the audit trail and the backlog, and is pruned
-- with the receipts (RECEIPT_RETENTION_HOURS after issued_at).
--
-- issued_at: when Slack issued the token, as near as the ack can tell (the event's event_time, never after its
-- receipt); expires_at: issued_at + its 15 minutes (shared/steps/execution.ts).
-- Insert: 4 rows written (the table, step_executions_live, step_executions_by_age, and the primary key is the
-- table: WITHOUT ROWID); a scrub: 2 (the row, and it leaves step_executions_live).
CREATE TABLE step_executions (
  execution_id TEXT    NOT NULL PRIMARY KEY,
  team_id      TEXT    NOT NULL,
  callback_id  TEXT    NOT NULL,
  receipt_id   TEXT    NOT NULL,
  key_id       TEXT,
  token        TEXT,
  issued_at    INTEGER NOT NULL,
  expires_at   INTEGER NOT NULL,
  ended_at     INTEGER,
  end_reason   TEXT,
  CHECK ((token IS NULL) = (key_id IS NULL)),
  CHECK ((token IS NULL) = (end_reason IS NOT NULL))
) WITHOUT ROWID;

-- Executions whose token is still held, by expiry: the cron's scrub of expired tokens reads a bounded range of it,
-- and the backlog counts live executions and those near expiry from it.
CREATE INDEX step_executions_live ON step_executions (expires_at) WHERE token IS NOT NULL;

-- Pruning walks them oldest first, LIMIT rows at a time.
CREATE INDEX step_executions_by_age ON step_executions (issued_at);
