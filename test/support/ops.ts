/**
 * Helpers for the operator surfaces' tests (workerd): the admin API's
 * dependencies over the real local D1, a queue that records whole messages
 * (delays included), authorised requests, and audit rows.
 */
import { env } from "cloudflare:workers";
import { recordingLog } from "../../shared/log.ts";
import type { OutboxMessage } from "../../shared/outbox/model.ts";
import { parseSettings, type Settings } from "../../shared/settings.ts";
import { type AdminDeps, handleAdmin } from "../../workers/ingress/admin/index.ts";
import { shardDbs } from "./rows.ts";
import { TEST_ADMIN_TOKEN } from "./settings.ts";

export const ADMIN_URL = "https://ackbox.test";

/** A queue stand-in that keeps every message as sent (body and delay), and can answer metrics(). */
export function messageQueue(options: { fail?: boolean; metrics?: () => Promise<QueueMetrics> } = {}) {
  const messages: MessageSendRequest<OutboxMessage>[] = [];
  return {
    messages,
    ids: () => messages.map((m) => m.body.id),
    async sendBatch(batch: Iterable<MessageSendRequest<OutboxMessage>>) {
      if (options.fail) throw new Error("Queue send failed: simulated");
      for (const message of batch) messages.push(message);
    },
    ...(options.metrics ? { metrics: options.metrics } : {}),
  };
}

export function adminDeps<Q extends AdminDeps["queue"] = ReturnType<typeof messageQueue>>(
  /** db: in place of shard 0's D1 (a metered or interleaving wrapper); shards: every shard's, in place of the test deployment's. */
  over: { settings?: Partial<Settings>; queue?: Q; db?: D1Database; shards?: readonly D1Database[] } = {},
) {
  const parsed = parseSettings(env);
  if (!parsed.ok) throw new Error(parsed.errors.join("; "));
  const log = recordingLog();
  const queue = (over.queue ?? messageQueue()) as Q;
  const shards = over.shards ?? [over.db ?? env.DB, ...shardDbs().slice(1)];
  const deps: AdminDeps = { shards, queue, settings: { ...parsed.settings, ...over.settings }, log };
  return { deps, log, queue };
}

export function adminRequest(path: string, init: RequestInit = {}, token: string | null = TEST_ADMIN_TOKEN): Request {
  const headers = new Headers(init.headers);
  if (token !== null) headers.set("authorization", `Bearer ${token}`);
  return new Request(`${ADMIN_URL}${path}`, { ...init, headers });
}

/** Calls the admin API at `now` and returns the status and parsed JSON body. */
export async function callAdmin<T = Record<string, unknown>>(deps: AdminDeps, path: string, now: number, init: RequestInit = {}) {
  const response = await handleAdmin(adminRequest(path, init), deps, now);
  const text = await response.text();
  let body: T;
  try {
    body = JSON.parse(text) as T;
  } catch {
    body = text as unknown as T;
  }
  return { status: response.status, body, headers: response.headers };
}

export function postJson(body: unknown): RequestInit {
  return { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) };
}

/** Writes an audit row as the consumer would (fence.ts, dead-letter.ts). */
export async function insertAttempt(
  db: D1Database,
  row: { outboxId: number; attempt: number; outcome: string; error?: string | null; finishedAt: number; startedAt?: number | null },
): Promise<void> {
  await db
    .prepare(
      "INSERT INTO outbox_attempts (outbox_id, attempt, outcome, error, claim_token, started_at, finished_at) VALUES (?, ?, ?, ?, NULL, ?, ?)",
    )
    .bind(row.outboxId, row.attempt, row.outcome, row.error ?? null, row.startedAt ?? null, row.finishedAt)
    .run();
}

export async function insertReceipt(db: D1Database, id: string, receivedAt: number, kind = "event", type = "app_mention"): Promise<void> {
  await db
    .prepare("INSERT INTO receipts (id, kind, type, team_id, retry_num, delivery_id, received_at) VALUES (?, ?, ?, 'T0TEAM', NULL, 'd', ?)")
    .bind(id, kind, type, receivedAt)
    .run();
}

/** Empties the tables of migration 0002 (resetTables empties those of 0001). */
export async function resetOpsTables(db: D1Database): Promise<void> {
  await db.batch([db.prepare("DELETE FROM backlog_samples"), db.prepare("DELETE FROM alert_state")]);
}
