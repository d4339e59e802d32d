/**
 * The reference app's assistant, tested with the kit alone (ackbox/testing): what each assistant input asks for
 * (runHandler), and a question answered through both Workers, a fake model and Slack's side of streams
 * (wholePath): one message, streamed, complete.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { createApp } from "../../shared/app/index.ts";
import {
  assistantMessage,
  assistantThreadStarted,
  fakeModel,
  modelTurn,
  runHandler,
  TEST_DM,
  wholePath,
} from "../../shared/app/testing.ts";
import { referenceApp } from "./app.ts";

const app = referenceApp(createApp());
const withModel = { settings: { MODEL_URL: "https://model.example/v1" } };

describe("the reference app's assistant", () => {
  it("offers its prompts when a thread starts, and answers a question with the model", () => {
    const started = runHandler(app, assistantThreadStarted(), withModel);
    expect(started.intents.map((i) => i.effect)).toEqual(["assistant.threads.setSuggestedPrompts"]);
    const asked = runHandler(app, assistantMessage({ text: "What can you do?" }), withModel);
    expect(asked.intents).toMatchObject([{ effect: "assistant_answer", args: { channel: TEST_DM, user: "U0HUMAN" } }]);
  });

  it("without a model (MODEL_URL unset) leaves assistant threads alone: nothing recorded", () => {
    expect(runHandler(app, assistantThreadStarted()).outcome).toBe("ignored");
    expect(runHandler(app, assistantMessage({ text: "Hello?" })).outcome).toBe("ignored");
  });

  it("streams the model's answer into the thread through both Workers: one message, complete", async () => {
    const model = fakeModel().always(modelTurn.answer("I answer questions, once and completely.", { chunks: 8 }));
    const path = wholePath(app, env, { model });
    const threadTs = "1764504000.000001";
    const { response } = await path.payload(assistantMessage({ text: "What can you do?", threadTs }));
    expect(response.status).toBe(200);
    const answers = path.streams.thread(TEST_DM, threadTs).messages.filter((m) => m.from === "app");
    expect(answers.map((m) => [m.text, m.streaming])).toEqual([["I answer questions, once and completely.", false]]);
    expect(model.calls).toHaveLength(1);
  });
});
