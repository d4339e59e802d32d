/**
 * How one cron tick's D1 queries are shared over the shards. Its own module, not the Worker entry's: workerd
 * takes every export of an entry module for a handler, and refuses to start on a constant.
 *
 * D1 allows 1 000 queries per Worker invocation; past it every query fails, so the last shards would go
 * unswept and the tick's alerts unjudged — exactly during an incident, when the scrub and the sweep have most
 * to do. So the tick counts what it actually issues (one InvocationCount over every shard's countingDb) and
 * gives each step no more than the worst case of what it may still start fits in what is left:
 *
 * - once, first: the token rotation on shard 0, where installations live (ROTATION_QUERIES worst), then what
 *   an older ackbox left (shared/shards/upgrade.ts, upgradeQueries worst: one read a shard once it is empty);
 * - per shard, in order: its allowance is an even split of what is left (after holding back the watch's
 *   WATCH_QUERIES) over the shards not yet walked, so a shard that needed little leaves more to the next.
 *   Of it, the prune and the backlog measure are fixed (SHARD_FIXED_QUERIES); the rest is halved between the
 *   scrub (its batch limit shrunk to fit) and the sweep (its batch and steps shrunk to fit);
 * - once, last: the sample and the alert judgement on shard 0 (WATCH_QUERIES).
 *
 * The worst case at MAX_SHARDS — every shard with a full scrub and a sweep backlog, every due installation
 * failing its refresh write to the end — stays under TICK_BUDGET (test/consumer/query-budget.tick.test.ts).
 * A backlog larger than a tick's share drains over the following ticks.
 */
import { D1_QUERIES_PER_INVOCATION } from "../../shared/delivery/query-budget.ts";
import { REFRESH_PER_TICK, REFRESH_WORST_QUERIES } from "../../shared/installations/rotation.ts";
import { ALERT_KINDS } from "../../shared/ops/health.ts";
import { SCRUB_BATCH_SIZE } from "../../shared/outbox/scrub.ts";
import type { Settings } from "../../shared/settings.ts";

/** What a tick may issue: D1's limit, less a margin for what no count here foresees. */
export const TICK_BUDGET = D1_QUERIES_PER_INVOCATION - 50;
/** The rotation's candidate select, then per installation its claim and at most REFRESH_WORST_QUERIES - 1 more. */
export const ROTATION_QUERIES = 1 + REFRESH_PER_TICK * REFRESH_WORST_QUERIES;
/** The sample's batch (insert, prune) and the alert states' read, then per alert kind its state write and a post (receipt, verdict, row, a failed enqueue's mark). */
export const WATCH_QUERIES = 3 + ALERT_KINDS.length * 5;
/**
 * Per shard: the prune's batch (5), the custom step executions' scrub and prune (2, shared/steps/tokens.ts), the
 * assistant's turns' and threads' prune (2, shared/assistant/store.ts) and the backlog measure's batch (14,
 * shared/ops/backlog.ts).
 */
export const SHARD_FIXED_QUERIES = 5 + 2 + 2 + 14;
/** Messages per sendBatch (shared/outbox/enqueue.ts): a failed one costs its rows' mark, one statement. */
const SEND_BATCH_LIMIT = 100;

/** A scrub of `limit` entries: the due entries' select, one update each, the entries' delete. */
export const scrubQueries = (limit: number): number => (limit === 0 ? 0 : limit + 2);
/** A sweep of `steps` steps of `batch` rows: per step the candidates' select, one take per row, a failed send's mark per chunk. */
export const sweepQueries = (batch: number, steps: number): number => steps * (1 + batch + Math.ceil(batch / SEND_BATCH_LIMIT));

export interface ShardShare {
  readonly sweepBatchSize: number;
  readonly sweepMaxSteps: number;
  /** 0: no scrub this tick on this shard (the allowance did not reach one). */
  readonly scrubLimit: number;
}

/**
 * One shard's share of a tick whose `used` queries are already spent, with `shardsLeft` shards (this one
 * included) still to walk; undefined when not even its fixed part fits (the shard is left for the next tick).
 */
export function shardShareOf(
  settings: Pick<Settings, "sweepBatchSize" | "sweepMaxSteps">,
  used: number,
  shardsLeft: number,
): ShardShare | undefined {
  const allowance = Math.floor((TICK_BUDGET - WATCH_QUERIES - used) / Math.max(1, shardsLeft));
  const variable = allowance - SHARD_FIXED_QUERIES;
  if (variable < 0) return undefined;
  const scrubLimit = Math.max(0, Math.min(SCRUB_BATCH_SIZE, Math.floor(variable / 2) - 2));
  const forSweep = variable - scrubQueries(scrubLimit);
  // The configured batch and steps, shrunk (steps first, then the batch) until the sweep's worst case fits.
  let steps = settings.sweepMaxSteps;
  let batch = settings.sweepBatchSize;
  while (steps > 1 && sweepQueries(batch, steps) > forSweep) steps -= 1;
  while (batch > 0 && sweepQueries(batch, steps) > forSweep) batch -= 1;
  return batch === 0 ? { sweepBatchSize: 0, sweepMaxSteps: 0, scrubLimit } : { sweepBatchSize: batch, sweepMaxSteps: steps, scrubLimit };
}
