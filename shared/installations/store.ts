/**
 * The installations table (migrations/0006_installations.sql): writing an
 * install, finding the one that serves a team, listing them for operators.
 * Tokens go in sealed (crypto.ts) and come out only through `tokenOf`; a
 * listing never carries them.
 */
import { isObject, type JsonObject } from "../slack/inputs.ts";
import { open, seal, type TokenKeys } from "./crypto.ts";

/** What oauth.v2.access answered, reduced to what is kept. */
export interface Installation {
  readonly enterpriseId: string | undefined;
  readonly teamId: string | undefined;
  readonly isEnterpriseInstall: boolean;
  readonly botUserId: string | undefined;
  readonly botId: string | undefined;
  readonly scopes: string;
  readonly installerUserId: string | undefined;
  readonly botToken: string;
  readonly refreshToken: string | undefined;
  /** Epoch ms; undefined for a token that does not rotate. */
  readonly tokenExpiresAt: number | undefined;
}

/** 'E:<enterprise>' for an org-wide install (Slack sends no team), else 'T:<team>'. */
export function installKeyOf(install: Pick<Installation, "enterpriseId" | "teamId" | "isEnterpriseInstall">): string {
  if (install.isEnterpriseInstall) {
    if (!install.enterpriseId) throw new Error("an org-wide install without an enterprise id");
    return `E:${install.enterpriseId}`;
  }
  if (!install.teamId) throw new Error("a workspace install without a team id");
  return `T:${install.teamId}`;
}

/**
 * An oauth.v2.access answer (ok:true) as an Installation, or why it cannot be
 * one. Slack's shape: access_token (xoxb-), token_type "bot", scope,
 * bot_user_id, team {id} (null for an org-wide install), enterprise {id} or
 * null, is_enterprise_install, authed_user {id}, and, for rotating tokens,
 * refresh_token and expires_in (seconds).
 */
export function installationFromAccess(body: JsonObject, now: number): { ok: true; install: Installation } | { ok: false; reason: string } {
  const text = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined);
  const idOf = (value: unknown): string | undefined => (isObject(value) ? text(value.id) : undefined);
  const botToken = text(body.access_token);
  if (!botToken) return { ok: false, reason: "oauth.v2.access answered no access_token" };
  // The bot token, and nothing else, is stored as one: token_type "bot" and a bot token's prefix (xoxb-, or
  // xoxe.xoxb- when it rotates). A user token (xoxp-, an app with only user scopes) would act as a person.
  if (body.token_type !== "bot" || !/^(xoxe\.)?xoxb-/.test(botToken))
    return { ok: false, reason: "oauth.v2.access answered a token that is not a bot token" };
  const isEnterpriseInstall = body.is_enterprise_install === true;
  const enterpriseId = idOf(body.enterprise);
  const teamId = idOf(body.team);
  if (isEnterpriseInstall ? !enterpriseId : !teamId)
    return { ok: false, reason: "oauth.v2.access answered no team (or enterprise for an org-wide install)" };
  const expiresIn = typeof body.expires_in === "number" && body.expires_in > 0 ? body.expires_in : undefined;
  return {
    ok: true,
    install: {
      enterpriseId,
      teamId: isEnterpriseInstall ? undefined : teamId,
      isEnterpriseInstall,
      botUserId: text(body.bot_user_id),
      botId: text(body.bot_id),
      scopes: text(body.scope) ?? "",
      installerUserId: idOf(body.authed_user),
      botToken,
      refreshToken: text(body.refresh_token),
      tokenExpiresAt: expiresIn === undefined ? undefined : now + expiresIn * 1000,
    },
  };
}

/**
 * Writes an install, one statement: a re-install replaces the tokens and
 * details, keeps installed_at, and clears a block (a re-install is the fix
 * for a revoked or broken token).
 */
export async function saveInstallation(db: D1Database, keys: TokenKeys, install: Installation, now: number): Promise<string> {
  const key = installKeyOf(install);
  const botToken = await seal(keys, key, install.botToken);
  const refreshToken = install.refreshToken === undefined ? null : await seal(keys, key, install.refreshToken);
  await db
    .prepare(
      `INSERT INTO installations (install_key, enterprise_id, team_id, is_enterprise_install, bot_user_id, bot_id, scopes,
         installer_user_id, installed_at, updated_at, key_id, bot_token, refresh_token, token_expires_at)
       VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, ?10, ?11, ?12, ?13)
       ON CONFLICT (install_key) DO UPDATE SET
         enterprise_id = excluded.enterprise_id, team_id = excluded.team_id, bot_user_id = excluded.bot_user_id,
         bot_id = excluded.bot_id, scopes = excluded.scopes, installer_user_id = excluded.installer_user_id,
         updated_at = excluded.updated_at, key_id = excluded.key_id, bot_token = excluded.bot_token,
         refresh_token = excluded.refresh_token, token_expires_at = excluded.token_expires_at,
         blocked_reason = NULL, blocked_at = NULL, refresh_claim_token = NULL, refresh_claim_expires_at = NULL,
         refresh_failures = 0, refresh_retry_at = NULL`,
    )
    .bind(
      key,
      install.enterpriseId ?? null,
      install.teamId ?? null,
      install.isEnterpriseInstall ? 1 : 0,
      install.botUserId ?? null,
      install.botId ?? null,
      install.scopes,
      install.installerUserId ?? null,
      now,
      keys.current.id,
      botToken,
      refreshToken,
      install.tokenExpiresAt ?? null,
    )
    .run();
  return key;
}

/** An installation as operators see it: everything but the tokens. */
export interface InstallationSummary {
  readonly installKey: string;
  readonly enterpriseId: string | null;
  readonly teamId: string | null;
  readonly isEnterpriseInstall: boolean;
  readonly botUserId: string | null;
  readonly scopes: string;
  readonly installerUserId: string | null;
  readonly installedAt: number;
  readonly updatedAt: number;
  readonly tokenExpiresAt: number | null;
  readonly keyId: string;
  readonly blockedReason: string | null;
}

interface SummaryRow {
  install_key: string;
  enterprise_id: string | null;
  team_id: string | null;
  is_enterprise_install: number;
  bot_user_id: string | null;
  scopes: string;
  installer_user_id: string | null;
  installed_at: number;
  updated_at: number;
  token_expires_at: number | null;
  key_id: string;
  blocked_reason: string | null;
}

// The column list is the guard: the token columns are never selected for a summary.
const SUMMARY_COLUMNS =
  "install_key, enterprise_id, team_id, is_enterprise_install, bot_user_id, scopes, installer_user_id, installed_at, updated_at, token_expires_at, key_id, blocked_reason";

function summaryOf(row: SummaryRow): InstallationSummary {
  return {
    installKey: row.install_key,
    enterpriseId: row.enterprise_id,
    teamId: row.team_id,
    isEnterpriseInstall: row.is_enterprise_install === 1,
    botUserId: row.bot_user_id,
    scopes: row.scopes,
    installerUserId: row.installer_user_id,
    installedAt: row.installed_at,
    updatedAt: row.updated_at,
    tokenExpiresAt: row.token_expires_at,
    keyId: row.key_id,
    blockedReason: row.blocked_reason,
  };
}

export async function listInstallations(db: D1Database, limit = 500): Promise<InstallationSummary[]> {
  const { results } = await db
    .prepare(`SELECT ${SUMMARY_COLUMNS} FROM installations ORDER BY install_key LIMIT ?`)
    .bind(limit)
    .all<SummaryRow>();
  return results.map(summaryOf);
}

/**
 * The installation serving a team: its own workspace install first, else its
 * org's org-wide install — the org given, or the one recorded on the row's
 * receipt (`receiptId`). One statement: primary-key reads only.
 */
export async function findInstallation(
  db: D1Database,
  team: { readonly teamId: string | undefined; readonly enterpriseId: string | undefined; readonly receiptId?: string | undefined },
): Promise<(InstallationSummary & { readonly sealedBotToken: string }) | undefined> {
  const row = await db
    .prepare(
      `SELECT ${SUMMARY_COLUMNS}, bot_token FROM installations
        WHERE install_key IN (?1, ?2, (SELECT 'E:' || enterprise_id FROM receipts WHERE id = ?3))
        ORDER BY is_enterprise_install LIMIT 1`,
    )
    .bind(team.teamId ? `T:${team.teamId}` : null, team.enterpriseId ? `E:${team.enterpriseId}` : null, team.receiptId ?? null)
    .first<SummaryRow & { bot_token: string }>();
  return row ? { ...summaryOf(row), sealedBotToken: row.bot_token } : undefined;
}

/** The bot token of a found installation, opened. */
export function tokenOf(
  keys: TokenKeys,
  found: { readonly installKey: string; readonly keyId: string; readonly sealedBotToken: string },
): Promise<string> {
  return open(keys, found.keyId, found.installKey, found.sealedBotToken);
}
