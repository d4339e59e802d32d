-- Migration number: 0013 	 one home per workspace: placements, and the keys an older ackbox left to place
--
-- Applied to every shard (migrations run on each); placements is read and written on shard 0 only
-- (shared/shards/placement.ts), legacy_keys on each shard by the cron until it is empty (shared/shards/upgrade.ts).

-- Where each workspace lives: its routing key (shared/shards/route.ts: 'E:<enterprise>' for an org-wide install,
-- else 'T:<team>') and its shard, chosen once, at first sight (an install, or the key's first input), by the rule
-- jumpHash(fnv1a64(key), SHARD_COUNT) of that moment. Written once with INSERT … ON CONFLICT DO NOTHING and never
-- updated or deleted: a workspace's home is immutable, so adding a shard moves nothing, and an isolate may cache a
-- row for its whole life. Insert: 1 row written (WITHOUT ROWID: the table is its primary key's b-tree).
CREATE TABLE placements (
  routing_key TEXT    PRIMARY KEY,
  shard       INTEGER NOT NULL CHECK (shard >= 0),
  placed_at   INTEGER NOT NULL
) WITHOUT ROWID;

-- The routing keys this shard held data for when it was upgraded to placements: an older ackbox routed by the
-- rule alone and wrote no placement, so these workspaces are placed by the cron (by the same rule, where their rows
-- already are) before a shard can be added — a workspace not seen since the upgrade must not move then. Extra keys
-- (an enterprise that is not an org-wide install) are harmless: they are placed by the rule routing uses. Drained
-- in bounded steps and emptied for good; nothing writes it afterwards.
CREATE TABLE legacy_keys (
  routing_key TEXT PRIMARY KEY
) WITHOUT ROWID;

INSERT OR IGNORE INTO legacy_keys (routing_key) SELECT install_key FROM installations;
INSERT OR IGNORE INTO legacy_keys (routing_key) SELECT 'T:' || team_id FROM receipts WHERE team_id IS NOT NULL AND team_id <> '';
INSERT OR IGNORE INTO legacy_keys (routing_key)
  SELECT 'E:' || enterprise_id FROM receipts WHERE enterprise_id IS NOT NULL AND enterprise_id <> '';
INSERT OR IGNORE INTO legacy_keys (routing_key) SELECT 'T:' || team_id FROM outbox WHERE team_id IS NOT NULL AND team_id <> '';
