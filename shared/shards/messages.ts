/**
 * A queue batch's messages grouped by the shard their row lives on
 * (OutboxMessage.shard; absent = 0), so the consumer claims each row on its
 * own D1 — a row id is unique only within its shard.
 */

export interface ShardGroups<M> {
  /** Shard index → its messages with their row ids, in batch order. */
  readonly groups: ReadonlyMap<number, readonly { readonly message: M; readonly id: number }[]>;
  /** Not a { id, shard? } body: acked by the caller with a log line. */
  readonly malformed: readonly M[];
  /** Naming a shard this deployment does not have (SHARD_COUNT lowered, a stray message): acked with a log line naming it. */
  readonly unknownShard: readonly { readonly message: M; readonly id: number; readonly shard: number }[];
}

export function groupByShard<M extends { readonly body: unknown }>(messages: readonly M[], shardCount: number): ShardGroups<M> {
  const groups = new Map<number, { message: M; id: number }[]>();
  const malformed: M[] = [];
  const unknownShard: { message: M; id: number; shard: number }[] = [];
  for (const message of messages) {
    const named = outboxMessageOf(message.body);
    if (!named) malformed.push(message);
    else if (named.shard >= shardCount) unknownShard.push({ message, ...named });
    else {
      const group = groups.get(named.shard) ?? [];
      group.push({ message, id: named.id });
      groups.set(named.shard, group);
    }
  }
  return { groups, malformed, unknownShard };
}

function outboxMessageOf(body: unknown): { readonly id: number; readonly shard: number } | undefined {
  if (typeof body !== "object" || body === null) return undefined;
  const { id, shard } = body as { id?: unknown; shard?: unknown };
  if (typeof id !== "number" || !Number.isSafeInteger(id) || id <= 0) return undefined;
  if (shard === undefined) return { id, shard: 0 };
  return typeof shard === "number" && Number.isSafeInteger(shard) && shard >= 0 ? { id, shard } : undefined;
}
