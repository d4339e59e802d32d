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
import pRetry from "p-retry";
import { slackWebApi } from "../slack/web-api.ts";
import { open, seal, type TokenKeys } from "./crypto.ts";

/** A refresh starts this long before the token expires. */
export const REFRESH_AHEAD_MS = 30 * 60 * 1000;
/** The refresh lease: one oauth.v2.access call with its timeout, and room. */
export const REFRESH_LEASE_MS = 30 * 1000;
const REFRESH_TIMEOUT_MS = 10_000;
/** A failing refresh waits this long before the cron tries it again, doubling per failure up to the cap. */
export const REFRESH_BACKOFF_BASE_MS = 60_000;
export const REFRESH_BACKOFF_CAP_MS = 15 * 60_000;
/** Tries of the fenced write of a pair Slack already issued (its refresh token is spent: losing it means a re-install). */
const WRITE_TRIES = 4;

/**
 * oauth.v2.access refresh answers that no retry cures for this installation:
 * its refresh token is spent or revoked, or the workspace is gone
 * (https://docs.slack.dev/reference/methods/oauth.v2.access, errors). The
 * installation is blocked, so its rows wait at once instead of each delivery
 * re-reading and the cron retrying forever. Everything else (ratelimited,
 * internal_error, a 5xx, no answer) stays retryable — and so do the app's own
 * credentials being refused (invalid_client_id, bad_client_secret,
 * bad_redirect_uri, invalid_grant_type): that is the operator's configuration,
 * the same for every installation, and Slack refuses it before spending the
 * refresh token; blocking would make every workspace re-install after the
 * secret is fixed. They back off, and the next refresh after the fix succeeds.
 */
export const REFRESH_REFUSALS: ReadonlySet<string> = new Set([
  "invalid_refresh_token",
  "token_revoked",
  "token_expired",
  "invalid_auth",
  "not_authed",
  "account_inactive",
  "app_uninstalled",
  "team_access_not_granted",
]);

export interface RotationDeps {
  readonly db: D1Database;
  readonly keys: TokenKeys;
  readonly slackApiUrl: string;
  /** The fetch oauth.v2.access goes out through (the Worker's edge). */
  readonly edge: typeof fetch;
  readonly clientId: string;
  readonly clientSecret: string;
  readonly newToken: () => string;
  /**
   * Read at the claim, for the lease's expiry (the glossary's clock rule, docs/reliability.md): never a time
   * captured earlier, such as a cron tick's scheduledTime — a long tick would write leases already expired.
   */
  readonly clock: () => number;
  /** The refresh call's timeout (default 10 s): the ingress bounds it by what is left of the ack's budget. */
  readonly timeoutMs?: number;
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
       refresh_claim_token = NULL, refresh_claim_expires_at = NULL, refresh_failures = 0, refresh_retry_at = NULL
 WHERE install_key = ?6 AND refresh_claim_token = ?7`;

/** Blocks the installation, fenced on this worker's lease (a re-install meanwhile cleared it, and is not blocked). */
const blockHeld = `
UPDATE installations
   SET blocked_reason = ?1, blocked_at = ?2, refresh_claim_token = NULL, refresh_claim_expires_at = NULL
 WHERE install_key = ?3 AND refresh_claim_token = ?4`;

/** A transient failure: the cron backs off (the lease stays, and runs out on its own). */
const backOffHeld = `
UPDATE installations
   SET refresh_failures = refresh_failures + 1,
       refresh_retry_at = ?1 + min(?2, ?3 * (1 << min(refresh_failures, 16)))
 WHERE install_key = ?4 AND refresh_claim_token = ?5`;

export type RefreshOutcome =
  | { readonly kind: "refreshed"; readonly token: string }
  /** Another worker holds the lease, already refreshed, or a re-install replaced the row: re-read the row. */
  | { readonly kind: "not_holder" }
  /** `blocked`: the installation is blocked (Slack refused for good, or the new pair could not be kept). */
  | { readonly kind: "failed"; readonly reason: string; readonly blocked?: boolean };

/**
 * Refreshes the installation's token if this worker wins the lease.
 * `sealedBotToken` is the token the caller read: the claim matches only while
 * the row still holds it.
 */
export async function refreshInstallation(deps: RotationDeps, installKey: string, sealedBotToken: string): Promise<RefreshOutcome> {
  const lease = deps.newToken();
  const now = deps.clock();
  const claimed = await deps.db
    .prepare(claimRefresh)
    .bind(lease, now, REFRESH_LEASE_MS, installKey, sealedBotToken)
    .first<{ key_id: string; refresh_token: string }>();
  if (!claimed) return { kind: "not_holder" };
  const transientFailure = async (reason: string): Promise<RefreshOutcome> => {
    // The lease expires on its own; the next worker to need the token tries again, the cron after its backoff.
    await deps.db
      .prepare(backOffHeld)
      .bind(now, REFRESH_BACKOFF_CAP_MS, REFRESH_BACKOFF_BASE_MS, installKey, lease)
      .run()
      .catch(() => undefined);
    return { kind: "failed", reason };
  };
  const block = async (reason: string): Promise<RefreshOutcome> => {
    // Fenced on the lease: a lease lost meanwhile (expired, taken by another worker) blocks nothing, and says so.
    const { meta } = await deps.db.prepare(blockHeld).bind(reason, now, installKey, lease).run();
    return meta.changes === 1 ? { kind: "failed", reason, blocked: true } : { kind: "not_holder" };
  };
  const refreshToken = await open(deps.keys, claimed.key_id, installKey, claimed.refresh_token);
  let answer: Awaited<ReturnType<ReturnType<typeof slackWebApi>["call"]>>;
  try {
    answer = await slackWebApi(undefined, deps.slackApiUrl, deps.edge).call(
      "oauth.v2.access",
      { client_id: deps.clientId, client_secret: deps.clientSecret, grant_type: "refresh_token", refresh_token: refreshToken },
      deps.timeoutMs ?? REFRESH_TIMEOUT_MS,
    );
  } catch (error) {
    return transientFailure(`oauth.v2.access (refresh) did not answer: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (!answer.ok) {
    const reason = `oauth.v2.access (refresh) answered ${answer.error}`;
    return REFRESH_REFUSALS.has(answer.error) ? block(`${reason}; re-install the app`) : transientFailure(reason);
  }
  const token = typeof answer.body.access_token === "string" ? answer.body.access_token : "";
  const nextRefresh = typeof answer.body.refresh_token === "string" ? answer.body.refresh_token : "";
  const expiresIn = typeof answer.body.expires_in === "number" ? answer.body.expires_in : 0;
  if (token === "" || nextRefresh === "" || expiresIn <= 0) {
    return transientFailure("oauth.v2.access (refresh) answered without a token, a refresh token or an expiry");
  }
  // Slack has spent the old refresh token: this pair is the only one. Its write is retried (it is fenced, so
  // running it again is safe); if it cannot be kept, the installation is blocked with the reason rather than
  // left to fail every refresh with invalid_refresh_token.
  const sealedToken = await seal(deps.keys, installKey, token);
  const sealedRefresh = await seal(deps.keys, installKey, nextRefresh);
  let changes: number;
  try {
    changes = await pRetry(
      async () =>
        (
          await deps.db
            .prepare(writeRefreshed)
            .bind(sealedToken, sealedRefresh, now + expiresIn * 1000, deps.keys.current.id, now, installKey, lease)
            .run()
        ).meta.changes,
      { retries: WRITE_TRIES - 1, minTimeout: 50, maxTimeout: 400 },
    );
  } catch (error) {
    const why = `the refreshed token could not be written (${error instanceof Error ? error.message : String(error)}); Slack spent the refresh token: re-install the app`;
    return block(why).catch(() => ({ kind: "failed", reason: why, blocked: true }));
  }
  // Fenced: a lost lease (a re-install, or a holder after this one's lease ran out) means another pair is current: re-read.
  return changes === 1 ? { kind: "refreshed", token } : { kind: "not_holder" };
}

/** Installations one cron tick refreshes at most: each is a claim, a Slack call and a write. */
export const REFRESH_PER_TICK = 20;
/** D1 statements one refresh issues at most: its claim, WRITE_TRIES tries of the write, then the block. */
export const REFRESH_WORST_QUERIES = 1 + WRITE_TRIES + 1;

/**
 * The cron's part: refresh every rotating token that expires within
 * REFRESH_AHEAD_MS (soonest first, at most REFRESH_PER_TICK), so an effect
 * rarely meets an expiring token at all. Each goes through the same lease as
 * an on-demand refresh: a tick and an effect racing for one installation make
 * one refresh call between them. `now` decides what is due; each lease is
 * timed by `deps.clock` at its claim.
 */
export async function refreshExpiring(deps: RotationDeps, now: number): Promise<{ refreshed: number; failed: string[] }> {
  // Only what this tick can do: not blocked, under no live lease, and not backing off after failures — so
  // REFRESH_PER_TICK broken installations cannot take every slot, tick after tick, from the ones behind them.
  const { results } = await deps.db
    .prepare(
      `SELECT install_key, bot_token FROM installations
        WHERE refresh_token IS NOT NULL AND blocked_reason IS NULL AND token_expires_at <= ?1 + ?3
          AND (refresh_claim_expires_at IS NULL OR refresh_claim_expires_at <= ?1)
          AND (refresh_retry_at IS NULL OR refresh_retry_at <= ?1)
        ORDER BY token_expires_at LIMIT ?2`,
    )
    .bind(now, REFRESH_PER_TICK, REFRESH_AHEAD_MS)
    .all<{ install_key: string; bot_token: string }>();
  let refreshed = 0;
  const failed: string[] = [];
  for (const row of results) {
    // One row that throws (its key is not configured, a D1 error) is reported, not the end of the tick: it sorts
    // first on every tick, so it would otherwise stop the refresh of every installation behind it.
    const outcome = await refreshInstallation(deps, row.install_key, row.bot_token).catch(
      async (error: unknown): Promise<RefreshOutcome> => {
        // Backed off too (fenced on the token read: a re-install meanwhile starts afresh).
        await deps.db
          .prepare(
            `UPDATE installations SET refresh_failures = refresh_failures + 1,
                    refresh_retry_at = ?1 + min(?2, ?3 * (1 << min(refresh_failures, 16)))
              WHERE install_key = ?4 AND bot_token = ?5`,
          )
          .bind(now, REFRESH_BACKOFF_CAP_MS, REFRESH_BACKOFF_BASE_MS, row.install_key, row.bot_token)
          .run()
          .catch(() => undefined);
        return { kind: "failed", reason: error instanceof Error ? error.message : String(error) };
      },
    );
    if (outcome.kind === "refreshed") refreshed += 1;
    else if (outcome.kind === "failed") failed.push(`${row.install_key}: ${outcome.reason}`);
  }
  return { refreshed, failed };
}
