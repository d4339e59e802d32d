import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { networkEdge } from "../../shared/effects/outbound.ts";
import { INSTALLATION_REMOVED } from "../../shared/installations/lifecycle.ts";
import { recordingLog } from "../../shared/log.ts";
import { handleSlackRequest } from "../../workers/ingress/ack.ts";
import { handleHttp } from "../../workers/ingress/http.ts";
import { ingressDeps } from "../support/ingress.ts";
import { dbOf, resetAllShards } from "../support/rows.ts";
import { eventEnvelope, eventRequest, NOW, signed, uniqueId } from "../support/slack-requests.ts";
import { testApp } from "../support/test-app.ts";

const OAUTH = {
  clientId: "1.2",
  clientSecret: "s",
  scopes: [],
  redirectUrl: "https://x.test/slack/oauth_redirect",
  tokenKey: "1e".repeat(32),
  previousTokenKey: undefined,
};

beforeEach(() => resetAllShards());

async function send(event: Record<string, unknown>, eventId: string, oauth: typeof OAUTH | undefined) {
  const harness = ingressDeps();
  const deps = { ...harness.deps, settings: { ...harness.deps.settings, oauth } };
  const response = await handleSlackRequest(await eventRequest(event, { eventId }), deps, NOW);
  await harness.settled();
  return response;
}
const rows = () =>
  env.DB.prepare("SELECT receipt_id, team_id, effect, payload FROM outbox")
    .all()
    .then((r) => r.results);

describe("app_uninstalled and tokens_revoked at the ingress", () => {
  it("app_uninstalled: recorded like any event (receipt + one engine row naming the team), idempotent on its event_id", async () => {
    const id = uniqueId("EvUninstall");
    expect((await send({ type: "app_uninstalled" }, id, OAUTH)).status).toBe(200);
    expect((await send({ type: "app_uninstalled" }, id, OAUTH)).status).toBe(200);
    expect(await rows()).toEqual([
      {
        receipt_id: id,
        team_id: "T0TEAM",
        effect: INSTALLATION_REMOVED,
        // at: the event's time (event_time, to the end of its second), never after receipt (NOW).
        payload: JSON.stringify({
          team_id: "T0TEAM",
          enterprise_id: null,
          org_wide: false,
          reason: "app_uninstalled",
          at: Math.min(NOW, Math.floor(NOW / 1000) * 1000 + 999),
          step: 1,
        }),
      },
    ]);
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM receipts").first("n")).toBe(1);
  });

  it("tokens_revoked: acted on only when a bot token is among the revoked (ackbox stores no user token)", async () => {
    await send({ type: "tokens_revoked", tokens: { oauth: ["U1"], bot: [] } }, uniqueId("EvUser"), OAUTH);
    expect(await rows()).toEqual([]);
    await send({ type: "tokens_revoked", tokens: { oauth: [], bot: ["U0BOT"] } }, uniqueId("EvBot"), OAUTH);
    expect((await rows()).map((r) => (r as { effect: string }).effect)).toEqual([INSTALLATION_REMOVED]);
  });

  it("single-workspace mode: nothing changes (no row for it, as before)", async () => {
    expect((await send({ type: "app_uninstalled" }, uniqueId("EvSingle"), undefined)).status).toBe(200);
    expect(await rows()).toEqual([]);
  });
});

describe("the receipt records the Enterprise Grid org", () => {
  it("from an event's authorizations (what an org-wide installation is found by)", async () => {
    const harness = ingressDeps();
    const id = uniqueId("EvGrid");
    const body = JSON.stringify({
      ...eventEnvelope({ type: "app_uninstalled" }, id),
      enterprise_id: "E0ENV",
      authorizations: [{ enterprise_id: "E0ORG", team_id: "T0TEAM", user_id: "U0BOT", is_bot: true, is_enterprise_install: true }],
    });
    const deps = { ...harness.deps, settings: { ...harness.deps.settings, oauth: OAUTH } };
    expect((await handleSlackRequest(await signed(body, "application/json"), deps, NOW)).status).toBe(200);
    expect(await env.DB.prepare("SELECT enterprise_id FROM receipts WHERE id = ?").bind(id).first("enterprise_id")).toBe("E0ORG");
    // An org-wide install's uninstall names the org and says it is org-wide, so the consumer removes 'E:E0ORG'.
    const payload = await env.DB.prepare("SELECT payload FROM outbox WHERE receipt_id = ?").bind(id).first<string>("payload");
    expect(JSON.parse(payload ?? "null")).toMatchObject({ enterprise_id: "E0ORG", org_wide: true, reason: "app_uninstalled" });
  });
});

describe("through the ingress's entry, first attempt on, in a distributed app", () => {
  it("leaves the uninstall's engine row to the consumer: never performed inline as a Slack method without a token", async () => {
    // Its name has a dot, so the app's registry alone takes it for a Slack method (inline by default): the
    // ingress then performed it with no token and parked it dead, and the installation was never removed.
    const oauthEnv = {
      ...env,
      SLACK_CLIENT_ID: "1111.2222",
      SLACK_CLIENT_SECRET: "client-secret-for-tests",
      SLACK_REDIRECT_URL: "https://ackbox.test/slack/oauth_redirect",
      TOKEN_ENCRYPTION_KEY: "0f".repeat(32),
    } as typeof env;
    const ctx = createExecutionContext();
    const request = await eventRequest({ type: "app_uninstalled" }, { eventId: uniqueId("EvEntry") });
    const response = await handleHttp(request, oauthEnv, ctx, NOW, recordingLog(), testApp(), networkEdge);
    await waitOnExecutionContext(ctx);
    expect(response.status).toBe(200);
    // Through the entry the event goes to its team's shard (T0TEAM is on shard 1 with the tests' two).
    const row = await dbOf("T0TEAM").prepare("SELECT effect, status, attempts, last_error FROM outbox").first();
    expect(row).toEqual({ effect: INSTALLATION_REMOVED, status: "pending", attempts: 0, last_error: null });
  });
});
