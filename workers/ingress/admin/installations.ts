import { listInstallations } from "../../../shared/installations/store.ts";
import { iso } from "../../../shared/ops/iso.ts";
import type { AdminDeps } from "./deps.ts";
import { json } from "./params.ts";

/**
 * GET /admin/installations: each installation's team, enterprise, scopes,
 * install times, token expiry, key id and whether it is blocked. The listing
 * reads no token column (store.ts's SUMMARY_COLUMNS), so there is none to
 * leak. `mode` says whether the deployment serves installs at all.
 */
export async function getInstallations(deps: AdminDeps, now: number): Promise<Response> {
  // Every shard's (an installation lives on its team's shard), in install_key order: one query per shard.
  const perShard = await Promise.all(deps.shards.map((db) => listInstallations(db)));
  const installations = perShard.flat().sort((a, b) => (a.installKey < b.installKey ? -1 : a.installKey > b.installKey ? 1 : 0));
  return json({
    mode: deps.settings.oauth ? "distributed" : "single-workspace",
    now: iso(now),
    installations: installations.map((i) => ({
      installKey: i.installKey,
      teamId: i.teamId,
      enterpriseId: i.enterpriseId,
      orgWide: i.isEnterpriseInstall,
      botUserId: i.botUserId,
      scopes: i.scopes === "" ? [] : i.scopes.split(","),
      installerUserId: i.installerUserId,
      installedAt: iso(i.installedAt),
      updatedAt: iso(i.updatedAt),
      tokenExpiresAt: iso(i.tokenExpiresAt),
      keyId: i.keyId,
      blocked: i.blockedReason !== null,
      blockedReason: i.blockedReason,
    })),
  });
}
