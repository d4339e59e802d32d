-- Migration number: 0007 	 token refresh backoff: a refresh that keeps failing stops starving the others
--
-- refresh_failures: transient refresh failures in a row (5xx, no answer, ratelimited, a key not configured);
-- refresh_retry_at: the cron does not try the installation again before it (epoch ms), growing by backoff
-- (shared/installations/rotation.ts). Both reset by a successful refresh and by a re-install. A refresh Slack
-- refuses for good (invalid_refresh_token, invalid_client_id, bad_client_secret, …) blocks the installation
-- instead (blocked_reason), as an auth failure on an effect does.
ALTER TABLE installations ADD COLUMN refresh_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE installations ADD COLUMN refresh_retry_at INTEGER;
