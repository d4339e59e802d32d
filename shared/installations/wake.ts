/**
 * An install (or re-install) serves its team's rows that wait for one now,
 * not when each row's wait (5 minutes, growing to an hour:
 * shared/delivery/deliver.ts installationWait) runs out.
 *
 * Installations live on shard 0; the rows on the install key's one home (its
 * placement, shared/shards/placement.ts: `T:<team>`, or `E:<org>` for an
 * org-wide install, whose rows are found by the enterprise their receipt
 * names). There one bounded UPDATE makes the waiting rows due now — only rows still pending
 * and waiting, so a row claimed meanwhile is left to its claimant — and the
 * ids it returns are enqueued at once with the ingress's own enqueue: on a
 * queue refusal they are marked for the next sweep, and the sweep_at written
 * here (now + grace) brings them back anyway. Enqueued rather than left to
 * the sweep: the person who just installed sees the app answer in seconds,
 * not at the next cron minute. Rows past WAKE_LIMIT keep their own wait.
 */
import type { Log } from "../log.ts";
import { enqueueRows, type OutboxQueue } from "../outbox/enqueue.ts";
import type { Installation } from "./store.ts";

/** Rows made due per shard by one install: bounded like every statement the ingress runs. */
export const WAKE_LIMIT = 500;

/**
 * A workspace's waiting rows, oldest first, through outbox_waiting_by_team (migration 0012): rows read are the
 * team's waiting rows, at most ?4. Check and act in one statement: only rows still pending and not yet due.
 */
const wakeTeam = `
UPDATE outbox
   SET next_attempt_at = ?2, enqueued_at = ?2, sweep_at = ?2 + ?3, updated_at = ?2
 WHERE id IN (SELECT id FROM outbox INDEXED BY outbox_waiting_by_team
               WHERE team_id = ?1 AND status = 'pending' AND waiting_since IS NOT NULL AND next_attempt_at > ?2
               ORDER BY created_at
               LIMIT ?4)
   AND status = 'pending'
RETURNING id`;

/**
 * An org-wide install's: the waiting rows whose receipt names the enterprise. The index holds only waiting rows,
 * and the walk stops after WAKE_SCAN of them, so an org's wake reads at most that many (plus their receipts).
 */
const wakeEnterprise = `
UPDATE outbox
   SET next_attempt_at = ?2, enqueued_at = ?2, sweep_at = ?2 + ?3, updated_at = ?2
 WHERE id IN (SELECT w.id FROM (SELECT id, receipt_id FROM outbox INDEXED BY outbox_waiting_by_team
                                 WHERE status = 'pending' AND waiting_since IS NOT NULL AND next_attempt_at > ?2
                                 LIMIT ?5) AS w
               WHERE EXISTS (SELECT 1 FROM receipts r WHERE r.id = w.receipt_id AND r.enterprise_id = ?1)
               LIMIT ?4)
   AND status = 'pending'
RETURNING id`;

/** Waiting rows an org-wide wake walks per shard at most. */
export const WAKE_SCAN = 5_000;

export interface WakeShard {
  readonly index: number;
  readonly db: D1Database;
  /** The outbox queue as seen from this shard (shared/shards/queue.ts). */
  readonly queue: OutboxQueue;
}

/** Makes the install's waiting rows due now on `shards` and enqueues them; returns how many were woken. */
export async function wakeWaitingRows(
  shards: readonly WakeShard[],
  install: Pick<Installation, "teamId" | "enterpriseId" | "isEnterpriseInstall">,
  now: number,
  sweepGraceMs: number,
  log: Log,
): Promise<number> {
  const teamId = install.isEnterpriseInstall ? null : (install.teamId ?? null);
  const enterpriseId = install.isEnterpriseInstall ? (install.enterpriseId ?? null) : null;
  if (teamId === null && enterpriseId === null) return 0;
  let woken = 0;
  for (const shard of shards) {
    const statement =
      teamId !== null
        ? shard.db.prepare(wakeTeam).bind(teamId, now, sweepGraceMs, WAKE_LIMIT)
        : shard.db.prepare(wakeEnterprise).bind(enterpriseId, now, sweepGraceMs, WAKE_LIMIT, WAKE_SCAN);
    const { results } = await statement.all<{ id: number }>();
    if (results.length === 0) continue;
    const ids = results.map((r) => r.id);
    await enqueueRows(shard.queue, shard.db, ids, now, log);
    log("info", "install: rows that waited for it are due now", {
      shard: shard.index,
      rows: ids.length,
      team_id: teamId,
      enterprise_id: enterpriseId,
    });
    woken += ids.length;
  }
  return woken;
}
