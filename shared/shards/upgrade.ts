/**
 * UPGRADING FROM AN OLDER ACKBOX: what it left is brought to one home per
 * workspace once, in bounded steps of the cron tick (docs/scaling.md,
 * "Upgrading from an older ackbox"). Two things, each a one-time table walk
 * that ends empty — after which a tick costs one read of empty tables a shard:
 *
 * - Routing keys without a placement. An older ackbox routed by the rule alone
 *   and wrote none, so migration 0013 listed every key each shard has data
 *   for (legacy_keys). Each is placed on shard 0 by the rule (where its rows
 *   already are), then forgotten: a workspace not seen since the upgrade must
 *   not move when a shard is added later (`npm run setup -- --shards N`
 *   refuses while any shard still lists keys).
 * - Copies of installations an ackbox that placed installations by team left
 *   on shards ≥ 1. Each is inserted on shard 0 unless shard 0 has the key
 *   (`INSERT … ON CONFLICT DO NOTHING`: shard 0's copy wins, it is the one a
 *   re-install wrote), deleted where it was, and its workspace's waiting rows
 *   are woken (they waited for it while it was out of reach). A copy whose
 *   refresh lease is live is left for a later tick: its holder writes it back.
 */
import { wakeWaitingRows } from "../installations/wake.ts";
import { describeError, type Log } from "../log.ts";
import type { OutboxQueue } from "../outbox/enqueue.ts";
import { type Placements, placedOn } from "./placement.ts";
import { routingKeyOf } from "./route.ts";

/** Keys placed per shard and tick: one insert and one delete of at most this many, inside D1's statement limits. */
export const LEGACY_KEYS_PER_TICK = 200;
/** Installation copies moved per tick, over every shard: each costs a placement round trip and a wake. */
export const COPIES_PER_TICK = 5;

/**
 * D1 statements the step issues at most in a tick over `shards` shards: per shard its read, and the keys' insert
 * and delete; per shard with copies (at most COPIES_PER_TICK of them) their insert and delete; per copy its
 * placement (2), its wake and a failed enqueue's mark.
 */
export const upgradeQueries = (shards: number): number =>
  shards * 3 + Math.min(Math.max(0, shards - 1), COPIES_PER_TICK) * 2 + COPIES_PER_TICK * 4;

/** Installation columns a copy carries over; its refresh lease is not among them (a copy is moved unleased). */
const COPY_COLUMNS = [
  "install_key",
  "enterprise_id",
  "team_id",
  "is_enterprise_install",
  "bot_user_id",
  "bot_id",
  "scopes",
  "installer_user_id",
  "installed_at",
  "updated_at",
  "key_id",
  "bot_token",
  "refresh_token",
  "token_expires_at",
  "blocked_reason",
  "blocked_at",
  "refresh_failures",
  "refresh_retry_at",
] as const;

/**
 * What is left on a shard, in one read: up to ?1 keys to place, and (?2 > 0, a shard ≥ 1) up to ?2 installation
 * copies not under a live refresh lease at ?3, each as one JSON object. Rows read: what it returns.
 */
const leftOn = `
SELECT routing_key AS name, NULL AS copy FROM (SELECT routing_key FROM legacy_keys LIMIT ?1)
UNION ALL
SELECT install_key, json_object(${COPY_COLUMNS.map((c) => `'${c}', ${c}`).join(", ")}) FROM (
  SELECT * FROM installations
   WHERE ?2 > 0 AND (refresh_claim_expires_at IS NULL OR refresh_claim_expires_at <= ?3)
   LIMIT ?2)`;

const forgetKeys = "DELETE FROM legacy_keys WHERE routing_key IN (SELECT value FROM json_each(?1))";

/** On shard 0: the copies, unless it has the key (its own copy wins). */
const insertCopies = `
INSERT INTO installations (${COPY_COLUMNS.join(", ")})
SELECT ${COPY_COLUMNS.map((c) => `json_extract(value, '$.${c}')`).join(", ")} FROM json_each(?1) WHERE true
ON CONFLICT (install_key) DO NOTHING`;

/** Where they were: each copy as it was read (fenced on its token: one refreshed meanwhile stays for the next tick). */
const deleteCopies = `
DELETE FROM installations
 WHERE EXISTS (SELECT 1 FROM json_each(?1) AS c
                WHERE json_extract(c.value, '$.install_key') = installations.install_key
                  AND json_extract(c.value, '$.bot_token') = installations.bot_token)`;

export interface UpgradeDeps {
  /** Every shard's D1, index order; shard 0 holds placements and installations. */
  readonly shards: readonly D1Database[];
  readonly placements: Placements;
  /** The outbox queue as seen from a shard (shared/shards/queue.ts), for the woken rows. */
  readonly queueOf: (shard: number) => OutboxQueue;
  readonly sweepGraceMs: number;
  readonly log: Log;
}

export interface UpgradeReport {
  readonly placed: number;
  readonly copiesMoved: number;
  readonly woken: number;
}

/** One tick's step: bounded (upgradeQueries); a shard's failure is logged and leaves its rest for the next tick. */
export async function upgradeStep(deps: UpgradeDeps, now: number): Promise<UpgradeReport> {
  const home = deps.shards[0] as D1Database;
  const report = { placed: 0, copiesMoved: 0, woken: 0 };
  let copiesLeft = COPIES_PER_TICK;
  for (const [index, db] of deps.shards.entries()) {
    const log: Log = (level, msg, fields) => deps.log(level, msg, { shard: index, ...fields });
    try {
      const copiesHere = index === 0 ? 0 : copiesLeft;
      const { results } = await db.prepare(leftOn).bind(LEGACY_KEYS_PER_TICK, copiesHere, now).all<{ name: string; copy: string | null }>();
      const keys = results.filter((row) => row.copy === null).map((row) => row.name);
      if (keys.length > 0) {
        await deps.placements.placeAll(keys, now);
        await db.prepare(forgetKeys).bind(JSON.stringify(keys)).run();
        report.placed += keys.length;
        log("info", "upgrade: routing keys of an older ackbox placed by the rule", { keys: keys.length });
      }
      const copies = results.flatMap((row) => (row.copy === null ? [] : [JSON.parse(row.copy) as Copy]));
      if (copies.length === 0) continue;
      copiesLeft -= copies.length;
      const moved = JSON.stringify(copies);
      await home.prepare(insertCopies).bind(moved).run();
      await db.prepare(deleteCopies).bind(moved).run();
      report.copiesMoved += copies.length;
      log("info", "upgrade: installations an older ackbox left here moved to shard 0", {
        install_keys: copies.map((c) => c.install_key),
      });
      for (const copy of copies) report.woken += await wakeFor(deps, copy, now);
    } catch (error) {
      log("error", "upgrade step failed on this shard; what is left there is taken on the next tick", { error: describeError(error) });
    }
  }
  return report;
}

interface Copy {
  readonly install_key: string;
  readonly team_id: string | null;
  readonly enterprise_id: string | null;
  readonly is_enterprise_install: number;
}

/** The copy's workspace's rows that waited for an installation (none was on shard 0), on its home: due now. */
async function wakeFor(deps: UpgradeDeps, copy: Copy, now: number): Promise<number> {
  const install = {
    teamId: copy.team_id ?? undefined,
    enterpriseId: copy.enterprise_id ?? undefined,
    isEnterpriseInstall: copy.is_enterprise_install === 1,
  };
  const index = await deps.placements.place(routingKeyOf(install), now);
  const home = { index, db: placedOn(deps.shards, index), queue: deps.queueOf(index) };
  return wakeWaitingRows([home], install, now, deps.sweepGraceMs, deps.log);
}
