/**
 * A Workflow Builder custom step's execution, as an input shows it (pure).
 *
 * Slack runs a custom step as an execution (function_execution_id, "Fx…") and
 * waits for exactly one completion: functions.completeSuccess with the step's
 * outputs, or functions.completeError with a message the user is shown. It
 * sends the execution in `function_executed` (an event_callback: `function
 * { callback_id }`, `inputs`, `function_execution_id`,
 * `workflow_execution_id`, `bot_access_token`), and an interaction on
 * something the step posted (block_actions, view_submission, view_closed)
 * carries it as `function_data { execution_id, function { callback_id },
 * inputs }` beside a `bot_access_token` (Slack's function_executed reference;
 * Bolt's CustomFunction reads both shapes the same way).
 *
 * bot_access_token is a workflow token: it lives about 15 minutes from when
 * it is issued, or until the step completes, and cannot be refreshed. The
 * engine keeps it sealed (shared/steps/tokens.ts); a handler never sees it.
 *
 * Exactly one completion per execution is a named row (shared/outbox/model.ts,
 * namedKey): completionName(execution) for complete() and fail() alike, so a
 * retry, a duplicate delivery, or a second handler asking again records
 * nothing more. A step that waits for a user gets a deadline: a timed row of
 * its own name that completes the execution with an error before its token
 * dies; the completion cancels it (shared/app/steps.ts).
 */
import { isObject, type JsonObject, type RecordableInput } from "../slack/inputs.ts";
import { semanticsOf } from "../slack/methods.ts";

/** How long a workflow token lives after it is issued (Slack: about 15 minutes, or until its step completes). */
export const WORKFLOW_TOKEN_LIFETIME_MS = 15 * 60_000;

/**
 * How long before its token's expiry a waiting step's deadline is due: room for its attempt, a retry or two after a
 * transient failure, and the cron's lateness if the deadline's delayed queue message was lost (one tick, a minute).
 */
export const DEADLINE_MARGIN_MS = 3 * 60_000;

/** The longest a step may wait for a user, in minutes: the token's life less the margin. */
export const MAX_WAIT_MINUTES = (WORKFLOW_TOKEN_LIFETIME_MS - DEADLINE_MARGIN_MS) / 60_000;

/** Methods that complete an execution; Slack accepts one of them once per execution. */
export const COMPLETION_METHODS: ReadonlySet<string> = new Set(["functions.completeSuccess", "functions.completeError"]);

/** Slack's answers to a completion that mean the execution is over (shared/slack/methods.ts): completed already, or gone. */
export const NO_LONGER_RUNNING: ReadonlySet<string> = new Set(semanticsOf("functions.completeSuccess").alreadyDone);

/**
 * Slack's ids are short letters and digits; one that is not is no execution the engine can name a row after
 * (names allow 128 characters: "step.<id>.deadline").
 */
const EXECUTION_ID = /^[A-Za-z0-9_-]{1,100}$/;
/** A token is one opaque word; a longer or spaced one is not Slack's. */
const TOKEN = /^[\x21-\x7e]{1,512}$/;

/** The row that completes an execution (complete() and fail() alike): one per execution, whoever asks. */
export const completionName = (executionId: string): string => `step.${executionId}`;
/** A waiting step's deadline: completes the execution with an error unless the completion cancelled it first. */
export const deadlineName = (executionId: string): string => `step.${executionId}.deadline`;

/** An execution as one input shows it. */
export interface StepInput {
  /** function_executed, or an interaction on something the step posted. */
  readonly kind: "executed" | "interaction";
  readonly executionId: string;
  readonly callbackId: string;
  readonly workflowExecutionId: string | undefined;
  /** The step's inputs, as Slack sent them. */
  readonly inputs: JsonObject;
  /** The workflow token the input carries (bot_access_token), if it carries one. */
  readonly token: string | undefined;
  /**
   * When the token was issued, as near as the ack can tell: the event's event_time (Slack's retries keep it), never
   * after the input was received; an interaction says nothing of it, so its receipt. Its expiry counts from here.
   */
  readonly issuedAt: number;
}

/** The execution `input` belongs to, or undefined (not a step's input, or one whose execution id is not usable). */
export function stepOf(input: RecordableInput, receivedAt: number): StepInput | undefined {
  if (input.surface === "command") return undefined;
  if (input.surface === "event") {
    const event = input.event as JsonObject;
    if (event.type !== "function_executed") return undefined;
    const fn = isObject(event.function) ? event.function : {};
    const executionId = idOf(event.function_execution_id);
    const callbackId = text(fn.callback_id);
    if (!executionId || !callbackId) return undefined;
    const eventTime = input.eventTime === undefined ? receivedAt : Math.min(receivedAt, input.eventTime * 1000);
    return {
      kind: "executed",
      executionId,
      callbackId,
      workflowExecutionId: text(event.workflow_execution_id),
      inputs: isObject(event.inputs) ? event.inputs : {},
      token: tokenOf(event.bot_access_token),
      issuedAt: eventTime,
    };
  }
  const data = isObject(input.payload.function_data) ? input.payload.function_data : undefined;
  if (!data) return undefined;
  const executionId = idOf(data.execution_id);
  const callbackId = isObject(data.function) ? text(data.function.callback_id) : undefined;
  if (!executionId) return undefined;
  return {
    kind: "interaction",
    executionId,
    callbackId: callbackId ?? "",
    workflowExecutionId: text(data.workflow_execution_id),
    inputs: isObject(data.inputs) ? data.inputs : {},
    token: tokenOf(input.payload.bot_access_token),
    issuedAt: receivedAt,
  };
}

/** `value` (a payload, an event) without its workflow token: what a handler is given. */
export function withoutToken<T extends JsonObject>(value: T): T {
  if (!("bot_access_token" in value)) return value;
  const { bot_access_token: _, ...rest } = value;
  return rest as T;
}

const text = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined);
const idOf = (value: unknown): string | undefined => (typeof value === "string" && EXECUTION_ID.test(value) ? value : undefined);
const tokenOf = (value: unknown): string | undefined => (typeof value === "string" && TOKEN.test(value) ? value : undefined);

/** What a completion row knows of its execution when its workflow token cannot be used (EffectContext.step; shared/steps/rows.ts). */
export interface StepState {
  readonly executionId: string;
  /** completed: Slack has answered a completion of it; ended: its token expired or was refused before one. */
  readonly state: "completed" | "ended";
  /** Why, for the row's result or its park: "completed", "expired at …", "refused: token_revoked". */
  readonly why: string;
  /**
   * functions.completeError with the installation's own token, once: so a user's workflow whose token died does
   * not hang silently, where Slack takes that token. What came of it; throws a transient EffectError when Slack
   * could not be asked (no answer, a 5xx, a 429): the row retries.
   */
  readonly failWithOwnToken: (error: string, timeoutMs: number, signal?: AbortSignal) => Promise<OwnTokenOutcome>;
}

/**
 * What completing an execution with an error by the installation's own token came to: done by it, found completed
 * already ("no longer running": it has its one completion), refused, or not tried (no installation token).
 */
export type OwnTokenOutcome =
  | { readonly kind: "completed" | "refused" | "untried"; readonly text: string }
  | { readonly kind: "already"; readonly error: string; readonly text: string };

/**
 * D1 statements a row of an execution adds to its installation's worst case (query-budget.ts): the execution's
 * read, and either its token's scrub (the workflow token used) or the installation's own resolution (not both).
 */
export const EXECUTION_WORST_QUERIES = 1;
