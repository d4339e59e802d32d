/**
 * Outbox rows in any state, written straight to D1 (the factory), and read
 * back whole (the snapshot), so tests can seed both sides of every time
 * boundary and assert that untouched rows are unchanged to the byte.
 */
import { env } from "cloudflare:workers";
import type { OutboxStatus } from "../../shared/outbox/model.ts";
import { shardsOf } from "../../shared/shards/bindings.ts";
import { type RoutingInput, routingKeyOf, shardIndexOf } from "../../shared/shards/route.ts";
import { NOW } from "./slack-requests.ts";

/** Every shard's D1 of the test deployment (SHARD_COUNT = 2), index order. */
export function shardDbs(): readonly D1Database[] {
  return shardsOf(env as unknown as Record<string, unknown>, Number(env.SHARD_COUNT)).map((shard) => shard.db);
}

/** The index of the shard a team (or an org-wide install's org) lives on, as the ingress routes it. */
export function shardOf(who: string | RoutingInput): number {
  const input = typeof who === "string" ? { teamId: who } : who;
  return shardIndexOf(routingKeyOf(input), Number(env.SHARD_COUNT));
}

/** The D1 a team's receipts and rows are on (shared/shards/route.ts): what a test reads them back from. */
export function dbOf(who: string | RoutingInput): D1Database {
  return shardDbs()[shardOf(who)] as D1Database;
}

export interface RowSpec {
  /** Only to put rows with one id on two shards (a message names its shard for that): else the factory's next. */
  readonly id?: number;
  readonly key?: string;
  readonly status: OutboxStatus;
  readonly effect?: string;
  readonly payload?: unknown;
  readonly attempts?: number;
  readonly claimToken?: string | null;
  readonly claimExpiresAt?: number | null;
  readonly nextAttemptAt?: number;
  readonly expiresAt?: number | null;
  readonly enqueuedAt?: number | null;
  readonly sweepAt?: number | null;
  readonly sweeps?: number;
  readonly lastError?: string | null;
  readonly createdAt?: number;
  readonly completedAt?: number | null;
  readonly teamId?: string | null;
  /** A timer's time (migration 0015); give nextAttemptAt and sweepAt to match, as the write would. */
  readonly dueAt?: number | null;
}

export interface OutboxRecord {
  id: number;
  idempotency_key: string;
  receipt_id: string;
  team_id: string | null;
  effect: string;
  payload: string;
  status: OutboxStatus;
  attempts: number;
  claim_token: string | null;
  claim_expires_at: number | null;
  next_attempt_at: number;
  expires_at: number | null;
  enqueued_at: number | null;
  sweeps: number;
  sweep_at: number | null;
  last_error: string | null;
  result: string | null;
  created_at: number;
  updated_at: number;
  completed_at: number | null;
  rate_limited_since: number | null;
  /** The input whose cancel ended the row (migration 0014). */
  cancelled_by: string | null;
  /** A timer's time (migration 0015). */
  due_at: number | null;
}

let seq = 0;

/**
 * When a row is created unless the spec says: an hour before the fixture's NOW (so it is due, stale and, leased,
 * expired at NOW), and so, like NOW, ahead of the wall clock: the test Worker's own queue consumer, which reads
 * the wall clock, finds no factory row due (slack-requests.ts, NOW).
 */
export const DEFAULT_CREATED_AT = NOW - 3_600_000;

/**
 * The next id the factory gives: ids never repeat in a file, whatever resetTables deleted in between (the
 * outbox has no AUTOINCREMENT, by design, so a reset table starts again at 1): a message a test sent for its
 * row can never name another test's. Above any id the code has written to the table meanwhile, too.
 */
let nextId = 1_000_000;

/** Inserts one outbox row as described, filling in consistent defaults for its status. */
export async function insertRow(db: D1Database, spec: RowSpec): Promise<number> {
  const created = spec.createdAt ?? DEFAULT_CREATED_AT;
  const live = spec.status === "pending" || spec.status === "leased";
  const key = spec.key ?? `Ev${++seq}-${Math.random().toString(36).slice(2, 8)}:main`;
  const receipt = key.slice(0, key.lastIndexOf(":"));
  const row = await db
    .prepare(
      `INSERT INTO outbox (id, idempotency_key, receipt_id, team_id, effect, payload, status, attempts, claim_token,
                           claim_expires_at, next_attempt_at, expires_at, enqueued_at, sweeps, sweep_at, last_error,
                           created_at, updated_at, completed_at, due_at)
       VALUES (CASE WHEN ?20 THEN ?19 ELSE max(?19, (SELECT coalesce(max(id), 0) + 1 FROM outbox)) END,
               ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?16, ?17, ?18)
       RETURNING id`,
    )
    .bind(
      key,
      receipt,
      spec.teamId === undefined ? "T0TEAM" : spec.teamId,
      spec.effect ?? "reactions.add",
      JSON.stringify(spec.payload ?? { channel: "C0WATCHED", timestamp: "1764504000.000200", name: "eyes" }),
      spec.status,
      spec.attempts ?? (spec.status === "pending" ? 0 : 1),
      spec.claimToken === undefined ? (spec.status === "leased" ? `token-${seq}` : null) : spec.claimToken,
      spec.claimExpiresAt === undefined ? (spec.status === "leased" ? created + 120_000 : null) : spec.claimExpiresAt,
      spec.nextAttemptAt ?? created,
      spec.expiresAt ?? null,
      spec.enqueuedAt === undefined ? created : spec.enqueuedAt,
      spec.sweeps ?? 0,
      spec.sweepAt === undefined ? (live ? created + 60_000 : null) : spec.sweepAt,
      spec.lastError ?? null,
      created,
      spec.completedAt === undefined ? (live ? null : created + 1_000) : spec.completedAt,
      spec.dueAt ?? null,
      spec.id ?? nextId,
      spec.id !== undefined ? 1 : 0,
    )
    .first<{ id: number }>();
  if (!row) throw new Error("insertRow: no id returned");
  nextId = Math.max(nextId, row.id + 1);
  return row.id;
}

export async function readRow(db: D1Database, id: number): Promise<OutboxRecord> {
  const row = await db.prepare("SELECT * FROM outbox WHERE id = ?").bind(id).first<OutboxRecord>();
  if (!row) throw new Error(`no outbox row ${id}`);
  return row;
}

/** A row's maybe_performed mark (migration 0010): a filter replay leaves a row so marked out. */
export async function maybePerformedOf(db: D1Database, id: number): Promise<number | undefined> {
  return (await db.prepare("SELECT maybe_performed AS m FROM outbox WHERE id = ?").bind(id).first<{ m: number }>())?.m;
}

export async function allRows(db: D1Database): Promise<OutboxRecord[]> {
  const { results } = await db.prepare("SELECT * FROM outbox ORDER BY id").all<OutboxRecord>();
  return results;
}

export async function countRows(db: D1Database, table: "receipts" | "outbox" | "outbox_attempts"): Promise<number> {
  const row = await db.prepare(`SELECT COUNT(*) AS n FROM ${table}`).first<{ n: number }>();
  return row?.n ?? 0;
}

export async function attemptsOf(db: D1Database, id: number) {
  const { results } = await db
    .prepare("SELECT * FROM outbox_attempts WHERE outbox_id = ? ORDER BY attempt, outcome")
    .bind(id)
    .all<{ outbox_id: number; attempt: number; outcome: string; error: string | null; claim_token: string | null }>();
  return results;
}

/**
 * A queue stand-in that records what it was asked to send (for tests of selection, not of delivery): what the
 * test helpers hand the code by default (consumer.ts, ingress.ts), so a test that calls the code directly never
 * sends to the test Worker's real queue, whose consumer would claim rows under the next test.
 */
export function recordingQueue(options: { fail?: boolean } = {}) {
  const sent: number[] = [];
  return {
    sent,
    async sendBatch(messages: Iterable<MessageSendRequest<{ id: number }>>) {
      if (options.fail) throw new Error("Queue send failed: simulated");
      for (const message of messages) sent.push(message.body.id);
    },
  };
}

/** Empties every table (storage is isolated per file, not per test). */
export async function resetTables(db: D1Database): Promise<void> {
  await db.batch([
    db.prepare("DELETE FROM receipts"),
    db.prepare("DELETE FROM outbox"),
    db.prepare("DELETE FROM outbox_attempts"),
    db.prepare("DELETE FROM rate_cooldowns"),
    db.prepare("DELETE FROM outbox_scrub_due"),
    db.prepare("DELETE FROM outbox_cancels"),
    db.prepare("DELETE FROM step_executions"),
  ]);
}

export async function tally(db: D1Database) {
  return {
    receipts: await countRows(db, "receipts"),
    outbox: await countRows(db, "outbox"),
    attempts: await countRows(db, "outbox_attempts"),
  };
}

/** tally() summed over every shard: "nothing written anywhere" and "one receipt, wherever its team lives". */
export async function tallyAll() {
  const sum = { receipts: 0, outbox: 0, attempts: 0 };
  for (const db of shardDbs()) {
    const one = await tally(db);
    sum.receipts += one.receipts;
    sum.outbox += one.outbox;
    sum.attempts += one.attempts;
  }
  return sum;
}

/** Deletes every test table's rows on every shard. */
export async function resetAllShards(): Promise<void> {
  for (const db of shardDbs()) await resetTables(db);
}
