/**
 * A moved team's installation while a shard is added (SHARD_COUNT 1 → 2,
 * SHARD_COUNT_PREVIOUS 1; shared/installations/move.ts): found and moved to
 * its new shard by the first row that needs it, from either shard, under the
 * rotation lease, so a rotating token is refreshed exactly once and never
 * exists as two refreshable copies; moved by the cron when no row needs it;
 * and removed from both shards by an uninstall.
 */
import { beforeEach, describe, expect, it } from "vitest";
import { deliverBatch } from "../../shared/delivery/deliver.ts";
import { slackForOf } from "../../shared/effects/context.ts";
import { type TokenKeys, tokenKeys } from "../../shared/installations/crypto.ts";
import { INSTALLATION_REMOVED, installationRemovedEffect, withLifecycleEffect } from "../../shared/installations/lifecycle.ts";
import { installationLocator, leftToMove, moveAwayFrom, moveInstallation } from "../../shared/installations/move.ts";
import { slackForRow } from "../../shared/installations/resolve.ts";
import { saveInstallation } from "../../shared/installations/store.ts";
import { shardIndexOf } from "../../shared/shards/route.ts";
import { otherShardDbOf } from "../../shared/shards/transition.ts";
import { deliveryDeps } from "../support/consumer.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { testInstallation } from "../support/installations.ts";
import { insertRow, readRow, resetTables, shardDbs } from "../support/rows.ts";
import { TEST_SLACK_API_URL } from "../support/settings.ts";
import { NOW } from "../support/slack-requests.ts";
import { testApp } from "../support/test-app.ts";

const slack = useFakeSlack();
const HOUR = 3_600_000;
const TRANSITION = { count: 2, previous: 1 };
let keys: TokenKeys;
let db0: D1Database;
let db1: D1Database;

beforeEach(async () => {
  [db0, db1] = shardDbs() as [D1Database, D1Database];
  for (const db of [db0, db1]) {
    await resetTables(db);
    await db.prepare("DELETE FROM installations").run();
  }
  keys = await tokenKeys("4a".repeat(32), undefined);
});

/** A team that moves from shard 0 to shard 1 when the count goes from 1 to 2. */
function movedTeam(prefix: string): string {
  for (let i = 0; i < 1000; i++) if (shardIndexOf(`T:${prefix}${i}`, 2) === 1) return `${prefix}${i}`;
  throw new Error("no candidate team");
}

const install = testInstallation;

async function installationsOn(db: D1Database) {
  const { results } = await db
    .prepare("SELECT install_key, bot_token, refresh_claim_token, token_expires_at, installed_at, scopes FROM installations")
    .all<Record<string, unknown>>();
  return results;
}

let leases = 0;
const newToken = () => `lease-${++leases}`;

/** The consumer's delivery on `shard`, each row's installation located as the Workers locate it during the transition. */
function shardDeliveryDeps(shard: number, now: number) {
  const shards = [db0, db1];
  const slackFor = slackForRow({
    db: shards[shard] as D1Database,
    keys: async () => keys,
    slackApiUrl: TEST_SLACK_API_URL,
    teamless: undefined,
    rotation: { clientId: "1.2", clientSecret: "secret", newToken },
    clock: () => now,
    // Real waits (the production 100 ms): the lanes and the shards really run at once.
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    locate: installationLocator(
      { shards, transition: TRANSITION, newToken, clock: () => now, sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)) },
      shard,
    ),
  });
  return deliveryDeps(now, { db: shards[shard] as D1Database, slackFor });
}

const post = (db: D1Database, teamId: string, text: string) =>
  insertRow(db, { status: "pending", effect: "chat.postMessage", payload: { channel: "C1", text }, teamId, nextAttemptAt: NOW });

describe("moving one installation (three statements, under the rotation lease)", () => {
  it("copies every column to the new shard, the lease cleared, and deletes the old copy", async () => {
    const team = movedTeam("T0ONE");
    await saveInstallation(db0, keys, install(team, "xoxb-one", { refreshToken: "xoxe-1-r", tokenExpiresAt: NOW + HOUR }), NOW - HOUR);
    const before = await db0.prepare("SELECT * FROM installations").first();
    expect(await moveInstallation(db0, db1, `T:${team}`, NOW, "lease-move")).toBe("moved");
    expect(await installationsOn(db0)).toEqual([]);
    expect(await db1.prepare("SELECT * FROM installations").first()).toEqual({
      ...before,
      refresh_claim_token: null,
      refresh_claim_expires_at: null,
    });
  });

  it("absent on the old shard: nothing written anywhere", async () => {
    expect(await moveInstallation(db0, db1, "T:T0NONE", NOW, "lease-move")).toBe("absent");
    expect(await installationsOn(db1)).toEqual([]);
  });

  it("a refresh in progress on the old copy (its lease live): busy, nothing copied; once the lease has run out it moves", async () => {
    const team = movedTeam("T0BUSY");
    await saveInstallation(db0, keys, install(team, "xoxb-busy"), NOW - HOUR);
    await db0
      .prepare("UPDATE installations SET refresh_claim_token = 'refresher', refresh_claim_expires_at = ?1")
      .bind(NOW + 30_000)
      .run();
    expect(await moveInstallation(db0, db1, `T:${team}`, NOW, "lease-move")).toBe("busy");
    expect(await installationsOn(db1)).toEqual([]);
    expect(await moveInstallation(db0, db1, `T:${team}`, NOW + 30_000, "lease-move")).toBe("moved");
  });

  it("a re-install already on the new shard is kept; the old copy is deleted, not copied over it", async () => {
    const team = movedTeam("T0REIN");
    await saveInstallation(db0, keys, install(team, "xoxb-old", { scopes: "old" }), NOW - HOUR);
    await saveInstallation(db1, keys, install(team, "xoxb-new", { scopes: "new" }), NOW);
    expect(await moveInstallation(db0, db1, `T:${team}`, NOW, "lease-move")).toBe("moved");
    expect(await installationsOn(db0)).toEqual([]);
    expect((await installationsOn(db1)).map((r) => r.scopes)).toEqual(["new"]);
  });

  it("a re-install written on the old shard after the team's installation had moved (an ingress still on the old count, between the consumer's deploy and its own): the re-install moves over the older copy", async () => {
    const team = movedTeam("T0GAP");
    // Moved by the consumer's cron, then blocked (its token revoked); the admin re-installs through an ingress still on
    // one shard, which writes the old shard.
    await saveInstallation(db1, keys, install(team, "xoxb-revoked", { scopes: "old" }), NOW - HOUR);
    await db1
      .prepare("UPDATE installations SET blocked_reason = 'token_revoked', blocked_at = ?1")
      .bind(NOW - HOUR)
      .run();
    await saveInstallation(db0, keys, install(team, "xoxb-fresh", { scopes: "new" }), NOW);
    expect(await moveInstallation(db0, db1, `T:${team}`, NOW, "lease-move")).toBe("moved");
    expect(await installationsOn(db0)).toEqual([]);
    expect(await db1.prepare("SELECT scopes, blocked_reason, updated_at FROM installations").all()).toMatchObject({
      results: [{ scopes: "new", blocked_reason: null, updated_at: NOW }],
    });
  });

  it("the old copy rewritten under the move (a re-install by a deployment still on one shard): raced, the copy undone; the next move takes the new install", async () => {
    const team = movedTeam("T0RACE");
    await saveInstallation(db0, keys, install(team, "xoxb-first", { scopes: "first" }), NOW - HOUR);
    // Between the copy and the delete, the old shard's installation is replaced (which clears the move's lease).
    const to = new Proxy(db1, {
      get(inner, prop) {
        if (prop !== "prepare") return Reflect.get(inner, prop).bind(inner);
        return (sql: string) => {
          const statement = inner.prepare(sql);
          if (!sql.trimStart().startsWith("INSERT")) return statement;
          return {
            bind: (...values: unknown[]) => ({
              run: async () => {
                const result = await statement.bind(...values).run();
                await saveInstallation(db0, keys, install(team, "xoxb-second", { scopes: "second" }), NOW);
                return result;
              },
            }),
          };
        };
      },
    });
    expect(await moveInstallation(db0, to, `T:${team}`, NOW, "lease-move")).toBe("raced");
    expect(await installationsOn(db1)).toEqual([]);
    expect((await installationsOn(db0)).map((r) => r.scopes)).toEqual(["second"]);
    expect(await moveInstallation(db0, db1, `T:${team}`, NOW, "lease-again")).toBe("moved");
    expect((await installationsOn(db1)).map((r) => r.scopes)).toEqual(["second"]);
  });
});

describe("a moved team's rows find its installation", () => {
  const refreshed = (team: string) =>
    reply.ok({ access_token: "xoxe.xoxb-new", refresh_token: "xoxe-1-second", expires_in: 43_200, token_type: "bot", team: { id: team } });

  it("rows on both shards at once, the token expired on the old shard: the installation moves once, is refreshed exactly once, and every row goes out with the fresh token", async () => {
    const team = movedTeam("T0ROT");
    await saveInstallation(
      db0,
      keys,
      install(team, "xoxe.xoxb-old", { refreshToken: "xoxe-1-first", tokenExpiresAt: NOW - 1 }),
      NOW - 11 * HOUR,
    );
    // Recorded before the switch (draining on shard 0) and after it (on shard 1).
    const old = [await post(db0, team, "before 1"), await post(db0, team, "before 2"), await post(db0, team, "before 3")];
    const fresh: number[] = [];
    for (let i = 0; i < 6; i++) fresh.push(await post(db1, team, `after ${i}`));
    slack.current.script("oauth.v2.access", refreshed(team));
    slack.current.always("chat.postMessage", reply.ok({ ts: "1.1" }));

    await Promise.all([deliverBatch(shardDeliveryDeps(0, NOW).deps, old), deliverBatch(shardDeliveryDeps(1, NOW).deps, fresh)]);

    const refreshes = slack.current.callsTo("oauth.v2.access");
    expect(refreshes).toHaveLength(1);
    expect(refreshes[0]?.params.refresh_token).toBe("xoxe-1-first");
    expect(slack.current.callsTo("chat.postMessage").map((c) => c.authorization)).toEqual(Array(9).fill("Bearer xoxe.xoxb-new"));
    for (const id of old) expect((await readRow(db0, id)).status).toBe("done");
    for (const id of fresh) expect((await readRow(db1, id)).status).toBe("done");
    expect(await installationsOn(db0)).toEqual([]);
    expect(await installationsOn(db1)).toMatchObject([
      { install_key: `T:${team}`, refresh_claim_token: null, token_expires_at: NOW + 43_200_000 },
    ]);
  });

  it("an unmoved team's rows read their own shard only: the other shard's installations are never touched", async () => {
    let team = "";
    for (let i = 0; i < 1000 && !team; i++) if (shardIndexOf(`T:T0STAY${i}`, 2) === 0) team = `T0STAY${i}`;
    await saveInstallation(db0, keys, install(team, "xoxb-stay"), NOW - HOUR);
    const id = await post(db0, team, "stays");
    slack.current.always("chat.postMessage", reply.ok({ ts: "1.1" }));
    await deliverBatch(shardDeliveryDeps(0, NOW).deps, [id]);
    expect(slack.current.callsTo("chat.postMessage").map((c) => c.authorization)).toEqual(["Bearer xoxb-stay"]);
    expect(await installationsOn(db0)).toHaveLength(1);
    expect(await installationsOn(db1)).toEqual([]);
  });
});

describe("an org-wide installation (Enterprise Grid) while a shard is added", () => {
  it("a workspace whose own key moved but whose org's did not: its rows find the org's installation on the org's shard", async () => {
    const team = movedTeam("T0GRID");
    let org = "";
    for (let i = 0; i < 1000 && !org; i++) if (shardIndexOf(`E:E0ORG${i}`, 2) === 0) org = `E0ORG${i}`;
    await saveInstallation(
      db0,
      keys,
      install("", "xoxb-org-wide", { teamId: undefined, enterpriseId: org, isEnterpriseInstall: true }),
      NOW - HOUR,
    );
    // An org-wide input routes by the org: its receipt (naming the org) and row are on the org's shard, 0.
    await db0
      .prepare(
        "INSERT INTO receipts (id, kind, type, team_id, delivery_id, received_at, enterprise_id) VALUES (?1, 'event', 'app_mention', ?2, 'd', ?3, ?4)",
      )
      .bind("EvGRID", team, NOW, org)
      .run();
    const id = await insertRow(db0, {
      key: "EvGRID:reply",
      status: "pending",
      effect: "chat.postMessage",
      payload: { channel: "C1", text: "grid" },
      teamId: team,
      nextAttemptAt: NOW,
    });
    slack.current.always("chat.postMessage", reply.ok({ ts: "1.1" }));
    await deliverBatch(shardDeliveryDeps(0, NOW).deps, [id]);
    expect(slack.current.callsTo("chat.postMessage").map((c) => c.authorization)).toEqual(["Bearer xoxb-org-wide"]);
    expect((await readRow(db0, id)).status).toBe("done");
    expect((await installationsOn(db0)).map((r) => r.install_key)).toEqual([`E:${org}`]);
  });
});

describe("the cron during the transition", () => {
  it("moves the installations of teams with no traffic, and counts what is left to drain on the old shard", async () => {
    const idle = movedTeam("T0IDLE");
    const busy = movedTeam("T0LIVE");
    let stay = "";
    for (let i = 0; i < 1000 && !stay; i++) if (shardIndexOf(`T:T0HOME${i}`, 2) === 0) stay = `T0HOME${i}`;
    for (const team of [idle, busy, stay]) await saveInstallation(db0, keys, install(team, `xoxb-${team}`), NOW - HOUR);
    await post(db0, busy, "draining");
    await post(db0, stay, "not moved");
    const deps = { shards: [db0, db1], transition: TRANSITION, newToken, clock: () => NOW, sleep: async () => undefined };

    // One move per tick here, to show the bound: the second installation waits for the next tick.
    expect(await moveAwayFrom(deps, 0, 1)).toEqual({ moved: 1, installationsLeft: 1, liveRowsOfMovedTeams: 1 });
    expect(await moveAwayFrom(deps, 0)).toEqual({ moved: 1, installationsLeft: 0, liveRowsOfMovedTeams: 1 });
    expect((await installationsOn(db0)).map((r) => r.install_key)).toEqual([`T:${stay}`]);
    expect((await installationsOn(db1)).map((r) => r.install_key).sort()).toEqual([`T:${busy}`, `T:${idle}`].sort());
    // The new shard has nothing to move away.
    expect(await moveAwayFrom(deps, 1)).toEqual({ moved: 0, installationsLeft: 0, liveRowsOfMovedTeams: 0 });
  });

  it("a Grid workspace's row on its own team's shard is not left to move because its org's key routes elsewhere (the workspace installed on its own)", async () => {
    // The workspace stays on shard 1 (its T: key, the row's routing key: not an org-wide install); its org's E: key
    // routes to shard 0. The row is exactly where it belongs, now and after SHARD_COUNT_PREVIOUS is removed.
    let team = "";
    for (let i = 0; i < 1000 && !team; i++) if (shardIndexOf(`T:T0GRID${i}`, 2) === 1) team = `T0GRID${i}`;
    let org = "";
    for (let i = 0; i < 1000 && !org; i++) if (shardIndexOf(`E:E0GRID${i}`, 2) === 0) org = `E0GRID${i}`;
    await saveInstallation(db1, keys, install(team, "xoxb-grid", { enterpriseId: org }), NOW - HOUR);
    const id = await insertRow(db1, { status: "pending", key: "EvGRID:main", teamId: team, createdAt: NOW });
    await db1
      .prepare(
        "INSERT INTO receipts (id, kind, type, team_id, delivery_id, received_at, enterprise_id) VALUES ('EvGRID', 'event', 'app_mention', ?1, 'd', ?2, ?3)",
      )
      .bind(team, NOW, org)
      .run();
    expect((await readRow(db1, id)).receipt_id).toBe("EvGRID");
    expect(await leftToMove(db1, 1, 2)).toEqual({ installationsLeft: 0, liveRowsOfMovedTeams: 0 });
  });
});

describe("an uninstall during the transition", () => {
  it("recorded on the new shard, it removes the copy not yet moved from the old one: nothing left to move back to life", async () => {
    const team = movedTeam("T0GONE");
    await saveInstallation(db0, keys, install(team, "xoxb-gone"), NOW - HOUR);
    const waiting = await post(db0, team, "recorded before the uninstall");
    const removal = await insertRow(db1, {
      key: `Ev-gone:${INSTALLATION_REMOVED}`,
      status: "pending",
      effect: INSTALLATION_REMOVED,
      payload: { team_id: team, enterprise_id: null, org_wide: false, reason: "app_uninstalled", at: NOW, step: 1 },
      teamId: team,
      nextAttemptAt: NOW,
    });
    const base = shardDeliveryDeps(1, NOW);
    const other = otherShardDbOf([db0, db1], 1, { shardCount: 2, shardCountPrevious: 1 });
    await deliverBatch(
      {
        ...base.deps,
        effects: withLifecycleEffect(
          testApp().effects,
          installationRemovedEffect(db1, () => NOW, other),
        ),
      },
      [removal],
    );
    expect((await readRow(db1, removal)).status).toBe("done");
    expect(await installationsOn(db0)).toEqual([]);
    expect(await installationsOn(db1)).toEqual([]);
    // The old shard's waiting row is parked with the reason, as on the installation's own shard.
    expect(await readRow(db0, waiting)).toMatchObject({ status: "dead" });
    expect(
      await moveAwayFrom({ shards: [db0, db1], transition: TRANSITION, newToken, clock: () => NOW, sleep: async () => undefined }, 0),
    ).toEqual({
      moved: 0,
      installationsLeft: 0,
      liveRowsOfMovedTeams: 0,
    });
  });
});

describe("an uninstall racing a move of the same installation", () => {
  it("recorded on the new shard, a move that lands between its delete there and its delete on the old shard: the copy it made is removed too", async () => {
    const team = movedTeam("T0RUSH");
    await saveInstallation(db0, keys, install(team, "xoxb-rush"), NOW - HOUR);
    // The new shard as the removal sees it: right after its batch there, a row of the team (or the cron) moves the
    // installation from the old shard — the copy lands where the removal has already looked.
    let moved = false;
    const racing = new Proxy(db1, {
      get(inner, prop) {
        if (prop !== "batch") return Reflect.get(inner, prop).bind(inner);
        return async (statements: D1PreparedStatement[]) => {
          const results = await inner.batch(statements);
          if (!moved) {
            moved = true;
            expect(await moveInstallation(db0, db1, `T:${team}`, NOW, "lease-move")).toBe("moved");
          }
          return results;
        };
      },
    });
    const other = otherShardDbOf([db0, db1], 1, { shardCount: 2, shardCountPrevious: 1 });
    await installationRemovedEffect(racing, () => NOW, other).perform(
      { team_id: team, enterprise_id: null, org_wide: false, reason: "app_uninstalled", at: NOW, step: 1 },
      {} as never,
    );
    expect(moved).toBe(true);
    expect(await installationsOn(db0)).toEqual([]);
    expect(await installationsOn(db1)).toEqual([]);
  });
});

describe("after the window (SHARD_COUNT_PREVIOUS removed)", () => {
  it("a moved team's row left on the shard it left (a dead row replayed later, as the procedure says) finds the installation on the team's shard now", async () => {
    const team = movedTeam("T0LATE");
    // Moved during the window: the installation is on shard 1; the row died on shard 0 before the switch and is replayed.
    await saveInstallation(db1, keys, install(team, "xoxb-late"), NOW - HOUR);
    const id = await post(db0, team, "replayed after the window");
    const oauth = {
      clientId: "1.2",
      clientSecret: "s",
      scopes: [],
      redirectUrl: "https://x.test/r",
      tokenKey: "4a".repeat(32),
      previousTokenKey: undefined,
    };
    const slackFor = slackForOf(
      db0,
      { oauth, slackBotToken: undefined, slackApiUrl: TEST_SLACK_API_URL, shardCount: 2, shardCountPrevious: undefined },
      { shards: [db0, db1], index: 0 },
    );
    slack.current.always("chat.postMessage", reply.ok({ ts: "1.1" }));
    await deliverBatch(deliveryDeps(NOW, { db: db0, slackFor }).deps, [id]);
    expect(slack.current.callsTo("chat.postMessage").map((c) => c.authorization)).toEqual(["Bearer xoxb-late"]);
    expect((await readRow(db0, id)).status).toBe("done");
  });
});
