/**
 * Custom steps for the app's handlers: app.function's typed inputs and outputs,
 * the `step` a handler of an execution gets (its id, its inputs, `complete`,
 * `fail`), and what the routing adds to a step's input (shared/app/app.ts).
 *
 *   app.function("ackbox_echo", { title: "Echo", inputs: { text: { type: "string", required: true } },
 *                                 outputs: { text: { type: "string" } } },
 *     ({ inputs }, { step }) => [step.complete({ text: inputs.text })]);
 *
 * complete(outputs) and fail(message) are intents (functions.completeSuccess /
 * functions.completeError) named after the execution (completionName): exactly
 * one completion per execution, whichever handler — the step's own, or an
 * action or view handler of the same execution — asks first, however often.
 * A step's handler that returns no completion waits for a user: the routing
 * adds a deadline that completes it with an error before its workflow token
 * dies, and the completion, when it comes, cancels the deadline in the same
 * batch.
 */
import type { FunctionExecutedEvent } from "@slack/types";
import type { IntendedEffect } from "../outbox/model.ts";
import type { JsonObject, RecordableInput } from "../slack/inputs.ts";
import { COMPLETION_METHODS, completionName, deadlineName, MAX_WAIT_MINUTES, type StepInput } from "../steps/execution.ts";
import { type Intent, slack } from "./intents.ts";

/** One input or output of a custom step (Slack's manifest `functions`): a Slack type such as "string" or "slack#/types/user_id". */
export interface FunctionParameter {
  readonly type: string;
  readonly title?: string;
  readonly description?: string;
  readonly required?: boolean;
}

/** A Workflow Builder custom step (a function in Slack's manifest), keyed in the manifest by its callback_id. */
export interface FunctionDefinition {
  readonly title: string;
  readonly description?: string;
  readonly inputs?: Readonly<Record<string, FunctionParameter>>;
  readonly outputs?: Readonly<Record<string, FunctionParameter>>;
  /**
   * How long the step may wait for a user (an action or view handler of its execution completes it), in minutes,
   * before it is completed with an error ("nobody answered within N minutes"): 1 to MAX_WAIT_MINUTES (12), the
   * default. Its workflow token lives 15 minutes; the rest is the deadline's room to be performed.
   */
  readonly waitMinutes?: number;
}

/** The value a parameter of Slack type `T` arrives as. */
type ValueOf<T extends string> = T extends
  | "string"
  | "slack#/types/user_id"
  | "slack#/types/channel_id"
  | "slack#/types/usergroup_id"
  | "slack#/types/date"
  | "slack#/types/message_ts"
  ? string
  : T extends "number" | "integer" | "slack#/types/timestamp"
    ? number
    : T extends "boolean"
      ? boolean
      : T extends "array"
        ? readonly unknown[]
        : unknown;

type Parameters_ = Readonly<Record<string, FunctionParameter>>;
type RequiredKeys<P extends Parameters_> = { [K in keyof P]: P[K]["required"] extends true ? K : never }[keyof P];

/** A step's parameters as values: the required ones present, the others optional. */
export type ValuesOf<P extends Parameters_ | undefined> = P extends Parameters_
  ? { readonly [K in RequiredKeys<P>]: ValueOf<P[K]["type"]> } & {
      readonly [K in Exclude<keyof P, RequiredKeys<P>>]?: ValueOf<P[K]["type"]>;
    }
  : JsonObject;

/** The custom step an input belongs to, as its handler sees it. */
export interface Step<O = JsonObject> {
  readonly callbackId: string;
  readonly executionId: string;
  readonly workflowExecutionId: string | undefined;
  /** The step's inputs, as Slack sent them. */
  readonly inputs: JsonObject;
  /** functions.completeSuccess with these outputs: the execution's one completion (its row is named completionName). */
  complete(outputs: O): Intent;
  /** functions.completeError with this message, shown to the user: the execution's one completion, as complete(). */
  fail(error: string): Intent;
}

/** function_executed as a step's handler is given it: without its workflow token, which the engine keeps. */
export type FunctionExecutedPayload = Omit<FunctionExecutedEvent, "bot_access_token">;

/** The step of `input` for its handler. */
export function stepContextOf<O = JsonObject>(step: StepInput): Step<O> {
  const name = completionName(step.executionId);
  return {
    callbackId: step.callbackId,
    executionId: step.executionId,
    workflowExecutionId: step.workflowExecutionId,
    inputs: step.inputs,
    complete: (outputs) =>
      slack(
        "functions.completeSuccess",
        { function_execution_id: step.executionId, outputs: outputs as JsonObject },
        { key: "step_complete", name },
      ),
    fail: (error) => slack("functions.completeError", { function_execution_id: step.executionId, error }, { key: "step_complete", name }),
  };
}

/** The methods a step's completion calls: declared for every app with a custom step. */
export const STEP_METHODS = ["functions.completeSuccess", "functions.completeError"] as const;

/** What the routing of a step's input becomes, or why it is refused. */
export type StepRouting =
  | { readonly effects: readonly IntendedEffect[]; readonly cancels: readonly string[]; readonly reply: JsonObject | undefined }
  | { readonly refuse: string };

/**
 * A step's input, routed (app.route, after its handler's intents were checked):
 * - function_executed with no completion among its intents waits for a user: its deadline is added, a timed row
 *   (named deadlineName) due `waitMinutes` after the token was issued, that completes the execution with an error;
 * - an input of the execution whose intents complete it cancels that deadline in the same batch (nothing to cancel
 *   when it completed in its own step; too late once the deadline is being performed, and then Slack keeps the
 *   first completion and answers the other "no longer running", which is success);
 * - a view submission inside a step answers `response_action: "clear"` (Slack requires it); a handler may answer
 *   "errors" instead, to keep the modal open; any other answer is refused.
 */
export function stepRouting(
  step: StepInput,
  input: RecordableInput,
  waitMinutes: number | undefined,
  checked: { readonly effects: readonly IntendedEffect[]; readonly cancels: readonly string[] },
  ack: JsonObject | undefined,
): StepRouting {
  let reply = ack;
  if (input.surface === "interaction" && input.type === "view_submission") {
    const action = ack?.response_action;
    if (ack === undefined) reply = { response_action: "clear" };
    else if (action !== "clear" && action !== "errors") {
      return {
        refuse: `a view submission inside a custom step answers response_action "clear" (Slack requires it), or "errors" to keep the modal open; got ${JSON.stringify(action ?? null)}`,
      };
    }
  }
  // Its completion: the one complete()/fail() make, or one the app wrote itself for this execution.
  const completes = checked.effects.some(
    (e) =>
      e.name === completionName(step.executionId) ||
      (COMPLETION_METHODS.has(e.effect) && (e.payload as JsonObject).function_execution_id === step.executionId),
  );
  if (step.kind === "executed") {
    if (completes) return { effects: checked.effects, cancels: checked.cancels, reply };
    return { effects: [...checked.effects, deadlineOf(step, waitMinutes ?? MAX_WAIT_MINUTES)], cancels: checked.cancels, reply };
  }
  const deadline = deadlineName(step.executionId);
  const cancels = completes && !checked.cancels.includes(deadline) ? [...checked.cancels, deadline] : checked.cancels;
  return { effects: checked.effects, cancels, reply };
}

/**
 * A waiting step's deadline: functions.completeError, a timer due `minutes` after its token was issued (at most
 * MAX_WAIT_MINUTES: DEADLINE_MARGIN_MS before the token dies, for its attempt, a retry, and a lost message's cron
 * tick). A deadline already past (Slack's late retry of the input) is due at once.
 */
function deadlineOf(step: StepInput, minutes: number): IntendedEffect {
  return {
    key: "step_deadline",
    effect: "functions.completeError",
    payload: {
      function_execution_id: step.executionId,
      error: `Nobody answered within ${minutes} minute${minutes === 1 ? "" : "s"}.`,
    },
    name: deadlineName(step.executionId),
    at: step.issuedAt + minutes * 60_000,
  };
}
