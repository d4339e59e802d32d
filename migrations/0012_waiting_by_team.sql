-- Migration number: 0012 	 the rows waiting for an installation, by team
--
-- An install makes its team's waiting rows due now (shared/installations/wake.ts). Without an index that is a
-- walk of the whole pending backlog per install; this partial index holds only rows that wait for an
-- installation (waiting_since set, still pending), so a workspace install reads its own waiting rows and an
-- org-wide one reads the waiting rows only. A row enters it when it starts to wait and leaves it when it is
-- claimed or parked: one index entry written per wait, none for the rows that never wait.
CREATE INDEX outbox_waiting_by_team ON outbox (team_id, created_at) WHERE status = 'pending' AND waiting_since IS NOT NULL;
