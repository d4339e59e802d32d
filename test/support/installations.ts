/** An installation as the tests store it: a workspace install of `teamId` with `botToken`, the rest overridable. */
import type { Installation } from "../../shared/installations/store.ts";

export function testInstallation(teamId: string, botToken: string, over: Partial<Installation> = {}): Installation {
  return {
    teamId,
    enterpriseId: undefined,
    isEnterpriseInstall: false,
    botUserId: "U0BOT",
    botId: "B0BOT",
    scopes: "chat:write",
    installerUserId: "U0ME",
    botToken,
    refreshToken: undefined,
    tokenExpiresAt: undefined,
    ...over,
  };
}
