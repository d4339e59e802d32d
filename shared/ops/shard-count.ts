/**
 * The two Workers disagreeing on SHARD_COUNT, made loud. A consumer with a
 * lower count acks every message naming a shard it does not have and never
 * sweeps that shard: its rows are neither delivered nor re-sent. Only the
 * consumer sees it happen, so it leaves a durable mark where the ingress
 * reads the deployment's state (shard 0):
 *
 * - the mark is an alert receipt, `alert:shard_count:raised:<window start>`
 *   (alerts.ts's operation ids), with a chat.postMessage row to ALERT_CHANNEL
 *   when one is set: one post per alert window while it lasts, deduped by the
 *   receipt like every alert;
 * - GET /admin/backlog (so the CLI, `backlog --check` and the dashboard) and
 *   /admin/metrics report the `shard_count` health check breached while the
 *   newest mark is younger than two alert windows.
 *
 * `npm run check:deploy` and `npm run deploy` refuse wrangler files that
 * disagree (cli/deploy/shards.ts); this catches what they cannot see
 * (one Worker deployed, a var changed on the dashboard).
 */
import type { Log } from "../log.ts";
import { enqueueRows, type OutboxQueue } from "../outbox/enqueue.ts";
import { recordIntent } from "../outbox/record.ts";
import type { Settings } from "../settings.ts";
import { ALERT_ID_PREFIX } from "./alert-rows.ts";
import type { HealthCheck } from "./health.ts";

const MARK_PREFIX = `${ALERT_ID_PREFIX}shard_count:raised:`;
/** The first id after every mark's (';' follows ':'): the marks are one range of the receipts' primary key. */
const MARK_END = `${ALERT_ID_PREFIX}shard_count:raised;`;

export interface UnknownShardDeps {
  /** Shard 0's D1, and the queue as seen from shard 0. */
  readonly db: D1Database;
  readonly queue: OutboxQueue;
  readonly settings: Pick<Settings, "alertChannel" | "alertWindowMs" | "sweepGraceMs">;
  readonly log: Log;
}

/** The consumer got messages naming `shard`, which its `shardCount` does not have: mark it, and post the alert once a window. */
export async function reportUnknownShard(
  deps: UnknownShardDeps,
  seen: { readonly shard: number; readonly shardCount: number },
  now: number,
): Promise<void> {
  const { settings } = deps;
  const operationId = `${MARK_PREFIX}${now - (now % settings.alertWindowMs)}`;
  const text =
    `:rotating_light: ackbox: the Workers disagree on SHARD_COUNT: the consumer (SHARD_COUNT ${seen.shardCount}) got a queue ` +
    `message for shard ${seen.shard}, which it does not have; that shard's rows are neither delivered nor swept. ` +
    "Deploy both Workers with the same SHARD_COUNT (`npm run check:deploy` refuses wrangler files that differ).";
  const channel = settings.alertChannel;
  const verdict = await recordIntent(
    deps.db,
    { id: operationId, kind: "alert", type: "shard_count.raised" },
    channel ? [{ key: "post", effect: "chat.postMessage", payload: { channel, text } }] : [],
    now,
    settings.sweepGraceMs,
  );
  if (!verdict.firstDelivery) return;
  deps.log("error", channel ? "alert raised" : "alert raised (ALERT_CHANNEL unset: logged only)", {
    kind: "shard_count",
    operation_id: operationId,
    shard: seen.shard,
    shard_count: seen.shardCount,
    outbox_ids: verdict.outboxIds,
  });
  await enqueueRows(deps.queue, deps.db, verdict.outboxIds, now, deps.log);
}

/** When the newest mark was left (epoch ms), if any: one range read of the receipts' primary key on shard 0. */
export async function lastUnknownShardAt(db: D1Database): Promise<number | null> {
  const row = await db
    .prepare("SELECT MAX(received_at) AS at FROM receipts WHERE id >= ?1 AND id < ?2")
    .bind(MARK_PREFIX, MARK_END)
    .first<{ at: number | null }>();
  return row?.at ?? null;
}

/** The `shard_count` health check of the ingress's backlog: breached while the newest mark is younger than two alert windows. */
export function shardCountCheck(lastAt: number | null, now: number, shardCount: number, alertWindowMs: number): HealthCheck {
  const limitS = Math.floor((2 * alertWindowMs) / 1000);
  const ageS = lastAt === null ? null : Math.max(0, Math.floor((now - lastAt) / 1000));
  const breached = ageS !== null && ageS < limitS;
  return {
    kind: "shard_count",
    breached,
    value: ageS,
    threshold: limitS,
    detail: breached
      ? `the consumer got a queue message for a shard it does not have ${ageS} s ago: its SHARD_COUNT is lower than this ingress's (${shardCount}), and those rows are neither delivered nor swept; deploy both Workers with the same SHARD_COUNT`
      : `no queue message for a shard the consumer does not have in the last ${limitS} s (SHARD_COUNT ${shardCount} here)`,
  };
}
