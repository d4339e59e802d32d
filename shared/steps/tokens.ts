/**
 * An execution's workflow token at rest (step_executions, migration 0019): sealed
 * like installations' tokens (shared/installations/crypto.ts) under
 * TOKEN_ENCRYPTION_KEY, the execution id bound as additional data (a sealed
 * token copied into another execution's row does not open there), written in
 * the ack's one batch, opened only when a row of the execution is performed
 * (shared/steps/rows.ts), scrubbed when the execution ends.
 *
 * Never in a row's payload, a receipt, a queue message, a log line or an
 * operator's answer: the handler is given the input without it
 * (shared/app/steps.ts), and what operators read of an execution
 * (executionSummary) has no token column.
 */
import { open, seal, type TokenKeys } from "../installations/crypto.ts";
import { type StepInput, WORKFLOW_TOKEN_LIFETIME_MS } from "./execution.ts";

/** The additional data a workflow token is sealed with: its execution, never an installation's key ("T:…", "E:…"). */
const boundTo = (executionId: string) => `workflow:${executionId}`;

/** What the ack writes for an execution whose input carries a token. */
export interface SealedExecution {
  readonly executionId: string;
  readonly teamId: string;
  readonly callbackId: string;
  readonly keyId: string;
  readonly sealedToken: string;
  readonly issuedAt: number;
  readonly expiresAt: number;
}

/** The input's workflow token sealed under the current key, with the execution it belongs to. */
export async function sealExecution(
  keys: TokenKeys,
  step: StepInput & { readonly token: string },
  teamId: string,
): Promise<SealedExecution> {
  return {
    executionId: step.executionId,
    teamId,
    callbackId: step.callbackId,
    keyId: keys.current.id,
    sealedToken: await seal(keys, boundTo(step.executionId), step.token),
    issuedAt: step.issuedAt,
    expiresAt: step.issuedAt + WORKFLOW_TOKEN_LIFETIME_MS,
  };
}

/**
 * The execution's row, in the ack's one batch (RecordOptions.also, shared/outbox/record.ts): it commits with the
 * input's receipt and rows or not at all. The first input of the execution recorded writes it; any later one (a
 * duplicate delivery, Slack's copy under a new event_id, a click) finds it (ON CONFLICT DO NOTHING): the token kept
 * is the first's, never moved. Rows read: 1 on a conflict; written: 3 (migration 0019), or 0.
 */
const insertExecution = `
INSERT INTO step_executions (execution_id, team_id, callback_id, receipt_id, key_id, token, issued_at, expires_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
ON CONFLICT (execution_id) DO NOTHING`;

export function insertExecutionStatement(db: D1Database, sealed: SealedExecution, receiptId: string): D1PreparedStatement {
  return db
    .prepare(insertExecution)
    .bind(
      sealed.executionId,
      sealed.teamId,
      sealed.callbackId,
      receiptId,
      sealed.keyId,
      sealed.sealedToken,
      sealed.issuedAt,
      sealed.expiresAt,
    );
}

/** An execution as operators see it: everything but the token. */
export interface ExecutionSummary {
  readonly executionId: string;
  readonly teamId: string;
  readonly callbackId: string;
  /** The input that brought its token (the first of the execution recorded). */
  readonly receiptId: string;
  readonly issuedAt: number;
  readonly expiresAt: number;
  /** Whether the engine still holds its token (never the token itself). */
  readonly tokenHeld: boolean;
  readonly endedAt: number | null;
  /** 'completed', 'expired' or 'refused: <Slack's error>'; null while the token is held. */
  readonly endReason: string | null;
}

/** An execution as the engine reads it to perform one of its rows. */
export interface ExecutionRecord extends ExecutionSummary {
  readonly keyId: string | null;
  /** Sealed; null once scrubbed. */
  readonly sealedToken: string | null;
  /** Whether the row named `completionKey` (its completion's, when asked) is recorded: its token may go any moment. */
  readonly completionRecorded: boolean;
}

/** The column list is the guard: an operator's summary never selects the token, only whether there is one. */
const SUMMARY_COLUMNS =
  "execution_id, team_id, callback_id, receipt_id, issued_at, expires_at, token IS NOT NULL AS held, ended_at, end_reason";

interface SummaryRow {
  execution_id: string;
  team_id: string;
  callback_id: string;
  receipt_id: string;
  issued_at: number;
  expires_at: number;
  held: number;
  ended_at: number | null;
  end_reason: string | null;
}

const summaryOf = (row: SummaryRow): ExecutionSummary => ({
  executionId: row.execution_id,
  teamId: row.team_id,
  callbackId: row.callback_id,
  receiptId: row.receipt_id,
  issuedAt: row.issued_at,
  expiresAt: row.expires_at,
  tokenHeld: row.held === 1,
  endedAt: row.ended_at,
  endReason: row.end_reason,
});

/**
 * The execution, and whether its completion's row (`completionKey`: namedKey(team, completionName(id))) is
 * recorded. One statement: two primary-key reads (the execution, the completion's key in the unique index).
 */
export async function findExecution(
  db: D1Database,
  executionId: string,
  completionKey: string | null = null,
): Promise<ExecutionRecord | undefined> {
  const row = await db
    .prepare(
      `SELECT ${SUMMARY_COLUMNS}, key_id, token, EXISTS (SELECT 1 FROM outbox WHERE idempotency_key = ?2) AS completion_recorded
         FROM step_executions WHERE execution_id = ?1`,
    )
    .bind(executionId, completionKey)
    .first<SummaryRow & { key_id: string | null; token: string | null; completion_recorded: number }>();
  if (!row) return undefined;
  return { ...summaryOf(row), keyId: row.key_id, sealedToken: row.token, completionRecorded: row.completion_recorded === 1 };
}

/** The workflow token, opened. Throws when its key is not configured (or the row was tampered with). */
export function openWorkflowToken(keys: TokenKeys, record: ExecutionRecord): Promise<string> {
  if (record.sealedToken === null || record.keyId === null) throw new Error(`execution ${record.executionId} holds no token`);
  return open(keys, record.keyId, boundTo(record.executionId), record.sealedToken);
}

/**
 * Slack answered a completion of the execution ok, or that it is no longer running: the token goes (Slack revokes
 * it too). Replaces a refusal learnt a moment before (the revocation reaching another row first); written once.
 */
const endAsCompleted = `
UPDATE step_executions SET token = NULL, key_id = NULL, ended_at = ?2, end_reason = 'completed'
 WHERE execution_id = ?1 AND (end_reason IS NULL OR end_reason != 'completed')`;

/** Slack refused the token (token_revoked, token_expired, …): it goes, unless the execution ended already. */
const endAsRefused = `
UPDATE step_executions SET token = NULL, key_id = NULL, ended_at = ?2, end_reason = ?3
 WHERE execution_id = ?1 AND end_reason IS NULL`;

/** Scrubs the token of an execution that ended; whether this statement did (false: it had ended already). */
export async function endExecution(db: D1Database, executionId: string, now: number, refusedWith?: string): Promise<boolean> {
  const statement =
    refusedWith === undefined
      ? db.prepare(endAsCompleted).bind(executionId, now)
      : db.prepare(endAsRefused).bind(executionId, now, `refused: ${refusedWith}`);
  return (await statement.run()).meta.changes === 1;
}

/**
 * The cron's scrub of tokens past their expiry: useless to Slack by now, still a credential. A bounded range of
 * step_executions_live (at most `limit` rows), re-checked by the UPDATE itself.
 */
const scrubExpired = `
UPDATE step_executions SET token = NULL, key_id = NULL, ended_at = expires_at, end_reason = 'expired'
 WHERE execution_id IN (SELECT execution_id FROM step_executions WHERE token IS NOT NULL AND expires_at <= ?1 ORDER BY expires_at LIMIT ?2)
   AND token IS NOT NULL AND expires_at <= ?1`;

/** Token-less execution rows older than the receipts' retention, oldest first, at most ?2. */
const pruneOld = `
DELETE FROM step_executions
 WHERE execution_id IN (SELECT execution_id FROM step_executions WHERE issued_at < ?1 ORDER BY issued_at LIMIT ?2)`;

/** The cron tick's part (workers/consumer/sweep.ts): expired tokens scrubbed, old executions pruned. One batch of 2 statements. */
export async function sweepExecutions(
  db: D1Database,
  now: number,
  pruneBefore: number,
  limit: number,
): Promise<{ readonly expired: number; readonly pruned: number }> {
  const [expired, pruned] = await db.batch([db.prepare(scrubExpired).bind(now, limit), db.prepare(pruneOld).bind(pruneBefore, limit)]);
  return { expired: expired?.meta.changes ?? 0, pruned: pruned?.meta.changes ?? 0 };
}

/** An execution for an operator (shared/ops/audit.ts): one primary-key read, no token selected. */
export async function executionSummary(db: D1Database, executionId: string): Promise<ExecutionSummary | undefined> {
  const row = await db
    .prepare(`SELECT ${SUMMARY_COLUMNS} FROM step_executions WHERE execution_id = ?1`)
    .bind(executionId)
    .first<SummaryRow>();
  return row ? summaryOf(row) : undefined;
}
