import { MAX_QUEUE_DELAY_SECONDS } from "../delivery/decide.ts";
import { cancelResultOf, cancelStatements } from "./cancel-named.ts";
import { type ClaimedRecord, claimedRowOf, claimInsertedRow } from "./claim.ts";
import {
  type CancelResult,
  type ClaimedRow,
  type IntendedEffect,
  idempotencyKey,
  namedKey,
  type RecordedRow,
  type Schedule,
  scheduleOf,
} from "./model.ts";

export type ReceiptKind = "event" | "command" | "interaction" | "alert";

export interface ReceiptInput {
  /** event_id, or an operation id (shared/slack/inputs.ts). */
  readonly id: string;
  readonly kind: ReceiptKind;
  /** Event type, command name or interaction type, for operators. */
  readonly type: string;
  readonly teamId?: string | undefined;
  /** The Enterprise Grid org, if any (an org-wide installation is found by it). */
  readonly enterpriseId?: string | undefined;
  /** X-Slack-Retry-Num of this delivery, kept for the audit trail only. */
  readonly retryNum?: number | undefined;
  /**
   * What happened (shared/slack/facts.ts): the rows are keyed by it, so every
   * copy of one fact (another event_id, a backfill) lands on the same keys.
   * Absent: the receipt's id is the fact.
   */
  readonly fact?: string | undefined;
  /** The custom step execution the input belongs to (shared/steps/execution.ts): its rows carry it (migration 0019). */
  readonly executionId?: string | undefined;
}

export type RecordVerdict =
  | {
      readonly firstDelivery: true;
      readonly outboxIds: readonly number[];
      /** The same rows, each with how its message goes: at once, delayed to its time (a timer), or not at all. */
      readonly rows: readonly RecordedRow[];
      /** The rows the write also claimed for the first attempt at the ack (InlineClaim), leased under its token. */
      readonly claimed: readonly ClaimedRow[];
      /**
       * Intents whose row is there already: the same fact's (another copy of it, recorded earlier), or a named
       * row the workspace has (a repeat of its name, from any input): nothing new to do.
       */
      readonly repeated: number;
      /** What each cancel of the input found (shared/outbox/cancel-named.ts), in the order asked. */
      readonly cancels: readonly CancelResult[];
    }
  | { readonly firstDelivery: false };

/**
 * Rows the durable write claims as it inserts them, for the first attempt at
 * the ack (shared/delivery/first-attempt.ts): which effects (their indexes),
 * under which token, for how long.
 */
export interface InlineClaim {
  readonly token: string;
  readonly leaseMs: number;
  /** Read at the write, for the lease's expiry (the glossary's clock rule): not the request's start time. */
  readonly clock: () => number;
  readonly indexes: readonly number[];
}

/**
 * The receipt. ON CONFLICT DO NOTHING is the whole dedupe: the uniqueness check
 * and the insert are one statement, so of two concurrent deliveries exactly one
 * inserts. Rows written: 2 (table + receipts_by_age), or 0 on a duplicate.
 */
const insertReceipt = `
INSERT INTO receipts (id, kind, type, team_id, retry_num, delivery_id, received_at, enterprise_id, fact, execution_id)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
ON CONFLICT (id) DO NOTHING`;

/**
 * changes() reports the statement immediately before it, and D1 runs a batch's
 * statements in order inside one transaction: so this must stay directly after
 * insertReceipt. 1 = this delivery inserted the receipt, 0 = a duplicate.
 */
const receiptVerdict = "SELECT changes() AS changes";

/**
 * One outbox row. It selects the receipt by this request's delivery id, so a
 * duplicate delivery writes nothing even if the app's routing changed between
 * deliveries (a deploy inside Slack's retry window).
 *
 * The key is "<fact>:<effect key>". A row this fact already has (a copy of
 * the message under another event_id, or found again by a backfill) is
 * skipped: that is the fact's dedupe, the same unique key that absorbs a
 * retry. There is no ON CONFLICT: a key taken by a row of another fact (a
 * row keyed before keys were unambiguous) is a collision, and the unique
 * index's error fails the whole batch (KeyTaken), receipt included, so
 * nothing is acked that has no row. Rows read: 1 (the receipt, by primary
 * key), + 1 if the fact has the row. Rows written: 3 (table, idempotency_key
 * index, outbox_sweepable), or 0.
 *
 * A row of an input that belongs to a custom step execution carries it from
 * the receipt (r.execution_id, migration 0019): +1 row written
 * (outbox_by_execution) for such a row, none for any other.
 *
 * enqueued_at is set optimistically: the ingress sends the message right after
 * the commit and clears it if the send fails. If the Worker dies in between,
 * sweep_at (now + grace) brings the row back anyway. A timer's times (?9
 * next_attempt_at, ?10 enqueued_at, ?6 sweep_at, ?11 due_at) are its
 * schedule's (shared/outbox/model.ts, scheduleOf); +1 row written for it
 * (outbox_timers).
 */
const insertRowWhere = (rest: string) => `
INSERT INTO outbox (idempotency_key, receipt_id, team_id, effect, payload,
                    next_attempt_at, expires_at, enqueued_at, sweep_at, created_at, updated_at, fact, due_at, execution_id)
SELECT ?1, r.id, r.team_id, ?2, ?3, ?9, ?5, ?10, ?6, ?4, ?4, r.fact, ?11, r.execution_id
  FROM receipts AS r
 WHERE r.id = ?7 AND r.delivery_id = ?8
${rest}
RETURNING id`;
const insertOutboxRow = insertRowWhere(
  "   AND NOT EXISTS (SELECT 1 FROM outbox AS o WHERE o.idempotency_key = ?1 AND coalesce(o.fact, o.receipt_id) = ?12)",
);

/**
 * A named row (shared/outbox/model.ts, namedKey): keyed by its name and team,
 * not by the fact, and unique per workspace whatever input records it. A key
 * taken is a repeat of the name, from this input or any other of the
 * workspace: nothing is written and the batch goes on (ON CONFLICT DO
 * NOTHING), unlike a fact's key taken by another fact above. Otherwise as
 * insertOutboxRow, with one row written more (outbox_named_by_fact), or none.
 */
const insertNamedRow = insertRowWhere("ON CONFLICT (idempotency_key) DO NOTHING");

/** The batch was refused: an intent's idempotency key is another input's row. Nothing was written. */
export class KeyTaken extends Error {
  constructor(receiptId: string, keys: readonly string[], cause: unknown) {
    super(`refused: an idempotency key of ${receiptId} (${keys.join(", ")}) is already another input's row; nothing was written`, {
      cause,
    });
    this.name = "KeyTaken";
  }
}

/** What the batch does beside the receipt and its rows. */
export interface RecordOptions {
  /** Names of the workspace's rows to cancel in this batch (shared/outbox/cancel-named.ts). */
  readonly cancels?: readonly string[];
  /** The cancels end only rows recorded by this time (a backfilled message's: cancel-named.ts, recordedBy). */
  readonly cancelsRecordedBy?: number;
  /** Statements that commit with the input or not at all, after its own (the ack's first sight of a workspace: shared/shards/placement.ts). */
  readonly also?: readonly D1PreparedStatement[];
  /** The longest a timer's message is delayed (QUEUE_DELAY_MAX_SECONDS); default Cloudflare's 12 h. */
  readonly queueDelayMaxMs?: number;
}

/**
 * An input's row key: its name's (namedKey) when it has one, else "<fact>:<effect key>". A named row needs the
 * input's team (the app's routing refuses a name without one; this is the engine's own check).
 */
export function inputRowKey(effect: Pick<IntendedEffect, "key" | "name">, fact: string, teamId: string | undefined): string {
  if (effect.name === undefined) return idempotencyKey(fact, effect.key);
  if (!teamId) throw new Error(`intent ${effect.key} names a row, but its input has no team (names are per workspace)`);
  return namedKey(teamId, effect.name);
}

/**
 * Durable intent, before the ack: the receipt and its outbox rows in one D1
 * batch, which is one transaction. Either all of it commits or none of it.
 * Idempotent: re-running it for the same receipt writes nothing new, which is
 * what makes a timeout on the caller's side (500, then Slack's retry) safe.
 * The input's cancels ride in the same batch, gated on this delivery's
 * receipt like its rows.
 */
export async function recordIntent(
  db: D1Database,
  receipt: ReceiptInput,
  effects: readonly IntendedEffect[],
  now: number,
  sweepGraceMs: number,
  deliveryId: string = crypto.randomUUID(),
  claim?: InlineClaim,
  options: RecordOptions = {},
): Promise<RecordVerdict> {
  const fact = receipt.fact ?? receipt.id;
  const keys = effects.map((effect) => inputRowKey(effect, fact, receipt.teamId));
  if (new Set(keys).size < keys.length) throw new KeyTaken(receipt.id, keys, "two intents of one input share a key");
  const queueDelayMaxMs = options.queueDelayMaxMs ?? MAX_QUEUE_DELAY_SECONDS * 1000;
  const schedules = effects.map((effect) => scheduleOf(effect, now, sweepGraceMs, queueDelayMaxMs));
  const cancelNames = options.cancels ?? [];
  if (cancelNames.length > 0 && !receipt.teamId) throw new Error("an input with no team cannot cancel rows (names are per workspace)");
  const cancels = cancelNames.map((name) =>
    cancelStatements(
      db,
      receipt.teamId as string,
      name,
      { kind: "ack", receiptId: receipt.id, deliveryId, recordedBy: options.cancelsRecordedBy },
      now,
    ),
  );
  // Never before the write's own time (the rows are due at `now`).
  const claimedAt = claim ? Math.max(now, claim.clock()) : undefined;
  const claims = (claim?.indexes ?? []).flatMap((i) => {
    const key = keys[i];
    return claim && key !== undefined
      ? [db.prepare(claimInsertedRow).bind(claim.token, claimedAt, claim.leaseMs, key, receipt.id, deliveryId)]
      : [];
  });
  const statements: D1PreparedStatement[] = [
    db
      .prepare(insertReceipt)
      .bind(
        receipt.id,
        receipt.kind,
        receipt.type,
        receipt.teamId ?? null,
        receipt.retryNum ?? null,
        deliveryId,
        now,
        receipt.enterpriseId ?? null,
        fact === receipt.id ? null : fact,
        receipt.executionId ?? null,
      ),
    db.prepare(receiptVerdict),
    ...effects.map((effect, i) => {
      const at = schedules[i] as Schedule;
      const args = [
        keys[i] as string,
        effect.effect,
        JSON.stringify(effect.payload),
        now,
        effect.expiresAt ?? null,
        at.sweepAt,
        receipt.id,
        deliveryId,
        at.nextAttemptAt,
        at.enqueuedAt,
        at.dueAt,
      ];
      return effect.name === undefined ? db.prepare(insertOutboxRow).bind(...args, fact) : db.prepare(insertNamedRow).bind(...args);
    }),
    // After every insert: a claim finds its row by key, inserted earlier in this same transaction.
    ...claims,
    // After the inserts too: a cancel never ends a row this same input names (checkIntents refuses that).
    ...cancels.flat(),
    ...(options.also ?? []),
  ];
  const results = await db.batch<{ changes?: number; id?: number }>(statements).catch((error: unknown) => {
    throw /UNIQUE constraint failed: outbox\.idempotency_key/.test(String(error)) ? new KeyTaken(receipt.id, keys, error) : error;
  });
  const firstDelivery = results[1]?.results[0]?.changes === 1;
  if (!firstDelivery) return { firstDelivery: false };
  const inserted = results.slice(2, 2 + effects.length);
  const rows = inserted.flatMap((result, i) =>
    result.results.map((row): RecordedRow => ({ id: Number(row.id), delaySeconds: (schedules[i] as Schedule).delaySeconds })),
  );
  const outboxIds = rows.map((row) => row.id);
  const claimsAt = 2 + effects.length;
  const claimed = results
    .slice(claimsAt, claimsAt + claims.length)
    .flatMap((result) => (result.results as unknown as ClaimedRecord[]).map(claimedRowOf))
    .sort((a, b) => a.id - b.id);
  const cancelsAt = claimsAt + claims.length;
  // Each cancel is three statements; the second is its verdict.
  const cancelled = cancelNames.flatMap((name, i) => {
    const verdict = cancelResultOf(name, (results[cancelsAt + 3 * i + 1]?.results ?? []) as Record<string, unknown>[]);
    return verdict ? [verdict] : [];
  });
  return { firstDelivery: true, outboxIds, rows, claimed, repeated: effects.length - outboxIds.length, cancels: cancelled };
}
