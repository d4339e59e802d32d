/** `ackbox installations list`: the workspaces the app is installed in, and which are blocked. Never a token. */
import type { InstallationsAnswer } from "../api.ts";
import type { Context } from "../context.ts";
import { EXIT, type ExitCode } from "../exit.ts";
import { table, when } from "../format.ts";

export async function installationsListCommand(ctx: Context): Promise<ExitCode> {
  const answer = await ctx.client.get<InstallationsAnswer>("/admin/installations");
  if (ctx.json) {
    ctx.out(`${JSON.stringify(answer)}\n`);
    return EXIT.ok;
  }
  if (answer.mode === "single-workspace" && answer.installations.length === 0) {
    ctx.out("single-workspace mode (SLACK_BOT_TOKEN; SLACK_CLIENT_ID unset): no installations\n");
    return EXIT.ok;
  }
  const blocked = answer.installations.filter((i) => i.blocked).length;
  ctx.out(
    `${answer.installations.length} installation${answer.installations.length === 1 ? "" : "s"}, ${blocked} blocked\n` +
      `${table(answer.installations, [
        { title: "team", value: (i) => i.teamId ?? "(org-wide)" },
        { title: "enterprise", value: (i) => i.enterpriseId },
        { title: "installed (UTC)", value: (i) => when(i.installedAt) },
        { title: "token expires (UTC)", value: (i) => (i.tokenExpiresAt ? when(i.tokenExpiresAt) : "never") },
        { title: "state", value: (i) => (i.blocked ? `BLOCKED: ${i.blockedReason}` : "ok"), max: 60 },
        { title: "scopes", value: (i) => i.scopes.join(","), max: 60 },
      ])}\n`,
  );
  return EXIT.ok;
}
