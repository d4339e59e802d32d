/**
 * The first attempt at the ack: after the durable write and the answer, the
 * ingress performs the new rows itself, in waitUntil, with the consumer's own
 * claim → perform → fenced finish (deliver.ts). One code path, two triggers;
 * the lease keeps them apart. The queue and the sweep stay what they were:
 * the queue the backup, the sweep the guarantee.
 *
 * Bounded well inside waitUntil's 30 s: at most INLINE_MAX_ROWS rows, one
 * round (all of them at once, never a second round), each effect within
 * INLINE_TIMEOUT_MAX_MS. Which rows go first is the app's choice per effect
 * (EffectDefinition.inline: on for Slack methods, an app effect's `inline`
 * option); the others are enqueued at once, as before.
 *
 * The backup message of an inline row is sent as the attempt starts, delayed
 * by the inline lease: the consumer usually finds the row done (one claim that
 * reads one row, and an ack) — the same queue operations per event as before —
 * and if the ingress died mid-effect the lease has just expired when the
 * message arrives, so the consumer claims the row then: sooner than a
 * consumer that dies mid-effect is recovered (its lease is LEASE_SECONDS,
 * then the sweep). An attempt that failed or met a cooldown is sent again
 * with the delay the consumer would have given its message.
 */
import type { EffectRegistry } from "../effects/registry.ts";
import { describeError } from "../log.ts";
import { enqueueRows } from "../outbox/enqueue.ts";
import type { Settings } from "../settings.ts";
import { type DeliveryDeps, deliverBatch } from "./deliver.ts";

/** Rows attempted inline per request; the rest of a request's rows go to the queue at once. */
export const INLINE_MAX_ROWS = 3;
/** The longest an inline effect may take, whatever EFFECT_TIMEOUT_SECONDS says: well inside waitUntil's 30 s. */
export const INLINE_TIMEOUT_MAX_MS = 10_000;

/** An inline attempt's timeout and lease: the lease twice the timeout, as shared/settings.ts requires of every attempt. */
export function inlineBounds(settings: Pick<Settings, "effectTimeoutMs" | "leaseMs">): { timeoutMs: number; leaseMs: number } {
  const timeoutMs = Math.min(settings.effectTimeoutMs, INLINE_TIMEOUT_MAX_MS);
  return { timeoutMs, leaseMs: Math.min(settings.leaseMs, 2 * timeoutMs) };
}

export interface NewRow {
  readonly id: number;
  readonly effect: string;
}

/** The rows of a request that go first inline, in order, at most INLINE_MAX_ROWS. */
export function inlineRows(rows: readonly NewRow[], effects: EffectRegistry): number[] {
  return rows
    .filter((row) => effects.get(row.effect)?.inline === true)
    .slice(0, INLINE_MAX_ROWS)
    .map((row) => row.id);
}

/**
 * Starts delivery of a request's new rows (already durable). `deps` are the
 * consumer's, with the inline lease in settings.leaseMs and the inline
 * timeout in the context. Never throws: what fails here is the queue's and
 * the sweep's to finish.
 */
export async function deliverFirstAttempt(deps: DeliveryDeps, rows: readonly NewRow[], now: number): Promise<void> {
  const inline = inlineRows(rows, deps.effects);
  const queued = rows.map((row) => row.id).filter((id) => !inline.includes(id));
  const backupDelaySeconds = Math.ceil(deps.settings.leaseMs / 1000);
  try {
    const [, , actions] = await Promise.all([
      queued.length > 0 ? enqueueRows(deps.queue, deps.db, queued, now, deps.log) : undefined,
      inline.length > 0 ? enqueueRows(deps.queue, deps.db, inline, now, deps.log, backupDelaySeconds) : undefined,
      inline.length > 0 ? deliverBatch(deps, inline) : new Map(),
    ]);
    const again = [...actions].flatMap(([id, action]) =>
      action.action === "ack" ? [] : [{ body: { id }, contentType: "json" as const, delaySeconds: action.delaySeconds }],
    );
    if (again.length > 0) await deps.queue.sendBatch(again);
  } catch (error) {
    // The rows are durable and their backup messages (or the sweep) will reach them.
    deps.log("warn", "first attempt at the ack did not finish; the queue and the sweep have the rows", {
      ids: rows.map((row) => row.id),
      error: describeError(error),
    });
  }
}
