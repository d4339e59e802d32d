import { listInstallations } from "../../../shared/installations/store.ts";
import type { AdminDeps } from "./deps.ts";
import { json } from "./params.ts";

/**
 * GET /admin/installations: each installation's team, enterprise, scopes,
 * install times, token expiry, key id and whether it is blocked. The listing
 * reads no token column (store.ts's SUMMARY_COLUMNS), so there is none to
 * leak. `mode` says whether the deployment serves installs at all.
 */
export async function getInstallations(deps: AdminDeps, now: number): Promise<Response> {
  const installations = await listInstallations(deps.db);
  return json({
    mode: deps.settings.oauth ? "distributed" : "single-workspace",
    now,
    installations: installations.map((i) => ({
      install_key: i.installKey,
      team_id: i.teamId,
      enterprise_id: i.enterpriseId,
      org_wide: i.isEnterpriseInstall,
      bot_user_id: i.botUserId,
      scopes: i.scopes === "" ? [] : i.scopes.split(","),
      installer_user_id: i.installerUserId,
      installed_at: i.installedAt,
      updated_at: i.updatedAt,
      token_expires_at: i.tokenExpiresAt,
      key_id: i.keyId,
      blocked: i.blockedReason !== null,
      blocked_reason: i.blockedReason,
    })),
  });
}
