/**
 * The guide's examples, run (docs/building-an-app.md, "Test it"), on the
 * app's test kit alone (shared/app/testing.ts): handlers on Slack's
 * payloads, the custom effect and its follow-up against a fake Slack and a
 * fake translation service.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import {
  assistantMessage,
  fakeModel,
  fakeService,
  fakeSlack,
  functionExecuted,
  httpStatus,
  interaction,
  message,
  modelTurn,
  runChain,
  runHandler,
  slashCommand,
  TEST_DM,
  wholePath,
} from "../../shared/app/testing.ts";
import { myApp } from "./my-app.ts";

describe("the guide's handlers", () => {
  it("/echo answers in the ack and posts the text", () => {
    const run = runHandler(myApp, slashCommand({ command: "/echo", text: "hi", channel: "C1" }));
    expect(run).toMatchObject({
      outcome: "recorded",
      ack: { response_type: "ephemeral", text: "Echoing…" },
      intents: [{ key: "chat.postMessage", effect: "chat.postMessage", args: { channel: "C1", text: "hi" } }],
    });
  });

  it("the pin_it message shortcut pins the message (a Slack method the reference app never calls)", () => {
    const shortcut = interaction({
      type: "message_action",
      callback_id: "pin_it",
      trigger_id: "t2",
      team: { id: "T1" },
      channel: { id: "C1" },
      message: { ts: "1.1" },
    });
    expect(runHandler(myApp, shortcut)).toMatchObject({
      outcome: "recorded",
      intents: [{ effect: "pins.add", args: { channel: "C1", timestamp: "1.1" } }],
    });
  });
});

describe("the guide's custom effect with a follow-up", () => {
  it("translates with the row's idempotency key, then posts the translation in the thread", async () => {
    const slack = fakeSlack();
    const translator = fakeService("https://translate.example").answer(httpStatus(200, { translation: "bonjour" }));
    const { intents } = runHandler(myApp, message({ text: "translate: hello", channel: "C1", ts: "1.1" }));

    const steps = await runChain(myApp, intents, { slack, services: [translator], keyPrefix: "Ev1" });
    expect(steps.map((s) => [s.key, s.status])).toEqual([
      ["Ev1:translate", "done"],
      ["Ev1:translate>chat.postMessage", "done"],
    ]);
    expect(translator.calls[0]?.headers["idempotency-key"]).toBe("Ev1:translate");
    expect(slack.callsTo("chat.postMessage")[0]?.args).toEqual({ channel: "C1", thread_ts: "1.1", text: "bonjour" });
  });
});

describe("the guide's custom step", () => {
  it("completes its execution in its own step, with its input as its output: one completion, named after the execution", () => {
    const run = runHandler(myApp, functionExecuted({ callbackId: "echo_step", inputs: { text: "hi" }, executionId: "Fx0GUIDE" }));
    expect(run).toMatchObject({
      outcome: "recorded",
      handler: "function(echo_step)",
      intents: [
        {
          effect: "functions.completeSuccess",
          name: "step.Fx0GUIDE",
          args: { function_execution_id: "Fx0GUIDE", outputs: { text: "hi" } },
        },
      ],
    });
  });
});

describe("the guide's assistant", () => {
  it("streams the model's answer into the question's thread: one message, complete, asked as the app says", async () => {
    const model = fakeModel().always(modelTurn.answer("The assistant, and faster bursts."));
    const path = wholePath(myApp, env, { model });
    await path.payload(assistantMessage({ text: "What did we ship this week?", threadTs: "1764504000.000001" }));

    const [answer, ...more] = path.streams.thread(TEST_DM, "1764504000.000001").messages.filter((m) => m.from === "app");
    expect(more).toEqual([]);
    expect([answer?.text, answer?.streaming]).toEqual(["The assistant, and faster bursts.", false]);
    expect(model.calls[0]?.body?.messages).toContainEqual({ role: "user", content: "What did we ship this week?" });
  });
});
