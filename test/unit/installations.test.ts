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
import { parseSlackBody } from "../../shared/slack/inputs.ts";

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

  it("refuses an answer whose access_token is not a bot token (no token_type bot, or not xoxb- / xoxe.xoxb-), never storing it as one", () => {
    const refused = { ok: false, reason: "oauth.v2.access answered a token that is not a bot token" };
    const team = { id: "T1" };
    expect(installationFromAccess({ access_token: "xoxp-user", token_type: "user", team }, NOW)).toEqual(refused);
    expect(installationFromAccess({ access_token: "xoxp-user", token_type: "bot", team }, NOW)).toEqual(refused);
    expect(installationFromAccess({ access_token: "xoxe.xoxp-1-user", token_type: "bot", team }, NOW)).toEqual(refused);
    expect(installationFromAccess({ access_token: "xoxb-1", team }, NOW)).toEqual(refused);
    expect(installationFromAccess({ access_token: "xoxb-1", token_type: "bot", team }, NOW).ok).toBe(true);
    expect(installationFromAccess({ access_token: "xoxe.xoxb-1", token_type: "bot", team }, NOW).ok).toBe(true);
  });
});

describe("the Enterprise Grid org each surface carries (recorded on the receipt)", () => {
  it("events: authorizations[0].enterprise_id, else the envelope's enterprise_id; commands: enterprise_id; interactions: enterprise.id", () => {
    const event = parseSlackBody(
      "application/json",
      JSON.stringify({ type: "event_callback", event_id: "Ev1", team_id: "T1", enterprise_id: "E0ENV", event: { type: "app_mention" } }),
    );
    expect(event.ok && event.input.surface === "event" && event.input.enterpriseId).toBe("E0ENV");
    const command = parseSlackBody(
      "application/x-www-form-urlencoded",
      "command=%2Fask&team_id=T1&enterprise_id=E0CMD&channel_id=C1&user_id=U1&response_url=https%3A%2F%2Fhooks.slack.com%2Fx&trigger_id=t1",
    );
    expect(command.ok && command.input.surface === "command" && command.input.enterpriseId).toBe("E0CMD");
    const interaction = parseSlackBody(
      "application/x-www-form-urlencoded",
      `payload=${encodeURIComponent(JSON.stringify({ type: "block_actions", trigger_id: "t2", team: null, enterprise: { id: "E0INT" }, is_enterprise_install: true }))}`,
    );
    expect(interaction.ok && interaction.input.surface === "interaction" && interaction.input.enterpriseId).toBe("E0INT");
  });
});
