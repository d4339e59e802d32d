/**
 * MOVING AN INSTALLATION to its team's new shard, while a shard is added
 * (docs/scaling.md, "Adding a shard"; shared/shards/transition.ts).
 *
 * A rotating installation holds Slack's single-use refresh token: two live
 * copies could each spend it, and the loser's refresh fails for good. So a
 * move is the rotation's own lease discipline (rotation.ts), one statement per
 * step:
 *
 * 1. claim the old copy's refresh lease (the same UPDATE a refresh claims
 *    with; RETURNING the whole row). While the move holds it no refresh can
 *    start on the old copy, and a refresh in progress there makes the claim
 *    fail ("busy": the caller waits and tries again);
 * 2. copy the row to the new shard, lease cleared, INSERT … ON CONFLICT DO
 *    UPDATE only WHERE the copy is newer (updated_at): a newer install already
 *    there (a re-install routes to the new shard) is kept, never overwritten
 *    by the old copy; a re-install written on the old shard after a move (an
 *    ingress still on the old count, during the deploy) replaces the older copy;
 * 3. delete the old copy, fenced on the move's lease. Fence lost (the move
 *    stalled past REFRESH_LEASE_MS and someone else took the lease, or a
 *    re-install wrote the old copy): the copy made in 2 is removed again if
 *    nobody has used it to refresh since (same token, same updated_at, no
 *    lease), and the caller tries again ("raced").
 *
 * So at every moment exactly one copy can be refreshed: the old one until the
 * move claims it, the new one once it is copied (the old one is leased by the
 * move until it is deleted).
 */
import { ShardConfigError } from "../shards/bindings.ts";
import { shardIndexOf } from "../shards/route.ts";
import type { ShardTransition } from "../shards/transition.ts";
import { REFRESH_LEASE_MS } from "./rotation.ts";

export type MoveOutcome = "moved" | "absent" | "busy" | "raced";

const LEASE_COLUMNS = new Set(["refresh_claim_token", "refresh_claim_expires_at"]);

/** Moves one installation (by install_key) from `from` to `to`; see the module comment for the three steps. */
export async function moveInstallation(
  from: D1Database,
  to: D1Database,
  installKey: string,
  now: number,
  lease: string,
): Promise<MoveOutcome> {
  const claimed = await from
    .prepare(
      `UPDATE installations SET refresh_claim_token = ?1, refresh_claim_expires_at = ?2 + ?3
        WHERE install_key = ?4 AND (refresh_claim_expires_at IS NULL OR refresh_claim_expires_at <= ?2)
       RETURNING *`,
    )
    .bind(lease, now, REFRESH_LEASE_MS, installKey)
    .first<Record<string, unknown>>();
  if (!claimed) {
    const there = await from.prepare("SELECT 1 AS found FROM installations WHERE install_key = ?1").bind(installKey).first("found");
    return there === 1 ? "busy" : "absent";
  }
  // Every column the table has (RETURNING *), so a column a later migration adds moves too.
  const columns = Object.keys(claimed);
  const quoted = (c: string) => `"${c.replaceAll('"', '""')}"`;
  // A copy already there is kept unless this one was written later: a re-install lands on the new shard (kept),
  // but one by an ingress still on the old count (the deploy's rollout) lands here after the move — that one wins.
  await to
    .prepare(
      `INSERT INTO installations (${columns.map(quoted).join(", ")})
       VALUES (${columns.map((_, i) => `?${i + 1}`).join(", ")})
       ON CONFLICT (install_key) DO UPDATE SET ${columns
         .filter((c) => c !== "install_key")
         .map((c) => `${quoted(c)} = excluded.${quoted(c)}`)
         .join(", ")}
        WHERE excluded.updated_at > installations.updated_at`,
    )
    .bind(...columns.map((c) => (LEASE_COLUMNS.has(c) ? null : (claimed[c] ?? null))))
    .run();
  const deleted = await from
    .prepare("DELETE FROM installations WHERE install_key = ?1 AND refresh_claim_token = ?2")
    .bind(installKey, lease)
    .run();
  if (deleted.meta.changes === 1) return "moved";
  await to
    .prepare(
      `DELETE FROM installations
        WHERE install_key = ?1 AND bot_token = ?2 AND updated_at = ?3 AND refresh_claim_token IS NULL`,
    )
    .bind(installKey, claimed.bot_token ?? null, claimed.updated_at ?? null)
    .run();
  return "raced";
}

/** How often, and how many times, a move waits for a refresh (or another move) in progress on the old copy. */
const BUSY_WAIT_MS = 100;
const BUSY_WAITS = 50;

export interface LocatorDeps {
  /** Every shard's D1, index order. */
  readonly shards: readonly D1Database[];
  readonly transition: ShardTransition;
  readonly newToken: () => string;
  readonly clock: () => number;
  readonly sleep: (ms: number) => Promise<void>;
  /** No waiting past this time (epoch ms, on `clock`): the ingress's ack budget. */
  readonly deadline?: number;
}

/**
 * Where the installation serving a row on shard `shard` is read, while a shard
 * is added. Each of the row's keys (its workspace's, and its org's: an
 * org-wide install serves a workspace without its own) lives on its shard
 * under the count now; a key that moved has its installation brought there
 * from its previous shard first. Both for rows recorded after the switch (on
 * the new shard) and rows recorded before it (draining on the previous one).
 * When the two keys live on two shards, the workspace's own installation wins
 * if there is one (findInstallation's order), else the org's.
 */
export function installationLocator(
  deps: LocatorDeps,
  shard: number,
): (row: {
  readonly teamId: string | null | undefined;
  readonly enterpriseId?: string | undefined;
  readonly receiptId?: string | undefined;
}) => Promise<{ readonly db: D1Database; readonly enterpriseId: string | undefined }> {
  const here = deps.shards[shard];
  if (!here) throw new ShardConfigError(`shard ${shard} is not configured`);
  const { count, previous } = deps.transition;
  /** The key's shard now, its installation moved there first if the key moved. */
  const settle = async (key: string): Promise<D1Database> => {
    const now = shardIndexOf(key, count);
    const before = shardIndexOf(key, previous);
    const to = deps.shards[now] as D1Database;
    if (now === before) return to;
    const from = deps.shards[before] as D1Database;
    for (let waits = 0; ; waits++) {
      const outcome = await moveInstallation(from, to, key, deps.clock(), deps.newToken());
      if (outcome === "moved" || outcome === "absent") break;
      const outOfTime = deps.deadline !== undefined && deps.clock() + BUSY_WAIT_MS > deps.deadline;
      // Still busy: read the new shard anyway; a miss there makes the row wait and come back (nothing is lost).
      if (waits >= BUSY_WAITS || outOfTime) break;
      await deps.sleep(BUSY_WAIT_MS);
    }
    return to;
  };
  return async (row) => {
    // The row's org is on its receipt, on the row's shard.
    const enterpriseId =
      row.enterpriseId ??
      (row.receiptId === undefined
        ? undefined
        : ((await here
            .prepare("SELECT enterprise_id FROM receipts WHERE id = ?1")
            .bind(row.receiptId)
            .first<string | null>("enterprise_id")) ?? undefined));
    const teamDb = row.teamId ? await settle(`T:${row.teamId}`) : undefined;
    const orgDb = enterpriseId ? await settle(`E:${enterpriseId}`) : undefined;
    if (!teamDb || !orgDb || teamDb === orgDb) return { db: teamDb ?? orgDb ?? here, enterpriseId };
    const own = await teamDb.prepare("SELECT 1 AS found FROM installations WHERE install_key = ?1").bind(`T:${row.teamId}`).first("found");
    return { db: own === 1 ? teamDb : orgDb, enterpriseId };
  };
}

/** Installations one cron tick moves at most, all shards together (three statements each; the consumer splits it over the shards). */
export const MOVES_PER_TICK = 20;

/**
 * The cron's part, per shard: move the installations whose key now lives on
 * another shard (a team with no traffic during the window still moves), at
 * most `limit` tries a tick, then report what is left (`leftToMove`).
 */
export async function moveAwayFrom(
  deps: Omit<LocatorDeps, "deadline">,
  shard: number,
  limit = MOVES_PER_TICK,
): Promise<{ moved: number } & LeftToMove> {
  const db = deps.shards[shard];
  if (!db) throw new ShardConfigError(`shard ${shard} is not configured`);
  const { count } = deps.transition;
  const { results } = await db.prepare("SELECT install_key FROM installations").all<{ install_key: string }>();
  const away = results.map((r) => r.install_key).filter((key) => shardIndexOf(key, count) !== shard);
  let moved = 0;
  // Tries, not successes, are bounded: each is three statements, whatever its outcome.
  for (const key of away.slice(0, limit)) {
    const outcome = await moveInstallation(db, deps.shards[shardIndexOf(key, count)] as D1Database, key, deps.clock(), deps.newToken());
    if (outcome === "moved") moved += 1;
  }
  return { moved, ...(await leftToMove(db, shard, count)) };
}

export interface LeftToMove {
  /** Installations on this shard whose key now lives on another shard. */
  readonly installationsLeft: number;
  /** Pending or leased rows on this shard whose team and org (when it has one) both live on another shard now (see below). */
  readonly liveRowsOfMovedTeams: number;
}

/**
 * What the operator waits for before removing SHARD_COUNT_PREVIOUS, on one
 * shard (docs/scaling.md, "Adding a shard"): read only, two statements — the
 * installation keys, and the live rows grouped by team and org (a row's org is
 * on its receipt), each tested against the routing in code (the hash is not SQL).
 */
export async function leftToMove(db: D1Database, shard: number, count: number): Promise<LeftToMove> {
  const away = (key: string) => shardIndexOf(key, count) !== shard;
  const [keys, live] = await db.batch<{ install_key?: string; team_id?: string; enterprise_id?: string | null; n?: number }>([
    db.prepare("SELECT install_key FROM installations"),
    db.prepare(
      `SELECT o.team_id AS team_id, r.enterprise_id AS enterprise_id, COUNT(*) AS n
         FROM outbox AS o LEFT JOIN receipts AS r ON r.id = o.receipt_id
        WHERE o.status IN ('pending', 'leased') AND o.team_id IS NOT NULL
        GROUP BY o.team_id, r.enterprise_id`,
    ),
  ]);
  return {
    installationsLeft: (keys?.results ?? []).filter((r) => away(String(r.install_key))).length,
    liveRowsOfMovedTeams: (live?.results ?? [])
      // A row is routed by ONE of its keys (E: for an org-wide install's event, else T:) and the row does not say
      // which; a Grid workspace installed on its own has an org on its receipt whose E: key may route elsewhere
      // while the row sits on its team's shard, where it belongs. Counted only when every key it may be routed by
      // is away: such a row is counted forever otherwise and `drained` never comes. A row left where only one key
      // moved is not counted; after the window it still finds its installation where its team or org lives now
      // (resolve.ts, locateOnMiss).
      .filter((r) => away(`T:${r.team_id}`) && (r.enterprise_id == null || away(`E:${r.enterprise_id}`)))
      .reduce((sum, r) => sum + Number(r.n), 0),
  };
}
