/**
 * A Workflow Builder custom step that waits for a person, written with the
 * app's door alone (shared/app/index.ts).
 *
 *   the step "Ask for approval" (ackbox_approval) → the request posted to the approver
 *                        with Approve and Deny buttons (chat.postMessage, with the
 *                        execution's workflow token); the step waits
 *   Approve or Deny      → the step completed with outputs { approved, approver }
 *                        (functions.completeSuccess, the execution's one completion)
 *                        and the request updated with the decision (chat.update, named:
 *                        the first click's, a second click changes nothing)
 *   nobody clicks        → after its wait (10 minutes) the engine completes the step with
 *                        an error, "Nobody answered within 10 minutes.", before its token dies
 *
 * Its buttons are registered before any catch-all action handler (the
 * reference app's): compose it first, `referenceApp(approvalApp(createApp()))`.
 */
import { type App, createApp, slack } from "../../shared/app/index.ts";

export const APPROVAL_STEP = "ackbox_approval";
export const APPROVE = "approval_approve";
export const DENY = "approval_deny";
/** How long the step waits for the approver before it is completed with an error. */
export const APPROVAL_WAIT_MINUTES = 10;

const requestBlocks = (request: string) => [
  { type: "section", text: { type: "mrkdwn", text: `*Approval asked*\n${request}` } },
  {
    type: "actions",
    block_id: "approval",
    elements: [
      { type: "button", action_id: APPROVE, text: { type: "plain_text", text: "Approve" }, style: "primary", value: "approve" },
      { type: "button", action_id: DENY, text: { type: "plain_text", text: "Deny" }, style: "danger", value: "deny" },
    ],
  },
];

/** The approval step and its buttons. */
export function approvalApp<V extends object>(app: App<V>) {
  return app
    .uses("chat.postMessage", "chat.update")
    .function(
      APPROVAL_STEP,
      {
        title: "Ask for approval",
        description: "Posts a request to an approver and waits for Approve or Deny",
        inputs: {
          approver: { type: "slack#/types/user_id", title: "Approver", required: true },
          request: { type: "string", title: "Request", required: true },
        },
        outputs: {
          approved: { type: "boolean", title: "Approved", required: true },
          approver: { type: "slack#/types/user_id", title: "Decided by", required: true },
        },
        waitMinutes: APPROVAL_WAIT_MINUTES,
      },
      // No completion yet: the step waits for a click (or its deadline).
      ({ inputs }) => [
        slack(
          "chat.postMessage",
          { channel: inputs.approver, text: `Approval asked: ${inputs.request}`, blocks: requestBlocks(inputs.request) },
          { key: "ask" },
        ),
      ],
    )
    .action(new RegExp(`^(${APPROVE}|${DENY})$`), ({ payload: action, body }, { step, userId }) => {
      // A click on an old message, outside any execution: nothing to complete.
      if (!step || !userId) return;
      const approved = action.action_id === APPROVE;
      const channel = body.container?.channel_id as string | undefined;
      const ts = body.container?.message_ts as string | undefined;
      const request = typeof step.inputs.request === "string" ? step.inputs.request : "the request";
      return [
        step.complete({ approved, approver: userId }),
        ...(channel && ts
          ? [
              slack(
                "chat.update",
                { channel, ts, text: `${approved ? "Approved" : "Denied"} by <@${userId}>: ${request}`, blocks: [] },
                // The first decision's update: a second click (the other button) records nothing, as its completion.
                { key: "decided", name: `approval.${step.executionId}.decided` },
              ),
            ]
          : []),
      ];
    });
}

/** The example on its own, for its tests. */
export const approval = approvalApp(createApp());
