/**
 * Slash commands and interactivity through the same Request URL: operation
 * ids instead of event_id, the app's immediate reply in the ack body, and a
 * modal opened inline (best effort) without touching the durable path.
 */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { networkEdge } from "../../shared/effects/outbound.ts";
import { recordingLog } from "../../shared/log.ts";
import { shardBindingName } from "../../shared/shards/bindings.ts";
import { handleSlackRequest } from "../../workers/ingress/ack.ts";
import { handleHttp } from "../../workers/ingress/http.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { ingressDeps } from "../support/ingress.ts";
import { allRows, dbOf, resetTables, shardDbs, shardOf, tally } from "../support/rows.ts";
import { blockActions, commandForm, FORM, interactionForm, NOW, signed } from "../support/slack-requests.ts";
import { TEST_MODAL, testApp } from "../support/test-app.ts";

const slack = useFakeSlack();
beforeEach(async () => {
  for (const db of shardDbs()) await resetTables(db);
});

async function send(body: string, now = NOW) {
  const harness = ingressDeps();
  const response = await handleSlackRequest(await signed(body, FORM, { now }), harness.deps, now);
  await harness.settled();
  const line = harness.log.records.find((r) => r.msg === "slack request");
  const text = await response.text();
  return { response, line, text, json: text ? (JSON.parse(text) as Record<string, unknown>) : null };
}

describe("slash commands", () => {
  it("answers with the immediate ephemeral reply and records a response_url effect that expires in 30 minutes", async () => {
    const { response, line, json } = await send(commandForm({ command: "/ackbox", text: "status", trigger_id: "1.2.abc" }));
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("application/json");
    expect(json).toEqual({ response_type: "ephemeral", text: "Working on `/ackbox status`…" });
    expect(line?.fields).toMatchObject({ verdict: "accepted", surface: "command", id: "command:T0TEAM:1.2.abc" });
    const receipt = await env.DB.prepare("SELECT kind, type, team_id FROM receipts").first();
    expect(receipt).toEqual({ kind: "command", type: "/ackbox", team_id: "T0TEAM" });
    const [row] = await allRows(env.DB);
    expect(row).toMatchObject({ effect: "response_url", idempotency_key: "command:T0TEAM:1.2.abc:result", expires_at: NOW + 30 * 60_000 });
    expect(JSON.parse(row?.payload ?? "{}")).toEqual({
      url: "https://hooks.slack.com/commands/T0TEAM/1234/abcd",
      body: { response_type: "ephemeral", replace_original: false, text: "Done: `/ackbox status`" },
    });
  });

  it("recognises a redelivery of the same invocation: 200, nothing new", async () => {
    const body = commandForm({ trigger_id: "7.7.same" });
    await send(body);
    const again = await send(body);
    expect(again.response.status).toBe(200);
    expect(again.line?.fields.verdict).toBe("duplicate");
    expect(await tally(env.DB)).toEqual({ receipts: 1, outbox: 1, attempts: 0 });
  });

  it("treats the same command typed twice as two operations", async () => {
    await send(commandForm({ text: "deploy api", trigger_id: "1.1.first" }));
    const second = await send(commandForm({ text: "deploy api", trigger_id: "2.2.second" }));
    expect(second.line?.fields.verdict).toBe("accepted");
    expect(await tally(env.DB)).toEqual({ receipts: 2, outbox: 2, attempts: 0 });
  });
});

describe("interactivity", () => {
  it("records chat.update of the message a button sits on, and answers an empty 200", async () => {
    const { response, text, line } = await send(interactionForm(blockActions({ trigger_id: "5.5.click" })));
    expect(response.status).toBe(200);
    expect(text).toBe("");
    expect(line?.fields).toMatchObject({ verdict: "accepted", surface: "interaction", id: "interaction:T0TEAM:5.5.click" });
    const [row] = await allRows(env.DB);
    expect(row?.effect).toBe("chat.update");
    expect(JSON.parse(row?.payload ?? "{}")).toEqual({
      channel: "C0WATCHED",
      ts: "1764504000.000300",
      text: "<@U0HUMAN> clicked approve.",
    });
  });

  it("recognises a redelivered click, and counts a second click as a second operation", async () => {
    const click = interactionForm(blockActions({ trigger_id: "5.5.once" }));
    await send(click);
    expect((await send(click)).line?.fields.verdict).toBe("duplicate");
    expect((await send(interactionForm(blockActions({ trigger_id: "5.5.twice" })))).line?.fields.verdict).toBe("accepted");
    expect(await tally(env.DB)).toEqual({ receipts: 2, outbox: 2, attempts: 0 });
  });

  it("answers a view submission with response_action and records the thank-you message", async () => {
    const submission = {
      type: "view_submission",
      team: { id: "T0TEAM" },
      user: { id: "U0HUMAN" },
      trigger_id: "8.8.v",
      view: { id: "V1", hash: "h1", callback_id: "ackbox_feedback" },
    };
    const { response, json } = await send(interactionForm(submission));
    expect(response.status).toBe(200);
    expect(json).toEqual({ response_action: "clear" });
    const [row] = await allRows(env.DB);
    expect(row?.effect).toBe("chat.postMessage");
    expect(JSON.parse(row?.payload ?? "{}")).toMatchObject({ channel: "U0HUMAN" });
  });

  it.each([
    [
      "a button in a modal (no message to update)",
      blockActions({ container: { type: "view", view_id: "V1" }, channel: undefined, message: undefined }),
      "", // the test app's handler matched and returned nothing: answered, not ignored
    ],
    [
      "a closed modal",
      { type: "view_closed", team: { id: "T0TEAM" }, user: { id: "U1" }, view: { id: "V1", hash: "h" } },
      "no handler for view_closed",
    ],
    [
      "a global shortcut",
      { type: "shortcut", team: { id: "T0TEAM" }, user: { id: "U1" }, trigger_id: "3.3.s", callback_id: "x" },
      "no handler for shortcut",
    ],
    [
      "an interactivity type the pipeline does not know",
      { type: "dialog_submission", team: { id: "T0TEAM" }, trigger_id: "t" },
      "unhandled type dialog_submission",
    ],
  ])("ignores %s: 200, nothing written", async (_, payload, reason) => {
    const { response, line } = await send(interactionForm(payload));
    expect(response.status).toBe(200);
    if (reason === "") expect(line?.fields).toMatchObject({ verdict: "answered", handler: "action(/.*/)" });
    else expect(line?.fields).toMatchObject({ verdict: "ignored", reason });
    expect(await tally(env.DB)).toEqual({ receipts: 0, outbox: 0, attempts: 0 });
  });

  it.each([
    ["a form without payload or command", "foo=bar", "form body has neither a command nor a payload"],
    ["a payload that is not JSON", "payload=%7Bbroken", "interactivity payload is not a JSON object"],
    ["a payload that is JSON but not an object", `payload=${encodeURIComponent('"hello"')}`, "interactivity payload is not a JSON object"],
    ["a payload without a type", `payload=${encodeURIComponent('{"trigger_id":"x"}')}`, "interactivity payload has no type"],
  ])("refuses %s: 400, nothing written", async (_, body, reason) => {
    const { response, line } = await send(body);
    expect(response.status).toBe(400);
    expect(line?.fields.reason).toBe(reason);
    expect(await tally(env.DB)).toEqual({ receipts: 0, outbox: 0, attempts: 0 });
  });
});

describe("modals: views.open inline, best effort, after the durable write", () => {
  const ingressRequest = (text: string, trigger: string) => signed(commandForm({ text, trigger_id: trigger }), FORM, { now: Date.now() });

  it("opens the modal through the real Worker wiring with the command's trigger_id", async () => {
    slack.current.script("views.open", reply.ok({ view: { id: "V123" } }));
    const ctx = createExecutionContext();
    const response = await handleHttp(
      await ingressRequest("modal", "4.4.modal"),
      env,
      ctx,
      Date.now(),
      recordingLog(),
      testApp(),
      networkEdge,
    );
    await waitOnExecutionContext(ctx);
    expect(response.status).toBe(200);
    const [call] = slack.current.callsTo("views.open");
    expect(call?.params.trigger_id).toBe("4.4.modal");
    expect(JSON.parse(call?.params.view ?? "{}")).toEqual(TEST_MODAL);
    expect(await tally(dbOf("T0TEAM"))).toEqual({ receipts: 1, outbox: 1, attempts: 0 });
  });

  it("calls views.open only once the receipt and its row are committed, and answers after it", async () => {
    // The order, recorded at the bindings: the D1 batch (with how many views.open calls Slack had
    // seen at its start and at its commit), then the answer.
    slack.current.script("views.open", reply.ok({ view: { id: "V124" } }));
    const order: string[] = [];
    const opened = () => slack.current.callsTo("views.open").length;
    // The command's team's shard, through the Worker's own routing (T0TEAM's D1).
    const db = new Proxy(dbOf("T0TEAM"), {
      get(target, prop) {
        if (prop === "batch") {
          return async (statements: D1PreparedStatement[]) => {
            order.push(`batch sent, views.open calls: ${opened()}`);
            const results = await target.batch(statements);
            order.push(`batch committed, views.open calls: ${opened()}`);
            return results;
          };
        }
        const value = Reflect.get(target, prop);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const ctx = createExecutionContext();
    const response = await handleHttp(
      await ingressRequest("modal", "4.4.order"),
      { ...env, [shardBindingName(shardOf("T0TEAM"))]: db },
      ctx,
      Date.now(),
      recordingLog(),
      testApp(),
      networkEdge,
    );
    order.push(`answered, views.open calls: ${opened()}`);
    await waitOnExecutionContext(ctx);
    expect(response.status).toBe(200);
    expect(order).toEqual(["batch sent, views.open calls: 0", "batch committed, views.open calls: 0", "answered, views.open calls: 1"]);
  });

  it("still acks with the reply when views.open fails, and says so in the log", async () => {
    slack.current.script("views.open", reply.error("expired_trigger_id"));
    const log = recordingLog();
    const ctx = createExecutionContext();
    const response = await handleHttp(await ingressRequest("modal", "4.4.late"), env, ctx, Date.now(), log, testApp(), networkEdge);
    await waitOnExecutionContext(ctx);
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ response_type: "ephemeral" });
    expect(log.records.find((r) => r.msg === "views.open failed (best effort)")?.fields.error).toContain("expired_trigger_id");
    expect(await tally(dbOf("T0TEAM"))).toEqual({ receipts: 1, outbox: 1, attempts: 0 });
  });

  it("does not open anything for a command that is not a modal", async () => {
    const ctx = createExecutionContext();
    const response = await handleHttp(
      await ingressRequest("status", "4.4.plain"),
      env,
      ctx,
      Date.now(),
      recordingLog(),
      testApp(),
      networkEdge,
    );
    await waitOnExecutionContext(ctx);
    expect(response.status).toBe(200);
    expect(slack.current.calls).toEqual([]);
  });
});
