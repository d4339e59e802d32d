/**
 * Adding a shard moves nothing (docs/scaling.md, "Adding a shard"; SPEC §4
 * invariant 14): the test deployment's two local D1s run first as a one-shard
 * deployment (SHARD_COUNT = 1: DB only), then with SHARD_COUNT = 2 and nothing
 * else, through the real Worker wiring (handleHttp), the consumer Worker's own
 * queue and scheduled handlers, and the fake Slack. The teams picked are those
 * the jump hash puts on shard 1 under two shards: the ones an add would have
 * moved when routing was the rule alone. Each workspace stays on the shard it
 * was placed on at its first sight, and every path — the ack, a Slack retry, a
 * backfill, an uninstall — finds it there.
 *
 * Each configuration is one isolate: one env object, its D1 bindings wrapped
 * once (so its placement cache is its own, as two isolates' are).
 */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { networkEdge } from "../../shared/effects/outbound.ts";
import { tokenKeys } from "../../shared/installations/crypto.ts";
import { saveInstallation } from "../../shared/installations/store.ts";
import { recordingLog } from "../../shared/log.ts";
import type { OutboxMessage } from "../../shared/outbox/model.ts";
import { shardIndexOf } from "../../shared/shards/route.ts";
import { handleHttp } from "../../workers/ingress/http.ts";
import consumer from "../support/entries/consumer.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { testInstallation } from "../support/installations.ts";
import { resetTables, shardDbs } from "../support/rows.ts";
import { TEST_ADMIN_TOKEN } from "../support/settings.ts";
import { commandForm, eventEnvelope, FORM, JSON_TYPE, mention, signed, uniqueId } from "../support/slack-requests.ts";
import { testApp } from "../support/test-app.ts";

const slack = useFakeSlack();
beforeEach(async () => {
  for (const db of shardDbs()) await resetTables(db);
  slack.current.always("chat.postMessage", reply.ok({ ts: "1764504000.000900" }));
});

const BEFORE = { SHARD_COUNT: "1" };
const AFTER = { SHARD_COUNT: "2" };
/** A distributed app: each workspace's installation, on shard 0. */
const DISTRIBUTED = {
  SLACK_CLIENT_ID: "1111.2222",
  SLACK_CLIENT_SECRET: "client-secret-for-tests",
  SLACK_REDIRECT_URL: "https://ackbox.test/slack/oauth_redirect",
  TOKEN_ENCRYPTION_KEY: "0f".repeat(32),
  SLACK_BOT_TOKEN: "",
};

/** A team the rule puts on shard 1 under two shards (`moves`), or on shard 0 under both; a fresh one per call. */
let teams = 0;
function teamThat(moves: boolean, prefix = "T0ADD"): string {
  for (let i = 0; i < 10_000; i++) {
    const team = `${prefix}${teams++}`;
    if ((shardIndexOf(`T:${team}`, 2) === 1) === moves) return team;
  }
  throw new Error("no candidate team");
}

/** A queue that records what it is sent, as the Workers' OUTBOX_QUEUE. */
function recordingQueue() {
  const sent: OutboxMessage[] = [];
  return {
    sent,
    sendBatch: async (messages: Iterable<MessageSendRequest<OutboxMessage>>) => {
      for (const message of messages) sent.push(message.body);
    },
    send: async (body: OutboxMessage) => {
      sent.push(body);
    },
  };
}

type Over = Record<string, unknown>;

/** D1 as one isolate sees it: the same database, its own object (the placement cache is per isolate). */
const ownBinding = (db: D1Database): D1Database =>
  new Proxy(db, {
    get(target, prop) {
      const value = Reflect.get(target, prop);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });

/** One ingress isolate with these settings over the test env. */
function isolate(over: Over, queue = recordingQueue()) {
  const own = {
    ...env,
    DB: ownBinding(env.DB),
    DB_1: ownBinding(env.DB_1 as D1Database),
    OUTBOX_QUEUE: queue,
    ...over,
  } as unknown as typeof env;
  const post = async (request: Request) => {
    const log = recordingLog();
    const ctx = createExecutionContext();
    const response = await handleHttp(request, own, ctx, Date.now(), log, testApp(), networkEdge);
    await waitOnExecutionContext(ctx);
    return { response, log, line: log.records.find((r) => r.msg === "slack request") };
  };
  return { env: own, queue, post };
}

/** An app_mention of `team` whose ts is unique: the fake Slack's replies are counted by their thread_ts. */
function mentionBody(team: string, eventId = uniqueId("Ev"), ts = `${Date.now()}.${Math.floor(Math.random() * 1e6)}`) {
  return { eventId, ts, body: JSON.stringify(eventEnvelope(mention({ ts }), eventId, team)) };
}

const send = (body: string, retryNum?: number) =>
  signed(body, JSON_TYPE, { now: Date.now(), headers: retryNum === undefined ? {} : { "x-slack-retry-num": String(retryNum) } });

async function receiptsOn(db: D1Database): Promise<string[]> {
  const { results } = await db.prepare("SELECT id FROM receipts ORDER BY id").all<{ id: string }>();
  return results.map((r) => r.id);
}

const placementOf = (key: string) => env.DB.prepare("SELECT shard FROM placements WHERE routing_key = ?1").bind(key).first<number>("shard");
const repliesTo = (ts: string) => slack.current.callsTo("chat.postMessage").filter((c) => c.params.thread_ts === ts).length;

describe("a workspace placed before a shard is added stays where it is", () => {
  it("a Slack retry, after the add, of an event recorded before it is a duplicate on the team's one home: nothing on shard 1, one reply", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    const team = teamThat(true);
    const event = mentionBody(team);

    const first = await isolate(BEFORE).post(await send(event.body));
    expect(first.line?.fields).toMatchObject({ verdict: "accepted", shard: 0 });
    const retry = await isolate(AFTER).post(await send(event.body, 1));
    expect(retry.response.status).toBe(200);
    expect(retry.line?.fields).toMatchObject({ verdict: "duplicate", shard: 0 });

    expect(await receiptsOn(db0)).toEqual([event.eventId]);
    expect(await receiptsOn(db1)).toEqual([]);
    expect(await placementOf(`T:${team}`)).toBe(0);
    // The first attempt at the ack performed the reply once, on shard 0; the retry performed nothing.
    expect(repliesTo(event.ts)).toBe(1);
  });

  it("a copy of a message recorded before the add, sent again after it under another event_id, finds its fact's row at home: one reply", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    const team = teamThat(true);
    const first = mentionBody(team);
    const copy = mentionBody(team, uniqueId("Ev"), first.ts);

    expect((await isolate(BEFORE).post(await send(first.body))).line?.fields).toMatchObject({ verdict: "accepted", shard: 0 });
    const again = await isolate(AFTER).post(await send(copy.body));
    expect(again.line?.fields).toMatchObject({ verdict: "accepted", shard: 0, repeated: 1 });

    expect(await receiptsOn(db0)).toEqual([first.eventId, copy.eventId].sort());
    expect(await receiptsOn(db1)).toEqual([]);
    const rowsOn = async (db: D1Database) => (await db.prepare("SELECT count(*) AS n FROM outbox").first<number>("n")) ?? 0;
    expect([await rowsOn(db0), await rowsOn(db1)]).toEqual([1, 0]);
    expect(repliesTo(first.ts)).toBe(1);
  });

  it("a command's operation id redelivered after the add is a duplicate of its record on the team's home", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    const team = teamThat(true);
    const form = commandForm({ team_id: team, response_url: `https://hooks.slack.com/commands/${team}/1/x` });
    slack.current.always(`https://hooks.slack.com/commands/${team}/1/x`, reply.text(200, "ok"));

    expect((await isolate(BEFORE).post(await signed(form, FORM, { now: Date.now() }))).line?.fields).toMatchObject({
      verdict: "accepted",
      shard: 0,
    });
    const after = isolate(AFTER);
    const again = await after.post(await signed(form, FORM, { now: Date.now() }));
    expect(again.line?.fields).toMatchObject({ verdict: "duplicate", shard: 0 });
    expect((await receiptsOn(db0)).length).toBe(1);
    expect(await receiptsOn(db1)).toEqual([]);
    expect(after.queue.sent).toEqual([]);
  });

  it("a workspace first seen after the add lands where the rule puts it under the new count, and a Worker still on the old count writes nothing beside it", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    const team = teamThat(true);
    const fresh = await isolate(AFTER).post(await send(mentionBody(team).body));
    expect(fresh.line?.fields).toMatchObject({ verdict: "accepted", shard: 1 });
    expect(await placementOf(`T:${team}`)).toBe(1);

    // An isolate of the version before the deploy (one shard) meets it: its batch on shard 0 finds the key placed
    // on shard 1 and commits nothing (500: Slack's retry reaches the new version).
    const old = await isolate(BEFORE).post(await send(mentionBody(team).body));
    expect(old.response.status).toBe(500);
    expect(old.line?.fields).toMatchObject({ verdict: "not_recorded", shard: 0 });
    expect(String(old.line?.fields.reason)).toContain("placed on another shard meanwhile");
    expect(await receiptsOn(db0)).toEqual([]);
    expect((await receiptsOn(db1)).length).toBe(1);
  });
});

/**
 * The consumer Worker's own handlers over the recorded messages: queue()
 * groups them by shard and delivers each against its shard; scheduled() walks
 * every shard and re-enqueues what the queue lost.
 */
function consumerRun(settings: Over) {
  const queue = recordingQueue();
  const consumerEnv = { ...env, OUTBOX_QUEUE: queue, FIRST_ATTEMPT: "off", ALERT_CHANNEL: "", ...settings } as unknown as typeof env;
  const deliver = async (bodies: readonly OutboxMessage[]) => {
    const messages = bodies.map((body, i) => ({
      id: `m${i}`,
      timestamp: new Date(),
      attempts: 1,
      body,
      ack: () => undefined,
      retry: () => queue.sent.push(body),
    }));
    await consumer.queue?.(
      { queue: "ackbox-outbox", messages, ackAll: () => undefined, retryAll: () => undefined } as unknown as MessageBatch<OutboxMessage>,
      consumerEnv,
      createExecutionContext(),
    );
  };
  const tick = async (at: number) => {
    await consumer.scheduled?.({ scheduledTime: at, cron: "* * * * *", noRetry: () => undefined }, consumerEnv, createExecutionContext());
  };
  /** Delivers `bodies` but every seventh (lost by the queue), then ticks until the sweep has nothing more to send. */
  const drain = async (bodies: readonly OutboxMessage[]) => {
    const lost = bodies.filter((_, i) => i % 7 === 0);
    await deliver(bodies.filter((_, i) => i % 7 !== 0));
    for (let round = 0; round < 5; round++) {
      await tick(Date.now() + 10 * 60_000);
      const resent = queue.sent.splice(0);
      if (resent.length === 0) break;
      await deliver(resent);
    }
    return lost.length;
  };
  return { queue, deliver, tick, drain };
}

describe("adding a shard with live traffic", () => {
  it.each(["off", "on"])(
    "24 teams sending before, during and after the add with both configurations live, retries of pre-add events after it, 4 new teams after: every reply exactly once, each team on one shard, the old ones where they were (first attempt at the ack %s)",
    async (firstAttempt) => {
      const [db0, db1] = shardDbs() as [D1Database, D1Database];
      const teams = Array.from({ length: 24 }, (_, i) => `T0LIVE${firstAttempt}${i}`);
      const wouldMove = teams.filter((t) => shardIndexOf(`T:${t}`, 2) === 1);
      expect(wouldMove.length).toBeGreaterThan(5);
      const newTeams = [teamThat(true, "T0NEW"), teamThat(true, "T0NEW"), teamThat(true, "T0NEW"), teamThat(false, "T0NEW")];

      // Off: every row is left to the consumer's code path and the sweep. On: the ack performs most rows inline, on
      // the shard it wrote them to, and the consumer gets the rest.
      const ingressQueue = recordingQueue();
      const before = isolate({ ...BEFORE, FIRST_ATTEMPT: firstAttempt }, ingressQueue);
      const after = isolate({ ...AFTER, FIRST_ATTEMPT: firstAttempt }, ingressQueue);
      const events: { team: string; eventId: string; ts: string; body: string }[] = [];
      const fire = (team: string, on: typeof before, retryOf?: { body: string }, retryNum = 1) => {
        const event = retryOf ?? { team, ...mentionBody(team) };
        if (!retryOf) events.push(event as (typeof events)[number]);
        return send(event.body, retryOf ? retryNum : undefined).then((request) => on.post(request));
      };
      const answers: Awaited<ReturnType<typeof before.post>>[] = [];

      // Before: one shard. Two events per team, all at once.
      answers.push(...(await Promise.all(teams.flatMap((t) => [fire(t, before), fire(t, before)]))));
      const preAdd = [...events];
      expect(await receiptsOn(db1)).toEqual([]);

      // The one-shard consumer starts on the first half of the messages while the add rolls out: both configurations
      // serve at once (old isolates still on one shard), new events arrive, and Slack retries pre-add events.
      const oldConsumer = consumerRun(BEFORE);
      const firstHalf = ingressQueue.sent.splice(0, Math.floor(ingressQueue.sent.length / 2));
      const rollout = Promise.all(
        teams.flatMap((t, i) => [
          fire(t, i % 2 === 0 ? before : after),
          fire(t, after),
          fire(t, after, preAdd[2 * i], 1),
          fire(t, i % 3 === 0 ? before : after, preAdd[2 * i + 1], 1),
        ]),
      );
      await Promise.all([rollout.then((a) => answers.push(...a)), oldConsumer.deliver(firstHalf)]);

      // After: the new configuration only; more events, second retries of every pre-add event, and workspaces
      // seen for the first time.
      answers.push(
        ...(await Promise.all([
          ...teams.map((t) => fire(t, after)),
          ...preAdd.map((e) => fire("", after, e, 2)),
          ...newTeams.flatMap((t) => [fire(t, after), fire(t, after)]),
        ])),
      );
      for (const answer of answers) expect(answer.response.status).toBe(200);

      // Delivery on the new configuration: every message but a few (lost by the queue), then the sweep for those.
      // (With the first attempt on, an inline row sends no message: only rows it left to the queue have one.)
      const lost = await consumerRun(AFTER).drain([...ingressQueue.sent, ...oldConsumer.queue.sent]);
      if (firstAttempt === "off") expect(lost).toBeGreaterThan(0);

      // Every event's reply at the fake Slack exactly once (counted by its thread_ts).
      const replies = new Map<string, number>();
      for (const call of slack.current.callsTo("chat.postMessage")) {
        const ts = String(call.params.thread_ts);
        replies.set(ts, (replies.get(ts) ?? 0) + 1);
      }
      expect(events.map((e) => replies.get(e.ts) ?? 0).filter((n) => n !== 1)).toEqual([]);
      expect(replies.size).toBe(events.length);

      // Every receipt on exactly one shard: its team's. The teams seen before the add are all on shard 0, those the
      // rule would now put on shard 1 included; the new teams where the rule put them under two shards.
      const on0 = new Set(await receiptsOn(db0));
      const on1 = new Set(await receiptsOn(db1));
      expect([...on0].filter((id) => on1.has(id))).toEqual([]);
      expect(on0.size + on1.size).toBe(events.length);
      const shardOfEvent = (e: (typeof events)[number]) => (on0.has(e.eventId) ? 0 : on1.has(e.eventId) ? 1 : undefined);
      for (const e of events) {
        const home = newTeams.includes(e.team) ? shardIndexOf(`T:${e.team}`, 2) : 0;
        expect({ event: e.eventId, team: e.team, shard: shardOfEvent(e) }).toEqual({ event: e.eventId, team: e.team, shard: home });
      }
      for (const team of [...teams, ...newTeams])
        expect(await placementOf(`T:${team}`)).toBe(newTeams.includes(team) ? shardIndexOf(`T:${team}`, 2) : 0);

      // Nothing left live on either shard; every row done.
      for (const db of [db0, db1]) {
        expect(await db.prepare("SELECT COUNT(*) AS n FROM outbox WHERE status <> 'done'").first("n")).toBe(0);
      }
    },
    // About 270 requests through both Workers' code: a bound for a loaded machine, not vitest's 5 s default.
    60_000,
  );
});

describe("right after a shard is added", () => {
  it("a backfill over a window delivered live before the add handles each message once: no second reply (finding 1)", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    const team = teamThat(true, "T0FILL");
    const stamp = Math.floor(Date.now() / 1000);
    const ts = [1, 2, 3].map((n) => `${stamp - 600 + n}.000100`);
    // Two mentions delivered live before the add, one never delivered (the outage the backfill is for).
    for (const at of ts.slice(0, 2)) {
      const answer = await isolate(BEFORE).post(await send(JSON.stringify(eventEnvelope(mention({ ts: at }), uniqueId("Ev"), team))));
      expect(answer.line?.fields).toMatchObject({ verdict: "accepted", shard: 0 });
    }
    expect(ts.slice(0, 2).map(repliesTo)).toEqual([1, 1]);

    slack.current.always("auth.test", reply.ok({ user_id: "U0BOT", team_id: team }));
    slack.current.always("conversations.info", reply.ok({ channel: { id: "C0WATCHED", is_channel: true, is_private: false } }));
    slack.current.always(
      "conversations.history",
      reply.history(ts.map((at) => ({ type: "message", user: "U0HUMAN", text: "<@U0BOT> hello", ts: at }))),
    );
    slack.current.always("reactions.add", reply.ok());
    const after = isolate({ ...AFTER, FIRST_ATTEMPT: "off" });
    const page = await handleHttp(
      new Request("https://ackbox.test/admin/backfill", {
        method: "POST",
        headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ channel: "C0WATCHED", oldest: String(stamp - 900), limit: 10 }),
      }),
      after.env,
      createExecutionContext(),
      Date.now(),
      recordingLog(),
      testApp(),
      networkEdge,
    );
    expect(page.status).toBe(200);
    // Each message is a message (a reaction) and an app_mention (a reply): the two mentions delivered live are
    // found at the team's home; the third mention and the three reactions are recorded, there too.
    expect(await page.json()).toMatchObject({ read: 3, alreadyHandled: 2, recorded: 4 });
    expect(await receiptsOn(db1)).toEqual([]);
    await consumerRun(AFTER).drain(after.queue.sent);
    expect(ts.map(repliesTo)).toEqual([1, 1, 1]);
    expect(await db0.prepare("SELECT COUNT(*) AS n FROM outbox WHERE status <> 'done'").first("n")).toBe(0);
  });

  it("an uninstall parks the team's live rows on its one home, wherever the rule now puts it (finding 7)", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    for (const db of [db0, db1]) await db.prepare("DELETE FROM installations").run();
    const OAUTH = { ...DISTRIBUTED, FIRST_ATTEMPT: "off" };
    const team = teamThat(true, "T0GONE");
    await saveInstallation(
      db0,
      await tokenKeys(OAUTH.TOKEN_ENCRYPTION_KEY, undefined),
      testInstallation(team, "xoxb-gone"),
      Date.now() - 60_000,
    );
    // Three mentions before the add, not delivered yet: live rows on shard 0, where the team was placed.
    const before = isolate({ ...BEFORE, ...OAUTH });
    for (let i = 0; i < 3; i++) expect((await before.post(await send(mentionBody(team).body))).line?.fields).toMatchObject({ shard: 0 });

    // Right after the add, the workspace uninstalls the app.
    const after = isolate({ ...AFTER, ...OAUTH });
    const uninstall = JSON.stringify({
      ...eventEnvelope({ type: "app_uninstalled" }, uniqueId("Ev"), team),
      event_time: Math.floor(Date.now() / 1000),
    });
    expect((await after.post(await send(uninstall))).line?.fields).toMatchObject({ verdict: "accepted", shard: 0 });
    const removal = await db0.prepare("SELECT id FROM outbox WHERE effect = 'installation.removed'").first<number>("id");
    expect(removal).not.toBeNull();
    await consumerRun({ ...AFTER, ...OAUTH }).deliver([{ id: removal as number }]);

    const { results } = await db0
      .prepare("SELECT effect, status, last_error FROM outbox ORDER BY id")
      .all<{ effect: string; status: string; last_error: string | null }>();
    expect(results.map((r) => [r.effect, r.status])).toEqual([
      ["chat.postMessage", "dead"],
      ["chat.postMessage", "dead"],
      ["chat.postMessage", "dead"],
      ["installation.removed", "done"],
    ]);
    expect(results[0]?.last_error).toContain("installation removed: app_uninstalled");
    expect(await db1.prepare("SELECT COUNT(*) AS n FROM outbox").first("n")).toBe(0);
    expect(await db0.prepare("SELECT COUNT(*) AS n FROM installations").first("n")).toBe(0);
    expect(slack.current.callsTo("chat.postMessage")).toEqual([]);
  });

  it("an installation is on shard 0 throughout: views.open and the first attempt use it after the add", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    for (const db of [db0, db1]) await db.prepare("DELETE FROM installations").run();
    const OAUTH = DISTRIBUTED;
    const team = teamThat(true, "T0DIST");
    const keys = await tokenKeys(OAUTH.TOKEN_ENCRYPTION_KEY, undefined);
    await saveInstallation(db0, keys, testInstallation(team, "xoxb-placed-team"), Date.now() - 60_000);
    // Seen while the deployment had one shard: placed on shard 0.
    expect((await isolate({ ...BEFORE, ...OAUTH }).post(await send(mentionBody(team).body))).line?.fields).toMatchObject({ shard: 0 });

    slack.current.script("views.open", reply.ok({ view: { id: "V1" } }));
    const after = isolate({ ...AFTER, ...OAUTH });
    const modal = await after.post(await signed(commandForm({ team_id: team, text: "modal" }), FORM, { now: Date.now() }));
    expect(modal.line?.fields).toMatchObject({ verdict: "accepted", shard: 0 });
    expect(slack.current.callsTo("views.open").map((c) => c.authorization)).toEqual(["Bearer xoxb-placed-team"]);

    const mentioned = mentionBody(team);
    expect((await after.post(await send(mentioned.body))).line?.fields).toMatchObject({ verdict: "accepted", shard: 0 });
    const replies = slack.current.callsTo("chat.postMessage").filter((c) => c.params.thread_ts === mentioned.ts);
    expect(replies.map((c) => c.authorization)).toEqual(["Bearer xoxb-placed-team"]);
    expect(await db1.prepare("SELECT COUNT(*) AS n FROM installations").first("n")).toBe(0);
  });
});
