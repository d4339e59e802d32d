-- Migration number: 0003 	 rate limits: 429s as their own outcome, cooldowns per rate key
--
-- What issue 11 needs beyond 0002: Slack's 429 is pacing, not a failure
-- (shared/delivery/decide.ts, shared/delivery/pacing.ts). As before, times are
-- integer milliseconds bound by the caller.

-- 1. outbox_attempts, rebuilt (SQLite cannot alter a CHECK) with outcome
-- 'rate_limited': the audit row of a 429. It spends no attempt (the attempt
-- number is the row's count at the time, which the next attempt reuses: the
-- primary key keeps finished_at, so the two never collide), and the failure
-- measures that raise alerts do not count it as a failure.
CREATE TABLE outbox_attempts_v3 (
  outbox_id   INTEGER NOT NULL,
  attempt     INTEGER NOT NULL,
  outcome     TEXT    NOT NULL
              CHECK (outcome IN ('retry', 'dead', 'fence_lost', 'dead_letter', 'replay', 'rate_limited')),
  error       TEXT,
  claim_token TEXT,
  started_at  INTEGER,
  finished_at INTEGER NOT NULL,
  PRIMARY KEY (outbox_id, attempt, outcome, finished_at)
) WITHOUT ROWID;

INSERT INTO outbox_attempts_v3 (outbox_id, attempt, outcome, error, claim_token, started_at, finished_at)
SELECT outbox_id, attempt, outcome, error, claim_token, started_at, finished_at FROM outbox_attempts;

DROP TABLE outbox_attempts;
ALTER TABLE outbox_attempts_v3 RENAME TO outbox_attempts;

CREATE INDEX outbox_attempts_by_time ON outbox_attempts (finished_at);

-- 2. One row per rate key that Slack answered 429 (shared/delivery/pacing.ts
-- says what a key is). Written only when a 429 happens, never on the happy
-- path; the claim reads it by primary key (a miss when nothing is cooling).
--
-- until:     no row of this key is claimed before it (Retry-After, capped).
-- next_slot: the next free release time for a row whose claim the cooldown
--            refused: each such row takes the slot and moves it one pace on,
--            so the waiting rows come back one pace apart, not all at until.
-- pace_ms:   the key's pace (one second per channel, Tier 3 per method).
--
-- Write: 1 row (WITHOUT ROWID), on a 429 or a refused claim only. A row is
-- kept after its times have passed (an expired cooldown gates nothing): there
-- is one per key ever rate limited, bounded by the channels an app posts to.
CREATE TABLE rate_cooldowns (
  key        TEXT    NOT NULL PRIMARY KEY,
  until      INTEGER NOT NULL,
  next_slot  INTEGER NOT NULL,
  pace_ms    INTEGER NOT NULL CHECK (pace_ms > 0),
  updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- 3. When the row was first answered 429 in its current life: the wall-clock
-- limit of rate-limited waiting (RATE_LIMIT_MAX_WAIT_HOURS) counts from it,
-- since a 429 spends no attempt. Set by the first 429 (coalesce), cleared by
-- an operator's replay. Added as a nullable column: no row is rewritten, and
-- the happy path never writes it.
ALTER TABLE outbox ADD COLUMN rate_limited_since INTEGER;
