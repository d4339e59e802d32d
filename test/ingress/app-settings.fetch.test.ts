/**
 * The ingress with an app's own settings (shared/app/settings.ts): a missing
 * required one answers 500, writes nothing and logs which; set, its handlers
 * read it; a secret's value is in no log line, row or answer.
 */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { createApp } from "../../shared/app/app.ts";
import { slack } from "../../shared/app/intents.ts";
import { setting } from "../../shared/app/settings.ts";
import { networkEdge } from "../../shared/effects/outbound.ts";
import { recordingLog } from "../../shared/log.ts";
import { handleHttp } from "../../workers/ingress/http.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { allRows, dbOf, resetAllShards, tallyAll } from "../support/rows.ts";
import { eventRequest, mention } from "../support/slack-requests.ts";

const fake = useFakeSlack();
beforeEach(() => resetAllShards());

const KEY = "sk-live-ingress-0123456789";
const app = createApp()
  .settings({
    GREETING: setting.text({ description: "What the bot says", required: true }),
    SERVICE_KEY: setting.secret({ description: "The service's key", required: true }),
  })
  .uses("chat.postMessage")
  .event("app_mention", ({ payload }, { settings }) => [
    slack("chat.postMessage", { channel: payload.channel, text: settings.GREETING }, { key: "greet" }),
  ]);

async function send(overrides: Record<string, string>) {
  const log = recordingLog();
  const ctx = createExecutionContext();
  const request = await eventRequest(mention({ ts: "1764504000.000900" }), { now: Date.now() });
  const response = await handleHttp(request, { ...env, ...overrides }, ctx, Date.now(), log, app, networkEdge);
  await waitOnExecutionContext(ctx);
  return { response, body: await response.text(), log: log.records };
}

describe("an app setting at the ingress", () => {
  it("missing and required: 500, nothing written, and the log names each one (never a value)", async () => {
    const { response, body, log } = await send({ SERVICE_KEY: KEY });
    expect(response.status).toBe(500);
    expect(body).toBe("misconfigured");
    expect(await tallyAll()).toEqual({ receipts: 0, outbox: 0, attempts: 0 });
    expect(log.find((r) => r.msg === "app misconfigured; answering 500")?.fields.errors).toEqual([
      "GREETING is required: What the bot says",
    ]);
  });

  it("a secret too short is refused, and the log line does not quote it", async () => {
    const { response, log } = await send({ GREETING: "hi", SERVICE_KEY: "short!" });
    expect(response.status).toBe(500);
    expect(JSON.stringify(log)).toContain("SERVICE_KEY must be at least 8 characters");
    expect(JSON.stringify(log)).not.toContain("short!");
  });

  it("set: the handler reads it, and the secret is in no log line, row or answer", async () => {
    fake.current.script("chat.postMessage", reply.ok({ ts: "1764504000.000901" })); // the first attempt, right after the ack
    const { response, body, log } = await send({ GREETING: "hello from the app", SERVICE_KEY: KEY });
    expect(response.status).toBe(200);
    const rows = await allRows(dbOf("T0TEAM"));
    expect(rows.map((r) => JSON.parse(r.payload).text)).toEqual(["hello from the app"]);
    expect(fake.current.callsTo("chat.postMessage")[0]?.params.text).toBe("hello from the app");
    expect(JSON.stringify({ body, log, rows, calls: fake.current.calls })).not.toContain(KEY);
  });
});
