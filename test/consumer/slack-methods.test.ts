/**
 * The Slack-semantics table (shared/slack/methods.ts), held to what the
 * consumer does with each class of outcome, through its real claim →
 * perform → fenced finish, against a fake Slack answering in Slack's shapes.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { deliverBatch } from "../../shared/delivery/deliver.ts";
import { SLACK_METHODS } from "../../shared/slack/methods.ts";
import { deliveryDeps } from "../support/consumer.ts";
import { type Answer, reply, useFakeSlack } from "../support/fake-slack.ts";
import { insertRow, readRow, resetTables } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";

const slack = useFakeSlack();
beforeEach(() => resetTables(env.DB));

const cases: [string, string, Answer, "done" | "pending" | "dead", string | null][] = [
  // success, and success that had already happened
  [
    "chat.postMessage",
    "ok",
    reply.ok({ channel: "C1", ts: "1.2", message: { text: "x" } }),
    "done",
    JSON.stringify({ channel: "C1", ts: "1.2" }),
  ],
  ["views.publish", "ok", reply.ok({ view: { id: "V1", blocks: [] } }), "done", JSON.stringify({ view: { id: "V1" } })],
  ["reactions.add", "already_reacted", reply.error("already_reacted"), "done", JSON.stringify({ already: "already_reacted" })],
  ["pins.add", "already_pinned", reply.error("already_pinned"), "done", JSON.stringify({ already: "already_pinned" })],
  ["chat.delete", "message_not_found", reply.error("message_not_found"), "done", JSON.stringify({ already: "message_not_found" })],
  [
    "conversations.join",
    "already_in_channel",
    reply.error("already_in_channel"),
    "done",
    JSON.stringify({ already: "already_in_channel" }),
  ],
  [
    "functions.completeSuccess",
    "execution_not_in_running_state",
    reply.error("execution_not_in_running_state"),
    "done",
    JSON.stringify({ already: "execution_not_in_running_state" }),
  ],
  // fatal: a retry would get the same answer
  ["chat.postMessage", "channel_not_found", reply.error("channel_not_found"), "dead", null],
  ["chat.update", "message_not_found (success only for a delete)", reply.error("message_not_found"), "dead", null],
  ["views.publish", "invalid_blocks", reply.error("invalid_blocks"), "dead", null],
  // retryable
  ["reactions.add", "internal_error", reply.error("internal_error"), "pending", null],
  ["chat.update", "HTTP 503", reply.status(503), "pending", null],
  ["views.publish", "HTTP 429", reply.rateLimited(7), "pending", null],
  // a method the table does not list: the safe default
  ["bots.info", "ok (unknown method)", reply.ok({ bot: { id: "B1" } }), "done", JSON.stringify({ bot: { id: "B1" } })],
  ["bots.info", "an ok:false (unknown method)", reply.error("bot_not_found"), "dead", null],
  ["bots.info", "HTTP 500 (unknown method)", reply.status(500), "pending", null],
];

describe("each class of outcome → done / retry / dead", () => {
  it.each(cases)("%s answering %s → %s", async (method, _, answer, status, result) => {
    slack.current.script(method, answer);
    const id = await insertRow(env.DB, { status: "pending", effect: method, payload: { channel: "C1", ts: "1.2" } });
    const { deps } = deliveryDeps(NOW);
    await deliverBatch(deps, [id]);
    const row = await readRow(env.DB, id);
    expect(row.status).toBe(status);
    if (result !== null) expect(row.result).toBe(result);
    expect(slack.current.callsTo(method)).toHaveLength(1);
  });

  it("sends the args whole: blocks, metadata and flags reach Slack as given", async () => {
    slack.current.script("chat.postMessage", reply.ok({ ts: "1.3" }));
    const args = {
      channel: "C1",
      text: "t",
      blocks: [{ type: "divider" }],
      metadata: { event_type: "x", event_payload: { a: 1 } },
      unfurl_links: false,
    };
    const id = await insertRow(env.DB, { status: "pending", effect: "chat.postMessage", payload: args });
    await deliverBatch(deliveryDeps(NOW).deps, [id]);
    expect(slack.current.callsTo("chat.postMessage")[0]?.params).toEqual({
      channel: "C1",
      text: "t",
      blocks: JSON.stringify(args.blocks),
      metadata: JSON.stringify(args.metadata),
      unfurl_links: "false",
    });
  });
});

describe("the table's shape", () => {
  it("says for every method whether a repeat is harmless, and lists scopes as Slack names them", () => {
    for (const [method, semantics] of Object.entries(SLACK_METHODS)) {
      expect(["harmless", "visible"], method).toContain(semantics.repeat);
      for (const scope of semantics.scopes) expect(scope, method).toMatch(/^[a-z.]+:[a-z.]+$/);
    }
  });
});
