/**
 * A custom step's input, routed (shared/app/app.ts, shared/app/steps.ts, shared/steps/execution.ts): the handler
 * gets the step and never its workflow token; what the routing adds (the waiting step's deadline, the
 * completion's cancel of it, the view submission's "clear"); and what is refused or ignored.
 */
import { describe, expect, it } from "vitest";
import { createApp } from "../../shared/app/app.ts";
import { slack } from "../../shared/app/intents.ts";
import { NO_APP_SETTINGS } from "../../shared/app/settings.ts";
import { factOf } from "../../shared/slack/facts.ts";
import type { InteractionInput, JsonObject, RecordableInput } from "../../shared/slack/inputs.ts";
import { MAX_WAIT_MINUTES, stepOf } from "../../shared/steps/execution.ts";

const NOW = 1_764_504_100_000;
const EVENT_TIME = 1_764_504_000; // seconds: 100 s before NOW
const TOKEN = "xwfp-unit-0123456789";
const context = { now: NOW, settings: NO_APP_SETTINGS };

const executed = (callbackId: string, over: JsonObject = {}, eventTime: number | null = EVENT_TIME): RecordableInput => ({
  surface: "event",
  id: "Ev0UNIT",
  teamId: "T1",
  eventTime: eventTime ?? undefined,
  event: {
    type: "function_executed",
    function: { callback_id: callbackId },
    inputs: { text: "hi" },
    function_execution_id: "Fx0UNIT",
    workflow_execution_id: "Wx0UNIT",
    bot_access_token: TOKEN,
    ...over,
  },
});

const inStep = (type: string, payload: JsonObject): InteractionInput => ({
  surface: "interaction",
  id: `interaction:T1:${type}`,
  teamId: "T1",
  type,
  payload: {
    type,
    team: { id: "T1" },
    user: { id: "U1" },
    trigger_id: "1.2.3",
    function_data: { execution_id: "Fx0UNIT", function: { callback_id: "wait" }, inputs: { text: "hi" } },
    bot_access_token: TOKEN,
    ...payload,
  },
});

const recorded = (routing: ReturnType<ReturnType<typeof createApp>["route"]>) => {
  if (routing.action !== "record") throw new Error(`not recorded: ${JSON.stringify(routing)}`);
  return routing;
};

describe("a step's handler", () => {
  it("gets the step (its id, inputs, complete and fail) and its typed inputs, never the workflow token", () => {
    const seen: unknown[] = [];
    const app = createApp()
      .function("echo", { title: "Echo", inputs: { text: { type: "string", required: true } } }, (input, ctx) => {
        seen.push(input, ctx.step);
        return [ctx.step.complete({ text: input.inputs.text })];
      })
      .action("go", (input, ctx) => {
        seen.push(input, ctx.step?.executionId);
        return undefined;
      });
    const routing = recorded(app.route(executed("echo"), context));
    expect(routing.effects).toEqual([
      {
        key: "step_complete",
        effect: "functions.completeSuccess",
        payload: { function_execution_id: "Fx0UNIT", outputs: { text: "hi" } },
        name: "step.Fx0UNIT",
      },
    ]);
    app.route(inStep("block_actions", { actions: [{ action_id: "go", block_id: "b" }] }), context);
    expect(seen[1]).toMatchObject({ callbackId: "echo", executionId: "Fx0UNIT", workflowExecutionId: "Wx0UNIT", inputs: { text: "hi" } });
    expect(seen[3]).toBe("Fx0UNIT");
    expect(JSON.stringify(seen)).not.toContain(TOKEN);
  });

  it("fail(message) is the execution's one completion too: the same name as complete()", () => {
    const app = createApp().function("f", { title: "F" }, (_, { step }) => [step.fail("no, sorry")]);
    expect(recorded(app.route(executed("f"), context)).effects).toEqual([
      {
        key: "step_complete",
        effect: "functions.completeError",
        payload: { function_execution_id: "Fx0UNIT", error: "no, sorry" },
        name: "step.Fx0UNIT",
      },
    ]);
  });
});

describe("a step that returns no completion waits for a user", () => {
  const app = createApp()
    .uses("chat.postMessage")
    .function("wait", { title: "Wait", waitMinutes: 4 }, () => [
      slack("chat.postMessage", { channel: "C1", text: "click" }, { key: "ask" }),
    ])
    .function("idle", { title: "Idle" }, () => undefined)
    .function("raw", { title: "Raw" }, ({ payload }) => [
      slack("functions.completeSuccess", { function_execution_id: payload.function_execution_id, outputs: {} }),
    ])
    .action("done", (_, { step }) => (step ? [step.complete({})] : undefined));

  it("its deadline is a timer of its own name, due its wait after the token was issued (the event's time)", () => {
    const deadline = recorded(app.route(executed("wait"), context)).effects[1];
    expect(deadline).toEqual({
      key: "step_deadline",
      effect: "functions.completeError",
      payload: { function_execution_id: "Fx0UNIT", error: "Nobody answered within 4 minutes." },
      name: "step.Fx0UNIT.deadline",
      at: EVENT_TIME * 1000 + 4 * 60_000,
    });
  });

  it("with no intents at all it waits too, MAX_WAIT_MINUTES by default; Slack's late retry keeps the first time (a past deadline is due at once)", () => {
    const late = recorded(app.route(executed("idle"), { ...context, now: EVENT_TIME * 1000 + 20 * 60_000 })).effects;
    expect(late).toMatchObject([{ name: "step.Fx0UNIT.deadline", at: EVENT_TIME * 1000 + MAX_WAIT_MINUTES * 60_000 }]);
    // No event time (an older envelope): the receipt's.
    expect(recorded(app.route(executed("idle", {}, null), context)).effects).toMatchObject([{ at: NOW + MAX_WAIT_MINUTES * 60_000 }]);
  });

  it("a completion the app wrote itself for the execution needs no deadline", () => {
    expect(recorded(app.route(executed("raw"), context)).effects.map((e) => e.effect)).toEqual(["functions.completeSuccess"]);
  });

  it("an input of the execution that completes it cancels the deadline in its batch; one that does not, cancels nothing", () => {
    const done = recorded(app.route(inStep("block_actions", { actions: [{ action_id: "done", block_id: "b" }] }), context));
    expect(done.cancels).toEqual(["step.Fx0UNIT.deadline"]);
    const outside = recorded(
      app.route(
        {
          ...inStep("block_actions", { actions: [{ action_id: "done", block_id: "b" }] }),
          payload: { type: "block_actions", team: { id: "T1" }, trigger_id: "1.2", actions: [{ action_id: "done", block_id: "b" }] },
        },
        context,
      ),
    );
    expect(outside.cancels).toBeUndefined();
    expect(outside.effects).toEqual([]);
  });

  it("waitMinutes is a whole number from 1 to 12: the token lives 15 minutes", () => {
    for (const waitMinutes of [0, 13, 2.5])
      expect(() => createApp().function("w", { title: "W", waitMinutes }, () => undefined)).toThrow(
        /waitMinutes must be a whole number from 1 to 12/,
      );
    expect(() => createApp().function("w", { title: "W", waitMinutes: 12 }, () => undefined)).not.toThrow();
  });
});

describe("a view submission inside a step", () => {
  const app = createApp()
    .uses("chat.postMessage")
    .view("quiet", () => [slack("chat.postMessage", { channel: "C1", text: "x" })])
    .view("checked", () => ({ ack: { response_action: "errors", errors: { b: "say more" } } }))
    .view("pushy", () => ({ ack: { response_action: "update", view: { type: "modal" } } }));
  const submitted = (callbackId: string) => inStep("view_submission", { view: { id: "V1", callback_id: callbackId, hash: "h" } });

  it("answers response_action clear (Slack requires it), or the handler's errors, which keep the modal open", () => {
    expect(recorded(app.route(submitted("quiet"), context)).reply).toEqual({ response_action: "clear" });
    expect(recorded(app.route(submitted("checked"), context)).reply).toEqual({ response_action: "errors", errors: { b: "say more" } });
  });

  it("refuses any other answer, naming the rule", () => {
    expect(app.route(submitted("pushy"), context)).toMatchObject({
      action: "refuse",
      reason: expect.stringContaining('a view submission inside a custom step answers response_action "clear"'),
    });
  });
});

describe("what is not a usable step input", () => {
  it("a function_executed whose execution id is not an id is ignored, nothing recorded", () => {
    const app = createApp().function("echo", { title: "Echo" }, (_, { step }) => [step.complete({})]);
    expect(app.route(executed("echo", { function_execution_id: "not an id!" }), context)).toMatchObject({ action: "ignore" });
    expect(stepOf(executed("echo", { function_execution_id: undefined }), NOW)).toBeUndefined();
  });

  it("an interaction without function_data belongs to no execution; function_executed's fact is its execution", () => {
    expect(stepOf({ ...inStep("block_actions", {}), payload: { type: "block_actions" } }, NOW)).toBeUndefined();
    expect(factOf(executed("echo"))).toEqual({ fact: "function_executed:T1:Fx0UNIT" });
  });
});
