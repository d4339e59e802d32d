/**
 * Adding a shard with live traffic (docs/scaling.md, "Adding a shard"): the
 * test deployment's two local D1s run first as a one-shard deployment
 * (SHARD_COUNT = 1: DB only), then switch to {SHARD_COUNT = 2,
 * SHARD_COUNT_PREVIOUS = 1}, through the real Worker wiring (handleHttp), the
 * consumer Worker's own queue and scheduled handlers, and the fake Slack.
 * Under 1 → 2, the teams that move are exactly those whose shard is 1.
 */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { countingDb } from "../../shared/delivery/query-budget.ts";
import { tokenKeys } from "../../shared/installations/crypto.ts";
import { saveInstallation } from "../../shared/installations/store.ts";
import { recordingLog } from "../../shared/log.ts";
import type { OutboxMessage } from "../../shared/outbox/model.ts";
import { shardIndexOf } from "../../shared/shards/route.ts";
import { handleHttp } from "../../workers/ingress/http.ts";
import consumer from "../support/entries/consumer.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { resetTables, shardDbs } from "../support/rows.ts";
import { commandForm, eventEnvelope, FORM, JSON_TYPE, mention, signed, uniqueId } from "../support/slack-requests.ts";
import { testApp } from "../support/test-app.ts";

const slack = useFakeSlack();
beforeEach(async () => {
  for (const db of shardDbs()) await resetTables(db);
  slack.current.always("chat.postMessage", reply.ok({ ts: "1764504000.000900" }));
});

const BEFORE = { SHARD_COUNT: "1", SHARD_COUNT_PREVIOUS: "" };
const DURING = { SHARD_COUNT: "2", SHARD_COUNT_PREVIOUS: "1" };

/** The team's shard under `count` shards, as the ingress routes it. */
const shardUnder = (team: string, count: number) => shardIndexOf(`T:${team}`, count);

function teamThat(moves: boolean, prefix = "T0MOVE"): string {
  for (let i = 0; i < 1000; i++) if ((shardUnder(`${prefix}${i}`, 2) === 1) === moves) return `${prefix}${i}`;
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

/** handleHttp with the given settings over the test env; returns the answer and the ack's log line. */
async function post(request: Request, over: Over, queue = recordingQueue()) {
  const log = recordingLog();
  const ctx = createExecutionContext();
  const response = await handleHttp(
    request,
    { ...env, OUTBOX_QUEUE: queue, ...over } as unknown as typeof env,
    ctx,
    Date.now(),
    log,
    testApp(),
  );
  await waitOnExecutionContext(ctx);
  return { response, queue, line: log.records.find((r) => r.msg === "slack request") };
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

describe("routing while a shard is added", () => {
  it("a moved team's input reads one receipt on its previous shard first; an unmoved team's costs exactly what it cost before", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    const measure = async (team: string, settings: Over) => {
      const c0 = countingDb(db0);
      const c1 = countingDb(db1);
      const { response, line } = await post(await send(mentionBody(team).body), { ...settings, DB: c0.db, DB_1: c1.db });
      expect(response.status).toBe(200);
      return { shard0: c0.budget.used(), shard1: c1.budget.used(), line };
    };
    const stays = teamThat(false);
    const moves = teamThat(true);

    // The same kind of input, the same work: steady state with two shards, then the transition.
    const steadyStays = await measure(stays, { SHARD_COUNT: "2" });
    const duringStays = await measure(stays, DURING);
    expect(duringStays).toMatchObject({ shard0: steadyStays.shard0, shard1: 0 });
    expect(duringStays.line?.fields).toMatchObject({ verdict: "accepted", shard: 0 });

    const steadyMoves = await measure(moves, { SHARD_COUNT: "2" });
    const duringMoves = await measure(moves, DURING);
    expect(steadyMoves.shard0).toBe(0);
    // One statement more, on the previous shard: the receipt read. The write is the same, on the new shard.
    expect(duringMoves).toMatchObject({ shard0: 1, shard1: steadyMoves.shard1 });
    expect(duringMoves.line?.fields).toMatchObject({ verdict: "accepted", shard: 1 });
  });

  it("a Slack retry of an event recorded on shard 0 before the switch, delivered after it, is a duplicate: nothing on shard 1, one reply", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    const team = teamThat(true);
    const event = mentionBody(team);

    const first = await post(await send(event.body), BEFORE);
    expect(first.line?.fields).toMatchObject({ verdict: "accepted", shard: 0 });
    const retry = await post(await send(event.body, 1), DURING);
    expect(retry.response.status).toBe(200);
    expect(retry.line?.fields).toMatchObject({ verdict: "duplicate", shard: 1, previous_shard: 0 });
    expect(retry.queue.sent).toEqual([]);

    expect(await receiptsOn(db0)).toEqual([event.eventId]);
    expect(await receiptsOn(db1)).toEqual([]);
    // The first attempt at the ack performed the reply once, on shard 0; the retry performed nothing.
    expect(slack.current.callsTo("chat.postMessage").map((c) => c.params.thread_ts)).toEqual([event.ts]);
  });

  it("a copy of a message recorded on shard 0 before the switch, sent again after it under another event_id, adds no row on shard 1: one reply", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    const team = teamThat(true);
    const first = mentionBody(team);
    const copy = mentionBody(team, uniqueId("Ev"), first.ts);

    expect((await post(await send(first.body), BEFORE)).line?.fields).toMatchObject({ verdict: "accepted", shard: 0 });
    const again = await post(await send(copy.body), DURING);
    expect(again.response.status).toBe(200);
    expect(again.line?.fields).toMatchObject({ verdict: "accepted", shard: 1, previous_shard: 0, repeated_on_previous: 1 });
    expect(again.queue.sent).toEqual([]);

    // The copy's receipt is kept (the audit shows every event_id); its fact's row is the one on shard 0.
    expect(await receiptsOn(db1)).toEqual([copy.eventId]);
    const rowsOn = async (db: D1Database) => (await db.prepare("SELECT count(*) AS n FROM outbox").first<number>("n")) ?? 0;
    expect([await rowsOn(db0), await rowsOn(db1)]).toEqual([1, 0]);
    expect(slack.current.callsTo("chat.postMessage").map((c) => c.params.thread_ts)).toEqual([first.ts]);
  });

  it("without SHARD_COUNT_PREVIOUS the same retry is recorded a second time on the new shard: the hazard the setting closes", async () => {
    const team = teamThat(true);
    const event = mentionBody(team);
    await post(await send(event.body), BEFORE);
    const retry = await post(await send(event.body, 1), { SHARD_COUNT: "2" });
    expect(retry.line?.fields).toMatchObject({ verdict: "accepted", shard: 1 });
    expect(slack.current.callsTo("chat.postMessage").map((c) => c.params.thread_ts)).toEqual([event.ts, event.ts]);
  });

  it("a command's operation id redelivered after the switch is a duplicate of its record on the previous shard", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    const team = teamThat(true);
    const form = commandForm({ team_id: team, response_url: `https://hooks.slack.com/commands/${team}/1/x` });

    const first = await post(await signed(form, FORM, { now: Date.now() }), BEFORE);
    expect(first.line?.fields).toMatchObject({ verdict: "accepted", shard: 0 });
    const again = await post(await signed(form, FORM, { now: Date.now() }), DURING);
    expect(again.line?.fields).toMatchObject({ verdict: "duplicate", shard: 1, previous_shard: 0 });
    expect((await receiptsOn(db0)).length).toBe(1);
    expect(await receiptsOn(db1)).toEqual([]);
    // One response_url row in all, on shard 0, and nothing sent for the redelivery.
    const rows = async (db: D1Database) => db.prepare("SELECT COUNT(*) AS n FROM outbox").first("n");
    expect([await rows(db0), await rows(db1)]).toEqual([1, 0]);
    expect(again.queue.sent).toEqual([]);
  });

  it("an unmoved team's retry after the switch is a duplicate on its own shard, with no read elsewhere", async () => {
    const team = teamThat(false);
    const event = mentionBody(team);
    await post(await send(event.body), BEFORE);
    const retry = await post(await send(event.body, 1), DURING);
    expect(retry.line?.fields).toMatchObject({ verdict: "duplicate", shard: 0 });
    expect(retry.line?.fields.previous_shard).toBeUndefined();
  });

  it("the previous shard's read failing: 500, nothing written on either shard (Slack's retry reads again)", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    const failing = new Proxy(db0, {
      get(inner, prop) {
        if (prop === "prepare") {
          const fail = async () => Promise.reject(new Error("D1_ERROR: simulated"));
          return () => ({ bind: () => ({ first: fail, all: fail, run: fail, raw: fail }) });
        }
        const value = Reflect.get(inner, prop);
        return typeof value === "function" ? value.bind(inner) : value;
      },
    });
    const { response, line, queue } = await post(await send(mentionBody(teamThat(true)).body), { ...DURING, DB: failing });
    expect(response.status).toBe(500);
    expect(line?.fields).toMatchObject({ verdict: "not_recorded", shard: 1, previous_shard: 0 });
    expect(String(line?.fields.reason)).toContain("simulated");
    expect(await receiptsOn(db0)).toEqual([]);
    expect(await receiptsOn(db1)).toEqual([]);
    expect(queue.sent).toEqual([]);
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
  return { queue, deliver, tick };
}

describe("the add-a-shard procedure with live traffic", () => {
  it.each(["off", "on"])(
    "24 teams, events before, during and after the switch, retries of pre-switch events after it: every reply exactly once, no receipt on two shards, nothing left live (first attempt at the ack %s)",
    async (firstAttempt) => {
      const [db0, db1] = shardDbs() as [D1Database, D1Database];
      const teams = Array.from({ length: 24 }, (_, i) => `T0LIVE${i}`);
      const moved = teams.filter((t) => shardUnder(t, 2) === 1);
      expect(moved.length).toBeGreaterThan(5);
      expect(teams.length - moved.length).toBeGreaterThan(5);

      // Off: every row is left to the consumer's code path and the sweep. On: the ack performs most rows inline, on
      // the shard it wrote them to, and the consumer gets the rest.
      const before = { ...BEFORE, FIRST_ATTEMPT: firstAttempt };
      const during = { ...DURING, FIRST_ATTEMPT: firstAttempt };
      const ingressQueue = recordingQueue();
      const events: { eventId: string; ts: string; body: string }[] = [];
      const fire = (team: string, settings: Over, retryOf?: { body: string }, retryNum = 1) => {
        const event = retryOf ?? mentionBody(team);
        if (!retryOf) events.push(event as { eventId: string; ts: string; body: string });
        return send(event.body, retryOf ? retryNum : undefined).then((request) => post(request, settings, ingressQueue));
      };
      const answers: Awaited<ReturnType<typeof post>>[] = [];

      // Before: one shard. Two events per team, all at once.
      answers.push(...(await Promise.all(teams.flatMap((t) => [fire(t, before), fire(t, before)]))));
      const preSwitch = [...events];
      expect(await receiptsOn(db1)).toEqual([]);

      // The old shard's consumer starts on the first half of the messages while the switch happens: during the
      // rollout both configurations serve at once (old isolates still on one shard), new events arrive, and Slack
      // retries pre-switch events on the new configuration.
      const oldConsumer = consumerRun(BEFORE);
      const firstHalf = ingressQueue.sent.splice(0, Math.floor(ingressQueue.sent.length / 2));
      const rollout = Promise.all(
        teams.flatMap((t, i) => [
          fire(t, i % 2 === 0 ? before : during),
          fire(t, during),
          fire(t, during, preSwitch[2 * i], 1),
          // Under the old configuration too: the old shard's receipt answers it.
          fire(t, i % 3 === 0 ? before : during, preSwitch[2 * i + 1], 1),
        ]),
      );
      await Promise.all([rollout.then((a) => answers.push(...a)), oldConsumer.deliver(firstHalf)]);

      // After: the new configuration only; more events, and second retries of every pre-switch event.
      answers.push(...(await Promise.all([...teams.map((t) => fire(t, during)), ...preSwitch.map((e) => fire("", during, e, 2))])));
      for (const answer of answers) expect(answer.response.status).toBe(200);

      // Delivery on the new configuration: the consumer over every message but a few (lost by the queue), then the
      // cron's sweep of every shard for the lost ones, until nothing is sent any more.
      const newConsumer = consumerRun(DURING);
      const pending = [...ingressQueue.sent, ...oldConsumer.queue.sent];
      const lost = pending.filter((_, i) => i % 7 === 0);
      await newConsumer.deliver(pending.filter((_, i) => i % 7 !== 0));
      expect(lost.length).toBeGreaterThan(0);
      for (let round = 0; round < 5; round++) {
        await newConsumer.tick(Date.now() + 10 * 60_000);
        const resent = newConsumer.queue.sent.splice(0);
        if (resent.length === 0) break;
        await newConsumer.deliver(resent);
      }

      // The verdict. Every event's reply at the fake Slack exactly once (counted by its thread_ts).
      const replies = new Map<string, number>();
      for (const call of slack.current.callsTo("chat.postMessage")) {
        const ts = String(call.params.thread_ts);
        replies.set(ts, (replies.get(ts) ?? 0) + 1);
      }
      const counts = events.map((e) => replies.get(e.ts) ?? 0);
      expect(counts.filter((n) => n !== 1)).toEqual([]);
      expect(replies.size).toBe(events.length);

      // No receipt on two shards, and every event has its receipt on one.
      const on0 = new Set(await receiptsOn(db0));
      const on1 = new Set(await receiptsOn(db1));
      expect([...on0].filter((id) => on1.has(id))).toEqual([]);
      expect(on0.size + on1.size).toBe(events.length);
      // A moved team's post-switch events live on shard 1 (those the old configuration took during the rollout on 0).
      for (const id of on1) expect(moved.some((t) => events.find((e) => e.eventId === id)?.body.includes(`"team_id":"${t}"`))).toBe(true);

      // Nothing left live on either shard; every row done.
      for (const db of [db0, db1]) {
        const live = await db.prepare("SELECT COUNT(*) AS n FROM outbox WHERE status IN ('pending', 'leased')").first("n");
        expect(live).toBe(0);
        const notDone = await db.prepare("SELECT COUNT(*) AS n FROM outbox WHERE status <> 'done'").first("n");
        expect(notDone).toBe(0);
      }
    },
    // About 220 requests through both Workers' code: a bound for a loaded machine, not vitest's 5 s default.
    30_000,
  );
});

describe("a distributed app's moved team at the ingress", () => {
  const OAUTH = {
    SLACK_CLIENT_ID: "1111.2222",
    SLACK_CLIENT_SECRET: "client-secret-for-tests",
    SLACK_REDIRECT_URL: "https://ackbox.test/slack/oauth_redirect",
    TOKEN_ENCRYPTION_KEY: "0f".repeat(32),
    SLACK_BOT_TOKEN: "",
  };

  it("an installation never moves while a shard is added (no copy to lose): views.open and the first attempt of a moved team use it on shard 0, where it stays", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    for (const db of [db0, db1]) await db.prepare("DELETE FROM installations").run();
    const team = teamThat(true, "T0DIST");
    const keys = await tokenKeys(OAUTH.TOKEN_ENCRYPTION_KEY, undefined);
    // Installed while the deployment had one shard: on shard 0.
    await saveInstallation(
      db0,
      keys,
      {
        teamId: team,
        enterpriseId: undefined,
        isEnterpriseInstall: false,
        botUserId: "U0BOT",
        botId: "B0BOT",
        scopes: "commands,chat:write",
        installerUserId: "U0ME",
        botToken: "xoxb-moved-team",
        refreshToken: undefined,
        tokenExpiresAt: undefined,
      },
      Date.now() - 60_000,
    );
    slack.current.script("views.open", reply.ok({ view: { id: "V1" } }));
    const modal = await post(await signed(commandForm({ team_id: team, text: "modal" }), FORM, { now: Date.now() }), {
      ...DURING,
      ...OAUTH,
    });
    expect(modal.line?.fields).toMatchObject({ verdict: "accepted", shard: 1 });
    expect(slack.current.callsTo("views.open").map((c) => c.authorization)).toEqual(["Bearer xoxb-moved-team"]);

    const mentioned = mentionBody(team);
    const event = await post(await send(mentioned.body), { ...DURING, ...OAUTH });
    expect(event.line?.fields).toMatchObject({ verdict: "accepted", shard: 1 });
    // The first attempt at the ack performed the reply with the team's own token.
    const replies = slack.current.callsTo("chat.postMessage").filter((c) => c.params.thread_ts === mentioned.ts);
    expect(replies.map((c) => c.authorization)).toEqual(["Bearer xoxb-moved-team"]);

    expect(await db0.prepare("SELECT install_key FROM installations").first("install_key")).toBe(`T:${team}`);
    expect(await db1.prepare("SELECT COUNT(*) AS n FROM installations").first("n")).toBe(0);
  });
});
