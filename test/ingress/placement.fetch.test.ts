/**
 * A workspace's first sight at the ack (shared/shards/placement.ts): where it
 * is placed, what that costs the ack, and what a failed placement answers —
 * through the real Worker wiring (handleHttp) over the test deployment's two
 * local D1s. Each ingress configuration is one isolate: one env object whose
 * D1 bindings are its own objects, so its placement cache is its own.
 */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { networkEdge } from "../../shared/effects/outbound.ts";
import { recordingLog } from "../../shared/log.ts";
import type { OutboxMessage } from "../../shared/outbox/model.ts";
import { SHARD_COUNT_PREVIOUS_REFUSED } from "../../shared/settings.ts";
import { shardIndexOf } from "../../shared/shards/route.ts";
import { handleSlackRequest } from "../../workers/ingress/ack.ts";
import { handleHttp } from "../../workers/ingress/http.ts";
import { captureLog } from "../support/console-capture.ts";
import consumer from "../support/entries/consumer.ts";
import { gate } from "../support/fake-slack.ts";
import { ingressDeps } from "../support/ingress.ts";
import { meteredDb } from "../support/metered-db.ts";
import { recordingQueue, resetTables, shardDbs } from "../support/rows.ts";
import { eventEnvelope, JSON_TYPE, mention, signed, uniqueId } from "../support/slack-requests.ts";
import { testApp } from "../support/test-app.ts";

beforeEach(async () => {
  for (const db of shardDbs()) await resetTables(db);
});

/** A team never seen before, whose rule under two shards is `shard`. */
let fresh = 0;
function newTeam(shard: 0 | 1, prefix = "T0FIRST"): string {
  for (;;) {
    const team = `${prefix}${fresh++}`;
    if (shardIndexOf(`T:${team}`, 2) === shard) return team;
  }
}

/**
 * D1 that counts its round trips (a batch is one; so is a statement run alone) and its statements, then forgets
 * them. Not the ingress's note of what it saw of the team (shared/ops/activity.ts): written after the answer, once a
 * minute per team and isolate (so its count would hang on the wall clock's minute), and measured in
 * admin.gaps.test.ts.
 */
function counted(db: D1Database) {
  const { db: metered, meter } = meteredDb(db, { except: /\bteam_activity\b/ });
  const taken = () => {
    const seen = { roundTrips: meter.roundTrips, statements: meter.statements };
    meter.reset();
    return seen;
  };
  return { db: metered, taken };
}

/** One ingress isolate: these settings and D1 bindings over the test env, the first attempt off (only the ack's own statements). */
function isolate(over: Record<string, unknown>) {
  const queue = recordingQueue();
  const own = { ...env, OUTBOX_QUEUE: queue, FIRST_ATTEMPT: "off", ...over } as unknown as typeof env;
  const post = async (request: Request) => {
    const log = recordingLog();
    const ctx = createExecutionContext();
    const response = await handleHttp(request, own, ctx, Date.now(), log, testApp(), networkEdge);
    await waitOnExecutionContext(ctx);
    return { response, line: log.records.find((r) => r.msg === "slack request") };
  };
  return { queue, post };
}

const mentionOf = (team: string, eventId = uniqueId("Ev")) =>
  signed(JSON.stringify(eventEnvelope(mention(), eventId, team)), JSON_TYPE, { now: Date.now() });

async function receiptsOn(db: D1Database): Promise<string[]> {
  const { results } = await db.prepare("SELECT id FROM receipts ORDER BY id").all<{ id: string }>();
  return results.map((r) => r.id);
}
/** What one mention's ack costs with no shards and no placement (one database, as before sharding). */
async function unshardedAck() {
  const alone = counted(env.DB);
  const harness = ingressDeps({ db: alone.db, queue: recordingQueue() });
  expect((await handleSlackRequest(await mentionOf(uniqueId("T0ALONE")), harness.deps, Date.now())).status).toBe(200);
  await harness.settled();
  return alone.taken();
}

const placements = async (key: string) =>
  (await env.DB.prepare("SELECT shard FROM placements WHERE routing_key = ?1").bind(key).all<{ shard: number }>()).results;

describe("a workspace's first sight", () => {
  it("many first inputs of one new key at once, through two isolates on different SHARD_COUNTs (a deploy rolling out): one placement row, every receipt and row on that shard", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    for (const round of [0, 1, 2]) {
      const team = newTeam(1, `T0RACE${round}`);
      const old = isolate({ SHARD_COUNT: "1", DB: counted(env.DB).db });
      const rolledOut = isolate({ SHARD_COUNT: "2", DB: counted(env.DB).db, DB_1: counted(env.DB_1 as D1Database).db });
      const ids = Array.from({ length: 12 }, () => uniqueId("Ev"));
      const first = await Promise.all(
        ids.map(async (id, i) => ({ id, ...(await (i % 2 ? old : rolledOut).post(await mentionOf(team, id))) })),
      );
      // A 500 is the old isolate meeting a key the new one placed on shard 1: Slack retries it, and its retry is
      // answered by the version the deploy rolled out.
      const refused = first.filter((answer) => answer.response.status !== 200);
      for (const answer of refused) expect(String(answer.line?.fields.reason)).toContain("placed on another shard meanwhile");
      for (const { id } of refused) expect((await rolledOut.post(await mentionOf(team, id))).response.status).toBe(200);

      const placed = await placements(`T:${team}`);
      expect(placed).toHaveLength(1);
      const home = placed[0]?.shard as number;
      const [here, elsewhere] = home === 0 ? [db0, db1] : [db1, db0];
      expect((await receiptsOn(here)).filter((id) => ids.includes(id)).sort()).toEqual([...ids].sort());
      expect((await receiptsOn(elsewhere)).filter((id) => ids.includes(id))).toEqual([]);
      const rows = await here.prepare("SELECT COUNT(*) AS n FROM outbox WHERE team_id = ?1").bind(team).first("n");
      expect(rows).toBe(ids.length);
      expect(await elsewhere.prepare("SELECT COUNT(*) AS n FROM outbox WHERE team_id = ?1").bind(team).first("n")).toBe(0);
    }
  });

  it("the ack's steady state reads nothing new: once an isolate has seen a workspace, its ack issues exactly the statements of its batch, as an ack without shards does", async () => {
    // The ack of one mention with no placement at all (one database, no routing): the statements of its batch.
    const batch = await unshardedAck();
    expect(batch.roundTrips).toBe(1);

    const shard0 = counted(env.DB);
    const shard1 = counted(env.DB_1 as D1Database);
    const ingress = isolate({ SHARD_COUNT: "2", DB: shard0.db, DB_1: shard1.db, FIRST_ATTEMPT: "off" });
    const away = newTeam(1);
    // First sight of a workspace whose home is shard 1: one round trip to shard 0 (place by the rule, read back).
    expect((await ingress.post(await mentionOf(away))).line?.fields).toMatchObject({ verdict: "accepted", shard: 1 });
    expect([shard0.taken(), shard1.taken()]).toEqual([{ roundTrips: 1, statements: 2 }, batch]);
    // Seen: nothing on shard 0, the batch alone.
    expect((await ingress.post(await mentionOf(away))).line?.fields).toMatchObject({ verdict: "accepted", shard: 1 });
    expect([shard0.taken(), shard1.taken()]).toEqual([{ roundTrips: 0, statements: 0 }, batch]);

    // A workspace whose home is shard 0: its first sight's placement rides in the batch there, no round trip more.
    const home = newTeam(0);
    expect((await ingress.post(await mentionOf(home))).line?.fields).toMatchObject({ verdict: "accepted", shard: 0 });
    expect([shard0.taken(), shard1.taken()]).toEqual([
      { roundTrips: 1, statements: batch.statements + 1 },
      { roundTrips: 0, statements: 0 },
    ]);
    expect((await ingress.post(await mentionOf(home))).line?.fields).toMatchObject({ verdict: "accepted", shard: 0 });
    expect([shard0.taken(), shard1.taken()]).toEqual([batch, { roundTrips: 0, statements: 0 }]);
    expect(await placements(`T:${away}`)).toEqual([{ shard: 1 }]);
    expect(await placements(`T:${home}`)).toEqual([{ shard: 0 }]);
  });

  it("one shard: a first sight costs no round trip, one statement in the ack's own batch; after it, nothing — and a later add finds the workspace placed on shard 0", async () => {
    const only = counted(env.DB);
    const alone = isolate({ SHARD_COUNT: "1", DB: only.db });
    const team = newTeam(1, "T0ONE");
    const batch = await unshardedAck();

    expect((await alone.post(await mentionOf(team))).line?.fields).toMatchObject({ verdict: "accepted", shard: 0 });
    expect(only.taken()).toEqual({ roundTrips: 1, statements: batch.statements + 1 });
    expect((await alone.post(await mentionOf(team))).line?.fields).toMatchObject({ verdict: "accepted", shard: 0 });
    expect(only.taken()).toEqual(batch);
    expect(await placements(`T:${team}`)).toEqual([{ shard: 0 }]);

    // SHARD_COUNT raised: the rule would put the team on shard 1; its placement keeps it home.
    const grown = isolate({ SHARD_COUNT: "2" });
    expect((await grown.post(await mentionOf(team))).line?.fields).toMatchObject({ verdict: "accepted", shard: 0 });
    expect(await (env.DB_1 as D1Database).prepare("SELECT COUNT(*) AS n FROM receipts").first("n")).toBe(0);
  });

  it("the placement read failing: 500, nothing written on either shard, a log line that says why", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    const failing = new Proxy(env.DB, {
      get(inner, prop) {
        if (prop === "batch") return async () => Promise.reject(new Error("D1_ERROR: simulated placement failure"));
        const value = Reflect.get(inner, prop);
        return typeof value === "function" ? value.bind(inner) : value;
      },
    });
    const ingress = isolate({ SHARD_COUNT: "2", DB: failing });
    const { response, line } = await ingress.post(await mentionOf(newTeam(1)));
    expect(response.status).toBe(500);
    expect(line?.fields).toMatchObject({ verdict: "not_recorded" });
    expect(String(line?.fields.reason)).toContain("simulated placement failure");
    expect(await receiptsOn(db0)).toEqual([]);
    expect(await receiptsOn(db1)).toEqual([]);
    expect(ingress.queue.sent).toEqual([]);
  });

  it("the placement read overrunning the ack's budget: 500, nothing written but the placement itself, once it commits", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    const held = gate();
    let late: Promise<unknown> | undefined;
    // The placement's batch is held; the ingress's note of the team after the answer (shared/ops/activity.ts) is not.
    const placing = new WeakSet<D1PreparedStatement>();
    const slow = new Proxy(env.DB, {
      get(inner, prop) {
        if (prop === "prepare")
          return (sql: string) => {
            const statement = inner.prepare(sql);
            if (!/\bplacements\b/.test(sql)) return statement;
            const bind = statement.bind.bind(statement);
            return Object.assign(statement, {
              bind: (...values: unknown[]) => {
                const bound = bind(...values);
                placing.add(bound);
                return bound;
              },
            });
          };
        if (prop === "batch")
          return (statements: D1PreparedStatement[]) => {
            if (!statements.some((s) => placing.has(s))) return inner.batch(statements);
            late = held.opened.then(() => inner.batch(statements));
            return late;
          };
        const value = Reflect.get(inner, prop);
        return typeof value === "function" ? value.bind(inner) : value;
      },
    });
    const team = newTeam(1, "T0SLOW");
    const ingress = isolate({ SHARD_COUNT: "2", DB: slow, ACK_BUDGET_MS: "100" });
    const { response, line } = await ingress.post(await mentionOf(team));
    expect(response.status).toBe(500);
    expect(line?.fields).toMatchObject({ verdict: "not_recorded" });
    expect(String(line?.fields.reason)).toContain("the placement read took longer than 100 ms");
    held.open();
    await late;
    // The late placement is the rule's: where the workspace lives from now on. Nothing else was written.
    expect(await placements(`T:${team}`)).toEqual([{ shard: 1 }]);
    expect(await receiptsOn(db0)).toEqual([]);
    expect(await receiptsOn(db1)).toEqual([]);
    expect(ingress.queue.sent).toEqual([]);
  });
});

describe("an older ackbox's shard add left open (SHARD_COUNT_PREVIOUS set)", () => {
  it("every Worker refuses to run on it: the ingress answers 500 and writes nothing, the consumer leaves its rows, the cron skips its tick — each saying what to do", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    const open = { SHARD_COUNT: "2", SHARD_COUNT_PREVIOUS: "1" };
    const log = recordingLog();
    const response = await handleHttp(
      await mentionOf(newTeam(1)),
      { ...env, ...open } as unknown as typeof env,
      createExecutionContext(),
      Date.now(),
      log,
      testApp(),
      networkEdge,
    );
    expect(response.status).toBe(500);
    expect(log.records).toContainEqual(
      expect.objectContaining({ msg: "ingress misconfigured; answering 500", fields: { errors: [SHARD_COUNT_PREVIOUS_REFUSED] } }),
    );
    expect(await receiptsOn(db0)).toEqual([]);
    expect(await receiptsOn(db1)).toEqual([]);

    const lines = captureLog();
    const acked: string[] = [];
    await consumer.queue?.(
      {
        queue: "ackbox-outbox",
        messages: [{ id: "m1", timestamp: new Date(), attempts: 1, body: { id: 1 }, ack: () => acked.push("m1"), retry: () => undefined }],
        ackAll: () => acked.push("all"),
        retryAll: () => undefined,
      } as unknown as MessageBatch<OutboxMessage>,
      { ...env, ...open } as unknown as typeof env,
      createExecutionContext(),
    );
    await consumer.scheduled?.(
      { scheduledTime: Date.now(), cron: "* * * * *", noRetry: () => undefined },
      { ...env, ...open },
      createExecutionContext(),
    );
    vi.restoreAllMocks();
    expect(acked).toEqual(["all"]);
    const refusals = lines
      .filter((line) => line.includes("SHARD_COUNT_PREVIOUS is set"))
      .map((line) => JSON.parse(line) as { msg: string });
    expect(refusals.map((line) => line.msg)).toEqual([
      "consumer misconfigured; messages acked, rows left pending for the sweep",
      "sweeper misconfigured; tick skipped",
    ]);
  });
});
