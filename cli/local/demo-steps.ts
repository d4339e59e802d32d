/**
 * The demo's custom steps (Workflow Builder), against the local stand-in,
 * which plays the workflow: it starts an execution (an id and its workflow
 * token, POST /_standin/workflow), the demo sends the ingress the
 * function_executed Slack would, and the stand-in answers the completion as
 * Slack does (one per execution; the token revoked then).
 *
 * - "custom step": the reference app's ackbox_echo,
 *   delivered twice (Slack's retry): exactly one functions.completeSuccess
 *   with outputs { text }, made with the execution's own workflow token.
 * - "custom step by click": the approval example's
 *   ackbox_approval asks its approver (chat.postMessage, with the workflow
 *   token) and waits; the demo clicks Approve on that message, with the
 *   execution's function_data: one functions.completeSuccess with
 *   { approved: true }, the request updated, and no completeError (the click's
 *   completion cancelled the step's deadline).
 */
import { needs } from "./demo-apps.ts";
import type { DemoScenario } from "./scenario.ts";
import { asSlackRetry, buttonClick, DEMO_TEAM, eventCallback, functionExecuted } from "./slack-payloads.ts";
import { type StandinCall, startStandinExecution } from "./slack-standin.ts";

/** A call made with the execution's own workflow token (the stand-in records whose token a call carried, never the token). */
const withWorkflowToken = (call: StandinCall, executionId: string) => call.token?.issuedTo.startsWith(`workflow ${executionId} `) === true;
const answeredOk = (call: StandinCall) => (call.answer.body as { ok?: boolean } | undefined)?.ok === true;

export function stepScenarios(standinUrl: string): DemoScenario[] {
  return [
    {
      name: "custom step",
      needs: [needs.echoStep],
      note: "function_executed ×2 (Slack's retry) → one functions.completeSuccess, with the workflow token",
      async send(ctx) {
        const { executionId, token } = await startStandinExecution(standinUrl, "ackbox_echo", DEMO_TEAM.teamId);
        const text = `echo ${ctx.run}`;
        const id = ctx.eventId("S", 0);
        const request = eventCallback(functionExecuted({ callbackId: "ackbox_echo", executionId, token, inputs: { text } }), id);
        const posted = [await ctx.post(request), await ctx.post(asSlackRetry(request, 1, "http_timeout"))];
        ctx.say("1 custom step run by a workflow (ackbox_echo) + Slack's retry", posted);
        return {
          posted,
          problems: ctx.statusProblems(posted),
          ids: [id, executionId],
          intended: [
            {
              label: `exactly one completion of ${executionId} with outputs {text}, with its workflow token`,
              count: 1,
              matches: (c: StandinCall) =>
                c.method === "functions.completeSuccess" &&
                c.params.function_execution_id === executionId &&
                c.params.outputs === JSON.stringify({ text }) &&
                withWorkflowToken(c, executionId) &&
                answeredOk(c),
            },
          ],
        };
      },
    },
    {
      name: "custom step by click",
      needs: [needs.approvalStep],
      note: "function_executed → the request posted; Approve → one functions.completeSuccess, the request updated",
      async send(ctx) {
        const { executionId, token } = await startStandinExecution(standinUrl, "ackbox_approval", DEMO_TEAM.teamId);
        const approver = `U0APPROVER${ctx.run}`;
        const inputs = { approver, request: `Ship ${ctx.run}` };
        const id = ctx.eventId("W", 0);
        const executed = await ctx.post(eventCallback(functionExecuted({ callbackId: "ackbox_approval", executionId, token, inputs }), id));
        const messageTs = ctx.nextTs();
        const triggerId = `${ctx.run}.7.trigger`;
        const clicked = await ctx.post(
          buttonClick({
            channel: approver,
            messageTs,
            triggerId,
            responseUrl: `${ctx.responseBase}/actions/${DEMO_TEAM.teamId}/${ctx.run}/7`,
            actionId: "approval_approve",
            step: { executionId, callbackId: "ackbox_approval", token, inputs },
          }),
        );
        const posted = [executed, clicked];
        ctx.say("1 custom step that waits (ackbox_approval), then its Approve click", posted);
        return {
          posted,
          problems: ctx.statusProblems(posted),
          ids: [id, executionId],
          intended: [
            {
              label: `the approval asked of ${approver}, with the workflow token`,
              count: 1,
              matches: (c: StandinCall) =>
                c.method === "chat.postMessage" && c.params.channel === approver && withWorkflowToken(c, executionId),
            },
            {
              label: `exactly one completion of ${executionId}, approved, from the click`,
              count: 1,
              matches: (c: StandinCall) =>
                c.method === "functions.completeSuccess" &&
                c.params.function_execution_id === executionId &&
                c.params.outputs === JSON.stringify({ approved: true, approver: "U0DEMOUSER" }) &&
                answeredOk(c),
            },
            {
              label: "the request updated with the decision",
              count: 1,
              matches: (c: StandinCall) => c.method === "chat.update" && c.params.ts === messageTs && c.params.channel === approver,
            },
            {
              label: `no deadline completion of ${executionId} (the click cancelled it)`,
              count: 0,
              matches: (c: StandinCall) => c.method === "functions.completeError" && c.params.function_execution_id === executionId,
            },
          ],
        };
      },
    },
  ];
}
