-- Migration number: 0020 	 assistant threads: their context and their turns, kept beside the workspace's rows
--
-- An AI assistant (app.assistant, shared/assistant/) answers each user message in a thread with a model's
-- streamed answer. What it asks the model with is kept here, on the workspace's shard, rather than read back
-- from Slack: conversations.replies is limited to 1 request a minute (15 messages) for apps outside the
-- Marketplace since 2025-05-29.

-- A thread's context, as the two assistant events last told it (assistant_thread_started,
-- assistant_thread_context_changed: the channel the user is looking at). Written in the ack's one batch of the
-- event; an older event (its event_ts) never replaces a newer one. 1 row written (WITHOUT ROWID: the key is the
-- table), or 0.
CREATE TABLE assistant_threads (
  team_id     TEXT    NOT NULL,
  channel_id  TEXT    NOT NULL,
  thread_ts   TEXT    NOT NULL,
  user_id     TEXT,
  context     TEXT,
  context_ts  TEXT,
  updated_at  INTEGER NOT NULL,
  PRIMARY KEY (team_id, channel_id, thread_ts)
) WITHOUT ROWID;

-- One turn per question the app answers with the model: the user's message (written in the ack's batch beside
-- its answer row, ON CONFLICT DO NOTHING: the same message under another event_id, or a retry, is one turn), and
-- what the answer row (outbox_id) has done so far, written under that row's claim (each write checks the claim in
-- the same statement: shared/outbox/fence.ts, leaseHeldSql):
--   state       asked → answering (the model asked) → starting (startStream sent, its answer not yet read)
--               → streaming (stream_ts known)
--               → generated (the model's whole answer kept in `answer`) → delivered; or stopped (the user
--               stopped it: what Slack shows stands) or failed (the row parked; the user was told).
--   stream_ts   the answer's one message, recorded as soon as Slack answers startStream (or found again in the
--               thread after a start whose answer was lost).
--   sent_chars  how much of the text Slack confirmed in the stream.
--   answer      the model's whole answer, once it finished: a later attempt delivers it without asking again.
--   model_calls how many times the model was asked for this turn (each attempt that had no answer kept).
--   stop_requested_at  the user pressed stop (agent_session_stopped) while it was being answered (not a question
--               still waiting its turn, nor one asked after the stop): the answer ends at its next write.
-- The history of a thread is its turns in message order (a range of the primary key).
CREATE TABLE assistant_turns (
  team_id            TEXT    NOT NULL,
  channel_id         TEXT    NOT NULL,
  thread_ts          TEXT    NOT NULL,
  message_ts         TEXT    NOT NULL,
  user_id            TEXT,
  question           TEXT    NOT NULL,
  outbox_id          INTEGER,
  state              TEXT    NOT NULL DEFAULT 'asked'
                     CHECK (state IN ('asked', 'answering', 'starting', 'streaming', 'generated', 'delivered', 'stopped', 'failed')),
  stream_ts          TEXT,
  stream_started_at  INTEGER,
  sent_chars         INTEGER NOT NULL DEFAULT 0,
  answer             TEXT,
  model_calls        INTEGER NOT NULL DEFAULT 0,
  stop_requested_at  INTEGER,
  created_at         INTEGER NOT NULL,
  updated_at         INTEGER NOT NULL,
  PRIMARY KEY (team_id, channel_id, thread_ts, message_ts)
) WITHOUT ROWID;

-- Pruning walks turns and threads oldest first, LIMIT rows at a time, 30 days after their last write
-- (shared/assistant/store.ts, ASSISTANT_RETENTION_MS): they hold what users asked and what the model answered.
CREATE INDEX assistant_turns_by_age ON assistant_turns (updated_at);
CREATE INDEX assistant_threads_by_age ON assistant_threads (updated_at);
