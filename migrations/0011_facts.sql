-- Migration number: 0011 	 one fact, one effect; the last time each channel's events were seen
--
-- fact (receipts, outbox): the fact identity of the input (shared/slack/facts.ts): a message's team,
-- channel, ts and type, a reaction's item, user, time and name, or NULL when it is the receipt's own id
-- (an event with no natural identity, a command, an interaction: the id names the fact already). An
-- input's rows are keyed "<fact>:<effect key>" (shared/outbox/record.ts), so a copy of a message under a
-- new event_id, or the same message found again by a backfill, lands on the keys its first copy took;
-- outbox.fact is what tells such a repeat from a collision (a taken key of another fact refuses the
-- batch). The receipt keeps every event_id, and its fact says which one it repeated. Neither column is
-- indexed: an insert still writes what it did.
ALTER TABLE receipts ADD COLUMN fact TEXT;
ALTER TABLE outbox ADD COLUMN fact TEXT;

-- One row per channel an event was recorded in: when its events were last seen. Upserted in the ack's one
-- batch: 1 row written per recorded event (WITHOUT ROWID, no secondary index).
CREATE TABLE channel_activity (
  team_id      TEXT    NOT NULL,
  channel      TEXT    NOT NULL,
  last_seen_at INTEGER NOT NULL,
  PRIMARY KEY (team_id, channel)
) WITHOUT ROWID;

-- A silence in a channel longer than Slack's retry window, written by the event that ended it (gap_from:
-- the previous event's time, gap_until: this one's). Events Slack could not deliver for longer than its
-- retries last are lost to the Events API; a gap is where to look (`ackbox backlog`) and what
-- `ackbox backfill --since <gap_from> --until <gap_until>` recovers. Keyed by its end, so the newest gaps
-- are one bounded range read. Rare: a row only when a channel was silent that long (a quiet channel is
-- too; many channels with one gap at once is an outage).
CREATE TABLE delivery_gaps (
  gap_until INTEGER NOT NULL,
  team_id   TEXT    NOT NULL,
  channel   TEXT    NOT NULL,
  gap_from  INTEGER NOT NULL,
  PRIMARY KEY (gap_until, team_id, channel)
) WITHOUT ROWID;
