import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { tokenKeys } from "../../shared/installations/crypto.ts";
import { saveInstallation } from "../../shared/installations/store.ts";
import { handleAdmin } from "../../workers/ingress/admin/index.ts";
import { adminDeps, adminRequest, callAdmin } from "../support/ops.ts";

const NOW = 1_800_000_000_000;
const KEY = "7d".repeat(32);
const OAUTH = {
  clientId: "1.2",
  clientSecret: "s",
  scopes: [],
  redirectUrl: "https://x.test/slack/oauth_redirect",
  tokenKey: KEY,
  previousTokenKey: undefined,
};

beforeEach(async () => {
  await env.DB.prepare("DELETE FROM installations").run();
});

describe("GET /admin/installations", () => {
  it("lists each installation's team, enterprise, scopes, times, expiry and block — never a token", async () => {
    const keys = await tokenKeys(KEY, undefined);
    const base = { botUserId: "U0BOT", botId: "B0BOT", installerUserId: "U0ME", refreshToken: undefined, tokenExpiresAt: undefined };
    await saveInstallation(
      env.DB,
      keys,
      {
        ...base,
        teamId: "T0ONE",
        enterpriseId: undefined,
        isEnterpriseInstall: false,
        scopes: "chat:write,commands",
        botToken: "xoxb-one",
      },
      NOW,
    );
    await saveInstallation(
      env.DB,
      keys,
      {
        ...base,
        teamId: undefined,
        enterpriseId: "E0ORG",
        isEnterpriseInstall: true,
        scopes: "chat:write",
        botToken: "xoxe.xoxb-org",
        refreshToken: "xoxe-1-refresh",
        tokenExpiresAt: NOW + 3_600_000,
      },
      NOW,
    );
    await env.DB.prepare("UPDATE installations SET blocked_reason = 'token_revoked', blocked_at = ? WHERE install_key = 'T:T0ONE'")
      .bind(NOW)
      .run();

    const { deps } = adminDeps({ settings: { oauth: OAUTH } });
    const { status, body, headers } = await callAdmin<{ mode: string; installations: Record<string, unknown>[] }>(
      deps,
      "/admin/installations",
      NOW,
    );
    expect(status).toBe(200);
    expect(headers.get("cache-control")).toBe("no-store");
    expect(body.mode).toBe("distributed");
    expect(body.installations).toEqual([
      expect.objectContaining({
        installKey: "E:E0ORG",
        teamId: null,
        enterpriseId: "E0ORG",
        orgWide: true,
        scopes: ["chat:write"],
        tokenExpiresAt: new Date(NOW + 3_600_000).toISOString(),
        blocked: false,
      }),
      expect.objectContaining({
        installKey: "T:T0ONE",
        teamId: "T0ONE",
        orgWide: false,
        scopes: ["chat:write", "commands"],
        installedAt: new Date(NOW).toISOString(),
        blocked: true,
        blockedReason: "token_revoked",
        keyId: keys.current.id,
      }),
    ]);
    expect(JSON.stringify(body)).not.toMatch(/xox/);
  });

  it("says single-workspace mode, with no installations, when SLACK_CLIENT_ID is unset", async () => {
    const { deps } = adminDeps();
    const { body } = await callAdmin(deps, "/admin/installations", NOW);
    expect(body).toEqual({ mode: "single-workspace", now: new Date(NOW).toISOString(), installations: [] });
  });

  it("needs the admin token, and answers only GET", async () => {
    const { deps } = adminDeps();
    expect((await handleAdmin(adminRequest("/admin/installations", {}, null), deps, NOW)).status).toBe(401);
    expect((await callAdmin(deps, "/admin/installations", NOW, { method: "POST" })).status).toBe(405);
  });
});
