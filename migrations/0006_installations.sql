-- Migration number: 0006 	 installations: one row per workspace (or org-wide Enterprise Grid install) the app is installed in
--
-- Keyed by install_key, which says what an install covers:
--   'T:<team_id>'        a workspace install (also a workspace of a Grid org, installed on its own);
--   'E:<enterprise_id>'  an org-wide install (is_enterprise_install): Slack sends no team, and the
--                        one bot token serves every workspace of the org.
-- A lookup for a row's team reads 'T:<team>' and, when the row has an enterprise, 'E:<enterprise>'
-- (two primary-key reads, one statement). The CHECK holds the key to the columns it is made of.
--
-- Tokens are never stored in the clear: bot_token and refresh_token hold AES-GCM ciphertext
-- (shared/installations/crypto.ts: "<iv hex>.<ciphertext hex>") under the key named by key_id
-- (the first 8 hex digits of the key's SHA-256), so a rotated TOKEN_ENCRYPTION_KEY leaves old
-- rows readable through TOKEN_ENCRYPTION_KEY_PREVIOUS until their next write re-encrypts them.
--
-- token_expires_at: NULL for a non-rotating token; epoch ms otherwise (Slack's expires_in).
-- blocked_reason/blocked_at: an auth failure on an effect (invalid_auth, token_revoked, …) marks
-- the installation, not the row (issue 13); NULL when the installation works.
-- refresh_claim_token/refresh_claim_expires_at: the lease on a token refresh, the outbox's claim
-- discipline applied to this row (one holder spends the single-use refresh token).
CREATE TABLE installations (
  install_key TEXT PRIMARY KEY,
  enterprise_id TEXT,
  team_id TEXT,
  is_enterprise_install INTEGER NOT NULL CHECK (is_enterprise_install IN (0, 1)),
  bot_user_id TEXT,
  bot_id TEXT,
  scopes TEXT NOT NULL,
  installer_user_id TEXT,
  installed_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  key_id TEXT NOT NULL,
  bot_token TEXT NOT NULL,
  refresh_token TEXT,
  token_expires_at INTEGER,
  blocked_reason TEXT,
  blocked_at INTEGER,
  refresh_claim_token TEXT,
  refresh_claim_expires_at INTEGER,
  CHECK (
    (is_enterprise_install = 1 AND enterprise_id IS NOT NULL AND install_key = 'E:' || enterprise_id)
    OR (is_enterprise_install = 0 AND team_id IS NOT NULL AND install_key = 'T:' || team_id)
  )
);

-- OAuth states: one per started install, single-use (the redirect consumes it with one
-- DELETE … RETURNING), expiring after 10 minutes. The browser that started the install also
-- holds the state in a cookie, checked before the state is consumed, so a state carried into
-- another browser's flow (a forged redirect link) is refused and cannot burn the real one.
CREATE TABLE oauth_states (
  state TEXT PRIMARY KEY,
  expires_at INTEGER NOT NULL
);
CREATE INDEX oauth_states_by_expiry ON oauth_states (expires_at);

-- The Enterprise Grid org a request came from (events: authorizations[0] / enterprise_id; commands:
-- enterprise_id; interactions: enterprise.id), so the consumer can find an org-wide installation
-- for a row whose workspace has none of its own. On the receipt, not the outbox row: follow-ups
-- share their parent's receipt, and the receipt insert already writes the row (no index: 0 more
-- rows written). A row whose receipt was pruned (RECEIPT_RETENTION_HOURS) finds only a workspace
-- installation.
ALTER TABLE receipts ADD COLUMN enterprise_id TEXT;
