/**
 * GET /admin/timers's answer: the one contract between the Worker (workers/ingress/admin/timers.ts builds
 * exactly this) and the CLI. Plain types, no Workers runtime types. Times are ISO 8601 strings.
 */

export interface TimerRowAnswer {
  /** "<shard>:<id>" with more than one shard, the id with one (shared/ops/row-ref.ts). */
  ref: string;
  shard: number;
  id: number;
  key: string;
  /** The row's name (IntentOptions.name), when the app named it: what cancel(name) takes. */
  name: string | null;
  /** The input that recorded it: `ackbox events show <receiptId>`. */
  receiptId: string;
  teamId: string | null;
  effect: string;
  /** Its time, as the app asked. */
  dueAt: string | null;
  /** waiting (its time is ahead), due (its time has come, not attempted yet), retrying, or cancelled. */
  state: string;
  attempts: number;
  nextAttemptAt: string | null;
  lastError: string | null;
  createdAt: string | null;
  /** The input whose cancel ended it, and when; null unless cancelled. */
  cancelledBy: string | null;
  cancelledAt: string | null;
  /** Its payload, credentials redacted (shared/credentials.ts). */
  payload: unknown;
}

export interface TimersPageAnswer {
  shardCount: number;
  /** The time the states are as of. */
  at: string | null;
  rows: TimerRowAnswer[];
  /** The next page: ?cursor= (with the same filters); null at the end. */
  nextCursor: string | null;
}
