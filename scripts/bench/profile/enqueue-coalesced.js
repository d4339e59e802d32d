// Bench-only variant of shared/outbox/enqueue.ts (ack profiling): concurrent
// requests in one isolate share one sendBatch. Ids are collected for a short
// window (or until 100 are waiting) and sent together; every caller awaits
// the send that carried its ids (its own waitUntil keeps it alive), and marks
// its own rows for the sweep if that send failed. A lost batch delays
// delivery until the sweep; it loses nothing, as today.
const SEND_BATCH_LIMIT = 100;
const WINDOW_MS = 10;

const markNotEnqueued = `
UPDATE outbox
   SET enqueued_at = NULL, sweep_at = ?2, updated_at = ?2
 WHERE id IN (SELECT value FROM json_each(?1)) AND status = 'pending'`;

let pending = null;

function flush(batch) {
  if (pending === batch) pending = null;
  batch.queue.sendBatch(batch.ids.map((id) => ({ body: { id }, contentType: "json" }))).then(batch.resolve, batch.reject);
}

function join(queue, ids) {
  if (!pending || pending.queue !== queue || pending.ids.length + ids.length > SEND_BATCH_LIMIT) {
    const batch = { queue, ids: [] };
    batch.done = new Promise((resolve, reject) => {
      batch.resolve = resolve;
      batch.reject = reject;
    });
    setTimeout(() => flush(batch), WINDOW_MS);
    pending = batch;
  }
  pending.ids.push(...ids);
  return pending.done;
}

export async function enqueueRows(queue, db, ids, now, log) {
  if (ids.length === 0) return { sent: 0, failed: 0 };
  try {
    await join(queue, ids);
    return { sent: ids.length, failed: 0 };
  } catch (error) {
    log("warn", "enqueue failed; rows left for the sweep", { ids, error: String(error) });
    await db
      .prepare(markNotEnqueued)
      .bind(JSON.stringify(ids), now)
      .run()
      .catch(() => {});
    return { sent: 0, failed: ids.length };
  }
}
