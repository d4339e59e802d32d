/**
 * Rotating tokens (Slack's token rotation: a 12-hour access token and a
 * single-use refresh token), refreshed without races: only the holder of a
 * lease on the installation row spends the refresh token — the outbox's
 * claim discipline applied to this row.
 *
 * 1. The claim: one UPDATE that stamps a random token and an expiry on the
 *    row, only if no live lease is on it and the row still holds the token
 *    this worker read (a refresh someone finished meanwhile is not redone).
 *    RETURNING is the verdict and carries the sealed refresh token.
 * 2. oauth.v2.access with grant_type=refresh_token.
 * 3. The fenced write of the new pair, sealed under the current encryption
 *    key (so a refresh also re-encrypts a row sealed under the previous key),
 *    `WHERE refresh_claim_token = ?`: a holder whose lease expired and was
 *    taken over cannot overwrite the newer pair.
 *
 * Everyone else keeps using the current token while it is still valid (a
 * refresh starts REFRESH_AHEAD_MS before expiry; Slack's old token works
 * until it expires), and once it has expired waits for the holder's write,
 * re-reading the row.
 */
import { slackWebApi } from "../slack/web-api.ts";
import { open, seal, type TokenKeys } from "./crypto.ts";

/** A refresh starts this long before the token expires. */
export const REFRESH_AHEAD_MS = 30 * 60 * 1000;
/** The refresh lease: one oauth.v2.access call with its timeout, and room. */
export const REFRESH_LEASE_MS = 30 * 1000;
const REFRESH_TIMEOUT_MS = 10_000;

export interface RotationDeps {
  readonly db: D1Database;
  readonly keys: TokenKeys;
  readonly slackApiUrl: string;
  readonly clientId: string;
  readonly clientSecret: string;
  readonly newToken: () => string;
}

const claimRefresh = `
UPDATE installations
   SET refresh_claim_token = ?1, refresh_claim_expires_at = ?2 + ?3
 WHERE install_key = ?4 AND bot_token = ?5 AND refresh_token IS NOT NULL
   AND (refresh_claim_expires_at IS NULL OR refresh_claim_expires_at <= ?2)
RETURNING key_id, refresh_token`;

const writeRefreshed = `
UPDATE installations
   SET bot_token = ?1, refresh_token = ?2, token_expires_at = ?3, key_id = ?4, updated_at = ?5,
       refresh_claim_token = NULL, refresh_claim_expires_at = NULL
 WHERE install_key = ?6 AND refresh_claim_token = ?7`;

export type RefreshOutcome =
  | { readonly kind: "refreshed"; readonly token: string }
  /** Another worker holds the lease (or already refreshed): re-read the row. */
  | { readonly kind: "not_holder" }
  | { readonly kind: "failed"; readonly reason: string };

/**
 * Refreshes the installation's token if this worker wins the lease.
 * `sealedBotToken` is the token the caller read: the claim matches only while
 * the row still holds it.
 */
export async function refreshInstallation(
  deps: RotationDeps,
  installKey: string,
  sealedBotToken: string,
  now: number,
): Promise<RefreshOutcome> {
  const lease = deps.newToken();
  const claimed = await deps.db
    .prepare(claimRefresh)
    .bind(lease, now, REFRESH_LEASE_MS, installKey, sealedBotToken)
    .first<{ key_id: string; refresh_token: string }>();
  if (!claimed) return { kind: "not_holder" };
  const refreshToken = await open(deps.keys, claimed.key_id, installKey, claimed.refresh_token);
  let answer: Awaited<ReturnType<ReturnType<typeof slackWebApi>["call"]>>;
  try {
    answer = await slackWebApi(undefined, deps.slackApiUrl).call(
      "oauth.v2.access",
      { client_id: deps.clientId, client_secret: deps.clientSecret, grant_type: "refresh_token", refresh_token: refreshToken },
      REFRESH_TIMEOUT_MS,
    );
  } catch (error) {
    // The lease expires on its own; the next worker to need the token tries again.
    return {
      kind: "failed",
      reason: `oauth.v2.access (refresh) did not answer: ${error instanceof Error ? error.message : String(error)}`,
    };
  }
  if (!answer.ok) return { kind: "failed", reason: `oauth.v2.access (refresh) answered ${answer.error}` };
  const token = typeof answer.body.access_token === "string" ? answer.body.access_token : "";
  const nextRefresh = typeof answer.body.refresh_token === "string" ? answer.body.refresh_token : "";
  const expiresIn = typeof answer.body.expires_in === "number" ? answer.body.expires_in : 0;
  if (token === "" || nextRefresh === "" || expiresIn <= 0) {
    return { kind: "failed", reason: "oauth.v2.access (refresh) answered without a token, a refresh token or an expiry" };
  }
  const written = await deps.db
    .prepare(writeRefreshed)
    .bind(
      await seal(deps.keys, installKey, token),
      await seal(deps.keys, installKey, nextRefresh),
      now + expiresIn * 1000,
      deps.keys.current.id,
      now,
      installKey,
      lease,
    )
    .run();
  // Fenced: a lost lease means another holder's pair is the current one; this token is still valid until it expires.
  return written.meta.changes === 1 ? { kind: "refreshed", token } : { kind: "not_holder" };
}

/** Installations one cron tick refreshes at most: each is a claim, a Slack call and a write. */
export const REFRESH_PER_TICK = 20;

/**
 * The cron's part: refresh every rotating token that expires within
 * REFRESH_AHEAD_MS (soonest first, at most REFRESH_PER_TICK), so an effect
 * rarely meets an expiring token at all. Each goes through the same lease as
 * an on-demand refresh: a tick and an effect racing for one installation make
 * one refresh call between them.
 */
export async function refreshExpiring(deps: RotationDeps, now: number): Promise<{ refreshed: number; failed: string[] }> {
  const { results } = await deps.db
    .prepare(
      `SELECT install_key, bot_token FROM installations
        WHERE refresh_token IS NOT NULL AND blocked_reason IS NULL AND token_expires_at <= ?1
        ORDER BY token_expires_at LIMIT ?2`,
    )
    .bind(now + REFRESH_AHEAD_MS, REFRESH_PER_TICK)
    .all<{ install_key: string; bot_token: string }>();
  let refreshed = 0;
  const failed: string[] = [];
  for (const row of results) {
    // One row that throws (its key is not configured, a D1 error) is reported, not the end of the tick: it sorts
    // first on every tick, so it would otherwise stop the refresh of every installation behind it.
    const outcome = await refreshInstallation(deps, row.install_key, row.bot_token, now).catch(
      (error: unknown): RefreshOutcome => ({ kind: "failed", reason: error instanceof Error ? error.message : String(error) }),
    );
    if (outcome.kind === "refreshed") refreshed += 1;
    else if (outcome.kind === "failed") failed.push(`${row.install_key}: ${outcome.reason}`);
  }
  return { refreshed, failed };
}
