import type { OutboxQueue } from "../outbox/enqueue.ts";
import type { OutboxMessage } from "../outbox/model.ts";

/**
 * The outbox queue as seen from one shard: every message it sends names the
 * shard its row lives on, so the consumer claims the row on the right D1.
 * Shard 0 sends the message unchanged ({ id }): a one-shard deployment's
 * messages are exactly those of before sharding.
 */
export function shardQueue(queue: OutboxQueue, shard: number): OutboxQueue {
  if (shard === 0) return queue;
  return {
    sendBatch: (messages: Iterable<MessageSendRequest<OutboxMessage>>) =>
      queue.sendBatch([...messages].map((message) => ({ ...message, body: { ...message.body, shard } }))),
  };
}
