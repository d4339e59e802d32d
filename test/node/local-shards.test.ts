/**
 * The local run's shards, without starting anything: how many it binds, that
 * both generated configs bind every shard to the same local database (one id
 * per shard: local D1 keeps one SQLite file per database_id, so two shards on
 * one id would silently be one database), and the teams the local tools use
 * to put traffic on every shard. The run itself: test/node/local-run.test.ts.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { localShardCount, writeDevConfigs } from "../../cli/local/config.ts";
import { PROJECT_ROOT } from "../../cli/local/run-info.ts";
import { teamsOnEveryShard } from "../../cli/local/shard-teams.ts";
import { routingKeyOf, shardIndexOf } from "../../shared/shards/route.ts";

interface Database {
  binding: string;
  database_name: string;
  database_id: string;
  migrations_dir: string;
}
const databasesIn = (path: string) =>
  (JSON.parse(readFileSync(path, "utf8").replace(/^\/\/.*\n/, "")) as { d1_databases: Database[] }).d1_databases;

describe("a local run's shards", () => {
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), "ackbox-local-shards-"));
    mkdirSync(join(root, "workers", "consumer"), { recursive: true });
    copyFileSync(join(PROJECT_ROOT, "wrangler.toml"), join(root, "wrangler.toml"));
    copyFileSync(join(PROJECT_ROOT, "workers/consumer/wrangler.toml"), join(root, "workers/consumer/wrangler.toml"));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it("counts SHARD_COUNT from the run's settings first, else the wrangler files' [vars] (1 as committed)", () => {
    expect(localShardCount(root, {})).toBe(1);
    expect(localShardCount(root, { SHARD_COUNT: "4" })).toBe(4);
    expect(() => localShardCount(root, { SHARD_COUNT: "17" })).toThrow('SHARD_COUNT must be a whole number from 1 to 16, got "17"');
    const consumer = join(root, "workers/consumer/wrangler.toml");
    writeFileSync(consumer, readFileSync(consumer, "utf8").replace('SHARD_COUNT = "1"', 'SHARD_COUNT = "2"'));
    expect(() => localShardCount(root, {})).toThrow(
      'SHARD_COUNT is "1" in wrangler.toml but "2" in workers/consumer/wrangler.toml: both Workers must see the same shards',
    );
    expect(localShardCount(root, { SHARD_COUNT: "3" })).toBe(3); // the run's own setting reaches both Workers
  });

  it("binds every shard in both Workers, each shard to one local database of its own, migrated from the one folder", () => {
    const configs = writeDevConfigs({ root, dir: join(root, "run"), vars: {}, shardCount: 3 });
    expect(configs.shards).toEqual([
      { index: 0, binding: "DB", databaseName: "ackbox" },
      { index: 1, binding: "DB_1", databaseName: "ackbox-shard-1" },
      { index: 2, binding: "DB_2", databaseName: "ackbox-shard-2" },
    ]);
    const ingress = databasesIn(configs.ingress);
    const consumer = databasesIn(configs.consumer);
    expect(ingress.map((db) => db.binding)).toEqual(["DB", "DB_1", "DB_2"]);
    expect(consumer.map((db) => [db.binding, db.database_name, db.database_id])).toEqual(
      ingress.map((db) => [db.binding, db.database_name, db.database_id]),
    );
    expect(new Set(ingress.map((db) => db.database_id)).size).toBe(3);
    for (const db of [...ingress, ...consumer]) expect(db.migrations_dir).toBe(join(root, "migrations"));
  });

  it("binds shard 0 alone with one shard: the deployment of before sharding", () => {
    const configs = writeDevConfigs({ root, dir: join(root, "run"), vars: {} });
    expect(configs.shards).toEqual([{ index: 0, binding: "DB", databaseName: "ackbox" }]);
    expect(databasesIn(configs.ingress).map((db) => db.binding)).toEqual(["DB"]);
  });

  it("finds a team for every shard with the Workers' own routing", () => {
    for (const count of [1, 2, 4, 16]) {
      const teams = teamsOnEveryShard(count, "T0CHAOS");
      expect(teams).toHaveLength(count);
      for (const [shard, team] of teams.entries()) expect(shardIndexOf(routingKeyOf({ teamId: team.teamId }), count)).toBe(shard);
    }
  });
});
