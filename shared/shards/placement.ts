/**
 * PLACEMENT: where a workspace lives. Chosen once, at first sight (an install,
 * or the first input of its routing key), recorded on shard 0 (placements,
 * migration 0013) and never changed: adding a shard moves no workspace, and
 * every path that finds a workspace's rows asks here.
 *
 *   the rule   a routing key seen for the first time goes where the jump
 *              hash puts it under the SHARD_COUNT of that moment
 *              (shared/shards/route.ts) — where an older ackbox, which
 *              routed by the rule alone, already keeps its rows.
 *   the row    INSERT … ON CONFLICT DO NOTHING, then read back: the database
 *              decides, so two isolates on different SHARD_COUNTs (a deploy
 *              rolling out) seeing a new key at once agree on the row that won.
 *   the cache  a row is immutable, so an isolate keeps what it read for its
 *              whole life (size-bounded): the ack's steady state reads nothing.
 *
 * A first sight costs one round trip to shard 0 (a batch of the insert and the
 * read) — none when the rule puts the key on shard 0 itself (every key of a
 * one-shard deployment): the ack's own batch is on shard 0 then, and the
 * insert rides in it (`homeForBatch`). An input without a routing key lives on
 * shard 0, with no placement row.
 */
import { HOME_SHARD, shardIndexOf } from "./route.ts";

/** Routing keys one isolate remembers per database: about a megabyte, far more workspaces than an isolate serves. */
export const PLACEMENT_CACHE_MAX = 10_000;

/**
 * Keys by the rule ([key, shard] pairs: one at a first sight, a step's at an upgrade), each unless placed.
 * Rows written: 1 per key placed now.
 */
const placeByRule = `
INSERT INTO placements (routing_key, shard, placed_at)
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), ?2 FROM json_each(?1) WHERE true
ON CONFLICT (routing_key) DO NOTHING`;

/** Where the key lives: one primary-key read. */
const placedShard = "SELECT shard FROM placements WHERE routing_key = ?1";

/**
 * A key whose rule is shard 0, placed in a batch on shard 0 itself: inserted on 0 unless it is placed there
 * already. Placed on another shard meanwhile (an isolate with a higher SHARD_COUNT won the key), the insert meets
 * the primary key and fails the whole batch, so nothing is written where the key does not live. Check and act
 * in one statement. Rows read: 1; written: 1 at the key's first sight, else 0.
 */
const placeOnHomeUnlessElsewhere = `
INSERT INTO placements (routing_key, shard, placed_at)
SELECT ?1, 0, ?2 WHERE NOT EXISTS (SELECT 1 FROM placements WHERE routing_key = ?1 AND shard = 0)`;

/** A placement that rides in the caller's batch on shard 0 (`homeForBatch`). */
export interface Placing {
  /** The statement to add to the batch, prepared on the batch's own D1 (shard 0). */
  statement(db: D1Database): D1PreparedStatement;
  /** The batch committed: the key lives on shard 0, for this isolate's life. */
  committed(): void;
}

export type Home = { readonly shard: number; readonly placing?: undefined } | { readonly shard: 0; readonly placing: Placing };

export interface Placements {
  /** Where the key lives, placing it by the rule at its first sight (one round trip to shard 0, none after). */
  place(routingKey: string | undefined, now: number): Promise<number>;
  /**
   * The same for a caller about to write a batch on the key's shard (the ack): a first sight whose rule is shard
   * 0 costs no round trip — the placement rides in that batch (`placing`), which then fails if the key was placed
   * elsewhere meanwhile (`placedElsewhere`).
   */
  homeForBatch(routingKey: string | undefined, now: number): Promise<Home>;
  /** Where the key lives without placing it: its row, else where the rule would put it (an operator's look-up). */
  whereIs(routingKey: string | undefined): Promise<number>;
  /** Places each key by the rule unless it is placed, in one statement (an older ackbox's keys: upgrade.ts); nothing is read back. */
  placeAll(routingKeys: readonly string[], now: number): Promise<void>;
}

const cachesByHome = new WeakMap<D1Database, Map<string, number>>();

/** `home` is shard 0's D1; `count` is SHARD_COUNT, which the rule places new keys over. */
export function placementsOn(home: D1Database, count: number): Placements {
  let cache = cachesByHome.get(home);
  if (!cache) {
    cache = new Map();
    cachesByHome.set(home, cache);
  }
  const known = cache;
  const remember = (key: string, shard: number) => {
    known.delete(key);
    if (known.size >= PLACEMENT_CACHE_MAX) known.delete(known.keys().next().value as string);
    known.set(key, shard);
  };
  const cached = (key: string): number | undefined => {
    const shard = known.get(key);
    if (shard !== undefined) remember(key, shard); // most recently used last: the oldest goes first
    return shard;
  };
  const read = async (key: string): Promise<number | undefined> => {
    const shard = await home.prepare(placedShard).bind(key).first<number>("shard");
    if (typeof shard !== "number") return undefined;
    remember(key, shard);
    return shard;
  };
  const place = async (key: string | undefined, now: number): Promise<number> => {
    if (key === undefined) return shardIndexOf(undefined, count);
    const hit = cached(key);
    if (hit !== undefined) return hit;
    const [, placed] = await home.batch([
      home.prepare(placeByRule).bind(JSON.stringify([[key, shardIndexOf(key, count)]]), now),
      home.prepare(placedShard).bind(key),
    ]);
    const shard = (placed?.results[0] as { shard?: number } | undefined)?.shard;
    if (typeof shard !== "number") throw new Error(`the placement of ${key} was not read back`);
    remember(key, shard);
    return shard;
  };
  return {
    place,
    async homeForBatch(key, now) {
      if (key === undefined || shardIndexOf(key, count) !== HOME_SHARD) return { shard: await place(key, now) };
      const hit = cached(key);
      if (hit !== undefined) return { shard: hit };
      return {
        shard: HOME_SHARD,
        placing: {
          statement: (db) => db.prepare(placeOnHomeUnlessElsewhere).bind(key, now),
          committed: () => remember(key, HOME_SHARD),
        },
      };
    },
    async whereIs(key) {
      if (key === undefined) return shardIndexOf(undefined, count);
      return cached(key) ?? (await read(key)) ?? shardIndexOf(key, count);
    },
    async placeAll(keys, now) {
      const byRule = keys.map((key) => [key, shardIndexOf(key, count)]);
      await home.prepare(placeByRule).bind(JSON.stringify(byRule), now).run();
    },
  };
}

/** Whether a batch failed because its placement (`Placing`) found the key placed on another shard. */
export function placedElsewhere(error: unknown): boolean {
  return /UNIQUE constraint failed: placements\.routing_key/.test(String(error));
}

/**
 * The D1 of the shard a workspace was placed on, among this Worker's `shards`. Past them: placed by a Worker
 * whose SHARD_COUNT is higher (a deploy raising it, still rolling out) — nothing may be written elsewhere, so
 * this throws, and the caller answers as for any failed write (the ack's 500: Slack's retry finds the new version).
 */
export function placedOn<T>(shards: readonly T[], index: number): T {
  const shard = shards[index];
  if (shard === undefined)
    throw new Error(
      `placed on shard ${index}, past this Worker's SHARD_COUNT of ${shards.length} (a deploy raising it is rolling out); nothing was written`,
    );
  return shard;
}
