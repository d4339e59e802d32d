-- Migration number: 0008 	 a row waiting for an installation has a time limit
--
-- waiting_since: when the row first waited for its team's installation (missing, blocked, a token that
-- cannot be read or refreshed) without being attempted; NULL once it is attempted again. The consumer
-- (shared/delivery/deliver.ts) lets the wait grow with it, from 5 minutes up to an hour, and after
-- INSTALLATION_WAIT_MAX_MS (7 days) parks the row dead with the reason, where `ackbox replay` brings it
-- back once the app is installed again: bounded, and nothing lost.
ALTER TABLE outbox ADD COLUMN waiting_since INTEGER;
