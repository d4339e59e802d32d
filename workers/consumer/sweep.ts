/**
 * THE SWEEP, one cron tick: re-enqueue what is stale, prune what is old.
 * Bounded: at most SWEEP_MAX_STEPS × SWEEP_BATCH_SIZE rows re-enqueued and
 * PRUNE_BATCH_SIZE rows pruned per kind, whatever the tables hold; a backlog
 * larger than that drains over the following ticks.
 */
import { ASSISTANT_RETENTION_MS, pruneAssistant } from "../../shared/assistant/store.ts";
import { describeError, type Log } from "../../shared/log.ts";
import { GAPS_LOOKBACK_MS } from "../../shared/ops/backfill-gaps.ts";
import { enqueueRows, type OutboxQueue } from "../../shared/outbox/enqueue.ts";
import { SCRUB_BATCH_SIZE, scrubDueRows } from "../../shared/outbox/scrub.ts";
import { type PruneCounts, pruneOld, takeStaleRows } from "../../shared/outbox/sweep.ts";
import type { Settings } from "../../shared/settings.ts";
import { sweepExecutions } from "../../shared/steps/tokens.ts";

export interface SweepDeps {
  readonly db: D1Database;
  readonly queue: OutboxQueue;
  readonly settings: Pick<
    Settings,
    "sweepGraceMs" | "sweepBatchSize" | "sweepMaxSteps" | "pruneBatchSize" | "receiptRetentionMs" | "doneRetentionMs" | "deadRetentionMs"
  >;
  readonly log: Log;
  /**
   * The clock read at each step's take: its re-sent rows are looked at again one grace after it (the clock
   * rule of shared/outbox/model.ts), for a tick's rotation or earlier shards may have run long. `now` still
   * decides what is stale. Absent: `now`.
   */
  readonly clock?: () => number;
}

export interface SweepReport {
  readonly reenqueued: number;
  readonly enqueueFailed: number;
  readonly steps: number;
  readonly pruned: PruneCounts;
  /** Dead rows whose stored payload lost its credentials this tick. */
  readonly scrubbed: number;
  /** Custom step executions: tokens scrubbed at their expiry, rows pruned after the receipts' retention. */
  readonly executions: { readonly expired: number; readonly pruned: number };
  /** An assistant's turns and threads pruned (shared/assistant/store.ts). */
  readonly assistant: { readonly turns: number; readonly threads: number };
}

/** `scrubLimit`: the scrub's batch this tick (workers/consumer/sweep-share.ts); 0 skips it. */
export async function sweep(deps: SweepDeps, now: number, scrubLimit = SCRUB_BATCH_SIZE): Promise<SweepReport> {
  const { settings } = deps;
  let reenqueued = 0;
  let enqueueFailed = 0;
  let steps = 0;
  while (steps < settings.sweepMaxSteps && settings.sweepBatchSize > 0) {
    steps += 1;
    const at = deps.clock?.() ?? now;
    const ids = await takeStaleRows(deps.db, now, settings.sweepGraceMs, settings.sweepBatchSize, at);
    if (ids.length === 0) break;
    const { sent, failed } = await enqueueRows(deps.queue, deps.db, ids, at, deps.log);
    reenqueued += sent;
    enqueueFailed += failed;
    // A full step may mean more is waiting; a short one, or a refusing queue, ends the tick.
    if (failed > 0 || ids.length < settings.sweepBatchSize) break;
  }
  const pruned = await pruneOld(
    deps.db,
    {
      receiptsBefore: now - settings.receiptRetentionMs,
      doneBefore: now - settings.doneRetentionMs,
      deadBefore: now - settings.deadRetentionMs,
      gapsBefore: now - GAPS_LOOKBACK_MS,
    },
    settings.pruneBatchSize,
  );
  // Dead rows whose deadline came lose their credentials (shared/outbox/scrub.ts). Never in the tick's way:
  // a failure is logged and the entries wait for the next tick; the re-enqueue above and the alerts after stand.
  const scrubbed = await (scrubLimit > 0 ? scrubDueRows(deps.db, now, scrubLimit) : Promise.resolve(0)).catch((error) => {
    deps.log("error", "scrub step failed; its rows are scrubbed on a later tick", { error: describeError(error) });
    return 0;
  });
  // Workflow tokens past their expiry go, as credentials do; never in the tick's way either.
  const executions = await sweepExecutions(deps.db, now, now - settings.receiptRetentionMs, settings.pruneBatchSize).catch((error) => {
    deps.log("error", "executions' sweep failed; expired workflow tokens are scrubbed on a later tick", { error: describeError(error) });
    return { expired: 0, pruned: 0 };
  });
  // An assistant's turns and threads (what users asked, what the model answered) go ASSISTANT_RETENTION_MS after their last write.
  const assistant = await pruneAssistant(deps.db, now - ASSISTANT_RETENTION_MS, settings.pruneBatchSize).catch((error) => {
    deps.log("error", "assistant turns' prune failed; they are pruned on a later tick", { error: describeError(error) });
    return { turns: 0, threads: 0 };
  });
  const report = { reenqueued, enqueueFailed, steps, pruned, scrubbed, executions, assistant };
  deps.log(reenqueued > 0 || enqueueFailed > 0 ? "info" : "debug", "sweep", { ...report });
  return report;
}
