/**
 * How one cron tick's D1 queries are shared over the shards. Its own module, not the Worker entry's: workerd
 * takes every export of an entry module for a handler, and refuses to start on a constant.
 */
import { D1_QUERIES_PER_INVOCATION } from "../../shared/delivery/query-budget.ts";
import type { Settings } from "../../shared/settings.ts";

/**
 * D1 queries one tick spends on each shard besides the rows it re-enqueues: prune, scrub and the backlog measure
 * (13, measured by test/consumer/shards.test.ts), the token rotation's select, a move's bookkeeping while a shard
 * is added (3), and a step's candidate select — rounded up.
 */
export const TICK_QUERIES_PER_SHARD = 20;
/** Once a tick: the sample and the alerts (about 10), a move's tries (MOVES_PER_TICK × 3), further steps' selects (≤ 50). */
export const TICK_QUERIES_ONCE = 130;

/**
 * The per-shard share of one tick's re-enqueue budget: SWEEP_BATCH_SIZE ×
 * SWEEP_MAX_STEPS rows (≤ MAX_SWEEP_ROWS_PER_TICK, D1's 1 000 queries per
 * invocation) divided by N, so N shards never take more rows or queries than
 * one did — and never more than the 1 000 leave once every shard's fixed
 * queries (TICK_QUERIES_PER_SHARD) and the tick's own (TICK_QUERIES_ONCE) are
 * paid: at 16 shards the fixed part alone is over 300 queries, so 800 rows
 * more would pass the limit, and the invocation would fail on the last
 * shards, their sweep and the tick's alerts with them. Each shard's share is
 * then at least one row a tick, and a backlog larger than that drains over
 * the following ticks. Beyond MAX_SHARDS the sweep needs one cron invocation
 * per group of shards (not built).
 */
export function sweepShareOf(
  settings: Pick<Settings, "sweepBatchSize" | "sweepMaxSteps">,
  shardCount: number,
): Pick<Settings, "sweepBatchSize" | "sweepMaxSteps"> {
  const budget = D1_QUERIES_PER_INVOCATION - TICK_QUERIES_ONCE - shardCount * TICK_QUERIES_PER_SHARD;
  const rows = Math.max(1, Math.floor(Math.min(settings.sweepBatchSize * settings.sweepMaxSteps, budget) / shardCount));
  const sweepBatchSize = Math.min(settings.sweepBatchSize, rows);
  return { sweepBatchSize, sweepMaxSteps: Math.max(1, Math.floor(rows / sweepBatchSize)) };
}
