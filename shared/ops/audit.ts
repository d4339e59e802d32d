/**
 * The audit trail of one event: its receipt, its outbox rows, and every
 * recorded attempt of each (failures, fence losses, dead-letterings, replays),
 * in order. A successful attempt writes no audit row (the happy path stays
 * cheap); the row's own completed_at, attempts and result say it.
 *
 * Found by the receipt id (an Events API event_id, or an operation id), or by
 * a fact (shared/slack/facts.ts). An input's rows are keyed "<fact>:<effect
 * key>", the fact being the receipt's own id when it names one already; the
 * receipt says which fact it was. Every copy of one fact (another event_id,
 * a backfill) has its receipt and shares the rows the first copy recorded:
 * each row says which receipt that was. The receipt may be gone (receipts are
 * pruned before done rows), so the rows are found on their own: a prefix range
 * on the unique index the table already has, and the fact check drops keys of
 * another fact that merely starts with this one and a colon. Follow-ups (rows
 * an effect asked for) share their parent's key prefix, so they are found the
 * same way; parentId and depth say where each sits in its chain.
 *
 * Named rows (IntentOptions.name) are keyed by their name, not under the
 * fact: they carry the fact (a named follow-up its chain's), and the same
 * statement finds them through outbox_named_by_fact (migration 0014). A row
 * of another input's name that this input repeated belongs to that input's
 * trail. What the receipt's cancels found (cancel(name), at the ack or in a
 * completion of one of its rows) is read with the receipt, from
 * outbox_cancels. A cancelled row's status reads "cancelled" here (stored as
 * done with cancelled_by: shared/outbox/cancel-named.ts). Two statements,
 * three when rows were found (their attempts), as before named rows.
 *
 * A custom step's execution (shared/steps/): the trail of one of its inputs
 * says which execution it belongs to, whether the engine still holds its
 * workflow token (never the token), and its completion and deadline rows,
 * whichever input recorded them (two statements more, for such an input
 * only). The trail of the execution itself (its id, Fx…) is every row of the
 * execution, by outbox_by_execution (migration 0019), looked for only when
 * no receipt or row has the id and the receipt's statement found an execution
 * of that id (a primary-key probe in the same statement: an unknown id costs
 * nothing more).
 *
 * An assistant's answer (shared/assistant/): the turn of each answer row — its state, its one message's ts, what
 * Slack confirmed, how often the model was asked — one primary-key read each, for such rows only.
 */
import { ANSWER_EFFECT } from "../assistant/thread.ts";
import { NAMED_KEYS_SQL, namedKey, nameOfKey } from "../outbox/model.ts";
import { completionName, deadlineName } from "../steps/execution.ts";
import { type ExecutionSummary, executionSummary } from "../steps/tokens.ts";

export interface AuditReceipt {
  readonly id: string;
  readonly kind: string;
  readonly type: string;
  readonly teamId: string | null;
  readonly retryNum: number | null;
  readonly receivedAt: number;
  /** The fact it was (shared/slack/facts.ts): its id, unless it names a message, an edit, a reaction. */
  readonly fact: string;
}

export interface AuditAttempt {
  readonly attempt: number;
  readonly outcome: string;
  readonly error: string | null;
  readonly claimToken: string | null;
  readonly startedAt: number | null;
  readonly finishedAt: number;
}

export interface AuditRow {
  readonly id: number;
  readonly key: string;
  /** The receipt that recorded it: another copy's, if this receipt repeated a fact already recorded. */
  readonly receiptId: string;
  readonly effect: string;
  /** The row whose effect asked for this one; null for a row the ingress recorded. */
  readonly parentId: number | null;
  readonly depth: number;
  /** pending, leased, done, dead, or cancelled (a done row with cancelledBy). */
  readonly status: string;
  /** The row's name (IntentOptions.name), when the app named it. */
  readonly name: string | null;
  /** The input (receipt id) whose cancel ended it, when it was cancelled. */
  readonly cancelledBy: string | null;
  readonly attempts: number;
  readonly payload: string;
  readonly result: string | null;
  readonly lastError: string | null;
  readonly createdAt: number;
  readonly enqueuedAt: number | null;
  readonly nextAttemptAt: number;
  /** A timer's time (IntentOptions.at / after), as asked; null for a row due when it was recorded. */
  readonly dueAt: number | null;
  readonly claimExpiresAt: number | null;
  readonly expiresAt: number | null;
  readonly completedAt: number | null;
  readonly sweeps: number;
  readonly history: readonly AuditAttempt[];
}

/** One cancel the trail's input (or one of its rows, byRow) asked for, and what it found. */
export interface AuditCancel {
  readonly name: string;
  /** The row whose completion asked; null when the input itself asked, at the ack. */
  readonly byRow: number | null;
  readonly outcome: string;
  readonly rowId: number | null;
  readonly rowStatus: string | null;
  readonly at: number;
}

/** A custom step execution, as its trail shows it: never its token, and its completion and deadline rows. */
export interface AuditExecution extends ExecutionSummary {
  /** Its one completion's row (complete() or fail()), when one was recorded; status as a row's. */
  readonly completion: { readonly rowId: number; readonly effect: string; readonly status: string } | null;
  /** A waiting step's deadline row, when one was recorded. */
  readonly deadline: { readonly rowId: number; readonly status: string; readonly dueAt: number | null } | null;
}

/**
 * An assistant's answer (shared/assistant/answer.ts), as its turn tells it: where it stands, its one message, how much
 * Slack confirmed and how often the model was asked — never what was asked or answered (lengths only).
 */
export interface AuditAnswer {
  readonly rowId: number;
  readonly channel: string;
  readonly threadTs: string;
  readonly messageTs: string;
  /** asked, starting, streaming, generated, delivered, stopped or failed (migration 0020). */
  readonly state: string;
  readonly streamTs: string | null;
  readonly sentChars: number;
  /** The model's whole answer's length, once it was kept. */
  readonly answerChars: number | null;
  readonly modelCalls: number;
  readonly stopRequestedAt: number | null;
}

export interface AuditTrail {
  readonly id: string;
  readonly receipt: AuditReceipt | null;
  readonly rows: readonly AuditRow[];
  readonly cancels: readonly AuditCancel[];
  /** The custom step execution the input belongs to, or the one the id names; null for any other. */
  readonly execution: AuditExecution | null;
  /** The assistant answers among its rows, with their turns (one primary-key read each). */
  readonly answers: readonly AuditAnswer[];
}

/** Rows of one receipt; a receipt has a handful, this bounds a pathological one. */
export const AUDIT_ROWS_MAX = 100;
/** Audit rows per trail: attempts are bounded by MAX_ATTEMPTS per life of a row, replays are not, so this is. */
export const AUDIT_ATTEMPTS_MAX = 1_000;

/**
 * The receipt, if any, and what its cancels found (by outbox_cancels' primary key prefix), as one row: the
 * receipt's columns are NULL when there is none (pruned, or an id that is only a fact). Rows read: 1 + 1 per cancel.
 */
const receiptById = `
SELECT r.id, r.kind, r.type, r.team_id, r.retry_num, r.received_at, r.fact, r.execution_id,
       (SELECT 1 FROM step_executions WHERE execution_id = ?1) AS names_execution,
       (SELECT json_group_array(json_object('name', c.name, 'by_row', c.by_row, 'outcome', c.outcome,
                                            'outbox_id', c.outbox_id, 'row_status', c.row_status, 'at', c.at))
          FROM (SELECT * FROM outbox_cancels WHERE receipt_id = ?1 ORDER BY at, by_row, name LIMIT ?2) AS c) AS cancels
  FROM (SELECT 1) LEFT JOIN receipts AS r ON r.id = ?1`;

/**
 * The fact's rows (the unique index range; a row keyed before facts has no fact: its receipt's id was it), and
 * its named rows (outbox_named_by_fact). Rows read: 2 per row.
 */
const rowsOfFact = `
SELECT * FROM (
  SELECT * FROM outbox
   WHERE idempotency_key >= ?1 || ':' AND idempotency_key < ?1 || ';' AND coalesce(fact, receipt_id) = ?1
  UNION ALL
  SELECT * FROM outbox WHERE coalesce(fact, receipt_id) = ?1 AND ${NAMED_KEYS_SQL}
)
 ORDER BY id
 LIMIT ?2`;

/** Every row of an execution (outbox_by_execution). Rows read: 2 per row. */
const rowsOfExecution = "SELECT * FROM outbox WHERE execution_id = ?1 ORDER BY id LIMIT ?2";

/** An execution's completion and deadline rows, by their names' keys. Rows read: at most 2. */
const namedRowsOfExecution =
  "SELECT id, idempotency_key, effect, status, cancelled_by, due_at FROM outbox WHERE idempotency_key IN (?1, ?2)";

/** Rows read: 1 per audit row (primary-key prefix per outbox id). */
const attemptsOfRows = `
SELECT outbox_id, attempt, outcome, error, claim_token, started_at, finished_at
  FROM outbox_attempts
 WHERE outbox_id IN (SELECT value FROM json_each(?1))
 ORDER BY outbox_id, finished_at, attempt
 LIMIT ?2`;

interface OutboxRecord {
  id: number;
  idempotency_key: string;
  receipt_id: string;
  effect: string;
  parent_id: number | null;
  depth: number;
  status: string;
  attempts: number;
  payload: string;
  result: string | null;
  last_error: string | null;
  created_at: number;
  enqueued_at: number | null;
  next_attempt_at: number;
  due_at: number | null;
  claim_expires_at: number | null;
  expires_at: number | null;
  completed_at: number | null;
  sweeps: number;
  cancelled_by: string | null;
}

interface AttemptRecord {
  outbox_id: number;
  attempt: number;
  outcome: string;
  error: string | null;
  claim_token: string | null;
  started_at: number | null;
  finished_at: number;
}

/** The trail, or null when neither a receipt nor a row has this id. */
export async function auditTrail(db: D1Database, id: string): Promise<AuditTrail | null> {
  const found = await db.prepare(receiptById).bind(id, AUDIT_ROWS_MAX).first<{
    id: string | null;
    kind: string;
    type: string;
    team_id: string | null;
    retry_num: number | null;
    received_at: number;
    fact: string | null;
    execution_id: string | null;
    names_execution: number | null;
    cancels: string;
  }>();
  const receipt = found?.id ? found : null;
  const fact = receipt?.fact ?? id;
  let rows = (await db.prepare(rowsOfFact).bind(fact, AUDIT_ROWS_MAX).all<OutboxRecord>()).results;
  const cancels = (JSON.parse(found?.cancels ?? "[]") as CancelRecord[]).map(
    (c): AuditCancel => ({
      name: c.name,
      byRow: c.by_row === 0 ? null : c.by_row,
      outcome: c.outcome,
      rowId: c.outbox_id,
      rowStatus: c.row_status,
      at: c.at,
    }),
  );
  let execution: AuditExecution | null = null;
  if (receipt?.execution_id) execution = await executionOf(db, receipt.execution_id);
  else if (!receipt && rows.length === 0 && cancels.length === 0) {
    // The id of an execution (found by the receipt's statement): its trail is every row it has, whichever input
    // recorded them. Nothing else by that id: not found, at no statement more.
    if (found?.names_execution !== 1) return null;
    execution = await executionOf(db, id);
    if (!execution) return null;
    rows = (await db.prepare(rowsOfExecution).bind(id, AUDIT_ROWS_MAX).all<OutboxRecord>()).results;
  }

  const history = new Map<number, AuditAttempt[]>();
  if (rows.length > 0) {
    const { results } = await db
      .prepare(attemptsOfRows)
      .bind(JSON.stringify(rows.map((r) => r.id)), AUDIT_ATTEMPTS_MAX)
      .all<AttemptRecord>();
    for (const a of results) {
      const list = history.get(a.outbox_id) ?? [];
      list.push({
        attempt: a.attempt,
        outcome: a.outcome,
        error: a.error,
        claimToken: a.claim_token,
        startedAt: a.started_at,
        finishedAt: a.finished_at,
      });
      history.set(a.outbox_id, list);
    }
  }

  return {
    id,
    receipt: receipt && {
      id: receipt.id as string,
      kind: receipt.kind,
      type: receipt.type,
      teamId: receipt.team_id,
      retryNum: receipt.retry_num,
      receivedAt: receipt.received_at,
      fact,
    },
    rows: rows.map((r) => ({
      id: r.id,
      key: r.idempotency_key,
      receiptId: r.receipt_id,
      effect: r.effect,
      parentId: r.parent_id,
      depth: r.depth,
      status: statusOf(r),
      name: nameOfKey(r.idempotency_key) ?? null,
      cancelledBy: r.cancelled_by,
      attempts: r.attempts,
      payload: r.payload,
      result: r.result,
      lastError: r.last_error,
      createdAt: r.created_at,
      enqueuedAt: r.enqueued_at,
      nextAttemptAt: r.next_attempt_at,
      dueAt: r.due_at,
      claimExpiresAt: r.claim_expires_at,
      expiresAt: r.expires_at,
      completedAt: r.completed_at,
      sweeps: r.sweeps,
      history: history.get(r.id) ?? [],
    })),
    cancels,
    execution,
    answers: await answersOf(db, rows),
  };
}

/** A row's status as the trail tells it: a cancelled row is done with cancelled_by (shared/outbox/cancel-named.ts). */
const statusOf = (r: { readonly status: string; readonly cancelled_by: string | null }) =>
  r.status === "done" && r.cancelled_by !== null ? "cancelled" : r.status;

/** An answer row's turn, by the turn's primary key (its row's payload names it). Rows read: 1. */
const turnOfAnswer = `
SELECT state, stream_ts, sent_chars, length(answer) AS answer_chars, model_calls, stop_requested_at
  FROM assistant_turns WHERE team_id = ?1 AND channel_id = ?2 AND thread_ts = ?3 AND message_ts = ?4`;

/** The answers among `rows`, each with its turn (a row whose turn is gone is left out). */
async function answersOf(db: D1Database, rows: readonly OutboxRecord[]): Promise<AuditAnswer[]> {
  const answers = rows.flatMap((r) => {
    if (r.effect !== ANSWER_EFFECT) return [];
    try {
      const p = JSON.parse(r.payload) as Record<string, unknown>;
      const key = [p.team, p.channel, p.thread_ts, p.message_ts];
      return key.every((part) => typeof part === "string") ? [{ row: r, key: key as string[] }] : [];
    } catch {
      return [];
    }
  });
  if (answers.length === 0) return [];
  const results = await db.batch<Record<string, unknown>>(answers.map((a) => db.prepare(turnOfAnswer).bind(...a.key)));
  return answers.flatMap((a, i) => {
    const turn = results[i]?.results[0];
    if (!turn) return [];
    return [
      {
        rowId: a.row.id,
        channel: a.key[1] as string,
        threadTs: a.key[2] as string,
        messageTs: a.key[3] as string,
        state: String(turn.state),
        streamTs: (turn.stream_ts as string | null) ?? null,
        sentChars: Number(turn.sent_chars),
        answerChars: turn.answer_chars === null ? null : Number(turn.answer_chars),
        modelCalls: Number(turn.model_calls),
        stopRequestedAt: (turn.stop_requested_at as number | null) ?? null,
      },
    ];
  });
}

/** The execution and its completion and deadline rows, or null when no input of it kept a token here. */
async function executionOf(db: D1Database, executionId: string): Promise<AuditExecution | null> {
  const summary = await executionSummary(db, executionId);
  if (!summary) return null;
  const completionKey = namedKey(summary.teamId, completionName(executionId));
  const { results } = await db
    .prepare(namedRowsOfExecution)
    .bind(completionKey, namedKey(summary.teamId, deadlineName(executionId)))
    .all<{ id: number; idempotency_key: string; effect: string; status: string; cancelled_by: string | null; due_at: number | null }>();
  const completion = results.find((r) => r.idempotency_key === completionKey);
  const deadline = results.find((r) => r.idempotency_key !== completionKey);
  return {
    ...summary,
    completion: completion ? { rowId: completion.id, effect: completion.effect, status: statusOf(completion) } : null,
    deadline: deadline ? { rowId: deadline.id, status: statusOf(deadline), dueAt: deadline.due_at } : null,
  };
}

interface CancelRecord {
  name: string;
  by_row: number;
  outcome: string;
  outbox_id: number | null;
  row_status: string | null;
  at: number;
}
