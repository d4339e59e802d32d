/**
 * REPLAY: an operator moves dead rows back to pending and re-enqueues them.
 *
 * - Only dead rows move. Each row is moved by its own
 *   `UPDATE … WHERE id = ? AND status = 'dead'` (check and act in one
 *   statement), and its meta.changes is the verdict: a row that is pending,
 *   leased, done, or was replayed a moment ago by someone else is untouched.
 * - Idempotent: a second replay of the same rows finds none dead and does
 *   nothing, so nothing is sent twice.
 * - History is kept: the row's earlier attempts stay in outbox_attempts, and
 *   each replay adds a 'replay' audit row holding the attempt count and the
 *   error the row died with. The row starts a fresh attempt budget
 *   (attempts = 0), since the consumer parks a row whose count is spent.
 * - Bounded and throttled: at most REPLAY_MAX_PER_CALL rows per call, moved
 *   and enqueued in steps of REPLAY_BATCH_SIZE; step n's messages carry a
 *   queue delay of n × REPLAY_STEP_DELAY_SECONDS, so Slack sees a ramp, not
 *   a burst. Each moved row's enqueued_at and sweep_at say when its message is
 *   due, so the sweeper does not re-send it early.
 * - A row whose effect may already have happened (maybe_performed, migration
 *   0010: parked under a holder still performing it, or after performing it)
 *   is left out of a filter replay — reported skipped as "maybe_performed" —
 *   and moves only when the operator names it by id. The step's UPDATE checks
 *   it too, so a row flagged after the selection is not moved by a filter.
 * - A dry run selects exactly as a replay would and writes nothing.
 * - Across shards: rows are named by ref ("<shard>:<id>", row-ref.ts) and a
 *   filter selects from the dead list merged across shards (dead-shards.ts).
 *   The steps and their delays are one ramp over the whole selection; each
 *   step runs one batch per shard it touches, against that shard's D1, and
 *   its messages name the shard. Per call: at most REPLAY_MAX_PER_CALL rows in
 *   all, so each shard's statements stay bounded as with one shard.
 */
import type { Log } from "../log.ts";
import { enqueueRows, type OutboxQueue } from "../outbox/enqueue.ts";
import type { OutboxMessage, OutboxStatus } from "../outbox/model.ts";
import type { Settings } from "../settings.ts";
import { shardQueue } from "../shards/queue.ts";
import type { DeadFilter } from "./dead.ts";
import { listDeadAcross, type ShardDeadCursor } from "./dead-shards.ts";
import type { RowRef } from "./row-ref.ts";

export type ReplaySelection =
  | { readonly by: "refs"; readonly refs: readonly RowRef[] }
  | {
      readonly by: "filter";
      readonly filter: DeadFilter;
      readonly cursor: ShardDeadCursor | null;
      readonly limit?: number | undefined;
    };

export interface ReplayRequest {
  readonly selection: ReplaySelection;
  readonly dryRun: boolean;
}

export interface ReplayDeps {
  /** Every shard's D1, index order (shared/shards/bindings.ts). */
  readonly shards: readonly D1Database[];
  readonly queue: OutboxQueue;
  readonly settings: Pick<Settings, "replayMaxPerCall" | "replayBatchSize" | "replayStepDelayMs" | "sweepGraceMs">;
  readonly log: Log;
}

export interface ReplayedRow {
  readonly shard: number;
  readonly id: number;
  readonly receiptId: string;
  readonly effect: string;
  /** The error it died with. */
  readonly lastError: string | null;
  /** Its effect may have happened (migration 0010): only a row named by id is replayed so; the operator is told. */
  readonly maybePerformed: boolean;
  /** The step that moved it; its queue message is delayed step × REPLAY_STEP_DELAY_SECONDS. */
  readonly step: number;
  readonly delaySeconds: number;
}

export interface SkippedRow {
  readonly shard: number;
  readonly id: number;
  /**
   * Why it was not replayed: its status, "missing", "no_longer_dead" (moved by someone else between selection
   * and step), or "maybe_performed" (a filter's: its effect may have happened; replay it by id if it did not).
   */
  readonly reason: OutboxStatus | "missing" | "no_longer_dead" | "maybe_performed";
}

export interface ReplayReport {
  readonly dryRun: boolean;
  /** Rows replayed (or, in a dry run, that would be). */
  readonly replayed: readonly ReplayedRow[];
  readonly skipped: readonly SkippedRow[];
  /** Queue sends; a failed send leaves the row for the next sweep. */
  readonly enqueue: { readonly sent: number; readonly failed: number };
  readonly steps: number;
  /** The filter matched more than one call may take: call again (with `next`) for the rest. */
  readonly more: boolean;
  /** Where a filtered selection stopped; pass it back to continue. */
  readonly next: ShardDeadCursor | null;
  /** Rows replayed (or that would be) and skipped, per shard, every shard listed. */
  readonly perShard: readonly { readonly shard: number; readonly replayed: number; readonly skipped: number }[];
}

export class ReplayRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ReplayRequestError";
  }
}

/** The ids' current state, for the selection by ids. Rows read: 1–2 per id (primary key). */
const statusOfIds = `
SELECT id, status, receipt_id, effect, last_error, maybe_performed FROM outbox WHERE id IN (SELECT value FROM json_each(?1))`;

/**
 * The replay audit rows of one step, written in the same batch as, and just
 * before, its UPDATEs, under the same condition (status = 'dead'): the batch
 * is one transaction, so a marker is written exactly for each row the step moves.
 * attempt and error are the row's as it died. Rows written: 2 per row (the
 * audit row and its outbox_attempts_by_time entry).
 */
const markReplayed = `
INSERT INTO outbox_attempts (outbox_id, attempt, outcome, error, finished_at)
SELECT id, attempts, 'replay', last_error, ?2 FROM outbox
 WHERE id IN (SELECT value FROM json_each(?1)) AND status = 'dead' AND (?3 OR maybe_performed = 0)
ON CONFLICT DO NOTHING`;

/**
 * Dead → pending, one row: check and act in one statement. The claim token is
 * cleared, so a late fenced write of the claim that parked the row can never
 * touch it again. next_attempt_at = now (claimable at once); the message is
 * due at now + delay (enqueued_at), and the sweeper looks in a grace period
 * after that (sweep_at).
 *
 * waiting_since is cleared: a row parked after its 7-day wait for an
 * installation (delivery/deliver.ts) starts a fresh wait, not dead at its
 * first claim.
 *
 * A row that may have been performed moves only when named by id (?5 = 1);
 * once moved it is a fresh delivery, so the flag is cleared.
 *
 * Rows read: 1. Rows written: the row, and its index moves (leaves
 * outbox_dead_by_age, enters outbox_sweepable): 3.
 */
const replayIfDead = `
UPDATE outbox
   SET status = 'pending', attempts = 0, claim_token = NULL, claim_expires_at = NULL,
       next_attempt_at = ?2, enqueued_at = ?2 + ?3, sweeps = 0, sweep_at = ?2 + ?3 + ?4,
       completed_at = NULL, rate_limited_since = NULL, waiting_since = NULL, maybe_performed = 0, updated_at = ?2
 WHERE id = ?1 AND status = 'dead' AND (?5 OR maybe_performed = 0)`;

interface Candidate {
  readonly shard: number;
  readonly id: number;
  readonly receiptId: string;
  readonly effect: string;
  readonly lastError: string | null;
  readonly maybePerformed: boolean;
}

export async function replayDead(deps: ReplayDeps, request: ReplayRequest, now: number): Promise<ReplayReport> {
  const { settings } = deps;
  const cap = settings.replayMaxPerCall;
  const { candidates, skipped, more, next } = await select(deps.shards, request.selection, cap);
  // Named by id: the operator's decision, a row that may have been performed included.
  const byId = request.selection.by === "refs" ? 1 : 0;

  const stepDelaySeconds = Math.round(settings.replayStepDelayMs / 1000);
  const steps: Candidate[][] = [];
  for (let i = 0; i < candidates.length; i += settings.replayBatchSize) steps.push(candidates.slice(i, i + settings.replayBatchSize));

  if (request.dryRun) {
    const replayed = steps.flatMap((rows, step) => rows.map((row) => ({ ...row, step, delaySeconds: step * stepDelaySeconds })));
    return {
      dryRun: true,
      replayed,
      skipped,
      enqueue: { sent: 0, failed: 0 },
      steps: steps.length,
      more,
      next,
      perShard: perShardOf(deps.shards, replayed, skipped),
    };
  }

  const replayed: ReplayedRow[] = [];
  const lateSkips: SkippedRow[] = [];
  let sent = 0;
  let failed = 0;
  for (const [step, stepRows] of steps.entries()) {
    const delaySeconds = step * stepDelaySeconds;
    // One batch (one transaction) per shard this step touches, against that shard's D1.
    for (const [shard, rows] of byShard(stepRows)) {
      const db = deps.shards[shard] as D1Database;
      const results = await db.batch([
        db.prepare(markReplayed).bind(JSON.stringify(rows.map((r) => r.id)), now, byId),
        ...rows.map((row) => db.prepare(replayIfDead).bind(row.id, now, delaySeconds * 1000, settings.sweepGraceMs, byId)),
      ]);
      const moved = rows.filter((_, i) => results[i + 1]?.meta.changes === 1);
      // Selected as dead, but no longer dead by the time the step ran: someone else moved it.
      for (const row of rows) if (!moved.includes(row)) lateSkips.push({ shard, id: row.id, reason: "no_longer_dead" });
      for (const row of moved) replayed.push({ ...row, step, delaySeconds });
      if (moved.length === 0) continue;
      const outcome = await enqueueRows(
        delayed(shardQueue(deps.queue, shard), delaySeconds),
        db,
        moved.map((r) => r.id),
        now,
        deps.log,
      );
      sent += outcome.sent;
      failed += outcome.failed;
    }
  }
  const allSkipped = [...skipped, ...lateSkips];
  const refs = (rows: readonly { shard: number; id: number }[]) => rows.map((r) => (deps.shards.length > 1 ? `${r.shard}:${r.id}` : r.id));
  deps.log(replayed.length > 0 ? "warn" : "info", "replay", {
    replayed: refs(replayed),
    skipped: refs(allSkipped),
    steps: steps.length,
    enqueue_failed: failed,
  });
  return {
    dryRun: false,
    replayed,
    skipped: allSkipped,
    enqueue: { sent, failed },
    steps: steps.length,
    more,
    next,
    perShard: perShardOf(deps.shards, replayed, allSkipped),
  };
}

function byShard(rows: readonly Candidate[]): Map<number, Candidate[]> {
  const groups = new Map<number, Candidate[]>();
  for (const row of rows) {
    const group = groups.get(row.shard) ?? [];
    group.push(row);
    groups.set(row.shard, group);
  }
  return groups;
}

function perShardOf(
  shards: readonly unknown[],
  replayed: readonly { shard: number }[],
  skipped: readonly { shard: number }[],
): ReplayReport["perShard"] {
  return shards.map((_, shard) => ({
    shard,
    replayed: replayed.filter((r) => r.shard === shard).length,
    skipped: skipped.filter((r) => r.shard === shard).length,
  }));
}

async function select(
  shards: readonly D1Database[],
  selection: ReplaySelection,
  cap: number,
): Promise<{ candidates: Candidate[]; skipped: SkippedRow[]; more: boolean; next: ShardDeadCursor | null }> {
  if (selection.by === "refs") {
    const refs = [...new Map(selection.refs.map((r) => [`${r.shard}:${r.id}`, r])).values()];
    if (refs.length === 0) throw new ReplayRequestError("no ids given");
    if (refs.length > cap) throw new ReplayRequestError(`at most ${cap} ids per call (REPLAY_MAX_PER_CALL); got ${refs.length}`);
    const bad = refs.find((r) => r.shard < 0 || r.shard >= shards.length);
    if (bad) throw new ReplayRequestError(`shard ${bad.shard} is not configured (SHARD_COUNT is ${shards.length})`);
    // One read per shard named (primary key), not per row.
    type Found = {
      id: number;
      status: OutboxStatus;
      receipt_id: string;
      effect: string;
      last_error: string | null;
      maybe_performed: number;
    };
    const found = new Map<string, Found>();
    for (const shard of new Set(refs.map((r) => r.shard))) {
      const ids = refs.filter((r) => r.shard === shard).map((r) => r.id);
      const { results } = await (shards[shard] as D1Database).prepare(statusOfIds).bind(JSON.stringify(ids)).all<Found>();
      for (const row of results) found.set(`${shard}:${row.id}`, row);
    }
    const candidates: Candidate[] = [];
    const skipped: SkippedRow[] = [];
    for (const { shard, id } of refs) {
      const row = found.get(`${shard}:${id}`);
      if (!row) skipped.push({ shard, id, reason: "missing" });
      else if (row.status !== "dead") skipped.push({ shard, id, reason: row.status });
      else
        candidates.push({
          shard,
          id,
          receiptId: row.receipt_id,
          effect: row.effect,
          lastError: row.last_error,
          maybePerformed: row.maybe_performed === 1,
        });
    }
    return { candidates, skipped, more: false, next: null };
  }
  const limit = Math.min(selection.limit ?? cap, cap);
  if (limit < 1) throw new ReplayRequestError("limit must be at least 1");
  const page = await listDeadAcross(shards, selection.filter, selection.cursor, limit);
  const candidates = page.rows
    .filter((r) => !r.maybePerformed)
    .map((r) => ({ shard: r.shard, id: r.id, receiptId: r.receiptId, effect: r.effect, lastError: r.lastError, maybePerformed: false }));
  const skipped = page.rows.filter((r) => r.maybePerformed).map((r) => ({ shard: r.shard, id: r.id, reason: "maybe_performed" as const }));
  return { candidates, skipped, more: page.next !== null, next: page.next };
}

/** The queue, with every message of this step delayed: the replay's throttle. */
function delayed(queue: OutboxQueue, delaySeconds: number): OutboxQueue {
  if (delaySeconds === 0) return queue;
  return {
    sendBatch: (messages: Iterable<MessageSendRequest<OutboxMessage>>) =>
      queue.sendBatch([...messages].map((message) => ({ ...message, delaySeconds }))),
  };
}
