// Bench-only variant of shared/outbox/enqueue.ts (ack profiling): the same
// send and the same failure handling, without p-retry around the send.
const SEND_BATCH_LIMIT = 100;

const markNotEnqueued = `
UPDATE outbox
   SET enqueued_at = NULL, sweep_at = ?2, updated_at = ?2
 WHERE id IN (SELECT value FROM json_each(?1)) AND status = 'pending'`;

export async function enqueueRows(queue, db, ids, now, log) {
  let sent = 0;
  let failed = 0;
  for (let start = 0; start < ids.length; start += SEND_BATCH_LIMIT) {
    const chunk = ids.slice(start, start + SEND_BATCH_LIMIT);
    try {
      await queue.sendBatch(chunk.map((id) => ({ body: { id }, contentType: "json" })));
      sent += chunk.length;
    } catch (error) {
      failed += chunk.length;
      log("warn", "enqueue failed; rows left for the sweep", { ids: chunk, error: String(error) });
      await db
        .prepare(markNotEnqueued)
        .bind(JSON.stringify(chunk), now)
        .run()
        .catch(() => {});
    }
  }
  return { sent, failed };
}
