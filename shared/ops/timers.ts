/**
 * TIMERS, as an operator looks for them (`ackbox timers list`, GET /admin/timers): rows with a time of the
 * app's choosing (IntentOptions.at / after) that are still pending, and those a cancel ended, soonest first,
 * filtered by team and by their time, in pages, across every shard.
 *
 * Each shard's page is a bounded walk of outbox_timers (migration 0015) in (due_at, id) order after the
 * cursor: at most `scanLimit` timers walked, those of the team kept (as the dead list does, shared/ops/dead.ts,
 * a selective filter may return a short page with a cursor past the rows it walked; no cursor is the end).
 * Two statements per shard, in one round trip: the page, and the walk's last position (index only).
 *
 * Across shards the order is (due_at, shard, id), and a page never goes past the earliest frontier of the
 * shards that have more (the last row a shard returned when its page was full, or walked when it was short):
 * beyond it some shard's rows are not read yet. That keeps the pages free of gaps and repeats.
 */
import { decodeShardPosition, encodeShardPosition } from "./shard-cursor.ts";

export interface TimerFilter {
  readonly team?: string | undefined;
  /** Time before (ms, exclusive). */
  readonly dueBefore?: number | undefined;
}

/** A position in the merged order: the last timer a page covered. */
export interface TimerCursor {
  readonly dueAt: number;
  readonly shard: number;
  readonly id: number;
}

export interface TimerRow {
  readonly shard: number;
  readonly id: number;
  readonly key: string;
  readonly receiptId: string;
  readonly teamId: string | null;
  readonly effect: string;
  readonly dueAt: number;
  /** pending, or done with cancelledBy set: cancelled (never performed). */
  readonly status: string;
  readonly cancelledBy: string | null;
  readonly attempts: number;
  readonly nextAttemptAt: number;
  readonly lastError: string | null;
  readonly createdAt: number;
  readonly completedAt: number | null;
  readonly payload: string;
}

export interface TimerPage {
  readonly rows: readonly TimerRow[];
  readonly next: TimerCursor | null;
}

/** Timers one shard's page may walk. */
export const TIMERS_SCAN_LIMIT = 1_000;
export const TIMERS_PAGE_MAX = 200;

/** outbox_timers' own condition: the statement must say it for the partial index to serve it. */
const TIMERS = "due_at IS NOT NULL AND (status = 'pending' OR cancelled_by IS NOT NULL)";

/** The walk: timers with due_at in [?1, ?2) after the cursor (?1 its due_at, ?3 its id), soonest first, at most ?4. */
const walk = `
 WHERE ${TIMERS} AND due_at >= ?1 AND due_at < ?2 AND NOT (due_at = ?1 AND id <= ?3)
 ORDER BY due_at, id`;

/** The walk, the team's only, at most ?6. Rows read: about 2 per timer walked. */
const timersPage = `
SELECT id, idempotency_key, receipt_id, team_id, effect, due_at, status, cancelled_by, attempts, next_attempt_at,
       last_error, created_at, completed_at, payload
  FROM (SELECT * FROM outbox ${walk} LIMIT ?4)
 WHERE (?5 IS NULL OR team_id = ?5)
 ORDER BY due_at, id
 LIMIT ?6`;

/** The walk's last position, when the walk was full (else nothing: it reached the end). Index only. */
const lastOfFullWalk = `SELECT due_at, id FROM outbox ${walk} LIMIT 1 OFFSET ?4 - 1`;

interface TimerRecord {
  id: number;
  idempotency_key: string;
  receipt_id: string;
  team_id: string | null;
  effect: string;
  due_at: number;
  status: string;
  cancelled_by: string | null;
  attempts: number;
  next_attempt_at: number;
  last_error: string | null;
  created_at: number;
  completed_at: number | null;
  payload: string;
}

interface ShardPage {
  readonly rows: readonly TimerRow[];
  /** Where this shard's next page starts; null at its end. */
  readonly next: { readonly dueAt: number; readonly id: number } | null;
}

/** One shard's page after (dueAt, id). */
export async function listTimersOn(
  db: D1Database,
  shard: number,
  filter: TimerFilter,
  after: { readonly dueAt: number; readonly id: number } | null,
  limit: number,
  scanLimit: number = TIMERS_SCAN_LIMIT,
): Promise<ShardPage> {
  const scan = Math.max(scanLimit, limit);
  const window = [after?.dueAt ?? 0, filter.dueBefore ?? Number.MAX_SAFE_INTEGER, after?.id ?? 0, scan] as const;
  const [page, end] = await db.batch<Record<string, unknown>>([
    db.prepare(timersPage).bind(...window, filter.team ?? null, limit),
    db.prepare(lastOfFullWalk).bind(...window),
  ]);
  const rows = ((page?.results ?? []) as unknown as TimerRecord[]).map((r) => timerRowOf(r, shard));
  const last = rows.at(-1);
  if (rows.length === limit && last) return { rows, next: { dueAt: last.dueAt, id: last.id } };
  const walked = end?.results[0] as { due_at: number; id: number } | undefined;
  return { rows, next: walked ? { dueAt: walked.due_at, id: walked.id } : null };
}

/** (due_at, shard, id): negative when a comes first. */
export function compareTimers(a: TimerCursor, b: TimerCursor): number {
  return a.dueAt - b.dueAt || a.shard - b.shard || a.id - b.id;
}

/** Shard `shard`'s own (due_at, id) position for "after `cursor`" in the merged order. */
function shardAfter(cursor: TimerCursor, shard: number): { dueAt: number; id: number } {
  if (shard < cursor.shard) return { dueAt: cursor.dueAt, id: Number.MAX_SAFE_INTEGER }; // its rows at dueAt came earlier
  if (shard > cursor.shard) return { dueAt: cursor.dueAt, id: 0 }; // its rows at dueAt come later, all of them
  return { dueAt: cursor.dueAt, id: cursor.id };
}

/** Every shard's timers as one list, soonest first, in pages. */
export async function listTimersAcross(
  /** Index order; undefined for a shard not to read (a team's filter reads its own shard only). */
  shards: readonly (D1Database | undefined)[],
  filter: TimerFilter,
  cursor: TimerCursor | null,
  limit: number,
  scanLimit?: number,
): Promise<{ readonly rows: readonly TimerRow[]; readonly next: TimerCursor | null }> {
  const pages = await Promise.all(
    shards.map((db, shard): Promise<ShardPage> | ShardPage =>
      db ? listTimersOn(db, shard, filter, cursor ? shardAfter(cursor, shard) : null, limit, scanLimit) : { rows: [], next: null },
    ),
  );
  let frontier: TimerCursor | null = null;
  for (const [shard, page] of pages.entries()) {
    if (!page.next) continue;
    const position = { ...page.next, shard };
    if (frontier === null || compareTimers(position, frontier) < 0) frontier = position;
  }
  const merged = pages
    .flatMap((page) => page.rows)
    .filter((row) => frontier === null || compareTimers(row, frontier) <= 0)
    .sort(compareTimers);
  const rows = merged.slice(0, limit);
  const last = rows.at(-1);
  return { rows, next: rows.length === limit && last ? { dueAt: last.dueAt, shard: last.shard, id: last.id } : frontier };
}

/** The cursor as text (shard-cursor.ts): "<due_at>.<id>" with one shard, "<due_at>.<shard>.<id>" with more. */
export function encodeTimerCursor(cursor: TimerCursor, shardCount: number): string {
  return encodeShardPosition(cursor.dueAt, cursor.shard, cursor.id, shardCount);
}

/** null for text this API did not hand out under this SHARD_COUNT. */
export function decodeTimerCursor(text: string, shardCount: number): TimerCursor | null {
  const position = decodeShardPosition(text, shardCount);
  return position && { dueAt: position.time, shard: position.shard, id: position.id };
}

/**
 * What a timer is doing at `now`, for a person: waiting (its time is ahead), due (its time has come and it
 * has not been attempted: on its way, or late), retrying (attempted, waiting for its next attempt), cancelled.
 */
export function timerState(row: Pick<TimerRow, "status" | "cancelledBy" | "dueAt" | "attempts">, now: number): string {
  if (row.cancelledBy !== null) return "cancelled";
  if (row.dueAt > now) return "waiting";
  return row.attempts > 0 ? "retrying" : "due";
}

function timerRowOf(r: TimerRecord, shard: number): TimerRow {
  return {
    shard,
    id: r.id,
    key: r.idempotency_key,
    receiptId: r.receipt_id,
    teamId: r.team_id,
    effect: r.effect,
    dueAt: r.due_at,
    status: r.cancelled_by !== null ? "cancelled" : r.status,
    cancelledBy: r.cancelled_by,
    attempts: r.attempts,
    nextAttemptAt: r.next_attempt_at,
    lastError: r.last_error,
    createdAt: r.created_at,
    completedAt: r.completed_at,
    payload: r.payload,
  };
}
