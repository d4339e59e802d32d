/**
 * The ack path with an app that misbehaves, or answers without writing:
 * a handler that throws or returns intents that cannot be recorded is
 * refused with 500 and nothing written (Slack retries an event; the log names
 * the handler); an input whose handler returns no intents (an options
 * request) is answered inline and writes nothing at all.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { type App, createApp } from "../../shared/app/app.ts";
import { run, slack } from "../../shared/app/intents.ts";
import { handleSlackRequest } from "../../workers/ingress/ack.ts";
import { ingressDeps } from "../support/ingress.ts";
import { resetTables, tally } from "../support/rows.ts";
import { commandForm, eventRequest, FORM, interactionForm, mention, NOW, signed } from "../support/slack-requests.ts";

const NOTHING = { receipts: 0, outbox: 0, attempts: 0 };
beforeEach(() => resetTables(env.DB));

async function send(app: App, request: Request) {
  const harness = ingressDeps({ app });
  const response = await handleSlackRequest(request, harness.deps, NOW);
  await harness.settled();
  return { response, text: await response.text(), line: harness.log.records.find((r) => r.msg === "slack request") };
}

describe("500, nothing written, the log names the handler", () => {
  it("an Events API handler that throws (Slack will retry)", async () => {
    const app = createApp().event("app_mention", () => {
      throw new Error("bug in the app");
    });
    const { response, line } = await send(app, await eventRequest(mention()));
    expect(response.status).toBe(500);
    expect(line?.fields).toMatchObject({ verdict: "refused", reason: "handler event(app_mention) threw: Error: bug in the app" });
    expect(line?.level).toBe("error");
    expect(await tally(env.DB)).toEqual(NOTHING);
  });

  it.each([
    [
      "a command handler that throws",
      () =>
        createApp().command("/ackbox", () => {
          throw new RangeError("nope");
        }),
      "handler command(/ackbox) threw: RangeError: nope",
    ],
    [
      "an unregistered effect",
      () => createApp().command("/ackbox", () => [run({ name: "forgotten" }, {})]),
      'no effect named "forgotten" is registered',
    ],
    [
      "a duplicate key",
      () =>
        createApp()
          .uses("chat.postMessage")
          .command("/ackbox", () => [slack("chat.postMessage", {}), slack("chat.postMessage", {})]),
      "duplicate key",
    ],
    [
      "args that are not JSON",
      () =>
        createApp()
          .uses("chat.postMessage")
          .command("/ackbox", () => [slack("chat.postMessage", { when: new Date() } as never)]),
      "not a plain object",
    ],
  ])("%s", async (_, build, reason) => {
    const { response, line } = await send(build(), await signed(commandForm(), FORM));
    expect(response.status).toBe(500);
    expect(line?.fields.verdict).toBe("refused");
    expect(String(line?.fields.reason)).toContain(reason);
    expect(await tally(env.DB)).toEqual(NOTHING);
  });
});

describe("answered inline, nothing written", () => {
  const options = {
    type: "block_suggestion",
    team: { id: "T0TEAM" },
    user: { id: "U0HUMAN" },
    action_id: "topic",
    block_id: "b",
    value: "bi",
  };

  it("an options request: its list in the ack body, no receipt, no rows", async () => {
    const app = createApp().options("topic", ({ payload }) => ({
      ack: { options: [{ text: { type: "plain_text", text: `${payload.value}lling` }, value: "billing" }] },
    }));
    const { response, text, line } = await send(app, await signed(interactionForm(options), FORM));
    expect(response.status).toBe(200);
    expect(JSON.parse(text)).toEqual({ options: [{ text: { type: "plain_text", text: "billing" }, value: "billing" }] });
    expect(line?.fields).toMatchObject({ verdict: "answered", handler: "options(topic)" });
    expect(await tally(env.DB)).toEqual(NOTHING);
  });

  it("but an options handler that returns intents records them, keyed by user, menu and text", async () => {
    const app = createApp()
      .uses("chat.postMessage")
      .options("topic", () => ({
        ack: { options: [] },
        intents: [slack("chat.postMessage", { channel: "U0HUMAN", text: "searched" })],
      }));
    const { response, line } = await send(app, await signed(interactionForm(options), FORM));
    expect(response.status).toBe(200);
    expect(line?.fields).toMatchObject({ verdict: "accepted", id: "interaction:T0TEAM:block_suggestion:U0HUMAN:topic:bi" });
    expect(await tally(env.DB)).toEqual({ receipts: 1, outbox: 1, attempts: 0 });
  });
});
