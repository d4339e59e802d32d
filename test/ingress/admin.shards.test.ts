/**
 * The operator API sees ONE system over the tests' two shards (SHARD_COUNT =
 * 2: DB and DB_1; T0TEAM lives on shard 1): the backlog summed and its oldest
 * age the max, the dead list merged across shards in gap-free pages, replay by
 * filter on both shards and by "<shard>:<id>" ref on one, bad refs refused
 * with nothing written, and an event found on the shard it lives on.
 */
import { beforeEach, describe, expect, it } from "vitest";
import type { BacklogAnswer } from "../../shared/ops/backlog-answer.ts";
import type { DeadPageAnswer, ReplayAnswer } from "../../shared/ops/dead-answer.ts";
import { listDeadAcross } from "../../shared/ops/dead-shards.ts";
import type { TrailAnswer } from "../../shared/ops/trail-answer.ts";
import { placementsOn } from "../../shared/shards/placement.ts";
import { meteredDb } from "../support/metered-db.ts";
import { adminDeps, callAdmin, insertAttempt, insertReceipt, postJson } from "../support/ops.ts";
import { allRows, insertRow, readRow, resetAllShards, shardDbs, shardOf, tallyAll } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

beforeEach(async () => {
  await resetAllShards();
  for (const db of shardDbs()) await db.batch([db.prepare("DELETE FROM backlog_samples"), db.prepare("DELETE FROM alert_state")]);
});

function twoShards(): [D1Database, D1Database] {
  const dbs = shardDbs();
  expect(dbs).toHaveLength(2);
  return dbs as [D1Database, D1Database];
}

describe("the tests' deployment", () => {
  it("has two shards, and T0TEAM lives on shard 1 while T0ZERO lives on shard 0 (the rows each test seeds on shard 0 name T0ZERO)", () => {
    expect(shardOf("T0TEAM")).toBe(1);
    expect(shardOf("T0ZERO")).toBe(0);
  });
});

describe("GET /admin/backlog and /admin/metrics across shards", () => {
  it("sums the counts, takes the oldest pending age of either shard, recomputes the failure rate from the sums, and breaks it down per shard", async () => {
    const [db0, db1] = twoShards();
    // Shard 0: two pending (the older 5 min), one dead, 1 done and 3 failed attempts in the last 5 min.
    await insertRow(db0, { status: "pending", createdAt: NOW - 5 * MINUTE, sweepAt: NOW + MINUTE, teamId: "T0ZERO" });
    await insertRow(db0, { status: "pending", createdAt: NOW - MINUTE, sweepAt: NOW + MINUTE, teamId: "T0ZERO" });
    await insertRow(db0, { status: "dead", completedAt: NOW - MINUTE, teamId: "T0ZERO" });
    await insertRow(db0, { status: "done", completedAt: NOW - MINUTE, teamId: "T0ZERO" });
    const failing = await insertRow(db0, { status: "pending", createdAt: NOW - 2 * MINUTE, sweepAt: NOW + MINUTE, teamId: "T0ZERO" });
    for (const attempt of [1, 2, 3]) await insertAttempt(db0, { outboxId: failing, attempt, outcome: "retry", finishedAt: NOW - MINUTE });
    // Shard 1: one pending 20 min old (the oldest of all), one leased, two dead, 9 done, no failures.
    await insertRow(db1, { status: "pending", createdAt: NOW - 20 * MINUTE, sweepAt: NOW + MINUTE });
    await insertRow(db1, { status: "leased", createdAt: NOW - MINUTE, claimExpiresAt: NOW + MINUTE, sweepAt: NOW + MINUTE });
    await insertRow(db1, { status: "dead", completedAt: NOW - 2 * MINUTE });
    await insertRow(db1, { status: "dead", completedAt: NOW - 3 * MINUTE });
    for (let i = 0; i < 9; i++) await insertRow(db1, { status: "done", completedAt: NOW - MINUTE });

    const { deps } = adminDeps();
    const { status, body } = await callAdmin<BacklogAnswer>(deps, "/admin/backlog", NOW);
    expect(status).toBe(200);
    expect(body.outbox).toMatchObject({ pending: 4, leased: 1, dead: 3, oldestPendingAgeSeconds: 20 * 60, capped: false });
    const fiveMin = body.windows.find((w) => w.seconds === 300);
    // (3 failed) ÷ (3 failed + 10 done), not the mean of 3/4 and 0/9.
    expect(fiveMin).toMatchObject({ done: 10, failedAttempts: 3, parkedDead: 3 });
    expect(fiveMin?.failureRate).toBeCloseTo(3 / 13, 10);
    expect(body.shards).toEqual([
      expect.objectContaining({ shard: 0, pending: 3, leased: 0, dead: 1, oldestPendingAgeSeconds: 5 * 60 }),
      expect.objectContaining({ shard: 1, pending: 1, leased: 1, dead: 2, oldestPendingAgeSeconds: 20 * 60 }),
    ]);
    // The health verdict is the merged one: 20 min > ALERT_OLDEST_PENDING_SECONDS (600).
    expect(body.health.find((c) => c.kind === "oldest_pending")).toMatchObject({ breached: true, value: 20 * 60 });

    const metrics = await callAdmin<string>(deps, "/admin/metrics", NOW);
    expect(metrics.body).toContain("\nackbox_outbox_pending 4\n");
    expect(metrics.body).toContain("\nackbox_outbox_oldest_pending_age_seconds 1200\n");
    expect(metrics.body).toContain('\nackbox_shard_outbox_rows{shard="1",status="dead"} 2\n');
    expect(metrics.body).toContain('\nackbox_shard_oldest_pending_age_seconds{shard="0"} 300\n');
  });

  it("says the counts are capped when one shard's count reached the cap, and reads samples and alert state from shard 0 only", async () => {
    const [db0, db1] = twoShards();
    await db1
      .prepare(
        `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000)
         INSERT INTO outbox (idempotency_key, receipt_id, effect, payload, status, attempts, next_attempt_at, created_at, updated_at, completed_at, last_error)
         SELECT 'old' || i || ':k', 'old' || i, 'reactions.add', '{}', 'dead', 1, 0, 0, 0, i, 'old' FROM n`,
      )
      .run();
    const sample = `INSERT INTO backlog_samples (at, pending, leased, dead, stale_leases, never_enqueued, oldest_pending_age_ms, done_in_window, failed_in_window, window_ms)
                    VALUES (?, ?, 0, 0, 0, 0, NULL, 0, 0, 900000)`;
    await db0
      .prepare(sample)
      .bind(NOW - HOUR, 7)
      .run();
    await db1
      .prepare(sample)
      .bind(NOW - HOUR, 99)
      .run();
    const { deps } = adminDeps();
    const { body } = await callAdmin<BacklogAnswer>(deps, "/admin/backlog?hours=2", NOW);
    expect(body.outbox).toMatchObject({ dead: 10_000, capped: true });
    expect(body.shards?.map((s) => s.capped)).toEqual([false, true]);
    expect(body.history?.map((h) => h.pending)).toEqual([7]);
  });
});

interface Seeded {
  shard: number;
  id: number;
  completedAt: number;
}

/**
 * Dead rows on both shards, with equal completed_at across shards (and within
 * one), and live rows with the same errors. Expected order: newest first,
 * then shard 0 before shard 1, then the higher id first.
 */
async function seedDeadOnBoth(): Promise<Seeded[]> {
  const dbs = twoShards();
  const seeded: Seeded[] = [];
  const minutesAgo = [
    [1, 5, 5, 30, 90],
    [1, 1, 5, 30, 60, 90],
  ];
  for (const [shard, list] of minutesAgo.entries()) {
    for (const m of list) {
      const completedAt = NOW - (m as number) * MINUTE;
      const id = await insertRow(dbs[shard] as D1Database, {
        status: "dead",
        effect: m === 30 ? "chat.postMessage" : "reactions.add",
        lastError: m === 30 || m === 1 ? "chat.postMessage: channel_not_found" : "HTTP 503",
        completedAt,
        createdAt: NOW - 2 * HOUR,
        teamId: shard === 1 ? "T0TEAM" : "T0ZERO",
      });
      seeded.push({ shard, id, completedAt });
    }
    await insertRow(dbs[shard] as D1Database, { status: "pending", lastError: "chat.postMessage: channel_not_found" });
  }
  return seeded.sort((a, b) => b.completedAt - a.completedAt || a.shard - b.shard || b.id - a.id);
}

const refOf = (r: { shard: number; id: number }) => `${r.shard}:${r.id}`;

describe("GET /admin/dead across shards", () => {
  it.each([1, 2, 3])(
    "pages of %i list every dead row of both shards exactly once, in order, across equal times on both shards",
    async (limit) => {
      const expected = (await seedDeadOnBoth()).map(refOf);
      const { deps } = adminDeps();
      const seen: string[] = [];
      let cursor: string | null = null;
      for (let page = 0; page < 20 && (page === 0 || cursor !== null); page++) {
        const query: string = `?limit=${limit}${cursor === null ? "" : `&cursor=${cursor}`}`;
        const { status, body } = await callAdmin<DeadPageAnswer>(deps, `/admin/dead${query}`, NOW);
        expect(status).toBe(200);
        expect(body.shardCount).toBe(2);
        expect(body.rows.length).toBeLessThanOrEqual(limit);
        for (const row of body.rows) expect(row.ref).toBe(`${row.shard}:${row.id}`);
        seen.push(...body.rows.map((r) => r.ref));
        cursor = body.nextCursor;
      }
      expect(cursor).toBeNull();
      expect(seen).toEqual(expected);
      expect(new Set(seen).size).toBe(11);
    },
  );

  it("a filter with a small scan limit gets short pages but still every match once: a page never runs past a shard's unread rows", async () => {
    const all = await seedDeadOnBoth();
    const dbs = twoShards();
    const expected = all.filter((r) => [1, 30].includes((NOW - r.completedAt) / MINUTE)).map(refOf);
    for (const limit of [1, 2, 3]) {
      const seen: string[] = [];
      let cursor = null;
      for (let page = 0; page < 40; page++) {
        const result = await listDeadAcross(dbs, { error: "channel_not_found" }, cursor, limit, 2);
        seen.push(...result.rows.map(refOf));
        cursor = result.next;
        if (cursor === null) break;
      }
      expect(seen).toEqual(expected);
    }
  });

  it.each([
    ["a cursor of one shard's form", "?cursor=1764503940000.3", "cursor"],
    ["a cursor naming a shard not configured", "?cursor=1764503940000.2.3", "cursor"],
  ])("answers 400 for %s", async (_, query, message) => {
    const { deps } = adminDeps();
    const { status, body } = await callAdmin<{ error: string }>(deps, `/admin/dead${query}`, NOW);
    expect(status).toBe(400);
    expect(body.error).toContain(message);
  });
});

describe("POST /admin/replay across shards", () => {
  it("by filter: replays the matching dead rows of both shards, counts per shard and in total, each message naming its shard", async () => {
    const seeded = await seedDeadOnBoth();
    const matching = seeded.filter((r) => (NOW - r.completedAt) / MINUTE === 30);
    expect(matching.map((r) => r.shard)).toEqual([0, 1]);
    const { deps, queue } = adminDeps();
    const { status, body } = await callAdmin<ReplayAnswer>(
      deps,
      "/admin/replay",
      NOW,
      postJson({ filter: { effect: "chat.postMessage" } }),
    );
    expect(status).toBe(200);
    expect(body.count).toBe(2);
    expect(body.replayed.map((r) => r.ref)).toEqual(matching.map(refOf));
    expect(body.perShard).toEqual([
      { shard: 0, replayed: 1, skipped: 0 },
      { shard: 1, replayed: 1, skipped: 0 },
    ]);
    const dbs = twoShards();
    for (const r of matching) expect((await readRow(dbs[r.shard] as D1Database, r.id)).status).toBe("pending");
    // Shard 0's message is { id } as before sharding; shard 1's names its shard.
    expect(queue.messages.map((m) => m.body).sort((a, b) => (a.shard ?? 0) - (b.shard ?? 0))).toEqual(
      matching.map((r) => (r.shard === 0 ? { id: r.id } : { id: r.id, shard: 1 })),
    );
    // Everything else is still dead on both shards.
    for (const r of seeded.filter((x) => !matching.includes(x))) {
      expect((await readRow(dbs[r.shard] as D1Database, r.id)).status).toBe("dead");
    }
  });

  it("by filter in calls of one: the cursor continues across shards and every match is replayed once", async () => {
    const seeded = await seedDeadOnBoth();
    const { deps } = adminDeps();
    const replayed: string[] = [];
    let cursor: string | null = null;
    for (let call = 0; call < 20; call++) {
      const { body }: { body: ReplayAnswer } = await callAdmin<ReplayAnswer>(
        deps,
        "/admin/replay",
        NOW,
        postJson({ filter: {}, limit: 1, ...(cursor === null ? {} : { cursor }) }),
      );
      replayed.push(...body.replayed.map((r) => r.ref));
      cursor = body.nextCursor;
      if (!body.more) break;
    }
    expect(replayed).toEqual(seeded.map(refOf));
  });

  it("by ref: replays row 1:<id> on shard 1 and leaves shard 0's row with the same id untouched", async () => {
    const [db0, db1] = twoShards();
    const zero = await insertRow(db0, { status: "dead", lastError: "x", completedAt: NOW - MINUTE, teamId: "T0ZERO" });
    // Each D1 numbers its own rows: the same id on both shards is why a ref names the shard.
    const one = await insertRow(db1, { id: zero, status: "dead", lastError: "x", completedAt: NOW - MINUTE });
    expect(one).toBe(zero);
    const before = await readRow(db0, zero);
    const { deps, queue } = adminDeps();
    const { status, body } = await callAdmin<ReplayAnswer>(deps, "/admin/replay", NOW, postJson({ ids: [`1:${one}`] }));
    expect(status).toBe(200);
    expect(body.replayed.map((r) => ({ ref: r.ref, shard: r.shard, id: r.id }))).toEqual([{ ref: `1:${one}`, shard: 1, id: one }]);
    expect(body.perShard).toEqual([
      { shard: 0, replayed: 0, skipped: 0 },
      { shard: 1, replayed: 1, skipped: 0 },
    ]);
    expect((await readRow(db1, one)).status).toBe("pending");
    expect(await readRow(db0, zero)).toEqual(before);
    expect(queue.messages.map((m) => m.body)).toEqual([{ id: one, shard: 1 }]);
  });

  it.each([
    ["a shard without an id", "1:", 'want "<shard>:<id>"'],
    ["a shard that is not a number", "x:3", 'want "<shard>:<id>"'],
    ["a shard beyond SHARD_COUNT", "9:1", "shard 9 is not configured (SHARD_COUNT is 2: shards 0–1)"],
    ["a plain id, ambiguous with two shards", "3", "with 2 shards a row id is ambiguous; name the row as <shard>:<id> (e.g. 0:3 or 1:3"],
    ["a plain numeric id", 3, "with 2 shards a row id is ambiguous"],
    ["row 0", "1:0", "a row id is a positive whole number"],
  ])("by ref: refuses %s with a 400 that says why, and writes nothing on either shard", async (_, ref, message) => {
    const [db0, db1] = twoShards();
    await insertRow(db0, { status: "dead", lastError: "x", completedAt: NOW - MINUTE, teamId: "T0ZERO" });
    const good = await insertRow(db1, { status: "dead", lastError: "x", completedAt: NOW - MINUTE });
    const before = [await allRows(db0), await allRows(db1), await tallyAll()];
    const { deps, queue } = adminDeps();
    // One bad ref among good ones refuses the whole call.
    const { status, body } = await callAdmin<{ error: string }>(deps, "/admin/replay", NOW, postJson({ ids: [`1:${good}`, ref] }));
    expect(status).toBe(400);
    expect(body.error).toContain(message);
    expect([await allRows(db0), await allRows(db1), await tallyAll()]).toEqual(before);
    expect(queue.messages).toEqual([]);
  });
});

describe("GET /admin/events/<id> across shards", () => {
  it("finds an event on shard 1 without being told its team, and names the shard and each row's ref", async () => {
    const [db0, db1] = twoShards();
    await insertReceipt(db1, "EvSHARD1", NOW - MINUTE);
    const id = await insertRow(db1, { key: "EvSHARD1:main", status: "dead", lastError: "boom", completedAt: NOW });
    // Shard 0 has a row with the same id, of another event: not part of the answer.
    await insertRow(db0, { key: "EvOTHER:main", status: "done", teamId: "T0ZERO" });
    const { deps } = adminDeps();
    const { status, body } = await callAdmin<TrailAnswer>(deps, "/admin/events/EvSHARD1", NOW);
    expect(status).toBe(200);
    expect(body.shards).toEqual([1]);
    expect(body.receipt).toMatchObject({ shard: 1, id: "EvSHARD1", teamId: "T0TEAM" });
    expect(body.rows.map((r) => ({ ref: r.ref, shard: r.shard, key: r.key }))).toEqual([
      { ref: `1:${id}`, shard: 1, key: "EvSHARD1:main" },
    ]);

    // ?team= looks on that team's shard only: T0TEAM's is shard 1, T0ZERO's is shard 0.
    expect((await callAdmin<TrailAnswer>(deps, "/admin/events/EvSHARD1?team=T0TEAM", NOW)).body.shards).toEqual([1]);
    const elsewhere = await callAdmin<{ error: string; message: string }>(deps, "/admin/events/EvSHARD1?team=T0ZERO", NOW);
    expect(elsewhere.status).toBe(404);
    expect(elsewhere.body.message).toContain("team T0ZERO's shard");
  });

  it("?team looks on the one shard the workspace was placed on, not where the rule would put it now; an org (E…) on its org's", async () => {
    const [db0, db1] = twoShards();
    // Seen while the deployment had one shard: placed on shard 0, though the rule now says shard 1.
    expect(shardOf("T0PLACED2")).toBe(1);
    expect(await placementsOn(db0, 1).place("T:T0PLACED2", NOW - MINUTE)).toBe(0);
    await insertReceipt(db0, "EvPLACED", NOW - MINUTE);
    const { deps } = adminDeps();
    expect((await callAdmin<TrailAnswer>(deps, "/admin/events/EvPLACED?team=T0PLACED2", NOW)).body.shards).toEqual([0]);
    // An org-wide install's events: ?team with its org id, on the org's home (here the rule's: placed at first sight).
    await insertReceipt(db1, "EvORGEV", NOW - MINUTE);
    expect(shardOf({ enterpriseId: "E0ORGEV0", isEnterpriseInstall: true })).toBe(1);
    expect((await callAdmin<TrailAnswer>(deps, "/admin/events/EvORGEV?team=E0ORGEV0", NOW)).body.shards).toEqual([1]);
  });

  it("answers 404 naming every shard when no shard has the id, and 400 for a team that is not a team id", async () => {
    const { deps } = adminDeps();
    const missing = await callAdmin<{ error: string; message: string }>(deps, "/admin/events/EvNOWHERE", NOW);
    expect(missing.status).toBe(404);
    expect(missing.body.message).toBe("no receipt or outbox row for EvNOWHERE on any of the 2 shards (it may have been pruned)");
    const bad = await callAdmin<{ error: string }>(deps, "/admin/events/EvX?team=not%20a%20team", NOW);
    expect(bad.status).toBe(400);
    expect(bad.body.error).toContain("team");
  });

  it("?shard looks on that shard only, and a shard that is not configured is a 400", async () => {
    const [, db1] = twoShards();
    await insertReceipt(db1, "EvSHARD1", NOW - MINUTE);
    const { deps } = adminDeps();
    expect((await callAdmin<TrailAnswer>(deps, "/admin/events/EvSHARD1?shard=1", NOW)).body.shards).toEqual([1]);
    const onZero = await callAdmin<{ message: string }>(deps, "/admin/events/EvSHARD1?shard=0", NOW);
    expect([onZero.status, onZero.body.message]).toEqual([
      404,
      "no receipt or outbox row for EvSHARD1 on shard 0 (it may have been pruned)",
    ]);
    for (const query of ["?shard=2", "?shard=x", "?shard=1&team=T0TEAM"]) {
      const bad = await callAdmin<{ error: string }>(deps, `/admin/events/EvSHARD1${query}`, NOW);
      expect(bad.status).toBe(400);
    }
    expect((await callAdmin<{ error: string }>(deps, "/admin/events/EvSHARD1?shard=2", NOW)).body.error).toBe(
      "shard: want a shard index from 0 to 1 (SHARD_COUNT is 2)",
    );
  });
});

describe("with one shard, the answers are as before sharding", () => {
  it("no per-shard breakdown, plain-id refs and two-part cursors, a plain id replays, and 0:<id> names the same row", async () => {
    const [db0] = twoShards();
    const older = await insertRow(db0, { status: "dead", lastError: "x", completedAt: NOW - 2 * MINUTE, teamId: "T0ZERO" });
    const newer = await insertRow(db0, { status: "dead", lastError: "x", completedAt: NOW - MINUTE, teamId: "T0ZERO" });
    const { deps, queue } = adminDeps({ shards: [db0] });

    const backlog = await callAdmin<BacklogAnswer>(deps, "/admin/backlog", NOW);
    expect(backlog.body.outbox.dead).toBe(2);
    expect(backlog.body).not.toHaveProperty("shards");
    expect((await callAdmin<string>(deps, "/admin/metrics", NOW)).body).not.toContain("ackbox_shard_");

    const page = await callAdmin<DeadPageAnswer>(deps, "/admin/dead?limit=1", NOW);
    expect(page.body.shardCount).toBe(1);
    expect(page.body.rows.map((r) => r.ref)).toEqual([String(newer)]);
    expect(page.body.nextCursor).toBe(`${NOW - MINUTE}.${newer}`);
    const next = await callAdmin<DeadPageAnswer>(deps, `/admin/dead?limit=1&cursor=${page.body.nextCursor}`, NOW);
    expect(next.body.rows.map((r) => r.ref)).toEqual([String(older)]);

    const replay = await callAdmin<ReplayAnswer>(deps, "/admin/replay", NOW, postJson({ ids: [newer, `0:${older}`] }));
    expect(replay.status).toBe(200);
    expect(replay.body.replayed.map((r) => r.ref)).toEqual([String(newer), String(older)]);
    expect(queue.messages.map((m) => m.body)).toEqual([{ id: newer }, { id: older }]);
    const beyond = await callAdmin<{ error: string }>(deps, "/admin/replay", NOW, postJson({ ids: ["1:1"] }));
    expect([beyond.status, beyond.body.error]).toEqual([
      400,
      'ids: row ref "1:1": shard 1 is not configured (SHARD_COUNT is 1: shards 0–0)',
    ]);
  });
});

describe("what one request costs across shards (docs/operating.md, 'What it costs')", () => {
  it("spends a fixed number of D1 statements on each shard, whatever the rows: backlog 14 (+3 on shard 0), a dead page 1–2, events 2–3, installations 1", async () => {
    await seedDeadOnBoth();
    const metered = twoShards().map((db) => meteredDb(db));
    const { deps } = adminDeps({ shards: metered.map((m) => m.db) });
    const cost = async (path: string, init?: RequestInit) => {
      for (const m of metered) m.meter.reset();
      const { status } = await callAdmin(deps, path, NOW, init);
      expect(status, path).toBeLessThan(500);
      return metered.map((m) => m.meter.statements);
    };
    // 4 statements + the custom steps' executions + 3 per window (5 min, 1 h, the alert window); shard 0 also reads
    // the alert state, the consumer's SHARD_COUNT mark (shared/ops/shard-count.ts) and the delivery gaps, which the
    // ingress writes there for every team.
    expect(await cost("/admin/backlog")).toEqual([17, 14]);
    expect(await cost("/admin/backlog?hours=1")).toEqual([18, 14]);
    // A full unfiltered page: one statement per shard; a filtered short page adds the cursor's place.
    expect(await cost("/admin/dead?limit=2")).toEqual([1, 1]);
    expect((await cost("/admin/dead?limit=50&error=channel")).every((n) => n >= 1 && n <= 2)).toBe(true);
    // Not found anywhere: receipt and rows on each shard (the attempts read only where rows were found).
    expect(await cost("/admin/events/EvNOWHERE")).toEqual([2, 2]);
    expect(await cost("/admin/events/EvNOWHERE?shard=1")).toEqual([0, 2]);
    expect(await cost("/admin/installations")).toEqual([1, 1]);
  });
});
