/**
 * ROUTING: the rule a workspace is placed by at its first sight, and its key.
 *
 * A workspace's receipts, outbox rows and attempts live on one shard, so every
 * transaction stays on one database; installations all live on shard 0
 * (docs/scaling.md, "Where installations live"). Which shard is decided once
 * and recorded (shared/shards/placement.ts, the one module that asks this
 * rule for a workspace); this module is the rule:
 *
 *   routing key  "E:<enterprise>" for an org-wide Enterprise Grid install (its
 *                workspaces share the org's one installation), else
 *                "T:<team>" — the same text as the installation's install_key
 *                (migration 0006).
 *   shard index  jump consistent hash (Lamping & Veach, 2014) of the key's
 *                64-bit FNV-1a hash over the shard count of the moment.
 *
 * The rule spreads new workspaces evenly over the shards there are; a placed
 * workspace never follows it again, so raising the count moves nothing. It is
 * also where an older ackbox, which routed by the rule alone, keeps each
 * workspace's rows: its workspaces are placed by it (shared/shards/upgrade.ts).
 *
 * An input whose team cannot be determined has no routing key; it lives on
 * shard 0, the home shard, always the same one — never a random shard.
 */

/** Shard 0: where an input without a team lives, and the whole database of a one-shard deployment. */
export const HOME_SHARD = 0;

export interface RoutingInput {
  readonly teamId?: string | undefined;
  readonly enterpriseId?: string | undefined;
  /** Slack's `is_enterprise_install`: the app is installed org-wide, so the enterprise is the tenant. */
  readonly isEnterpriseInstall?: boolean | undefined;
}

/** "E:<enterprise>" for an org-wide install, "T:<team>" otherwise; undefined when neither is known. */
export function routingKeyOf(input: RoutingInput): string | undefined {
  if (input.isEnterpriseInstall === true && input.enterpriseId) return `E:${input.enterpriseId}`;
  if (input.teamId) return `T:${input.teamId}`;
  return undefined;
}

const FNV_OFFSET = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;
const MASK_64 = 0xffffffffffffffffn;
const encoder = new TextEncoder();

/** 64-bit FNV-1a of the key's UTF-8 bytes: stable across runtimes and releases (an older ackbox's rows are where it puts them). */
export function fnv1a64(text: string): bigint {
  let hash = FNV_OFFSET;
  for (const byte of encoder.encode(text)) {
    hash ^= BigInt(byte);
    hash = (hash * FNV_PRIME) & MASK_64;
  }
  return hash;
}

/** Jump consistent hash: a bucket in [0, buckets) for a 64-bit key. */
export function jumpHash(key: bigint, buckets: number): number {
  if (!Number.isInteger(buckets) || buckets < 1) throw new RangeError(`shard count must be a positive integer, got ${buckets}`);
  let k = key & MASK_64;
  let b = -1;
  let j = 0;
  while (j < buckets) {
    b = j;
    k = (k * 2862933555777941757n + 1n) & MASK_64;
    j = Math.floor((b + 1) * (2 ** 31 / (Number(k >> 33n) + 1)));
  }
  return b;
}

/** The rule: where a routing key first seen among `count` shards is placed; HOME_SHARD for an input without one. */
export function shardIndexOf(routingKey: string | undefined, count: number): number {
  if (routingKey === undefined) {
    if (!Number.isInteger(count) || count < 1) throw new RangeError(`shard count must be a positive integer, got ${count}`);
    return HOME_SHARD;
  }
  return jumpHash(fnv1a64(routingKey), count);
}
