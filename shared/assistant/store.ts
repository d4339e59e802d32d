/**
 * An assistant's threads and turns in D1 (migration 0020), on the workspace's shard: every statement that
 * writes them, and the one read an answer starts from. The ack writes a thread's context, a turn's question and
 * a stop request in its one batch (records.ts); an answer writes its progress only under its row's claim,
 * each statement checking the claim itself (shared/outbox/fence.ts, leaseHeldSql) in the batch of the lease's
 * renewal.
 */
import { leaseHeldSql } from "../outbox/fence.ts";
import type { JsonObject } from "../slack/inputs.ts";
import type { ThreadKey, TurnKey } from "./thread.ts";

export type { ThreadKey, TurnKey } from "./thread.ts";

/** A turn and a thread are kept this long after their last write, then pruned (the sweep, PRUNE_BATCH_SIZE a tick). */
export const ASSISTANT_RETENTION_MS = 30 * 24 * 60 * 60 * 1000;

/** The earlier turns an answer is asked with, at most: the newest, within HISTORY_MAX_CHARS. */
export const HISTORY_MAX_TURNS = 20;

export type TurnState = "asked" | "answering" | "starting" | "streaming" | "generated" | "delivered" | "stopped" | "failed";

/** A turn's end states: nothing more will be written by its answer. */
export const FINISHED_STATES: ReadonlySet<TurnState> = new Set(["delivered", "stopped", "failed"]);

export interface Turn extends TurnKey {
  readonly userId: string | null;
  readonly question: string;
  readonly outboxId: number | null;
  /** Its answer row's status (done, dead, …), or null when the row is gone (pruned). */
  readonly rowStatus: string | null;
  /** When its row is due next (a pending row waiting for its retry), or null. */
  readonly rowDueAt: number | null;
  readonly state: TurnState;
  readonly streamTs: string | null;
  readonly streamStartedAt: number | null;
  readonly sentChars: number;
  readonly answer: string | null;
  readonly modelCalls: number;
  readonly stopRequestedAt: number | null;
}

// ── The ack's writes ─────────────────────────────────────────────────────────

/**
 * A thread's context as an assistant event told it: inserted, or updated unless the stored one came from a later
 * event (event_ts: Slack may deliver a retry of an older event after a newer one).
 */
const upsertContext = `
INSERT INTO assistant_threads (team_id, channel_id, thread_ts, user_id, context, context_ts, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
ON CONFLICT (team_id, channel_id, thread_ts) DO UPDATE
   SET user_id = coalesce(excluded.user_id, user_id), context = excluded.context, context_ts = excluded.context_ts,
       updated_at = excluded.updated_at
 WHERE assistant_threads.context_ts IS NULL OR excluded.context_ts >= assistant_threads.context_ts`;

export function contextStatement(
  db: D1Database,
  thread: ThreadKey & { readonly userId: string | undefined; readonly context: JsonObject | undefined; readonly eventTs: string },
  now: number,
): D1PreparedStatement {
  return db
    .prepare(upsertContext)
    .bind(
      thread.teamId,
      thread.channelId,
      thread.threadTs,
      thread.userId ?? null,
      thread.context ? JSON.stringify(thread.context) : null,
      thread.eventTs,
      now,
    );
}

/**
 * A question, recorded with its answer row (the row's key, inserted earlier in the same batch, or by an earlier
 * copy of the same message): ON CONFLICT DO NOTHING, so a retry or the same message under another event_id is one
 * turn. The thread is touched too, so a thread whose start Slack never told (or told late) still has its row.
 */
const insertTurn = `
INSERT INTO assistant_turns (team_id, channel_id, thread_ts, message_ts, user_id, question, outbox_id, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, (SELECT id FROM outbox WHERE idempotency_key = ?7), ?8, ?8)
ON CONFLICT DO NOTHING`;
const touchThread = `
INSERT INTO assistant_threads (team_id, channel_id, thread_ts, user_id, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT (team_id, channel_id, thread_ts) DO UPDATE SET updated_at = max(updated_at, excluded.updated_at)`;

export function turnStatements(
  db: D1Database,
  turn: TurnKey & { readonly userId: string | undefined; readonly question: string; readonly answerKey: string },
  now: number,
): D1PreparedStatement[] {
  return [
    db
      .prepare(insertTurn)
      .bind(turn.teamId, turn.channelId, turn.threadTs, turn.messageTs, turn.userId ?? null, turn.question, turn.answerKey, now),
    db.prepare(touchThread).bind(turn.teamId, turn.channelId, turn.threadTs, turn.userId ?? null, now),
  ];
}

/**
 * The user pressed stop (agent_session_stopped, at `event_ts` ?5): the thread's answers at work then end at their
 * next write — never a question still waiting its turn ('asked'), nor one asked after the stop (a retry of the stop
 * delivered late, or out of order, leaves later questions alone).
 */
const requestStop = `
UPDATE assistant_turns SET stop_requested_at = coalesce(stop_requested_at, ?4), updated_at = ?4
 WHERE team_id = ?1 AND channel_id = ?2 AND thread_ts = ?3 AND message_ts <= ?5
   AND state IN ('answering', 'starting', 'streaming', 'generated')`;

export function stopStatement(db: D1Database, thread: ThreadKey, eventTs: string, now: number): D1PreparedStatement {
  return db.prepare(requestStop).bind(thread.teamId, thread.channelId, thread.threadTs, now, eventTs);
}

// ── The answer's read ────────────────────────────────────────────────────────

export interface ThreadView {
  readonly context: JsonObject | undefined;
  /** The turn being answered. */
  readonly turn: Turn | undefined;
  /** Earlier turns of the thread, oldest first (at most HISTORY_MAX_TURNS). */
  readonly earlier: readonly Turn[];
}

const TURN_COLUMNS = `t.team_id, t.channel_id, t.thread_ts, t.message_ts, t.user_id, t.question, t.outbox_id, o.status AS row_status,
  o.next_attempt_at AS row_due_at,
  t.state, t.stream_ts, t.stream_started_at, t.sent_chars, t.answer, t.model_calls, t.stop_requested_at`;

/** The turn and the newest HISTORY_MAX_TURNS before it: a range of the primary key, each with its row by id. */
const readTurns = `
SELECT ${TURN_COLUMNS}
  FROM assistant_turns AS t LEFT JOIN outbox AS o ON o.id = t.outbox_id
 WHERE t.team_id = ?1 AND t.channel_id = ?2 AND t.thread_ts = ?3 AND t.message_ts <= ?4
 ORDER BY t.message_ts DESC
 LIMIT ?5`;
const readContext = "SELECT context FROM assistant_threads WHERE team_id = ?1 AND channel_id = ?2 AND thread_ts = ?3";

interface TurnRow {
  team_id: string;
  channel_id: string;
  thread_ts: string;
  message_ts: string;
  user_id: string | null;
  question: string;
  outbox_id: number | null;
  row_status: string | null;
  row_due_at: number | null;
  state: TurnState;
  stream_ts: string | null;
  stream_started_at: number | null;
  sent_chars: number;
  answer: string | null;
  model_calls: number;
  stop_requested_at: number | null;
}

/** One round trip: the thread's context and its turns up to `key`'s. */
export async function readThread(db: D1Database, key: TurnKey): Promise<ThreadView> {
  const [turns, context] = await db.batch<Record<string, unknown>>([
    db.prepare(readTurns).bind(key.teamId, key.channelId, key.threadTs, key.messageTs, HISTORY_MAX_TURNS + 1),
    db.prepare(readContext).bind(key.teamId, key.channelId, key.threadTs),
  ]);
  const rows = ((turns?.results ?? []) as unknown as TurnRow[]).map(turnOf).reverse();
  const turn = rows.at(-1)?.messageTs === key.messageTs ? rows.at(-1) : undefined;
  const stored = context?.results[0]?.context;
  return {
    context: typeof stored === "string" ? parseObject(stored) : undefined,
    turn,
    earlier: turn ? rows.slice(0, -1) : rows.slice(-HISTORY_MAX_TURNS),
  };
}

function turnOf(r: TurnRow): Turn {
  return {
    teamId: r.team_id,
    channelId: r.channel_id,
    threadTs: r.thread_ts,
    messageTs: r.message_ts,
    userId: r.user_id,
    question: r.question,
    outboxId: r.outbox_id,
    rowStatus: r.row_status,
    rowDueAt: r.row_due_at,
    state: r.state,
    streamTs: r.stream_ts,
    streamStartedAt: r.stream_started_at,
    sentChars: r.sent_chars,
    answer: r.answer,
    modelCalls: r.model_calls,
    stopRequestedAt: r.stop_requested_at,
  };
}

function parseObject(text: string): JsonObject | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as JsonObject) : undefined;
  } catch {
    return undefined;
  }
}

// ── The answer's writes, under its claim ────────────────────────────────────

/** What an answer writes of its progress; a field left out is kept. */
export interface Progress {
  readonly state?: TurnState;
  readonly streamTs?: string;
  readonly streamStartedAt?: number;
  readonly sentChars?: number;
  readonly answer?: string;
  /** One more model call begins. */
  readonly modelCall?: true;
}

/**
 * The turn's progress, written only while the answer row's claim holds (?9 id, ?10 token), in the batch of its
 * lease's renewal. RETURNING the stop request: the one thing the answer learns from the write.
 */
const writeProgress = `
UPDATE assistant_turns
   SET state = coalesce(?5, state), stream_ts = coalesce(?6, stream_ts), stream_started_at = coalesce(?7, stream_started_at),
       sent_chars = coalesce(?8, sent_chars), answer = coalesce(?11, answer), model_calls = model_calls + ?12, updated_at = ?13
 WHERE team_id = ?1 AND channel_id = ?2 AND thread_ts = ?3 AND message_ts = ?4 AND ${leaseHeldSql("?9", "?10")}
RETURNING stop_requested_at`;

export function progressStatement(
  db: D1Database,
  key: TurnKey,
  claim: { readonly rowId: number; readonly claimToken: string },
  progress: Progress,
  now: number,
): D1PreparedStatement {
  return db
    .prepare(writeProgress)
    .bind(
      key.teamId,
      key.channelId,
      key.threadTs,
      key.messageTs,
      progress.state ?? null,
      progress.streamTs ?? null,
      progress.streamStartedAt ?? null,
      progress.sentChars ?? null,
      claim.rowId,
      claim.claimToken,
      progress.answer ?? null,
      progress.modelCall ? 1 : 0,
      now,
    );
}

// ── Pruning ──────────────────────────────────────────────────────────────────

const pruneTurns = `
DELETE FROM assistant_turns WHERE (team_id, channel_id, thread_ts, message_ts) IN
  (SELECT team_id, channel_id, thread_ts, message_ts FROM assistant_turns WHERE updated_at < ?1 ORDER BY updated_at LIMIT ?2)`;
const pruneThreads = `
DELETE FROM assistant_threads WHERE (team_id, channel_id, thread_ts) IN
  (SELECT team_id, channel_id, thread_ts FROM assistant_threads WHERE updated_at < ?1 ORDER BY updated_at LIMIT ?2)`;

/** Turns and threads last written before `before`, at most `limit` of each (oldest first, by their age index). */
export async function pruneAssistant(db: D1Database, before: number, limit: number): Promise<{ turns: number; threads: number }> {
  const [turns, threads] = await db.batch([db.prepare(pruneTurns).bind(before, limit), db.prepare(pruneThreads).bind(before, limit)]);
  return { turns: turns?.meta.changes ?? 0, threads: threads?.meta.changes ?? 0 };
}
