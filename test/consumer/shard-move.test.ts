/**
 * Installations live on shard 0 (docs/scaling.md, "Where installations live"):
 * a row on any shard reads its installation there. One copy, so a rotating
 * token is refreshed exactly once and nothing can leave a second copy to
 * diverge; an uninstall removes it from shard 0 and parks the rows on the
 * workspace's one home, the removal's own shard. (Copies an older ackbox left
 * on other shards are brought to shard 0 by the cron:
 * test/consumer/upgrade.scheduled.test.ts.)
 */
import { beforeEach, describe, expect, it } from "vitest";
import { deliverBatch } from "../../shared/delivery/deliver.ts";
import { slackForOf } from "../../shared/effects/context.ts";
import { networkEdge } from "../../shared/effects/outbound.ts";
import { type TokenKeys, tokenKeys } from "../../shared/installations/crypto.ts";
import { INSTALLATION_REMOVED, installationRemovedEffect, withLifecycleEffect } from "../../shared/installations/lifecycle.ts";
import { saveInstallation } from "../../shared/installations/store.ts";
import { shardIndexOf } from "../../shared/shards/route.ts";
import { deliveryDeps } from "../support/consumer.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { testInstallation } from "../support/installations.ts";
import { insertRow, readRow, resetTables, shardDbs } from "../support/rows.ts";
import { TEST_SLACK_API_URL } from "../support/settings.ts";
import { NOW } from "../support/slack-requests.ts";
import { testApp } from "../support/test-app.ts";

const slack = useFakeSlack();
const HOUR = 3_600_000;
const TOKEN_KEY = "4a".repeat(32);
let keys: TokenKeys;
let db0: D1Database;
let db1: D1Database;

beforeEach(async () => {
  [db0, db1] = shardDbs() as [D1Database, D1Database];
  for (const db of [db0, db1]) {
    await resetTables(db);
    await db.prepare("DELETE FROM installations").run();
  }
  keys = await tokenKeys(TOKEN_KEY, undefined);
});

/** A team the rule puts on shard 1 under two shards. */
function movedTeam(prefix: string): string {
  for (let i = 0; i < 1000; i++) if (shardIndexOf(`T:${prefix}${i}`, 2) === 1) return `${prefix}${i}`;
  throw new Error("no candidate team");
}

const install = testInstallation;

async function installationsOn(db: D1Database) {
  const { results } = await db
    .prepare("SELECT install_key, refresh_claim_token, token_expires_at FROM installations")
    .all<Record<string, unknown>>();
  return results;
}

const OAUTH = {
  clientId: "1.2",
  clientSecret: "secret",
  scopes: [],
  redirectUrl: "https://x.test/r",
  tokenKey: TOKEN_KEY,
  previousTokenKey: undefined,
};

/** The consumer's delivery of a row on `shard`, as the Worker builds it: installations read on shard 0. */
function shardDeliveryDeps(shard: number, now: number) {
  const shards = [db0, db1];
  const rowDb = shards[shard] as D1Database;
  const slackFor = slackForOf(db0, { oauth: OAUTH, slackBotToken: undefined, slackApiUrl: TEST_SLACK_API_URL }, rowDb, {
    edge: networkEdge,
  });
  return deliveryDeps(now, { db: rowDb, slackFor });
}

const post = (db: D1Database, teamId: string, text: string) =>
  insertRow(db, { status: "pending", effect: "chat.postMessage", payload: { channel: "C1", text }, teamId, nextAttemptAt: NOW });

describe("a row on any shard reads its installation on shard 0", () => {
  const refreshed = (team: string) =>
    reply.ok({ access_token: "xoxe.xoxb-new", refresh_token: "xoxe-1-second", expires_in: 43_200, token_type: "bot", team: { id: team } });

  it("rows on both shards served by one installation, its token expired: refreshed exactly once, every row goes out with the fresh token, and the one copy stays on shard 0", async () => {
    const team = movedTeam("T0ROT");
    // Expired by the wall clock: slackForOf, as the Worker builds it, reads Date.now.
    const wall = Date.now();
    await saveInstallation(
      db0,
      keys,
      install(team, "xoxe.xoxb-old", { refreshToken: "xoxe-1-first", tokenExpiresAt: wall - 1 }),
      wall - 11 * HOUR,
    );
    // Rows on both shards at once (the workerd tests' rows are written straight to each shard).
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
    const [kept] = await installationsOn(db0);
    expect(kept).toMatchObject({ install_key: `T:${team}`, refresh_claim_token: null });
    expect(Number(kept?.token_expires_at)).toBeGreaterThanOrEqual(wall + 43_200_000);
    expect(await installationsOn(db1)).toEqual([]);
  });

  it("an org-wide install (Enterprise Grid): a row on shard 1 finds its org on its receipt there, and the org's installation on shard 0", async () => {
    const team = movedTeam("T0GRID");
    const org = "E0ORG";
    await saveInstallation(
      db0,
      keys,
      install("", "xoxb-org-wide", { teamId: undefined, enterpriseId: org, isEnterpriseInstall: true }),
      NOW - HOUR,
    );
    await db1
      .prepare(
        "INSERT INTO receipts (id, kind, type, team_id, delivery_id, received_at, enterprise_id) VALUES (?1, 'event', 'app_mention', ?2, 'd', ?3, ?4)",
      )
      .bind("EvGRID", team, NOW, org)
      .run();
    const id = await insertRow(db1, {
      key: "EvGRID:reply",
      status: "pending",
      effect: "chat.postMessage",
      payload: { channel: "C1", text: "grid" },
      teamId: team,
      nextAttemptAt: NOW,
    });
    slack.current.always("chat.postMessage", reply.ok({ ts: "1.1" }));
    await deliverBatch(shardDeliveryDeps(1, NOW).deps, [id]);
    expect(slack.current.callsTo("chat.postMessage").map((c) => c.authorization)).toEqual(["Bearer xoxb-org-wide"]);
    expect((await readRow(db1, id)).status).toBe("done");
  });
});

describe("an uninstall recorded on a team's shard other than 0", () => {
  const removal = (team: string) =>
    insertRow(db1, {
      key: `Ev-gone:${INSTALLATION_REMOVED}`,
      status: "pending",
      effect: INSTALLATION_REMOVED,
      payload: { team_id: team, enterprise_id: null, org_wide: false, reason: "app_uninstalled", at: NOW, step: 1 },
      teamId: team,
      nextAttemptAt: NOW,
    });
  const deliverRemoval = async (id: number) => {
    const base = shardDeliveryDeps(1, NOW);
    await deliverBatch(
      {
        ...base.deps,
        effects: withLifecycleEffect(
          testApp().effects,
          installationRemovedEffect(db1, () => NOW, db0),
        ),
      },
      [id],
    );
  };

  it("removes the installation from shard 0 and parks the team's waiting rows on its home, the removal's shard", async () => {
    const team = movedTeam("T0GONE");
    await saveInstallation(db0, keys, install(team, "xoxb-gone"), NOW - HOUR);
    const waiting = await insertRow(db1, { status: "pending", teamId: team, createdAt: NOW - 1, nextAttemptAt: NOW + HOUR });
    const id = await removal(team);
    await deliverRemoval(id);
    expect((await readRow(db1, id)).status).toBe("done");
    expect(await installationsOn(db0)).toEqual([]);
    expect(await installationsOn(db1)).toEqual([]);
    expect(await readRow(db1, waiting)).toMatchObject({ status: "dead" });
  });

  it("performed after a re-install on shard 0: the new installation is kept and the team's rows are not parked", async () => {
    const team = movedTeam("T0BACK");
    await saveInstallation(db0, keys, install(team, "xoxb-back"), NOW + 1);
    const waiting = await insertRow(db1, { status: "pending", teamId: team, createdAt: NOW - 1, nextAttemptAt: NOW + HOUR });
    await deliverRemoval(await removal(team));
    expect(await installationsOn(db0)).toMatchObject([{ install_key: `T:${team}` }]);
    expect(await readRow(db1, waiting)).toMatchObject({ status: "pending" });
  });
});
