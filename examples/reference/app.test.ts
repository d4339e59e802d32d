/**
 * The reference app (SPEC §3), through the real ack path and D1: which
 * inputs record which rows, and which are ignored. It composes nothing but
 * itself (and, last, beside the /ask example as the starter app/index.ts
 * does), so a team that replaces app/ breaks none of these.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { createApp } from "../../shared/app/index.ts";
import { ingressDeps } from "../../test/support/ingress.ts";
import { allRows, resetTables, tally } from "../../test/support/rows.ts";
import {
  blockActions,
  channelMessage,
  commandForm,
  eventRequest,
  FORM,
  interactionForm,
  mention,
  NOW,
  signed,
} from "../../test/support/slack-requests.ts";
import { handleSlackRequest } from "../../workers/ingress/ack.ts";
import { exampleApp } from "../ask/app.ts";
import { referenceApp } from "./app.ts";

beforeEach(() => resetTables(env.DB));

const reference = referenceApp(createApp());

async function send(request: Request, chosen = reference) {
  const harness = ingressDeps({ app: chosen });
  const response = await handleSlackRequest(request, harness.deps, NOW);
  await harness.settled();
  const text = await response.text();
  return {
    response,
    json: text ? JSON.parse(text) : null,
    line: harness.log.records.find((r) => r.msg === "slack request"),
    rows: await allRows(env.DB),
  };
}
const payloadOf = (row: { payload: string } | undefined) => JSON.parse(row?.payload ?? "null");

describe("what the reference app records", () => {
  it("app_mention → a threaded chat.postMessage", async () => {
    const { rows } = await send(await eventRequest(mention({ ts: "1.5" }), { eventId: "EvRef1" }));
    expect(rows).toMatchObject([
      { effect: "chat.postMessage", idempotency_key: "app_mention:T0TEAM:C0WATCHED:1.5:reply", receipt_id: "EvRef1" },
    ]);
    expect(payloadOf(rows[0])).toEqual({ channel: "C0WATCHED", thread_ts: "1.5", text: "Hi <@U0HUMAN>, ackbox heard you." });
  });

  it("a plain message in a watched channel → reactions.add eyes", async () => {
    const { rows } = await send(await eventRequest(channelMessage({ ts: "1.6" }), { eventId: "EvRef2" }));
    expect(rows).toMatchObject([{ effect: "reactions.add", idempotency_key: "message:T0TEAM:C0WATCHED:1.6:eyes", receipt_id: "EvRef2" }]);
    expect(payloadOf(rows[0])).toEqual({ channel: "C0WATCHED", timestamp: "1.6", name: "eyes" });
  });

  it("any slash command → the ephemeral reply in the ack, the result through its response_url within 30 minutes", async () => {
    const { json, rows } = await send(await signed(commandForm({ command: "/anything", text: "status", trigger_id: "1.2.ref" }), FORM));
    expect(json).toEqual({ response_type: "ephemeral", text: "Working on `/anything status`…" });
    expect(rows).toMatchObject([
      { effect: "response_url", idempotency_key: "command:T0TEAM:1.2.ref:result", expires_at: NOW + 30 * 60_000 },
    ]);
    expect(payloadOf(rows[0])).toEqual({
      url: "https://hooks.slack.com/commands/T0TEAM/1234/abcd",
      body: { response_type: "ephemeral", replace_original: false, text: "Done: `/anything status`" },
    });
  });

  it("a button click → chat.update of the message it sits on", async () => {
    const { response, rows } = await send(await signed(interactionForm(blockActions()), FORM));
    expect(response.status).toBe(200);
    expect(rows).toMatchObject([{ effect: "chat.update" }]);
    expect(payloadOf(rows[0])).toEqual({ channel: "C0WATCHED", ts: "1764504000.000300", text: "<@U0HUMAN> clicked approve." });
  });

  it("the feedback modal's submission → cleared, and a thank-you DM", async () => {
    const submission = {
      type: "view_submission",
      team: { id: "T0TEAM" },
      user: { id: "U0HUMAN" },
      trigger_id: "8.8.ref",
      view: { id: "V1", callback_id: "ackbox_feedback" },
    };
    const { json, rows } = await send(await signed(interactionForm(submission), FORM));
    expect(json).toEqual({ response_action: "clear" });
    expect(payloadOf(rows[0])).toEqual({ channel: "U0HUMAN", text: "Thanks, ackbox received your feedback." });
  });
});

describe("what it ignores: 200, nothing written", () => {
  it.each([
    ["a message in an unwatched channel", channelMessage({ channel: "C0ELSEWHERE" })],
    ["a message with a subtype", channelMessage({ subtype: "message_changed" })],
    ["a bot's message", channelMessage({ bot_id: "B0BOT" })],
    ["a mention by a bot", mention({ bot_id: "B0OTHER" })],
    ["an event type it does not handle", { type: "reaction_added", user: "U1", reaction: "eyes" }],
  ])("%s", async (_, event) => {
    const { response } = await send(await eventRequest(event));
    expect(response.status).toBe(200);
    expect(await tally(env.DB)).toEqual({ receipts: 0, outbox: 0, attempts: 0 });
  });

  it.each([
    ["a button in a modal", blockActions({ container: { type: "view", view_id: "V1" }, channel: undefined, message: undefined })],
    ["a closed modal", { type: "view_closed", team: { id: "T0TEAM" }, user: { id: "U1" }, view: { id: "V1", hash: "h" } }],
    ["a global shortcut", { type: "shortcut", team: { id: "T0TEAM" }, user: { id: "U1" }, trigger_id: "3.3.s", callback_id: "x" }],
  ])("%s", async (_, payload) => {
    const { response } = await send(await signed(interactionForm(payload), FORM));
    expect(response.status).toBe(200);
    expect(await tally(env.DB)).toEqual({ receipts: 0, outbox: 0, attempts: 0 });
  });
});

describe("beside the /ask example (as the starter app/index.ts composes them): the example first, then the reference app", () => {
  const app = referenceApp(exampleApp(createApp()));

  it("sends /ask to the example and every other command to the reference app", async () => {
    const ask = await send(await signed(commandForm({ command: "/ask", text: "why?" }), FORM), app);
    expect(ask.line?.fields.handler).toBe("command(/ask)");
    await resetTables(env.DB);
    const other = await send(await signed(commandForm({ command: "/ackbox" }), FORM), app);
    expect(other.line?.fields.handler).toBe("command(/^\\//)");
  });
});
