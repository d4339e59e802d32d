/**
 * Upgrading from an older ackbox (shared/shards/upgrade.ts, migration 0013):
 * the routing keys it left without a placement are placed by the rule, and
 * the installation copies it left on shard 1 brought to shard 0 — once, in
 * bounded steps of the cron tick, and idempotent when a step is repeated.
 */
import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { countingDb } from "../../shared/delivery/query-budget.ts";
import { type TokenKeys, tokenKeys } from "../../shared/installations/crypto.ts";
import { findInstallation, saveInstallation, tokenOf } from "../../shared/installations/store.ts";
import { recordingLog } from "../../shared/log.ts";
import { placementsOn } from "../../shared/shards/placement.ts";
import { shardQueue } from "../../shared/shards/queue.ts";
import { shardIndexOf } from "../../shared/shards/route.ts";
import { COPIES_PER_TICK, LEGACY_KEYS_PER_TICK, upgradeQueries, upgradeStep } from "../../shared/shards/upgrade.ts";
import worker from "../support/entries/consumer.ts";
import { testInstallation } from "../support/installations.ts";
import { insertRow, readRow, resetTables, shardDbs } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";

const HOUR = 3_600_000;
let keys: TokenKeys;
let db0: D1Database;
let db1: D1Database;

beforeEach(async () => {
  [db0, db1] = shardDbs() as [D1Database, D1Database];
  for (const db of [db0, db1]) {
    await resetTables(db);
    await db.batch([db.prepare("DELETE FROM installations"), db.prepare("DELETE FROM legacy_keys")]);
  }
  keys = await tokenKeys("4a".repeat(32), undefined);
});

/** A queue that records the messages it is sent. */
function recordingOutbox() {
  const sent: unknown[] = [];
  return {
    sent,
    async sendBatch(messages: Iterable<MessageSendRequest<unknown>>) {
      for (const m of messages) sent.push(m.body);
    },
  };
}

/** One tick's step over both shards, each counted; returns the report and the statements each shard took. */
async function step(now = NOW, queue = recordingOutbox()) {
  const count = { used: 0 };
  const shards = [db0, db1].map((db) => countingDb(db, Number.POSITIVE_INFINITY, count).db);
  const log = recordingLog();
  const report = await upgradeStep(
    {
      shards,
      placements: placementsOn(shards[0] as D1Database, 2),
      queueOf: (shard) => shardQueue(queue, shard),
      sweepGraceMs: 60_000,
      log,
    },
    now,
  );
  return { report, statements: count.used, queue, log };
}

async function legacyKeys(db: D1Database, keysToAdd: readonly string[]) {
  await db.prepare("INSERT INTO legacy_keys (routing_key) SELECT value FROM json_each(?1)").bind(JSON.stringify(keysToAdd)).run();
}
const left = async (db: D1Database) => (await db.prepare("SELECT COUNT(*) AS n FROM legacy_keys").first<number>("n")) ?? 0;
const placement = (key: string) => db0.prepare("SELECT shard FROM placements WHERE routing_key = ?1").bind(key).first<number>("shard");
const installationsOn = async (db: D1Database) =>
  (
    await db
      .prepare("SELECT install_key, bot_token FROM installations ORDER BY install_key")
      .all<{ install_key: string; bot_token: string }>()
  ).results;

describe("routing keys an older ackbox left without a placement", () => {
  it("are placed by the rule, at most LEGACY_KEYS_PER_TICK a shard a tick, then forgotten; a drained deployment costs one read a shard", async () => {
    const many = Array.from({ length: LEGACY_KEYS_PER_TICK + 30 }, (_, i) => `T:T0OLD${i}`);
    const few = ["T:T0FEW1", "E:E0FEWORG"];
    await legacyKeys(db0, many);
    await legacyKeys(db1, few);

    const first = await step();
    expect(first.report.placed).toBe(LEGACY_KEYS_PER_TICK + few.length);
    expect([await left(db0), await left(db1)]).toEqual([30, 0]);
    expect(first.statements).toBeLessThanOrEqual(upgradeQueries(2));

    const second = await step();
    expect(second.report.placed).toBe(30);
    expect([await left(db0), await left(db1)]).toEqual([0, 0]);
    for (const key of [...many, ...few]) expect({ key, shard: await placement(key) }).toEqual({ key, shard: shardIndexOf(key, 2) });

    // Empty: one read of the (empty) tables per shard, and nothing written.
    const drained = await step();
    expect(drained.report).toEqual({ placed: 0, copiesMoved: 0, woken: 0 });
    expect(drained.statements).toBe(2);
  });

  it("a key placed meanwhile (its first input since the upgrade) keeps its placement: the step only adds what is missing", async () => {
    const seen = Array.from({ length: 50 }, (_, i) => `T:T0SEEN${i}`).find((key) => shardIndexOf(key, 2) === 1) as string;
    // Placed on shard 0 by a one-shard isolate before the count was two (its rows are there).
    await placementsOn(db0, 1).place(seen, NOW - HOUR);
    await legacyKeys(db1, [seen]);
    await step();
    expect(await placement(seen)).toBe(0);
    expect(await left(db1)).toBe(0);
    // Repeated (a tick that died after placing, before forgetting): nothing changes.
    await legacyKeys(db1, [seen]);
    await step();
    expect(await placement(seen)).toBe(0);
  });

  it("the cron tick runs the step", async () => {
    await legacyKeys(db1, ["T:T0TICK"]);
    const ctx = createExecutionContext();
    await worker.scheduled(createScheduledController({ scheduledTime: NOW, cron: "* * * * *" }), { ...env, ALERT_CHANNEL: "" }, ctx);
    await waitOnExecutionContext(ctx);
    expect(await placement("T:T0TICK")).toBe(shardIndexOf("T:T0TICK", 2));
    expect(await left(db1)).toBe(0);
  });
});

describe("installation copies an older ackbox left on shard 1", () => {
  it("are moved to shard 0 and deleted where they were, shard 0's copy winning; the workspace's waiting rows are woken on its home", async () => {
    const alone = "T0COPYONLY";
    const both = "T0COPYBOTH";
    await saveInstallation(db1, keys, testInstallation(alone, "xoxb-copy-alone"), NOW - 2 * HOUR);
    await saveInstallation(db1, keys, testInstallation(both, "xoxb-copy-stale"), NOW - 2 * HOUR);
    await saveInstallation(db0, keys, testInstallation(both, "xoxb-reinstalled"), NOW - HOUR);
    const sealedOnBoth = (await installationsOn(db0)).find((i) => i.install_key === `T:${both}`)?.bot_token;
    // A row of the lone copy's team that waited for an installation shard 0 did not have.
    const home = shardIndexOf(`T:${alone}`, 2) === 0 ? db0 : db1;
    const waiting = await insertRow(home, { status: "pending", teamId: alone, createdAt: NOW - HOUR, nextAttemptAt: NOW + HOUR });
    await home
      .prepare("UPDATE outbox SET waiting_since = ?2 WHERE id = ?1")
      .bind(waiting, NOW - HOUR)
      .run();

    const { report, queue } = await step();
    expect(report).toMatchObject({ copiesMoved: 2, woken: 1 });
    const moved = await installationsOn(db0);
    expect(moved.map((i) => i.install_key)).toEqual([`T:${both}`, `T:${alone}`].sort());
    expect(moved.find((i) => i.install_key === `T:${both}`)?.bot_token).toBe(sealedOnBoth);
    expect(await installationsOn(db1)).toEqual([]);
    expect(await readRow(home, waiting)).toMatchObject({ status: "pending", next_attempt_at: NOW });
    expect(queue.sent).toEqual([home === db0 ? { id: waiting } : { id: waiting, shard: 1 }]);
    // The moved copy is the one its token opens with (sealed under its install key, as on any shard).
    const found = await findInstallation(db0, { teamId: alone, enterpriseId: undefined });
    expect(found && (await tokenOf(keys, found))).toBe("xoxb-copy-alone");
  });

  it("at most COPIES_PER_TICK a tick; one under a live refresh lease waits for a tick after the lease", async () => {
    const teams = Array.from({ length: COPIES_PER_TICK + 1 }, (_, i) => `T0MANY${i}`);
    for (const team of teams) await saveInstallation(db1, keys, testInstallation(team, `xoxb-${team}`), NOW - HOUR);
    await saveInstallation(db1, keys, testInstallation("T0LEASED", "xoxb-leased"), NOW - HOUR);
    await db1
      .prepare("UPDATE installations SET refresh_claim_token = 'r1', refresh_claim_expires_at = ?1 WHERE install_key = 'T:T0LEASED'")
      .bind(NOW + 1)
      .run();

    expect((await step(NOW)).report.copiesMoved).toBe(COPIES_PER_TICK);
    expect((await step(NOW)).report.copiesMoved).toBe(1);
    expect((await installationsOn(db1)).map((i) => i.install_key)).toEqual(["T:T0LEASED"]);
    // The lease ends at NOW + 1: a tick then moves it.
    expect((await step(NOW + 1)).report.copiesMoved).toBe(1);
    expect(await installationsOn(db1)).toEqual([]);
    expect((await installationsOn(db0)).map((i) => i.install_key)).toEqual([...teams.map((t) => `T:${t}`), "T:T0LEASED"].sort());
  });
});

describe("migration 0013", () => {
  it("lists every routing key a shard has data for: installations, receipts' teams and orgs, outbox rows' teams", async () => {
    await saveInstallation(db1, keys, testInstallation("T0INST", "xoxb-i"), NOW);
    await db1
      .prepare(
        "INSERT INTO receipts (id, kind, type, team_id, delivery_id, received_at, enterprise_id) VALUES ('EvA', 'event', 'app_mention', 'T0RCPT', 'd', ?1, 'E0RCPT'), ('EvB', 'event', 'app_mention', NULL, 'd', ?1, NULL)",
      )
      .bind(NOW)
      .run();
    await insertRow(db1, { status: "pending", teamId: "T0ROW" });
    await insertRow(db1, { status: "done", teamId: null });
    const seed = (env.TEST_MIGRATIONS.find((m) => m.name.startsWith("0013_"))?.queries ?? []).filter((q) =>
      /^INSERT OR IGNORE INTO legacy_keys/i.test(q.trim()),
    );
    expect(seed.length).toBeGreaterThan(0);
    for (const query of seed) await db1.prepare(query).run();
    const { results } = await db1.prepare("SELECT routing_key FROM legacy_keys ORDER BY routing_key").all<{ routing_key: string }>();
    expect(results.map((r) => r.routing_key)).toEqual(["E:E0RCPT", "T:T0INST", "T:T0ROW", "T:T0RCPT"].sort());
  });
});
