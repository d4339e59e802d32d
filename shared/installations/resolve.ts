/**
 * The Slack client a row is performed with, in a distributed app: its team's
 * installation's token, read (and opened) when the row is performed — never
 * earlier, so a re-install or a rotated token is always the current one.
 * Installations live on shard 0: one primary-key read per row there
 * (store.ts's findInstallation), two for a row on another shard (its
 * receipt's org on the row's shard, then the installation on shard 0).
 *
 * Rows whose installation is missing come back as a reason, not a failure:
 * the consumer lets such a row wait without spending an attempt
 * (shared/delivery/deliver.ts). So does a token that cannot be opened (its
 * encryption key is not configured): a configuration fix, not a row fault.
 */

import { fatal } from "../delivery/failure.ts";
import type { QueryBudget } from "../delivery/query-budget.ts";
import type { ClaimedRow } from "../outbox/model.ts";
import { type SlackWebApi, slackWebApi } from "../slack/web-api.ts";
import type { StepState } from "../steps/execution.ts";
import type { TokenKeys } from "./crypto.ts";
import { INSTALLATION_REMOVED } from "./lifecycle.ts";
import { REFRESH_AHEAD_MS, REFRESH_WORST_QUERIES, refreshInstallation } from "./rotation.ts";
import { findInstallation, tokenOf } from "./store.ts";

/** How often, and how many times, a worker re-reads an expired token another worker is refreshing. */
const EXPIRED_REREAD_MS = 100;
const EXPIRED_REREADS = 50;

/**
 * D1 statements one row's resolution issues once the invocation's query budget is past its stop (the re-reads
 * end there): its receipt, its installation on shard 0, a refresh, a re-read after it and one more refresh after
 * a lost lease (`lostOn`), and the block of a refused call.
 */
export const INSTALLATION_WORST_QUERIES = 2 + REFRESH_WORST_QUERIES + 1 + REFRESH_WORST_QUERIES + 1;

/**
 * Slack's answers that mean the token, not the call, is broken
 * (https://docs.slack.dev/reference/methods — the common errors of every
 * method): the installation is blocked and its team's rows wait.
 */
export const AUTH_ERRORS: ReadonlySet<string> = new Set([
  "invalid_auth",
  "not_authed",
  "token_revoked",
  "token_expired",
  "account_inactive",
]);

/**
 * A Web API client that notes the last auth error Slack answered (AUTH_ERRORS),
 * so the caller can block the installation rather than fail the row. Every
 * argument passes through untouched — the attempt's abort signal above all,
 * or a call an effect started late could land after its row was retried.
 */
export function watchAuthErrors(inner: SlackWebApi): { readonly slack: SlackWebApi; readonly authFailure: () => string | undefined } {
  let authError: string | undefined;
  const slack: SlackWebApi = {
    async call(method, params, timeoutMs, signal) {
      const answer = await inner.call(method, params, timeoutMs, signal);
      if (!answer.ok && AUTH_ERRORS.has(answer.error)) authError = answer.error;
      return answer;
    },
  };
  return { slack, authFailure: () => authError };
}

export type SlackForRow =
  | {
      readonly ok: true;
      readonly slack: SlackWebApi;
      /** The auth error Slack answered a call through `slack` with, if any. */
      readonly authFailure: () => string | undefined;
      /**
       * Marks the installation blocked, fenced on the token that failed (a
       * re-install meanwhile is not blocked); returns the row's last_error.
       */
      readonly block: (reason: string, now: number) => Promise<string>;
      /** A custom step's completion whose workflow token cannot be used: its execution (shared/steps/rows.ts). */
      readonly step?: StepState;
    }
  | {
      readonly ok: false;
      readonly reason: string;
      /** Due again at once, not after an installation's wait: the token is there but refreshed elsewhere (the ingress). */
      readonly dueNow?: true;
    };

const NO_SLACK: SlackWebApi = {
  call: async (method) => {
    throw fatal(`${method}: ${INSTALLATION_REMOVED} has no Slack token`);
  },
};

export function slackForRow(options: {
  readonly db: D1Database;
  readonly keys: () => Promise<TokenKeys>;
  readonly slackApiUrl: string;
  /** The fetch the row's client and a refresh go out through (the EffectContext's edge). */
  readonly edge: typeof fetch;
  /** For rows with no team (the sweeper's alerts): SLACK_BOT_TOKEN's client, if it is set. */
  readonly teamless: SlackWebApi | undefined;
  /**
   * Refreshing rotating tokens (rotation.ts): the app's credentials and the claim tokens' source. Absent (the
   * ingress, which never spends a refresh token): a token is used while valid, and an expired one is a reason.
   */
  readonly rotation?: { readonly clientId: string; readonly clientSecret: string; readonly newToken: () => string };
  readonly clock?: () => number;
  readonly sleep?: (ms: number) => Promise<void>;
  /**
   * The row's own shard, when it is not `db` (installations live on shard 0, `db`; docs/scaling.md, "Where
   * installations live"): the row's org is read from its receipt there. Absent: the row is on `db`, one
   * statement per row.
   */
  readonly rowDb?: D1Database;
  /**
   * The consumer invocation's D1 query count (query-budget.ts): past its stop, an expired token another worker
   * is refreshing is not re-read again — the row waits, and the worst case per row stays the one counted there.
   */
  readonly budget?: QueryBudget;
}): (
  row: Pick<ClaimedRow, "teamId"> & Partial<Pick<ClaimedRow, "effect" | "receiptId">> & { readonly enterpriseId?: string | undefined },
) => Promise<SlackForRow> {
  return async (row) => {
    // The engine's own lifecycle effect calls no Slack method: it must run whether or not an installation is left.
    if (row.effect === INSTALLATION_REMOVED)
      return { ok: true, slack: NO_SLACK, authFailure: () => undefined, block: async (reason: string) => reason };
    const teamId = row.teamId ?? undefined;
    if (teamId === undefined) {
      return options.teamless
        ? { ok: true, slack: options.teamless, authFailure: () => undefined, block: async (reason: string) => reason }
        : { ok: false, reason: "the row has no team, and SLACK_BOT_TOKEN is not set" };
    }
    try {
      const rowDb = options.rowDb !== undefined && options.rowDb !== options.db ? options.rowDb : undefined;
      // The org of an org-wide install is on the row's receipt, on the row's shard.
      const enterpriseId =
        row.enterpriseId ??
        (rowDb === undefined || row.receiptId === undefined
          ? undefined
          : ((await rowDb
              .prepare("SELECT enterprise_id FROM receipts WHERE id = ?1")
              .bind(row.receiptId)
              .first<string | null>("enterprise_id")) ?? undefined));
      const receiptId = rowDb === undefined ? row.receiptId : undefined;
      const db = options.db;
      const keys = await options.keys();
      const clock = options.clock ?? Date.now;
      const sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
      let refreshFailure: string | undefined;
      // The token this worker lost a refresh lease on: re-read once (a re-install or the holder's write may have
      // replaced it — the token read before is then never the one used); if it is still there, wait as below.
      let lostOn: string | undefined;
      let found: Awaited<ReturnType<typeof findInstallation>>;
      for (let reads = 0; ; reads++) {
        // The enterprise comes from the row (the ingress's views.open) or its receipt: an org-wide install serves a
        // workspace without its own.
        found = await findInstallation(db, { teamId, enterpriseId, receiptId });
        if (!found)
          return { ok: false, reason: `no installation for team ${teamId}: waiting for the app to be installed there (/slack/install)` };
        if (found.blockedReason !== null) {
          return {
            ok: false,
            reason: `installation of team ${teamId} is blocked (${found.blockedReason}): re-install the app there (/slack/install)`,
          };
        }
        const now = clock();
        const expiresAt = found.tokenExpiresAt;
        if (expiresAt === null || now < expiresAt - REFRESH_AHEAD_MS) break;
        if (!options.rotation) {
          // Not refreshed here (the ingress): still valid, it is used; expired, Slack would refuse it (and the
          // refusal block the installation), so the row waits for the consumer or the cron to refresh it.
          if (now < expiresAt) break;
          return {
            ok: false,
            reason: `token of team ${teamId} expired and is not refreshed here (the consumer and the cron refresh it)`,
            dueNow: true,
          };
        }
        if (lostOn === found.sealedBotToken && now < expiresAt) break;
        const outcome = await refreshInstallation(
          { db, keys, slackApiUrl: options.slackApiUrl, edge: options.edge, ...options.rotation, clock },
          found.installKey,
          found.sealedBotToken,
        );
        if (outcome.kind === "refreshed") continue; // re-read the row: the fresh token, and its sealed form for the block fence
        if (outcome.kind === "not_holder" && lostOn !== found.sealedBotToken) {
          lostOn = found.sealedBotToken;
          continue;
        }
        if (outcome.kind === "failed") {
          // Refused for good: the installation is blocked, and the row waits at once.
          if (outcome.blocked)
            return { ok: false, reason: `installation of team ${teamId} blocked: ${outcome.reason} there (/slack/install)` };
          refreshFailure = outcome.reason;
        }
        // Still valid: use it; the lease holder (or the next worker, once a failed holder's lease expires) refreshes it.
        if (now < expiresAt) break;
        const why = `token of team ${teamId} expired and is not refreshed yet${refreshFailure ? ` (${refreshFailure})` : " (another worker holds the refresh)"}`;
        // Past the invocation's query stop: due again at once, for an invocation with a budget left to wait in.
        if (options.budget && options.budget.used() >= options.budget.stopClaimingAt) return { ok: false, reason: why, dueNow: true };
        if (reads >= EXPIRED_REREADS) return { ok: false, reason: why };
        await sleep(EXPIRED_REREAD_MS);
      }
      const token = await tokenOf(keys, found);
      const { slack, authFailure } = watchAuthErrors(slackWebApi(token, options.slackApiUrl, options.edge));
      const block = async (reason: string, now: number) => {
        await db
          .prepare("UPDATE installations SET blocked_reason = ?1, blocked_at = ?2 WHERE install_key = ?3 AND bot_token = ?4")
          .bind(reason, now, found.installKey, found.sealedBotToken)
          .run();
        return `installation of team ${teamId} blocked: Slack answered ${reason}; re-install the app there (/slack/install)`;
      };
      return { ok: true, slack, authFailure, block };
    } catch (error) {
      // Never the token; the message says which key or which read failed.
      return { ok: false, reason: `installation of team ${teamId} unreadable: ${error instanceof Error ? error.message : String(error)}` };
    }
  };
}
