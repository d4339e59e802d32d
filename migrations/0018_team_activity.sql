-- Migration number: 0018 	 delivery gaps measured per team, from every request the ingress answers
--
-- A delivery gap was a silence in one channel, measured from the events that recorded rows, and it cost every
-- recorded ack two statements and a row written in its batch (channel_activity). It is now a silence in what
-- the ingress saw of a team (shared/ops/activity.ts): every signed request it answers, rows or not, and the
-- requests naming the team that it refused by their signature. Written after the answer, at most once per
-- team, minute and kind per isolate, on shard 0; nothing in the ack's batch.

-- One row per team: when a signed request of it was last seen (to a minute: the first of each minute an isolate
-- saw), the org of its org-wide install if that is what serves it (a backfill of it names the org), and the
-- first request naming it that was refused by its signature since then. WITHOUT ROWID, no index: 1 row written
-- per write.
CREATE TABLE team_activity (
  team_id       TEXT    NOT NULL PRIMARY KEY,
  seen_at       INTEGER NOT NULL,
  enterprise_id TEXT,
  refused_from  INTEGER
) WITHOUT ROWID;

-- A team silent longer than Slack's retry window, written by the request that ended it (gap_from: the last
-- request seen before, gap_until: this one; refused_from: the first refusal by signature in between, if any).
-- Keyed by its end, so the newest gaps are one bounded range read.
CREATE TABLE delivery_gaps_by_team (
  gap_until     INTEGER NOT NULL,
  team_id       TEXT    NOT NULL,
  gap_from      INTEGER NOT NULL,
  enterprise_id TEXT,
  refused_from  INTEGER,
  PRIMARY KEY (gap_until, team_id)
) WITHOUT ROWID;

-- Each team's latest recorded event, carried over, so a silence that spans the upgrade is still found. A
-- channel's gaps are not a team's (another channel of the team may have been busy): the list starts afresh.
INSERT INTO team_activity (team_id, seen_at) SELECT team_id, max(last_seen_at) FROM channel_activity GROUP BY team_id;

DROP TABLE channel_activity;
DROP TABLE delivery_gaps;
ALTER TABLE delivery_gaps_by_team RENAME TO delivery_gaps;
