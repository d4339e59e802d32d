/**
 * The approval step, tested on the app's test kit (shared/app/testing.ts)
 * alone: its execution on Slack's function_executed, its buttons on clicks
 * that carry the execution's function_data, its completion against a fake
 * Slack that answers as Slack does when the step was completed already or
 * refuses the outputs, and its composition before the reference app.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { createApp, manifestOf } from "../../shared/app/index.ts";
import {
  buttonClick,
  fakeSlack,
  functionExecuted,
  newExecutionId,
  runChain,
  runEffect,
  runHandler,
  slackError,
  wholePath,
} from "../../shared/app/testing.ts";
import { referenceApp } from "../reference/app.ts";
import { APPROVAL_STEP, APPROVAL_WAIT_MINUTES, APPROVE, approval, approvalApp, DENY } from "./app.ts";

/** When the kit's events happened (their event_time), and when the ingress receives them. */
const EVENT_TIME = 1_764_504_000_000;
const NOW = EVENT_TIME + 2_000;
const inputs = { approver: "U0BOSS", request: "Deploy v2 on Friday" };

describe("the approval step", () => {
  it("asks the approver with Approve and Deny buttons, and waits: no completion yet, a deadline instead", () => {
    const executionId = newExecutionId();
    const run = runHandler(approval, functionExecuted({ callbackId: APPROVAL_STEP, inputs, executionId }), { now: NOW });
    expect(run.outcome).toBe("recorded");
    expect(run.handler).toBe(`function(${APPROVAL_STEP})`);
    const [ask, deadline, ...rest] = run.intents;
    expect(rest).toEqual([]);
    expect(ask).toMatchObject({
      key: "ask",
      effect: "chat.postMessage",
      args: { channel: "U0BOSS", text: "Approval asked: Deploy v2 on Friday" },
    });
    const blocks = (ask?.args.blocks ?? []) as { elements?: { action_id: string }[] }[];
    const buttons = blocks[1]?.elements?.map((e) => e.action_id);
    expect(buttons).toEqual([APPROVE, DENY]);
    // Due its wait after the workflow ran the step (the event's time): before its 15-minute token dies.
    expect(deadline).toMatchObject({
      effect: "functions.completeError",
      name: `step.${executionId}.deadline`,
      args: { function_execution_id: executionId, error: `Nobody answered within ${APPROVAL_WAIT_MINUTES} minutes.` },
      at: EVENT_TIME + APPROVAL_WAIT_MINUTES * 60_000,
    });
    // The workflow token is the engine's: nothing the handler records carries it.
    expect(JSON.stringify(run)).not.toContain("xwfp-");
  });

  it("completes the execution on Approve, with its outputs, updates the request, and cancels the deadline in the same batch", () => {
    const executionId = newExecutionId();
    const click = buttonClick({
      actionId: APPROVE,
      user: "U0BOSS",
      channel: "D0BOSS",
      messageTs: "1764504000.000100",
      step: { executionId, callbackId: APPROVAL_STEP, inputs },
    });
    const run = runHandler(approval, click, { now: NOW });
    expect(run).toMatchObject({
      outcome: "recorded",
      intents: [
        {
          effect: "functions.completeSuccess",
          name: `step.${executionId}`,
          args: { function_execution_id: executionId, outputs: { approved: true, approver: "U0BOSS" } },
        },
        {
          effect: "chat.update",
          name: `approval.${executionId}.decided`,
          args: { channel: "D0BOSS", ts: "1764504000.000100", text: "Approved by <@U0BOSS>: Deploy v2 on Friday" },
        },
      ],
      cancels: [`step.${executionId}.deadline`],
    });
  });

  it("Deny completes it too, with approved false; both buttons name the same completion, so a second click records nothing more", () => {
    const step = { executionId: newExecutionId(), callbackId: APPROVAL_STEP, inputs };
    const approve = runHandler(approval, buttonClick({ actionId: APPROVE, user: "U0BOSS", step }), { now: NOW });
    const deny = runHandler(approval, buttonClick({ actionId: DENY, user: "U0BOSS", step }), { now: NOW });
    expect(deny.intents[0]).toMatchObject({ args: { outputs: { approved: false, approver: "U0BOSS" } } });
    expect(deny.intents.map((i) => i.name)).toEqual(approve.intents.map((i) => i.name));
  });

  it("ignores a click outside any execution (an old message): nothing to complete", () => {
    const run = runHandler(approval, buttonClick({ actionId: APPROVE }), { now: NOW });
    expect(run).toMatchObject({ outcome: "recorded", intents: [] });
  });

  it("a completion Slack answers 'no longer running' (the deadline came first, or another click) is done, not a failure", async () => {
    const step = { executionId: newExecutionId(), callbackId: APPROVAL_STEP, inputs };
    const [completion] = runHandler(approval, buttonClick({ actionId: APPROVE, user: "U0BOSS", step }), { now: NOW }).intents;
    for (const answer of ["execution_not_in_running_state", "function_execution_not_found"]) {
      const slack = fakeSlack().answer("functions.completeSuccess", slackError(answer));
      const run = await runEffect(approval, completion as never, { slack });
      expect(run).toEqual({ outcome: "done", result: { already: answer }, followUps: [] });
    }
  });

  it("outputs Slack refuses (parameter_validation_failed) park with the outputs sent, after completing the step with an error", async () => {
    const step = { executionId: newExecutionId(), callbackId: APPROVAL_STEP, inputs };
    const [completion] = runHandler(approval, buttonClick({ actionId: APPROVE, user: "U0BOSS", step }), { now: NOW }).intents;
    const slack = fakeSlack().answer("functions.completeSuccess", slackError("parameter_validation_failed"));
    const [run] = await runChain(approval, [completion as never], { slack });
    expect(run?.status).toBe("dead");
    expect(run?.attempts).toHaveLength(1);
    expect(run?.attempts[0]).toMatchObject({
      outcome: "park",
      error: expect.stringContaining('parameter_validation_failed; outputs sent: {"approved":true,"approver":"U0BOSS"}'),
    });
    expect(slack.calls.map((c) => [c.method, c.args.function_execution_id])).toEqual([
      ["functions.completeSuccess", step.executionId],
      ["functions.completeError", step.executionId],
    ]);
  });

  it("composes before the reference app, whose catch-all buttons would otherwise take its clicks", () => {
    const app = referenceApp(approvalApp(createApp()));
    const step = { executionId: newExecutionId(), callbackId: APPROVAL_STEP, inputs };
    expect(runHandler(app, buttonClick({ actionId: APPROVE, user: "U0BOSS", step }), { now: NOW }).handler).toBe(
      `action(/^(${APPROVE}|${DENY})$/)`,
    );
    const { manifest, warnings } = manifestOf(app, { url: "https://ackbox.example.test" });
    expect(warnings).toEqual([]);
    expect(Object.keys(manifest.functions as object)).toEqual([APPROVAL_STEP, "ackbox_echo"]);
  });
});

describe("the approval step, the whole path (both Workers, local D1, a fake Slack)", () => {
  it("asks, waits, and is completed once from the click; the update goes out too, and no deadline fires", async () => {
    const path = wholePath(approval, env);
    const executionId = newExecutionId();
    const asked = await path.event({
      type: "function_executed",
      function: { callback_id: APPROVAL_STEP },
      inputs,
      function_execution_id: executionId,
      workflow_execution_id: "Wx0WHOLE",
      bot_access_token: "xwfp-whole-path-0123456789",
    });
    expect(asked.response.status).toBe(200);
    expect(asked.calls).toMatchObject([
      { method: "chat.postMessage", params: { channel: "U0BOSS", text: "Approval asked: Deploy v2 on Friday" } },
    ]);
    const click = {
      type: "block_actions",
      user: { id: "U0BOSS" },
      container: { type: "message", message_ts: "1764504000.000100", channel_id: "D0BOSS" },
      actions: [{ action_id: APPROVE, block_id: "approval", type: "button" }],
      function_data: { execution_id: executionId, function: { callback_id: APPROVAL_STEP }, inputs },
      bot_access_token: "xwfp-whole-path-0123456789",
    };
    const clicked = await path.interaction(click);
    expect(clicked.response.status).toBe(200);
    expect(clicked.calls.map((c) => c.method).sort()).toEqual(["chat.update", "functions.completeSuccess"]);
    expect(clicked.calls.find((c) => c.method === "functions.completeSuccess")?.params).toEqual({
      function_execution_id: executionId,
      outputs: { approved: true, approver: "U0BOSS" },
    });
    // The second button after the first: the same completion and the same update, both named: nothing more.
    const again = await path.interaction({ ...click, actions: [{ action_id: DENY, block_id: "approval", type: "button" }] });
    expect(again.calls).toEqual([]);
  });
});
