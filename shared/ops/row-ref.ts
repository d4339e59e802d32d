/**
 * ROW REFS: how an operator names one outbox row once rows live on several
 * shards. A row id is unique only within its shard (each D1 has its own
 * AUTOINCREMENT), so a row is named "<shard>:<id>" — "1:42" is row 42 of
 * shard 1. With one shard (SHARD_COUNT = 1) the plain id is the ref, exactly
 * as before sharding, and "0:42" is accepted too.
 *
 * With more than one shard a plain id is refused (400), never taken to mean
 * shard 0: an operator who copies "42" from a shard-1 row must not replay
 * shard 0's row 42. The answer says to use "<shard>:<id>".
 */

export interface RowRef {
  readonly shard: number;
  readonly id: number;
}

export type RefParse = { readonly ok: true; readonly value: RowRef } | { readonly ok: false; readonly error: string };

/** "<shard>:<id>" with more than one shard; the plain id with one. */
export function formatRowRef(ref: RowRef, shardCount: number): string {
  return shardCount > 1 ? `${ref.shard}:${ref.id}` : String(ref.id);
}

const WHOLE = /^\d{1,15}$/;

/** A ref as an operator gives it: "<shard>:<id>", or a plain id (a number or its digits) when there is one shard. */
export function parseRowRef(value: unknown, shardCount: number): RefParse {
  const example = shardCount > 1 ? `e.g. ${shardCount - 1}:42` : "e.g. 42";
  const text = typeof value === "number" ? String(value) : value;
  if (typeof text !== "string" || text.length > 40) {
    return { ok: false, error: `row ref ${shown(value)}: want "<shard>:<id>" (${example}; the dead list's "ref")` };
  }
  if (WHOLE.test(text)) {
    const id = Number(text);
    if (id < 1) return { ok: false, error: `row ref ${shown(value)}: a row id is a positive whole number` };
    if (shardCount > 1) {
      return {
        ok: false,
        error: `row ref ${shown(value)}: with ${shardCount} shards a row id is ambiguous; name the row as <shard>:<id> (e.g. 0:${id} or 1:${id}; the dead list's "ref")`,
      };
    }
    return { ok: true, value: { shard: 0, id } };
  }
  const match = /^(\d{1,4}):(\d{1,15})$/.exec(text);
  if (!match) return { ok: false, error: `row ref ${shown(value)}: want "<shard>:<id>" (${example}; the dead list's "ref")` };
  const shard = Number(match[1]);
  const id = Number(match[2]);
  if (id < 1) return { ok: false, error: `row ref ${shown(value)}: a row id is a positive whole number` };
  if (shard >= shardCount) {
    return {
      ok: false,
      error: `row ref ${shown(value)}: shard ${shard} is not configured (SHARD_COUNT is ${shardCount}: shards 0–${shardCount - 1})`,
    };
  }
  return { ok: true, value: { shard, id } };
}

function shown(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 44 ? `${text.slice(0, 41)}…` : text;
}
