/**
 * Dead rows of every shard as ONE list: newest first, in pages, merged
 * across shards without gaps or repeats.
 *
 * The order is (completed_at DESC, shard ASC, id DESC): each shard's own
 * keyset order (dead.ts), with the shard breaking ties between shards. A
 * cursor is the position of the last row a page covered, the triple
 * (completed_at, shard, id); from it, each shard's own cursor is derived:
 *
 *   a shard before the cursor's    rows strictly older than completed_at
 *                                  (its rows at completed_at came earlier)
 *   the cursor's shard             its (completed_at, id) keyset, as dead.ts
 *   a shard after the cursor's     rows at completed_at or older, all of them
 *
 * A page asks every shard for up to `limit` rows after the cursor (each a
 * bounded walk of at most `scanLimit` dead rows, as with one shard) and takes
 * the first `limit` of the merge — but never past a shard's frontier: the
 * last row a shard returned when its page was full, or the last row it walked
 * when the filter left its page short. Past the earliest frontier, some
 * shard's rows are not yet read; so the page stops there and its cursor
 * continues from there. That is what makes the pages gap-free. Cost: one
 * (at most two) queries per shard, ≤ 2 × scanLimit rows read per shard.
 */
import { type DeadCursor, type DeadFilter, type DeadRow, listDead } from "./dead.ts";
import { decodeShardPosition, encodeShardPosition } from "./shard-cursor.ts";

export interface ShardDeadCursor {
  readonly completedAt: number;
  readonly shard: number;
  readonly id: number;
}

export interface ShardDeadRow extends DeadRow {
  readonly shard: number;
}

export interface ShardDeadPage {
  readonly rows: readonly ShardDeadRow[];
  readonly next: ShardDeadCursor | null;
  /** Dead rows the shards walked, summed, where every shard knew; else null. */
  readonly scanned: number | null;
}

/** (completed_at DESC, shard ASC, id DESC): negative when a comes first. */
export function compareDead(a: ShardDeadCursor, b: ShardDeadCursor): number {
  return b.completedAt - a.completedAt || a.shard - b.shard || b.id - a.id;
}

/** Shard `shard`'s own keyset cursor for "after `cursor`" in the merged order. */
export function shardCursorOf(cursor: ShardDeadCursor, shard: number): DeadCursor {
  if (shard < cursor.shard) return { completedAt: cursor.completedAt, id: 0 };
  if (shard > cursor.shard) return { completedAt: cursor.completedAt, id: Number.MAX_SAFE_INTEGER };
  return { completedAt: cursor.completedAt, id: cursor.id };
}

export async function listDeadAcross(
  shards: readonly D1Database[],
  filter: DeadFilter,
  cursor: ShardDeadCursor | null,
  limit: number,
  scanLimit?: number,
): Promise<ShardDeadPage> {
  const pages = await Promise.all(
    shards.map((db, shard) => listDead(db, filter, cursor ? shardCursorOf(cursor, shard) : null, limit, scanLimit)),
  );
  // The earliest frontier among shards that have more: nothing past it may be shown yet.
  let frontier: ShardDeadCursor | null = null;
  for (const [shard, page] of pages.entries()) {
    if (!page.next) continue;
    const position = { completedAt: page.next.completedAt, shard, id: page.next.id };
    if (frontier === null || compareDead(position, frontier) < 0) frontier = position;
  }
  const merged = pages
    .flatMap((page, shard) => page.rows.map((row): ShardDeadRow => ({ ...row, shard })))
    .filter((row) => frontier === null || compareDead(positionOf(row), frontier) <= 0)
    .sort((a, b) => compareDead(positionOf(a), positionOf(b)));
  const rows = merged.slice(0, limit);
  const last = rows.at(-1);
  const next = rows.length === limit && last ? positionOf(last) : frontier;
  const scanned = pages.every((p) => p.scanned !== null) ? pages.reduce((n, p) => n + (p.scanned ?? 0), 0) : null;
  return { rows, next, scanned };
}

function positionOf(row: ShardDeadRow): ShardDeadCursor {
  return { completedAt: row.completedAt, shard: row.shard, id: row.id };
}

/** The cursor as text (shard-cursor.ts): "<completed_at>.<id>" with one shard, "<completed_at>.<shard>.<id>" with more. */
export function encodeShardCursor(cursor: ShardDeadCursor, shardCount: number): string {
  return encodeShardPosition(cursor.completedAt, cursor.shard, cursor.id, shardCount);
}

/** null for text this API did not hand out under this SHARD_COUNT. */
export function decodeShardCursor(text: string, shardCount: number): ShardDeadCursor | null {
  const position = decodeShardPosition(text, shardCount);
  return position && { completedAt: position.time, shard: position.shard, id: position.id };
}
