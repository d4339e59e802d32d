/**
 * The two completion methods as effects (functions.completeSuccess,
 * functions.completeError), in place of the generic Slack method effect
 * (shared/effects/registry.ts): what Slack answers a completion means for an
 * execution, not only for its row.
 *
 * - ok → done.
 * - execution_not_in_running_state, function_execution_not_found ("the
 *   function has been completed and cannot be found", Slack's method docs):
 *   done, { already }: the execution has its one completion.
 * - completeSuccess refused with parameter_validation_failed (its outputs do
 *   not match the step's output parameters): parked, the reason naming the
 *   outputs it sent; first the execution is completed with an error, with the
 *   same token, so the workflow does not stay "in progress".
 * - the execution's token cannot be used (shared/steps/rows.ts, StepState):
 *   completed already → done, nothing sent; ended (expired, refused) → the
 *   execution completed with an error by the installation's own token where
 *   Slack takes it, and the row parked with both reasons (done, if Slack says
 *   the execution is no longer running: it has its completion).
 * - anything else: as any Slack method (retryable errors retried, the rest parked).
 */
import { fatal, transient } from "../delivery/failure.ts";
import type { EffectDefinition } from "../effects/effect.ts";
import { keptOf } from "../effects/slack-method.ts";
import { isObject, type JsonObject } from "../slack/inputs.ts";
import { refusal } from "../slack/web-api.ts";
import { NO_LONGER_RUNNING, type OwnTokenOutcome } from "./execution.ts";

/** Most of a refused step's outputs its park reason quotes: enough to see which field, not a whole document. */
const OUTPUTS_QUOTED = 600;

/** What the user is told when Slack refused the step's outputs. */
const OUTPUTS_REFUSED = "This step could not finish: Slack refused its outputs (parameter_validation_failed).";

function completionEffect(method: "functions.completeSuccess" | "functions.completeError"): EffectDefinition {
  return {
    name: method,
    // Slack completes an execution once; a repeat is answered execution_not_in_running_state.
    idempotentByShape: true,
    inline: true,
    async perform(payload, { slack, step, timeoutMs, signal }) {
      const executionId = typeof payload.function_execution_id === "string" ? payload.function_execution_id : undefined;
      if (step?.state === "completed") return { already: "completed", execution: step.executionId };
      if (step?.state === "ended") {
        const reason = `the workflow token of execution ${step.executionId} cannot complete it (${step.why})`;
        let outcome: OwnTokenOutcome;
        try {
          outcome = await step.failWithOwnToken(failText(method, payload, step.why), timeoutMs, signal);
        } catch (error) {
          // Slack could not be asked: retried, the attempt counted.
          throw transient(`${method}: ${reason}; completing it with an error by the installation's own token failed: ${String(error)}`);
        }
        // It has its one completion already: success, as when the workflow token is answered so.
        if (outcome.kind === "already") return { already: outcome.error, execution: step.executionId };
        throw fatal(`${method}: ${reason}; ${outcome.text}`);
      }
      const answer = await slack.call(method, payload, timeoutMs, signal);
      if (answer.ok) return keptOf(answer.body);
      if (NO_LONGER_RUNNING.has(answer.error)) return { already: answer.error };
      if (method === "functions.completeSuccess" && answer.error === "parameter_validation_failed" && executionId) {
        const failed = await slack.call(
          "functions.completeError",
          { function_execution_id: executionId, error: OUTPUTS_REFUSED },
          timeoutMs,
          signal,
        );
        const after = failed.ok
          ? "the execution was completed with an error instead"
          : NO_LONGER_RUNNING.has(failed.error)
            ? `the execution is no longer running (${failed.error})`
            : `completing it with an error was refused too (${failed.error})`;
        throw fatal(`${method}: parameter_validation_failed; outputs sent: ${quoted(payload.outputs)}; ${after}`);
      }
      throw refusal(method, answer.error);
    },
  };
}

/** The error the user is shown when the engine completes an execution whose token died. */
function failText(method: string, payload: JsonObject, why: string): string {
  const asked = method === "functions.completeError" && typeof payload.error === "string" ? ` ${payload.error}` : "";
  return `This step could not finish in time (${why}).${asked}`;
}

function quoted(outputs: unknown): string {
  const text = JSON.stringify(isObject(outputs) ? outputs : (outputs ?? null)) ?? "null";
  return text.length > OUTPUTS_QUOTED ? `${text.slice(0, OUTPUTS_QUOTED)}…` : text;
}

/** The completion effects, by method name: shared/effects/registry.ts serves them before the generic method effect. */
export const STEP_EFFECTS: ReadonlyMap<string, EffectDefinition> = new Map(
  (["functions.completeSuccess", "functions.completeError"] as const).map((method) => [method, completionEffect(method)]),
);
