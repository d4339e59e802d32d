/**
 * GET /admin/dead's and POST /admin/replay's answers: the one contract
 * between the Worker (workers/ingress/admin/dead.ts builds exactly these) and
 * its readers (the CLI, the dashboard). Plain types, no Workers runtime
 * types, so Node code can import them. Times are ISO 8601 strings.
 *
 * A row is named by its `ref` (shared/ops/row-ref.ts): "<shard>:<id>" when
 * the deployment has more than one shard, the plain id with one. `id` alone
 * is unique only within `shard`.
 */

export interface DeadRowAnswer {
  /** What replay takes: "<shard>:<id>" (several shards) or the id (one). */
  ref: string;
  shard: number;
  id: number;
  receiptId: string;
  teamId: string | null;
  effect: string;
  attempts: number;
  lastError: string | null;
  createdAt: string | null;
  diedAt: string | null;
  expiresAt: string | null;
  /** Its effect may have happened: a filter replay leaves it out; replay it by its ref if it did not. */
  maybePerformed: boolean;
  payload: unknown;
}

export interface DeadPageAnswer {
  /** SHARD_COUNT: with more than one, refs and cursors name the shard. */
  shardCount: number;
  rows: DeadRowAnswer[];
  nextCursor: string | null;
  /** Dead rows the page walked over all shards, where known. */
  scanned: number | null;
}

export interface ReplayedRowAnswer {
  ref: string;
  shard: number;
  id: number;
  receiptId: string;
  effect: string;
  lastError: string | null;
  /** Its effect may have happened: replayed because it was named by id (a filter leaves it out). */
  maybePerformed: boolean;
  step: number;
  delaySeconds: number;
}

export interface ReplayAnswer {
  dryRun: boolean;
  shardCount: number;
  replayed: ReplayedRowAnswer[];
  /** Rows replayed in all (or, in a dry run, that would be). */
  count: number;
  skipped: { ref: string; shard: number; id: number; reason: string }[];
  /** Every shard with its own counts: a filter replay touches rows on every shard. */
  perShard: { shard: number; replayed: number; skipped: number }[];
  enqueue: { sent: number; failed: number };
  steps: number;
  maxPerCall: number;
  more: boolean;
  nextCursor: string | null;
}
