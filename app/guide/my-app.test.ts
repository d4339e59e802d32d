/**
 * The guide's examples, run (docs/building-an-app.md, "Test it"). Handlers
 * are pure: call app.route with an input. Effects run through the consumer's
 * real delivery over local D1, with the network faked at the edge.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { deliverBatch, deliveryDeps } from "../../test/support/consumer.ts";
import { reply, useFakeSlack } from "../../test/support/fake-slack.ts";
import { allRows, insertRow, readRow, recordingQueue, resetTables } from "../../test/support/rows.ts";
import { myApp } from "./my-app.ts";

const context = { now: Date.UTC(2026, 10, 30), settings: { all: {}, public: {}, secrets: [] } };
const slack = useFakeSlack();
beforeEach(() => resetTables(env.DB));

describe("the guide's handlers", () => {
  it("/echo answers in the ack and posts the text", () => {
    const routing = myApp.route(
      {
        surface: "command",
        id: "command:T1:t1",
        teamId: "T1",
        command: {
          command: "/echo",
          text: "hi",
          teamId: "T1",
          channelId: "C1",
          userId: "U1",
          responseUrl: "https://hooks.slack.com/x",
          triggerId: "t1",
        },
      },
      context,
    );
    expect(routing).toMatchObject({
      action: "record",
      reply: { response_type: "ephemeral", text: "Echoing…" },
      effects: [{ key: "chat.postMessage", effect: "chat.postMessage", payload: { channel: "C1", text: "hi" } }],
    });
  });

  it("the pin_it message shortcut pins the message (a Slack method the reference app never calls)", () => {
    const payload = { type: "message_action", callback_id: "pin_it", trigger_id: "t2", channel: { id: "C1" }, message: { ts: "1.1" } };
    expect(
      myApp.route({ surface: "interaction", id: "interaction:T1:t2", teamId: "T1", type: "message_action", payload }, context),
    ).toMatchObject({
      action: "record",
      effects: [{ effect: "pins.add", payload: { channel: "C1", timestamp: "1.1" } }],
    });
  });
});

describe("the guide's custom effect with a follow-up", () => {
  it("translates with the row's idempotency key, then posts the translation in the thread", async () => {
    slack.current.script("https://translate.example/v1", reply.ok({ translation: "bonjour" }));
    slack.current.script("chat.postMessage", reply.ok({ channel: "C1", ts: "1.2" }));
    const id = await insertRow(env.DB, {
      status: "pending",
      effect: "translate",
      payload: { channel: "C1", ts: "1.1", text: "hello" },
      key: "Ev1:translate",
    });
    const queue = recordingQueue();
    const { deps } = deliveryDeps(context.now, { effects: myApp.effects, queue });

    await deliverBatch(deps, [id]);
    expect(slack.current.callsTo("https://translate.example/v1")[0]?.headers["idempotency-key"]).toBe("Ev1:translate");
    expect(await readRow(env.DB, id)).toMatchObject({ status: "done", result: JSON.stringify({ translation: "bonjour" }) });

    await deliverBatch(deps, queue.sent); // the follow-up, recorded with the completion
    const [, followUp] = await allRows(env.DB);
    expect(followUp).toMatchObject({ idempotency_key: "Ev1:translate>chat.postMessage", status: "done" });
    expect(slack.current.callsTo("chat.postMessage")[0]?.params).toEqual({ channel: "C1", thread_ts: "1.1", text: "bonjour" });
  });
});
