/**
 * The ack's durable write: the input's receipt and outbox rows in one D1
 * batch on the team's shard, within ACK_BUDGET_MS, claiming the rows the
 * first attempt takes (shared/delivery/first-attempt.ts) as it inserts them.
 * Returns what the answer says and what the after step needs; never throws.
 */
import type { FirstAttempt, NotPlanned, PlannedClaim } from "../../shared/delivery/first-attempt.ts";
import { describeError, type Fields } from "../../shared/log.ts";
import type { OutboxQueue } from "../../shared/outbox/enqueue.ts";
import { type ClaimedRow, type IntendedEffect, idempotencyKey } from "../../shared/outbox/model.ts";
import { type ReceiptInput, type RecordVerdict, recordIntent } from "../../shared/outbox/record.ts";
import type { Settings } from "../../shared/settings.ts";
import type { RoutingInput } from "../../shared/shards/route.ts";
import { recordedOn } from "../../shared/shards/transition.ts";
import { factOf } from "../../shared/slack/facts.ts";
import type { RecordableInput } from "../../shared/slack/inputs.ts";
import { withTimeout } from "../../shared/timeout.ts";

/** What the ack writes to and delivers with, for one shard. */
export interface ShardDeps {
  readonly index: number;
  readonly db: D1Database;
  readonly queue: OutboxQueue;
  readonly firstAttempt?: FirstAttempt | undefined;
  /**
   * Set only while a shard is added, for an input whose team moved: the shard
   * it lived on before (shared/shards/transition.ts). A receipt there makes
   * this delivery a duplicate; nothing is written on either shard.
   */
  readonly previous?: { readonly index: number; readonly db: D1Database } | undefined;
}

export interface WriteDeps {
  readonly db: D1Database;
  readonly queue: OutboxQueue;
  readonly settings: Pick<Settings, "ackBudgetMs" | "sweepGraceMs">;
  readonly firstAttempt?: FirstAttempt | undefined;
  /** The shard an input's team lives on (shared/shards/route.ts); absent: one shard, `db`/`queue`/`firstAttempt`. */
  readonly shardOf?: ((input: RoutingInput) => ShardDeps) | undefined;
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
  intended: readonly IntendedEffect[],
  retryNum: string | null,
  deps: WriteDeps,
  now: number,
): Promise<Written> {
  let effects = intended;
  const shard = deps.shardOf?.(input);
  const on: WrittenOn = shard ?? deps;
  let fields: Fields = { shard: shard?.index };
  const receipt = receiptOf(input, retryNum);
  // A read on the previous shard spends from the write's budget, so the ack's total stays ACK_BUDGET_MS.
  let budgetMs = deps.settings.ackBudgetMs;
  if (shard?.previous) {
    // A moved team, while a shard is added: a retry of an input first recorded on its previous shard is found
    // there, and so are the rows of its fact recorded there under another event_id (rows recorded there drain
    // there). A failed read writes nothing: 500, and Slack's retry reads again.
    const at = { shard: shard.index, previous_shard: shard.previous.index };
    const fact = receipt.fact ?? receipt.id;
    const keyOf = (effect: IntendedEffect) => idempotencyKey(fact, effect.key);
    const readStarted = performance.now();
    try {
      const seen = await withTimeout(
        recordedOn(shard.previous.db, input.id, receipt.fact, effects.map(keyOf)),
        budgetMs / 2,
        "the previous shard's receipt read",
      );
      if (seen.receipt) return { verdict: "duplicate", fields: at };
      if (seen.keys.size > 0) {
        effects = effects.filter((effect) => !seen.keys.has(keyOf(effect)));
        fields = { ...at, repeated_on_previous: seen.keys.size };
      }
    } catch (error) {
      return { verdict: "not_recorded", fields: { ...at, reason: describeError(error) } };
    }
    budgetMs = Math.max(1, budgetMs - (performance.now() - readStarted));
  }
  const plan = on.firstAttempt?.plan(effects, now);
  const planned = plan && "claim" in plan ? plan : undefined;
  const recording = recordIntent(on.db, receipt, effects, now, deps.settings.sweepGraceMs, undefined, planned?.claim);
  let recorded: RecordVerdict;
  try {
    recorded = await withTimeout(recording, budgetMs, "the durable write");
  } catch (error) {
    return { verdict: "not_recorded", fields: { ...fields, reason: describeError(error) }, on, plan: planned, late: recording };
  }
  if (!recorded.firstDelivery) return { verdict: "duplicate", fields, plan: planned };
  return {
    verdict: "accepted",
    fields: {
      ...fields,
      outbox_ids: recorded.outboxIds,
      first_attempt: firstAttemptVerdict(plan, recorded.claimed.length),
      // A copy of a fact already recorded (the same message under another event_id): its rows were there.
      ...(recorded.repeated > 0 ? { repeated: recorded.repeated, fact: receipt.fact } : {}),
    },
    on,
    outboxIds: recorded.outboxIds,
    claimed: recorded.claimed,
    plan: planned,
  };
}

/**
 * What became of a request's rows on the first attempt, for the ack's log
 * line: "inline" (the write claimed every planned row), "not_claimable" (the
 * write's claim left some pending: a rate key cooling after a 429),
 * "in_flight" (the isolate's inline rows were at INLINE_MAX_IN_FLIGHT),
 * "busy" (more than INLINE_MAX_REQUESTS requests in progress), "no_inline_effect", or "off" (no first attempt: FIRST_ATTEMPT=off, or no
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
