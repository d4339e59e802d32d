/**
 * The queue's own backlog, as the platform reports it: a Queue binding's
 * realtime metrics() (backlogCount, backlogBytes, oldestMessageTimestamp).
 *
 * Guarded three ways, since the outbox table is the truth and this is only a
 * second opinion: the method may be missing (an older runtime, a test double),
 * it may throw, or it may hang. Each becomes `available: false` with a reason,
 * never an error of the caller. (Locally, `wrangler dev` answers with zeros:
 * there is no local view of a queue's backlog.)
 */

export type QueueBacklog =
  | {
      readonly available: true;
      readonly backlogCount: number;
      readonly backlogBytes: number;
      /** ms since the epoch; null when the queue is empty or the platform did not say. */
      readonly oldestMessageAt: number | null;
    }
  | { readonly available: false; readonly reason: string };

/** The part of a Queue binding this reads; `metrics` is optional on purpose. */
export interface MeasurableQueue {
  metrics?: () => Promise<QueueMetrics>;
}

const METRICS_TIMEOUT_MS = 2_000;

export async function readQueueBacklog(queue: MeasurableQueue, timeoutMs = METRICS_TIMEOUT_MS): Promise<QueueBacklog> {
  if (typeof queue.metrics !== "function") return { available: false, reason: "this queue binding has no metrics()" };
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const metrics = await Promise.race([
      queue.metrics(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    const count = Number(metrics?.backlogCount);
    const bytes = Number(metrics?.backlogBytes);
    if (!Number.isFinite(count) || !Number.isFinite(bytes))
      return { available: false, reason: "metrics() answered without backlog figures" };
    return { available: true, backlogCount: count, backlogBytes: bytes, oldestMessageAt: timestampOf(metrics.oldestMessageTimestamp) };
  } catch (error) {
    return { available: false, reason: `metrics() failed: ${error instanceof Error ? error.message : String(error)}` };
  } finally {
    if (timer !== undefined) clearTimeout(timer);
  }
}

/** The docs have said both Date and epoch ms; accept either. */
function timestampOf(value: unknown): number | null {
  if (value instanceof Date) return Number.isFinite(value.getTime()) && value.getTime() > 0 ? value.getTime() : null;
  if (typeof value === "number" && Number.isFinite(value) && value > 0) return value;
  return null;
}
