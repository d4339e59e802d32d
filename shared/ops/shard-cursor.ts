/**
 * A page's cursor in a list merged across shards (the dead list, the timers list): the position of the last row
 * a page covered, as (time, shard, id). As text, "<time>.<id>" with one shard (as before sharding) and
 * "<time>.<shard>.<id>" with more; text this API did not hand out under this SHARD_COUNT reads as null (a
 * two-part cursor means shard 0 only with one shard).
 */

export function encodeShardPosition(time: number, shard: number, id: number, shardCount: number): string {
  return shardCount > 1 ? `${time}.${shard}.${id}` : `${time}.${id}`;
}

export function decodeShardPosition(
  text: string,
  shardCount: number,
): { readonly time: number; readonly shard: number; readonly id: number } | null {
  const match = shardCount > 1 ? /^(\d{1,16})\.(\d{1,4})\.(\d{1,16})$/.exec(text) : /^(\d{1,16})\.()(\d{1,16})$/.exec(text);
  if (!match) return null;
  const time = Number(match[1]);
  const shard = Number(match[2] || 0);
  const id = Number(match[3]);
  if (!Number.isSafeInteger(time) || !Number.isSafeInteger(id) || shard >= shardCount) return null;
  return { time, shard, id };
}
