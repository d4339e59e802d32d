import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { tokenKeys } from "../../shared/installations/crypto.ts";
import {
  findInstallation,
  type Installation,
  installationFromAccess,
  listInstallations,
  saveInstallation,
  tokenOf,
} from "../../shared/installations/store.ts";
import { teamOfCommand, teamOfEvent, teamOfInteraction } from "../../shared/installations/team.ts";

const KEY = "3c".repeat(32);
const NOW = 1_800_000_000_000;

const install = (over: Partial<Installation>): Installation => ({
  enterpriseId: undefined,
  teamId: "T0ONE",
  isEnterpriseInstall: false,
  botUserId: "U0BOT",
  botId: "B0BOT",
  scopes: "chat:write",
  installerUserId: "U0ME",
  botToken: "xoxb-one",
  refreshToken: undefined,
  tokenExpiresAt: undefined,
  ...over,
});

describe("which installation a request belongs to (Slack's documented fields per surface)", () => {
  it("events: the authorization, not the envelope's team (a shared channel's event can come from another workspace)", () => {
    expect(
      teamOfEvent({ team_id: "T0OTHER", authorizations: [{ team_id: "T0MINE", enterprise_id: null, is_enterprise_install: false }] }),
    ).toEqual({ teamId: "T0MINE", enterpriseId: undefined, isEnterpriseInstall: false });
  });

  it("events: an org-wide install's authorization names the enterprise and no team", () => {
    expect(
      teamOfEvent({ team_id: "T0WS", authorizations: [{ team_id: "T0WS", enterprise_id: "E0ORG", is_enterprise_install: true }] }),
    ).toEqual({ teamId: undefined, enterpriseId: "E0ORG", isEnterpriseInstall: true });
  });

  it("events without authorizations: the envelope's team_id / enterprise_id, then context_team_id / context_enterprise_id", () => {
    expect(teamOfEvent({ team_id: "T1", enterprise_id: "E1" })).toEqual({ teamId: "T1", enterpriseId: "E1", isEnterpriseInstall: false });
    expect(teamOfEvent({ context_team_id: "T2", context_enterprise_id: "E2" })).toEqual({
      teamId: "T2",
      enterpriseId: "E2",
      isEnterpriseInstall: false,
    });
  });

  it("slash commands: team_id, enterprise_id and is_enterprise_install from the form", () => {
    expect(teamOfCommand(new URLSearchParams("team_id=T1&enterprise_id=E1&is_enterprise_install=false"))).toEqual({
      teamId: "T1",
      enterpriseId: "E1",
      isEnterpriseInstall: false,
    });
    expect(teamOfCommand(new URLSearchParams("team_id=T1&enterprise_id=E1&is_enterprise_install=true"))).toEqual({
      teamId: undefined,
      enterpriseId: "E1",
      isEnterpriseInstall: true,
    });
  });

  it("interactions: team.id and enterprise.id (team null in an org-wide payload)", () => {
    expect(teamOfInteraction({ team: { id: "T1" }, enterprise: null, is_enterprise_install: false })).toEqual({
      teamId: "T1",
      enterpriseId: undefined,
      isEnterpriseInstall: false,
    });
    expect(teamOfInteraction({ team: null, enterprise: { id: "E1" }, is_enterprise_install: true })).toEqual({
      teamId: undefined,
      enterpriseId: "E1",
      isEnterpriseInstall: true,
    });
  });
});

describe("the installations table", () => {
  beforeEach(async () => {
    await env.DB.prepare("DELETE FROM installations").run();
  });

  it("serves each team its own token, a Grid workspace without its own install its org's, and an unknown team nothing", async () => {
    const keys = await tokenKeys(KEY, undefined);
    await saveInstallation(env.DB, keys, install({ teamId: "T0ONE", botToken: "xoxb-one" }), NOW);
    await saveInstallation(env.DB, keys, install({ teamId: "T0TWO", botToken: "xoxb-two" }), NOW);
    await saveInstallation(
      env.DB,
      keys,
      install({ teamId: undefined, enterpriseId: "E0ORG", isEnterpriseInstall: true, botToken: "xoxb-org" }),
      NOW,
    );
    await saveInstallation(env.DB, keys, install({ teamId: "T0OWN", enterpriseId: "E0ORG", botToken: "xoxb-own" }), NOW);

    const tokenFor = async (teamId: string | undefined, enterpriseId: string | undefined) => {
      const found = await findInstallation(env.DB, { teamId, enterpriseId });
      return found ? tokenOf(keys, found) : undefined;
    };
    expect(await tokenFor("T0ONE", undefined)).toBe("xoxb-one");
    expect(await tokenFor("T0TWO", undefined)).toBe("xoxb-two");
    expect(await tokenFor("T0GRIDWS", "E0ORG")).toBe("xoxb-org");
    expect(await tokenFor(undefined, "E0ORG")).toBe("xoxb-org");
    expect(await tokenFor("T0OWN", "E0ORG")).toBe("xoxb-own");
    expect(await tokenFor("T0NOBODY", undefined)).toBeUndefined();
    expect(await tokenFor("T0NOBODY", "E0ELSE")).toBeUndefined();
  });

  it("lists installations for operators without a token, and holds none at rest", async () => {
    const keys = await tokenKeys(KEY, undefined);
    await saveInstallation(env.DB, keys, install({ refreshToken: "xoxe-1-refresh", tokenExpiresAt: NOW + 43_200_000 }), NOW);
    const listed = await listInstallations(env.DB);
    expect(listed).toEqual([
      expect.objectContaining({ installKey: "T:T0ONE", teamId: "T0ONE", tokenExpiresAt: NOW + 43_200_000, keyId: keys.current.id }),
    ]);
    expect(JSON.stringify(listed)).not.toMatch(/xox/);
    const raw = await env.DB.prepare("SELECT * FROM installations").all();
    expect(JSON.stringify(raw.results)).not.toMatch(/xox/);
  });

  it("refuses, in the schema, a row whose key does not match what it covers", async () => {
    await expect(
      env.DB.prepare(
        "INSERT INTO installations (install_key, team_id, is_enterprise_install, scopes, installed_at, updated_at, key_id, bot_token) VALUES ('T:T0X', 'T0Y', 0, '', 0, 0, 'k', 's')",
      ).run(),
    ).rejects.toThrow(/CHECK/);
  });

  it("reads a rotating token's expiry from expires_in, and refuses an answer without a token or a team", () => {
    const parsed = installationFromAccess(
      { access_token: "xoxe.xoxb-1", token_type: "bot", team: { id: "T1" }, refresh_token: "xoxe-1", expires_in: 43200 },
      NOW,
    );
    expect(parsed.ok && parsed.install.tokenExpiresAt).toBe(NOW + 43_200_000);
    expect(installationFromAccess({ team: { id: "T1" } }, NOW)).toEqual({ ok: false, reason: "oauth.v2.access answered no access_token" });
    expect(installationFromAccess({ access_token: "xoxb-1", team: null }, NOW).ok).toBe(false);
  });
});
