/**
 * Dead rows, as an operator looks for them: newest first, filtered by effect,
 * error substring, team and the time the row died, in pages.
 *
 * Pages are keyset-paginated on (completed_at, id) through outbox_dead_by_age,
 * and every page is a bounded scan (invariant 6): it walks at most
 * `scanLimit` dead rows after the cursor, keeps those that match the filter,
 * and stops. A selective filter may therefore return a short page (even an
 * empty one) with a cursor that continues past the rows it walked; no cursor
 * means the end. The cost of a page never depends on how many dead rows
 * there are.
 */

export interface DeadFilter {
  readonly effect?: string | undefined;
  /** Case-insensitive substring of last_error. */
  readonly error?: string | undefined;
  readonly team?: string | undefined;
  /** Died at or after (ms). */
  readonly since?: number | undefined;
  /** Died before (ms). */
  readonly until?: number | undefined;
}

/** A position in the newest-first order: the last row a page walked. */
export interface DeadCursor {
  readonly completedAt: number;
  readonly id: number;
}

export interface DeadRow {
  readonly id: number;
  readonly receiptId: string;
  readonly teamId: string | null;
  readonly effect: string;
  readonly payload: string;
  readonly attempts: number;
  readonly lastError: string | null;
  readonly createdAt: number;
  readonly completedAt: number;
  readonly expiresAt: number | null;
  /** Its effect may have happened (parked under a holder, or after performing it): a filter replay leaves it out. */
  readonly maybePerformed: boolean;
}

export interface DeadPage {
  readonly rows: readonly DeadRow[];
  readonly next: DeadCursor | null;
  /** Dead rows this page walked, where known: the scan limit when the walk used it all; null when it stopped early. */
  readonly scanned: number | null;
}

/** Dead rows one page may walk. */
export const DEAD_SCAN_LIMIT = 1_000;
export const DEAD_PAGE_MAX = 200;

/**
 * The window: dead rows in [since, upper], newest first, excluding the
 * cursor's row and those after it at the same completed_at, at most ?6.
 * upper is the cursor's completed_at when there is one, else until − 1, so
 * the index range starts where the previous page stopped.
 */
const windowWhere = `
 WHERE status = 'dead'
   AND completed_at >= ?1 AND completed_at <= ?2
   AND NOT (completed_at = ?3 AND id >= ?4)
 ORDER BY completed_at DESC, id DESC`;

/**
 * One page: the window, filtered, at most ?9 rows. Rows read: about 2 per row
 * walked (index entry and row), so at most 2 × scanLimit.
 */
const deadPage = `
SELECT id, receipt_id, team_id, effect, payload, attempts, last_error, created_at, completed_at, expires_at, maybe_performed
  FROM (SELECT * FROM outbox ${windowWhere} LIMIT ?5)
 WHERE (?6 IS NULL OR effect = ?6)
   AND (?7 IS NULL OR team_id = ?7)
   AND (?8 IS NULL OR instr(lower(last_error), lower(?8)) > 0)
 ORDER BY completed_at DESC, id DESC
 LIMIT ?9`;

/**
 * The window's last row, if the window was full (else nothing: the walk
 * reached the end). Run only when a filtered page came back short, to place
 * the cursor past the rows the filter skipped. It reads only the covering
 * index outbox_dead_by_age (completed_at, and the rowid, which is id): about
 * 1 row read per row walked.
 */
const lastOfFullWindow = `
SELECT completed_at, id FROM outbox ${windowWhere} LIMIT 1 OFFSET ?5 - 1`;

interface DeadRecord {
  id: number;
  receipt_id: string;
  team_id: string | null;
  effect: string;
  payload: string;
  attempts: number;
  last_error: string | null;
  created_at: number;
  completed_at: number;
  expires_at: number | null;
  maybe_performed: number;
}

export async function listDead(
  db: D1Database,
  filter: DeadFilter,
  cursor: DeadCursor | null,
  limit: number,
  scanLimit: number = DEAD_SCAN_LIMIT,
): Promise<DeadPage> {
  const scan = Math.max(scanLimit, limit);
  const since = filter.since ?? 0;
  const untilInclusive = (filter.until ?? Number.MAX_SAFE_INTEGER) - 1;
  const upper = cursor ? Math.min(cursor.completedAt, untilInclusive) : untilInclusive;
  const windowArgs = [since, upper, cursor ? cursor.completedAt : -1, cursor ? cursor.id : 0, scan] as const;
  const { results } = await db
    .prepare(deadPage)
    .bind(...windowArgs, filter.effect ?? null, filter.team ?? null, filter.error ?? null, limit)
    .all<DeadRecord>();
  const rows = results.map(toDeadRow);
  const last = rows.at(-1);
  if (rows.length === limit && last) return { rows, next: { completedAt: last.completedAt, id: last.id }, scanned: null };

  const filtered = filter.effect !== undefined || filter.team !== undefined || filter.error !== undefined;
  if (!filtered) return { rows, next: null, scanned: rows.length };
  const end = await db
    .prepare(lastOfFullWindow)
    .bind(...windowArgs)
    .first<{ completed_at: number; id: number }>();
  if (!end) return { rows, next: null, scanned: null };
  return { rows, next: { completedAt: end.completed_at, id: end.id }, scanned: scan };
}

function toDeadRow(r: DeadRecord): DeadRow {
  return {
    id: r.id,
    receiptId: r.receipt_id,
    teamId: r.team_id,
    effect: r.effect,
    payload: r.payload,
    attempts: r.attempts,
    lastError: r.last_error,
    createdAt: r.created_at,
    completedAt: r.completed_at,
    expiresAt: r.expires_at,
    maybePerformed: r.maybe_performed === 1,
  };
}
