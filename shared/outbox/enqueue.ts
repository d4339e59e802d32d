import pRetry from "p-retry";
import { describeError, type Log } from "../log.ts";
import type { OutboxMessage, RecordedRow } from "./model.ts";

/** Cloudflare Queues takes at most 100 messages per sendBatch. */
export const SEND_BATCH_LIMIT = 100;

/** The part of a Queue binding the enqueue uses (what a send returns is not needed). */
export interface OutboxQueue {
  sendBatch(messages: Iterable<MessageSendRequest<OutboxMessage>>): Promise<unknown>;
}

/**
 * Rows whose send failed: enqueued_at cleared (an operator's "never
 * enqueued") and sweep_at set to now — or to the row's time, for a timer
 * (or a retry) not due yet — so the next sweep after that sends them instead
 * of waiting out the grace period. Only pending rows: one that was claimed in
 * the meantime is already on its way.
 */
const markNotEnqueued = `
UPDATE outbox
   SET enqueued_at = NULL, sweep_at = max(?2, next_attempt_at), updated_at = ?2
 WHERE id IN (SELECT value FROM json_each(?1)) AND status = 'pending'`;

/**
 * Hands row ids to the queue: the fast path. Two quick retries (p-retry)
 * ride out a blip; if the queue still refuses, the rows are marked for the
 * next sweep and the failure is logged, never thrown: the rows are durable,
 * and the sweep is the guarantee.
 */
export async function enqueueRows(
  queue: OutboxQueue,
  db: D1Database,
  ids: readonly number[],
  now: number,
  log: Log,
  /** Held back this long by the queue: a timer's message, delayed to its time (enqueueRecorded). */
  delaySeconds = 0,
): Promise<{ readonly sent: number; readonly failed: number }> {
  let sent = 0;
  let failed = 0;
  for (let start = 0; start < ids.length; start += SEND_BATCH_LIMIT) {
    const chunk = ids.slice(start, start + SEND_BATCH_LIMIT);
    try {
      await pRetry(
        () =>
          queue.sendBatch(
            chunk.map((id) => ({ body: { id }, contentType: "json" as const, ...(delaySeconds > 0 ? { delaySeconds } : {}) })),
          ),
        {
          retries: 2,
          minTimeout: 25,
          maxTimeout: 100,
        },
      );
      sent += chunk.length;
    } catch (error) {
      failed += chunk.length;
      log("warn", "enqueue failed; rows left for the sweep", { ids: chunk, error: describeError(error) });
      try {
        await db.prepare(markNotEnqueued).bind(JSON.stringify(chunk), now).run();
      } catch (markError) {
        // Still safe: sweep_at was set to now + grace when the row was written.
        log("error", "could not mark rows not enqueued", { ids: chunk, error: describeError(markError) });
      }
    }
  }
  return { sent, failed };
}

/**
 * Rows just recorded, each with its message's delay (shared/outbox/model.ts, scheduleOf): due now, at once;
 * a timer within the queue's delay, delayed to its time; one beyond it, not at all (the sweep sends it at its
 * time). One sendBatch per distinct delay. Never throws, as enqueueRows.
 */
export async function enqueueRecorded(
  queue: OutboxQueue,
  db: D1Database,
  rows: readonly RecordedRow[],
  now: number,
  log: Log,
): Promise<{ readonly sent: number; readonly failed: number }> {
  const byDelay = new Map<number, number[]>();
  for (const row of rows) {
    if (row.delaySeconds === null) continue;
    byDelay.set(row.delaySeconds, [...(byDelay.get(row.delaySeconds) ?? []), row.id]);
  }
  let sent = 0;
  let failed = 0;
  for (const [delaySeconds, ids] of byDelay) {
    const done = await enqueueRows(queue, db, ids, now, log, delaySeconds);
    sent += done.sent;
    failed += done.failed;
  }
  return { sent, failed };
}
