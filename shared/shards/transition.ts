/**
 * ADDING A SHARD: the window between SHARD_COUNT going from N to N + 1 and
 * the operator removing SHARD_COUNT_PREVIOUS (docs/scaling.md, "Adding a shard").
 *
 * Jump hash moves only the keys that land on the new shard; every other key
 * keeps its shard and pays nothing here. For a moved key the receipts of
 * inputs recorded before the switch stay on its previous shard: a Slack retry
 * (or a redelivered operation id) of one of them must be a duplicate, not a
 * second record on the new shard, and a copy of its fact under another
 * event_id must add no row its fact has there. The ack reads both on the
 * previous shard before its batch (`recordedOn`): one statement of indexed
 * reads, moved keys only, and only while the window is open. Installations do not move: every
 * one lives on shard 0 (docs/scaling.md, "Where installations live").
 *
 * Rows recorded before the switch stay where they are: their messages name
 * their shard, and that shard's consumer and sweep deliver them.
 */
import type { Settings } from "../settings.ts";
import { shardIndexOf } from "./route.ts";

/** SHARD_COUNT now, and SHARD_COUNT_PREVIOUS while a shard is being added. */
export interface ShardTransition {
  readonly count: number;
  readonly previous: number;
}

/** The transition in progress, or undefined in the steady state (SHARD_COUNT_PREVIOUS unset). */
export function transitionOf(settings: Pick<Settings, "shardCount" | "shardCountPrevious">): ShardTransition | undefined {
  const previous = settings.shardCountPrevious;
  return previous === undefined || previous >= settings.shardCount ? undefined : { count: settings.shardCount, previous };
}

/**
 * Where a routing key lived before the shard was added, when that differs from
 * where it lives now; undefined for a key that did not move (and for an input
 * without a key: shard 0 under every count).
 */
export function previousShardOf(routingKey: string | undefined, transition: ShardTransition | undefined): number | undefined {
  if (!transition || routingKey === undefined) return undefined;
  const before = shardIndexOf(routingKey, transition.previous);
  return before === shardIndexOf(routingKey, transition.count) ? undefined : before;
}

/** Whether a receipt with this id is on `db`: one primary-key read (receipts is WITHOUT ROWID, keyed by id). */
/**
 * What a moved key's previous shard already holds of an input, in one statement: its receipt (a Slack retry,
 * a redelivered operation id), and the rows of its fact among `keys` (the same message under another
 * event_id, recorded there before the switch: record.ts's fact dedupe, read across the two shards).
 */
export async function recordedOn(
  db: D1Database,
  receiptId: string,
  fact: string | undefined,
  keys: readonly string[],
): Promise<{ readonly receipt: boolean; readonly keys: ReadonlySet<string> }> {
  const { results } = await db
    .prepare(
      `SELECT 1 AS receipt, NULL AS key FROM receipts WHERE id = ?1
       UNION ALL
       SELECT 0, idempotency_key FROM outbox
        WHERE ?2 IS NOT NULL AND idempotency_key IN (SELECT value FROM json_each(?3)) AND coalesce(fact, receipt_id) = ?2`,
    )
    .bind(receiptId, fact ?? null, JSON.stringify(keys))
    .all<{ receipt: number; key: string | null }>();
  return {
    receipt: results.some((row) => row.receipt === 1),
    keys: new Set(results.flatMap((row) => (row.key === null ? [] : [row.key]))),
  };
}
