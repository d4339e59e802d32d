-- Migration number: 0021 	 rows the uninstall and the dead letter parked pending after an attempt are marked
--
-- The one rule (shared/delivery/decide.ts, mayHavePerformed; migration 0016) marks a parked row maybe_performed
-- when an earlier attempt may have performed it. Two parks read it as "leased" only: the uninstall's
-- (shared/installations/lifecycle.ts) and the dead letter's (shared/outbox/dead-letter.ts). A row pending again
-- after a timed-out or unknown attempt (attempts > 0: waits and 429s give their attempt back) was parked unmarked,
-- and a filter replay would perform it again. Both now mark it; the rows they parked since 0016 are marked here.
-- Rows parked before 0016 were marked by it.
--
-- Only rows those two parks wrote: the uninstall's say so in last_error (a replay, which clears the mark, rewrites
-- it), and the dead letter's park wrote its audit row ('dead_letter') at the park's own time (completed_at), so a
-- row replayed since and parked again by another path is left to that path's mark.
--
-- Runs once; rows read: the dead rows (at most DEAD_RETENTION_DAYS of them), each dead letter's audit rows by the
-- primary key's outbox_id; rows written: each such row (the column is in no index).
UPDATE outbox SET maybe_performed = 1
 WHERE status = 'dead' AND maybe_performed = 0 AND attempts > 0
   AND (last_error LIKE 'installation removed: %'
        OR EXISTS (SELECT 1 FROM outbox_attempts a
                    WHERE a.outbox_id = outbox.id AND a.outcome = 'dead_letter' AND a.finished_at = outbox.completed_at));
