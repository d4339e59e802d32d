/**
 * Operator answers never carry a credential from a stored payload: the
 * response_url (a bearer capability) and any token-bearing field are
 * redacted in /admin/dead and /admin/events/<id> — and so in the CLI and the
 * dashboard, which show what these answer — keeping the host and a
 * fingerprint so rows stay distinguishable.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { adminDeps, callAdmin } from "../support/ops.ts";
import { insertRow, resetTables } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";

beforeEach(() => resetTables(env.DB));

const FIRST = "https://hooks.slack.com/commands/T0TEAM/111/first-secret-part";
const SECOND = "https://hooks.slack.com/commands/T0TEAM/222/second-secret-part";
const SECRETS = ["first-secret-part", "second-secret-part", "xoxb-stored-token", "custom-api-key-value"];

async function seed() {
  const a = await insertRow(env.DB, {
    key: "command:T0TEAM:trig1:respond",
    status: "dead",
    effect: "response_url",
    payload: { url: FIRST, body: { text: "Done" } },
    lastError: "response_url: HTTP 404 expired_url",
  });
  const b = await insertRow(env.DB, { status: "dead", effect: "response_url", payload: { url: SECOND, body: { text: "Done" } } });
  const c = await insertRow(env.DB, {
    status: "dead",
    effect: "custom.webhook",
    payload: { channel: "C1", api_key: "custom-api-key-value", nested: { note: "xoxb-stored-token" } },
  });
  return { a, b, c };
}

describe("redaction in operator answers", () => {
  it("GET /admin/dead shows host and fingerprint, never the secret part, and keeps the rest of the payload", async () => {
    await seed();
    const { deps } = adminDeps();
    const response = await callAdmin<{ rows: { payload: Record<string, unknown> }[] }>(deps, "/admin/dead", NOW);
    expect(response.status).toBe(200);
    const text = JSON.stringify(response.body);
    for (const secret of SECRETS) expect(text).not.toContain(secret);
    const urls = response.body.rows.map((r) => r.payload.url).filter((u) => u !== undefined);
    expect(urls).toHaveLength(2);
    for (const url of urls) expect(url).toMatch(/^\[redacted https:\/\/hooks\.slack\.com #[0-9a-f]{8}\]$/);
    expect(new Set(urls).size).toBe(2); // two rows, two fingerprints
    const custom = response.body.rows.find((r) => r.payload.channel === "C1");
    expect(custom?.payload).toMatchObject({ channel: "C1", api_key: expect.stringMatching(/^\[redacted #/) });
  });

  it("GET /admin/events/<id> redacts the payload of every row of the trail", async () => {
    await seed();
    const { deps } = adminDeps();
    const response = await callAdmin<{ rows: { payload: { url: string; body: unknown } }[] }>(
      deps,
      `/admin/events/${encodeURIComponent("command:T0TEAM:trig1")}`,
      NOW,
    );
    expect(response.status).toBe(200);
    expect(JSON.stringify(response.body)).not.toContain("first-secret-part");
    expect(response.body.rows[0]?.payload).toEqual({
      url: expect.stringMatching(/^\[redacted https:\/\/hooks\.slack\.com #[0-9a-f]{8}\]$/),
      body: { text: "Done" },
    });
  });
});
