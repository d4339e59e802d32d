/**
 * The shards' D1 bindings. Shard 0 is the `DB` binding every deployment has,
 * so a one-shard deployment is exactly the deployment of before sharding; shard
 * i ≥ 1 is `DB_<i>`. The count is a setting, not inferred from the bindings
 * present: a binding dropped by mistake from a wrangler file must be a clear
 * error at the first request, not a silent change of every team's shard.
 */

import { shardBindingName } from "./binding-name.ts";

export { shardBindingName };

export interface Shard {
  readonly index: number;
  readonly db: D1Database;
}

export class ShardConfigError extends Error {
  override readonly name = "ShardConfigError";
}

function isD1(value: unknown): value is D1Database {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as D1Database).prepare === "function" &&
    typeof (value as D1Database).batch === "function"
  );
}

/** Every shard, in index order; throws ShardConfigError naming each binding the count needs and the env lacks. */
export function shardsOf(env: Readonly<Record<string, unknown>>, count: number): readonly Shard[] {
  if (!Number.isInteger(count) || count < 1) throw new ShardConfigError(`shard count must be a positive integer, got ${count}`);
  const shards: Shard[] = [];
  const missing: string[] = [];
  for (let index = 0; index < count; index++) {
    const db = env[shardBindingName(index)];
    if (isD1(db)) shards.push({ index, db });
    else missing.push(shardBindingName(index));
  }
  if (missing.length > 0) {
    throw new ShardConfigError(
      `${count} shards are configured but the D1 binding${missing.length > 1 ? "s" : ""} ${missing.join(", ")} ${missing.length > 1 ? "are" : "is"} missing`,
    );
  }
  return shards;
}
