/**
 * Which token a row of an execution is performed with (both Workers: the
 * consumer, and the first attempt at the ack). It wraps the engine's own
 * choice (the installation's token, shared/installations/resolve.ts): a row
 * no execution owns goes there untouched, with no read.
 *
 * A row of an execution (outbox.execution_id, migration 0019) reads its
 * execution (one primary-key read on the row's shard):
 *
 * - token held and not expired: the row is performed with the workflow token
 *   (what Bolt does in a step's listeners, and what makes a button the step
 *   posts come back with its function_data) — a row other than a completion
 *   only until the execution's completion is recorded: Slack revokes the token
 *   when the step completes, so from then on such a row (the click's own
 *   update, in the completion's batch) goes with the installation's token
 *   rather than race the completion to a refusal. Slack's auth errors on it do not
 *   block the installation: they end the execution's token ("refused: …")
 *   and the row is retried, transient, without it. A completion Slack answers
 *   ok, or "no longer running", ends it as completed: the token is scrubbed
 *   then, before the row's fenced finish.
 * - otherwise (completed, expired, refused, or no token kept): any row but a
 *   completion goes as every row does, with the installation's token. A
 *   completion is given the execution's state (StepState) instead, and its
 *   effect (shared/steps/effects.ts) does not call Slack with a dead token:
 *   completed already → done, nothing sent; ended → completed with an error
 *   by the installation's own token where Slack takes it, and parked with
 *   the reason (what Slack allows here: docs/building-an-app.md, "Custom
 *   steps"). Slack's ok (or "no longer running") to that call ends the
 *   execution as completed too, its token scrubbed if it was still held.
 */
import { fatal, transient } from "../delivery/failure.ts";
import type { TokenKeys } from "../installations/crypto.ts";
import { AUTH_ERRORS, type SlackForRow } from "../installations/resolve.ts";
import type { Log } from "../log.ts";
import { type ClaimedRow, namedKey } from "../outbox/model.ts";
import { type SlackWebApi, slackWebApi } from "../slack/web-api.ts";
import { COMPLETION_METHODS, completionName, NO_LONGER_RUNNING, type StepState } from "./execution.ts";
import { type ExecutionRecord, endExecution, findExecution, openWorkflowToken } from "./tokens.ts";

export interface WorkflowTokenOptions {
  /** The row's own shard: its execution lives beside it. */
  readonly db: D1Database;
  readonly keys: (() => Promise<TokenKeys>) | undefined;
  readonly slackApiUrl: string;
  /** The fetch the workflow token's client goes out through (the EffectContext's edge). */
  readonly edge: typeof fetch;
  readonly clock: () => number;
  readonly log: Log;
}

/** The row's Slack client as the engine chooses it (`inner`), with an execution's rows given its workflow token. */
export function withWorkflowTokens(
  inner: (row: ClaimedRow) => Promise<SlackForRow>,
  options: WorkflowTokenOptions,
): (row: ClaimedRow) => Promise<SlackForRow> {
  return async (row) => {
    const executionId = row.executionId ?? undefined;
    if (executionId === undefined) return inner(row);
    const completion = COMPLETION_METHODS.has(row.effect);
    const completionKey = !completion && row.teamId ? namedKey(row.teamId, completionName(executionId)) : null;
    const record = await findExecution(options.db, executionId, completionKey);
    // No token was kept for it (its input carried none), or its completion is under way: the row goes as any row.
    if (!record || record.completionRecorded) return inner(row);
    let why: string | undefined;
    if (record.sealedToken !== null && options.clock() < record.expiresAt) {
      try {
        const token = await openWorkflowToken(await keysOf(options), record);
        return {
          ok: true,
          slack: workflowClient(token, record, options),
          // The workflow token's refusals end the execution's token, never the installation.
          authFailure: () => undefined,
          block: async (reason) => reason,
        };
      } catch (error) {
        // Never the token; which key or read failed.
        why = `its workflow token cannot be opened (${error instanceof Error ? error.message : String(error)})`;
      }
    }
    if (!completion) return inner(row);
    const state = record.endReason === "completed" ? "completed" : "ended";
    why ??= state === "completed" ? "completed" : (record.endReason ?? `expired at ${new Date(record.expiresAt).toISOString()}`);
    return {
      ok: true,
      slack: NO_CALLS,
      authFailure: () => undefined,
      block: async (reason) => reason,
      step: { executionId, state, why, failWithOwnToken: failWithOwnToken(inner, row, record, options) },
    };
  };
}

function keysOf(options: WorkflowTokenOptions): Promise<TokenKeys> {
  if (!options.keys) throw new Error("TOKEN_ENCRYPTION_KEY is not set");
  return options.keys();
}

/** A completion whose token is dead calls Slack only through failWithOwnToken. */
const NO_CALLS: SlackWebApi = {
  call: async (method) => {
    throw fatal(`${method}: the execution's workflow token cannot be used (engine bug: the completion should not call it)`);
  },
};

/** The workflow token's client: what Slack answers about the execution ends its token (see the module's comment). */
function workflowClient(token: string, record: ExecutionRecord, options: WorkflowTokenOptions): SlackWebApi {
  const inner = slackWebApi(token, options.slackApiUrl, options.edge);
  return {
    async call(method, params, timeoutMs, signal) {
      const answer = await inner.call(method, params, timeoutMs, signal);
      if (COMPLETION_METHODS.has(method) && (answer.ok || NO_LONGER_RUNNING.has(answer.error))) {
        await endCompleted(record, options);
      } else if (!answer.ok && AUTH_ERRORS.has(answer.error)) {
        await endExecution(options.db, record.executionId, options.clock(), answer.error);
        throw transient(
          `${method}: Slack refused the workflow token of execution ${record.executionId} (${answer.error}); retried without it`,
        );
      }
      return answer;
    },
  };
}

/** completeError by the installation's own token (see StepState.failWithOwnToken). */
function failWithOwnToken(
  inner: (row: ClaimedRow) => Promise<SlackForRow>,
  row: ClaimedRow,
  record: ExecutionRecord,
  options: WorkflowTokenOptions,
): StepState["failWithOwnToken"] {
  return async (error, timeoutMs, signal) => {
    const own = await inner(row);
    if (!own.ok) return { kind: "untried", text: `it was not completed with an error either: no installation token (${own.reason})` };
    // Its auth errors are about this one call, made outside what Slack documents: they never block the installation.
    const answer = await own.slack.call("functions.completeError", { function_execution_id: record.executionId, error }, timeoutMs, signal);
    const ended = answer.ok || NO_LONGER_RUNNING.has(answer.error);
    // Completed now (or already): the execution ends as completed, as after its workflow token's completion — an
    // expired token still held is scrubbed now, not at the cron's tick, and operators no longer see it held.
    if (ended) await endCompleted(record, options);
    if (answer.ok) return { kind: "completed", text: "it was completed with an error by the installation's own token" };
    if (NO_LONGER_RUNNING.has(answer.error))
      return { kind: "already", error: answer.error, text: `Slack says it is no longer running (${answer.error})` };
    return { kind: "refused", text: `completing it with an error by the installation's own token was refused (${answer.error})` };
  };
}

/** Best effort: a failed write leaves the token until the cron's scrub at its expiry (at most 15 minutes). */
async function endCompleted(record: ExecutionRecord, options: WorkflowTokenOptions): Promise<void> {
  await endExecution(options.db, record.executionId, options.clock()).catch((error: unknown) =>
    options.log("warn", "could not scrub a completed execution's workflow token; the cron scrubs it at its expiry", {
      execution_id: record.executionId,
      error: String(error),
    }),
  );
}
