// Bench-only stand-in for shared/outbox/enqueue.ts (ack profiling): no queue
// send at all. The rows stay pending and the sweep would send them.
export async function enqueueRows() {
  return { sent: 0, failed: 0 };
}
