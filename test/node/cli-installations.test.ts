/**
 * `npx ackbox installations list`, in process, against a stand-in operator
 * API answering what GET /admin/installations answers
 * (test/ingress/admin.installations.test.ts proves the real answer's shape).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { InstallationsAnswer } from "../../cli/api.ts";
import { runCli, serveJson } from "./support/cli-in-process.ts";

const ISO = "2027-01-15T08:00:00.000Z";
const row = (over: Partial<InstallationsAnswer["installations"][number]>): InstallationsAnswer["installations"][number] => ({
  installKey: "T:T0ONE",
  teamId: "T0ONE",
  enterpriseId: null,
  orgWide: false,
  botUserId: "U0BOT",
  scopes: ["chat:write", "commands"],
  installerUserId: "U0ME",
  installedAt: ISO,
  updatedAt: ISO,
  tokenExpiresAt: null,
  keyId: "0a1b2c3d",
  blocked: false,
  blockedReason: null,
  ...over,
});
let answer: InstallationsAnswer;
let served: Awaited<ReturnType<typeof serveJson>>;
beforeAll(async () => {
  served = await serveJson((path) => (path === "/admin/installations" ? [200, JSON.stringify(answer)] : [404, "{}"]));
});
afterAll(() => served.close());

function run(...argv: string[]) {
  return runCli({
    argv: [...argv, "--url", served.url],
    env: { ACKBOX_ADMIN_TOKEN: "cli-installations-token-0123456789ab" },
    isTty: false,
  });
}

describe("npx ackbox installations list", () => {
  it("shows each installation, org-wide ones and blocked ones by name", async () => {
    answer = {
      mode: "distributed",
      now: ISO,
      installations: [
        row({ installKey: "E:E0ORG", teamId: null, enterpriseId: "E0ORG", orgWide: true, tokenExpiresAt: "2027-01-15T20:00:00.000Z" }),
        row({ blocked: true, blockedReason: "token_revoked" }),
      ],
    };
    const { code, out } = await run("installations", "list");
    expect(code).toBe(0);
    expect(out).toContain("2 installations, 1 blocked");
    expect(out).toMatch(/\(org-wide\)\s+E0ORG\s+2027-01-15 08:00:00\s+2027-01-15 20:00:00\s+ok/);
    expect(out).toMatch(/T0ONE\s+-\s+2027-01-15 08:00:00\s+never\s+BLOCKED: token_revoked/);
  });

  it("prints the answer as one JSON document with --json", async () => {
    answer = { mode: "distributed", now: ISO, installations: [row({})] };
    const { code, out } = await run("installations", "list", "--json");
    expect(code).toBe(0);
    expect(JSON.parse(out)).toEqual(answer);
  });

  it("says single-workspace mode when there is nothing to list there", async () => {
    answer = { mode: "single-workspace", now: ISO, installations: [] };
    const { out } = await run("installations", "list");
    expect(out).toBe("single-workspace mode (SLACK_BOT_TOKEN; SLACK_CLIENT_ID unset): no installations\n");
  });

  it("refuses an unknown verb with a usage error", async () => {
    const { code, err } = await run("installations", "delete");
    expect(code).toBe(2);
    expect(err).toContain("unknown command: installations delete (want installations list; see --help)");
  });
});
