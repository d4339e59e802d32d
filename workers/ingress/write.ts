/**
 * The ack's durable write: the input's receipt and outbox rows in one D1
 * batch on its workspace's one shard (shared/shards/placement.ts), within ACK_BUDGET_MS, claiming the rows the
 * first attempt takes (shared/delivery/first-attempt.ts) as it inserts them.
 * Returns what the answer says and what the after step needs; never throws.
 */
import { threadStatements } from "../../shared/assistant/records.ts";
import type { ThreadRecord } from "../../shared/assistant/thread.ts";
import type { FirstAttempt, NotPlanned, PlannedClaim } from "../../shared/delivery/first-attempt.ts";
import { describeError, type Fields } from "../../shared/log.ts";
import { cancelsText } from "../../shared/outbox/cancel-named.ts";
import type { OutboxQueue } from "../../shared/outbox/enqueue.ts";
import type { ClaimedRow, IntendedEffect, RecordedRow } from "../../shared/outbox/model.ts";
import { inputRowKey, type ReceiptInput, type RecordVerdict, recordIntent } from "../../shared/outbox/record.ts";
import type { Settings } from "../../shared/settings.ts";
import { type Placing, placedElsewhere } from "../../shared/shards/placement.ts";
import type { RoutingInput } from "../../shared/shards/route.ts";
import { factOf } from "../../shared/slack/facts.ts";
import type { RecordableInput } from "../../shared/slack/inputs.ts";
import { insertExecutionStatement, type SealedExecution } from "../../shared/steps/tokens.ts";
import { withTimeout } from "../../shared/timeout.ts";

/** What the ack writes to and delivers with, for one shard. */
export interface ShardDeps {
  readonly index: number;
  readonly db: D1Database;
  readonly queue: OutboxQueue;
  readonly firstAttempt?: FirstAttempt | undefined;
  /** The workspace's first sight in this isolate, its home shard 0: the placement rides in the batch (shared/shards/placement.ts). */
  readonly placing?: Placing | undefined;
}

export interface WriteDeps {
  readonly db: D1Database;
  readonly queue: OutboxQueue;
  readonly settings: Pick<Settings, "ackBudgetMs" | "sweepGraceMs"> & Partial<Pick<Settings, "queueDelayMaxMs">>;
  readonly firstAttempt?: FirstAttempt | undefined;
  /**
   * The shard an input's workspace lives on (shared/shards/placement.ts): at its first sight in this isolate one
   * round trip to shard 0 (or none, riding in the batch), then nothing. Absent: one shard, `db`/`queue`/`firstAttempt`.
   */
  readonly shardOf?: ((input: RoutingInput, now: number) => Promise<ShardDeps>) | undefined;
}

/** Where the input was written, and how its rows are delivered. */
export type WrittenOn = Pick<ShardDeps, "db" | "queue" | "firstAttempt">;

/** The write's outcome; `fields` go into the ack's log line. */
export type Written =
  | {
      readonly verdict: "accepted";
      readonly fields: Fields;
      readonly on: WrittenOn;
      readonly outboxIds: readonly number[];
      /** The same rows, each with how its message goes (a timer's delayed to its time, or left to the sweep). */
      readonly rows: readonly RecordedRow[];
      /** The rows the write claimed for the first attempt. */
      readonly claimed: readonly ClaimedRow[];
      readonly plan: PlannedClaim | undefined;
    }
  | { readonly verdict: "duplicate"; readonly fields: Fields; readonly plan?: PlannedClaim | undefined }
  | {
      readonly verdict: "not_recorded";
      readonly fields: Fields;
      readonly on?: WrittenOn;
      readonly plan?: PlannedClaim | undefined;
      /** The write that overran its budget or failed: it may still commit. Absent if nothing was written. */
      readonly late?: Promise<RecordVerdict>;
    };

export async function writeDurably(
  input: RecordableInput,
  effects: readonly IntendedEffect[],
  retryNum: string | null,
  deps: WriteDeps,
  now: number,
  /** Names of the workspace's rows to cancel in the same batch (shared/outbox/cancel-named.ts). */
  cancels: readonly string[] = [],
  /** The custom step execution the input belongs to, and its workflow token sealed (shared/steps/tokens.ts). */
  execution?: { readonly executionId: string; readonly sealed?: SealedExecution },
  /** An assistant's thread records (shared/assistant/records.ts): written in the same batch, on the same shard. */
  records: readonly ThreadRecord[] = [],
): Promise<Written> {
  // Where the workspace lives spends from the write's budget, so the ack's total stays ACK_BUDGET_MS. A placement
  // that fails or overruns writes nothing: 500, and Slack's retry asks again.
  let budgetMs = deps.settings.ackBudgetMs;
  let shard: ShardDeps | undefined;
  if (deps.shardOf) {
    const placing = performance.now();
    try {
      shard = await withTimeout(deps.shardOf(input, now), budgetMs, "the placement read");
    } catch (error) {
      return { verdict: "not_recorded", fields: { reason: describeError(error) } };
    }
    budgetMs = Math.max(1, budgetMs - (performance.now() - placing));
  }
  const on: WrittenOn = shard ?? deps;
  const fields: Fields = { shard: shard?.index };
  const receipt = { ...receiptOf(input, retryNum), ...(execution ? { executionId: execution.executionId } : {}) };
  const plan = on.firstAttempt?.plan(effects, now);
  const planned = plan && "claim" in plan ? plan : undefined;
  const also = [
    ...(shard?.placing ? [shard.placing.statement(on.db)] : []),
    // The execution's workflow token, kept beside the receipt on the workspace's shard, in the same batch.
    ...(execution?.sealed ? [insertExecutionStatement(on.db, execution.sealed, receipt.id)] : []),
    // After the rows: a turn names its answer row by key.
    ...threadStatements(on.db, records, (key) => inputRowKey({ key }, receipt.fact ?? receipt.id, receipt.teamId), now),
  ];
  const recording = recordIntent(on.db, receipt, effects, now, deps.settings.sweepGraceMs, undefined, planned?.claim, {
    also,
    cancels,
    ...(deps.settings.queueDelayMaxMs === undefined ? {} : { queueDelayMaxMs: deps.settings.queueDelayMaxMs }),
  });
  let recorded: RecordVerdict;
  try {
    recorded = await withTimeout(recording, budgetMs, "the durable write");
  } catch (error) {
    const reason = placedElsewhere(error)
      ? "placed on another shard meanwhile by a Worker with a higher SHARD_COUNT (a deploy rolling out): nothing was written; Slack's retry finds its shard"
      : describeError(error);
    return { verdict: "not_recorded", fields: { ...fields, reason }, on, plan: planned, late: recording };
  }
  shard?.placing?.committed();
  if (!recorded.firstDelivery) return { verdict: "duplicate", fields, plan: planned };
  return {
    verdict: "accepted",
    fields: {
      ...fields,
      outbox_ids: recorded.outboxIds,
      // Timers: rows due later, with their message's delay in seconds (null: no message; the sweep sends it).
      ...(recorded.rows.some((r) => r.delaySeconds !== 0)
        ? { timers: recorded.rows.filter((r) => r.delaySeconds !== 0).map((r) => [r.id, r.delaySeconds]) }
        : {}),
      first_attempt: firstAttemptVerdict(plan, recorded.claimed.length),
      // A copy of a fact already recorded (the same message under another event_id), or a row name the
      // workspace has already: its rows were there.
      ...(recorded.repeated > 0 ? { repeated: recorded.repeated, fact: receipt.fact } : {}),
      // What each cancel found: "<name>: cancelled | too_late (<status>) | already_cancelled | nothing_to_cancel".
      ...(recorded.cancels.length > 0 ? { cancels: cancelsText(recorded.cancels) } : {}),
    },
    on,
    outboxIds: recorded.outboxIds,
    rows: recorded.rows,
    claimed: recorded.claimed,
    plan: planned,
  };
}

/**
 * What became of a request's rows on the first attempt, for the ack's log
 * line: "inline" (the write claimed every planned row), "not_claimable" (the
 * write's claim left some pending: a rate key cooling after a 429),
 * "in_flight" (the isolate's inline rows were at INLINE_MAX_IN_FLIGHT),
 * "no_inline_effect", or "off" (no first attempt: FIRST_ATTEMPT=off, or no
 * token to call Slack with).
 */
function firstAttemptVerdict(plan: PlannedClaim | NotPlanned | undefined, claimed: number): string {
  if (plan === undefined) return "off";
  if ("queued" in plan) return plan.queued;
  return claimed === plan.claim.indexes.length ? "inline" : "not_claimable";
}

function receiptOf(input: RecordableInput, retryNum: string | null): ReceiptInput {
  return {
    id: input.id,
    kind: input.surface,
    type: input.surface === "event" ? input.event.type : input.surface === "command" ? input.command.command : input.type,
    teamId: input.teamId,
    enterpriseId: input.enterpriseId,
    retryNum: retryNum !== null && /^\d+$/.test(retryNum) ? Number(retryNum) : undefined,
    ...factOf(input),
  };
}
