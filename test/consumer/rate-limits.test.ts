/**
 * Slack's 429 is pacing, shared by everyone calling Slack: a cooldown per rate
 * key (team, channel) or (team, method), persisted by the 429 and respected by
 * the claim, across lanes and across consumer invocations; released rows come
 * back a pace apart; and within a batch, calls on one key are spaced.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { deliverBatch } from "../../shared/delivery/deliver.ts";
import { CHANNEL_PACE_MS } from "../../shared/delivery/pacing.ts";
import { deliveryDeps } from "../support/consumer.ts";
import { gate, reply, useFakeSlack } from "../support/fake-slack.ts";
import { attemptsOf, insertRow, readRow, resetTables } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";
import { waitFor } from "../support/wait.ts";

const slack = useFakeSlack();
beforeEach(() => resetTables(env.DB));

const SECOND = 1000;
const eyes = (channel: string, ts: string) => ({ channel, timestamp: ts, name: "eyes" });
const pending = (payload: unknown, over: { teamId?: string; effect?: string; nextAttemptAt?: number } = {}) =>
  insertRow(env.DB, { status: "pending", payload, createdAt: NOW - 10 * SECOND, ...over });

async function cooldowns() {
  const { results } = await env.DB.prepare("SELECT key, until, next_slot, pace_ms FROM rate_cooldowns ORDER BY key").all();
  return results;
}

describe("a 429 cools its rate key down for every claimer", () => {
  it("holds back the key's rows in a second invocation, not other channels or teams, releases them a pace apart, and lets them through once it passes", async () => {
    slack.current.script("reactions.add", reply.rateLimited(5)).always("reactions.add", reply.ok());
    slack.current.always("chat.postMessage", reply.ok({ channel: "C1", ts: "2.2" }));
    const limited = await pending(eyes("C1", "1.1"));

    // Invocation 1: Slack answers 429, Retry-After 5 s (jitter pinned to 0).
    const first = deliveryDeps(NOW, { random: () => 0 });
    expect((await deliverBatch(first.deps, [limited])).get(limited)).toEqual({ action: "resend", delaySeconds: 5 });
    expect(await cooldowns()).toEqual([
      // The first slot after the cooldown is the limited row's own retry; waiting rows queue behind it.
      { key: "T0TEAM/channel/C1", until: NOW + 5 * SECOND, next_slot: NOW + 6 * SECOND, pace_ms: CHANNEL_PACE_MS },
    ]);

    // Invocation 2, a second later, another claim token: the same channel waits, whatever the method; others go.
    const sameChannel = await pending(eyes("C1", "1.2"));
    const sameChannelPost = await pending({ channel: "C1", text: "hi" }, { effect: "chat.postMessage" });
    const otherChannel = await pending(eyes("C2", "1.3"));
    const otherTeam = await pending(eyes("C1", "1.4"), { teamId: "T0OTHER" });
    const second = deliveryDeps(NOW + SECOND);
    const actions = await deliverBatch(second.deps, [sameChannel, sameChannelPost, otherChannel, otherTeam]);

    expect(actions.get(sameChannel)).toEqual({ action: "resend", delaySeconds: 5 }); // slot NOW + 6 s
    expect(actions.get(sameChannelPost)).toEqual({ action: "resend", delaySeconds: 6 }); // slot NOW + 7 s
    expect(actions.get(otherChannel)).toEqual({ action: "ack" });
    expect(actions.get(otherTeam)).toEqual({ action: "ack" });
    expect((await readRow(env.DB, otherChannel)).status).toBe("done");
    expect((await readRow(env.DB, otherTeam)).status).toBe("done");
    expect(await readRow(env.DB, sameChannel)).toMatchObject({
      status: "pending",
      attempts: 0,
      next_attempt_at: NOW + 6 * SECOND,
      enqueued_at: NOW + 6 * SECOND,
      sweep_at: NOW + 6 * SECOND + 60 * SECOND,
    });
    expect(await readRow(env.DB, sameChannelPost)).toMatchObject({ status: "pending", attempts: 0, next_attempt_at: NOW + 7 * SECOND });
    const c1Calls = () => slack.current.calls.filter((call) => call.params.channel === "C1" && !call.params.timestamp?.startsWith("1.4"));
    expect(c1Calls()).toHaveLength(1); // only the call that got the 429

    // One millisecond before the cooldown ends: still held (and not due).
    const third = deliveryDeps(NOW + 5 * SECOND - 1);
    expect((await deliverBatch(third.deps, [limited])).get(limited)).toEqual({ action: "ack" });
    expect(c1Calls()).toHaveLength(1);

    // At the slots: each row is claimable again and performed, once. Queues may hand several slots' messages
    // over in one batch: a hot key's next row is then spaced one pace behind within the batch; one that would
    // wait longer takes a slot instead, since D1 hands out slots to other invocations meanwhile.
    const later = deliveryDeps(NOW + 7 * SECOND);
    const released = await deliverBatch(later.deps, [limited, sameChannel, sameChannelPost]);
    expect([released.get(limited), released.get(sameChannel)]).toEqual([{ action: "ack" }, { action: "ack" }]);
    expect(released.get(sameChannelPost)?.action).toBe("resend");
    expect(later.sleeps).toEqual([CHANNEL_PACE_MS]);
    expect(await readRow(env.DB, sameChannelPost)).toMatchObject({ status: "pending", attempts: 0, next_attempt_at: NOW + 8 * SECOND });
    const last = deliveryDeps(NOW + 8 * SECOND);
    expect((await deliverBatch(last.deps, [sameChannelPost])).get(sameChannelPost)).toEqual({ action: "ack" });
    for (const id of [limited, sameChannel, sameChannelPost]) expect((await readRow(env.DB, id)).status).toBe("done");
    expect(await readRow(env.DB, limited)).toMatchObject({ attempts: 1 });
    expect(c1Calls()).toHaveLength(4);
    expect(await attemptsOf(env.DB, limited)).toMatchObject([{ outcome: "rate_limited", attempt: 1 }]);
  });

  it("holds back the key's rows in other lanes of the same batch once the 429 is recorded", async () => {
    // Lane 1 gets the 429 at once; lanes 2–6 are held busy elsewhere (on a gate) until lane 1 has given back
    // the next C1 rows, so lane 1 is the one that takes them.
    const busyLanes = gate();
    slack.current.script("reactions.add", reply.rateLimited(3));
    slack.current.always("chat.postMessage", reply.held(busyLanes, reply.ok({ channel: "C9", ts: "3.3" })));
    const limited = await pending(eyes("C1", "1.1"));
    const busy = [];
    for (let i = 0; i < 5; i++) busy.push(await pending({ channel: `C9${i}`, text: "busy" }, { effect: "chat.postMessage" }));
    const laterC1 = [await pending(eyes("C1", "1.7")), await pending(eyes("C1", "1.8"))];
    const { deps } = deliveryDeps(NOW, { random: () => 0 });
    const givenBack = async () => Promise.all(laterC1.map((id) => readRow(env.DB, id)));
    const release = waitFor(givenBack, (rows) => rows.every((r) => r.next_attempt_at >= NOW + 4 * SECOND)).then(() => busyLanes.open());

    const actions = await deliverBatch(deps, [limited, ...busy, ...laterC1]);
    await release;

    expect(actions.get(limited)).toEqual({ action: "resend", delaySeconds: 3 });
    // Slots after the limited row's own: NOW + 4 s and NOW + 5 s.
    expect(laterC1.map((id) => actions.get(id))).toEqual([
      { action: "resend", delaySeconds: 4 },
      { action: "resend", delaySeconds: 5 },
    ]);
    expect(slack.current.callsTo("reactions.add")).toHaveLength(1);
    for (const id of busy) expect((await readRow(env.DB, id)).status).toBe("done");
  });

  it("writes no cooldown for a 429 on a response_url post (it has no rate key), and still spends no attempt", async () => {
    slack.current.script("https://hooks.slack.com/commands/T0TEAM/1/abc", reply.rateLimited(2));
    const id = await insertRow(env.DB, {
      status: "pending",
      effect: "response_url",
      payload: { url: "https://hooks.slack.com/commands/T0TEAM/1/abc", body: { text: "done" } },
      createdAt: NOW - SECOND,
      expiresAt: NOW + 30 * 60 * SECOND,
    });
    const { deps } = deliveryDeps(NOW, { random: () => 0 });
    expect((await deliverBatch(deps, [id])).get(id)).toEqual({ action: "resend", delaySeconds: 2 });
    expect(await cooldowns()).toEqual([]);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "pending", attempts: 0 });
  });
});

describe("a row whose lease expired behind a busy channel", () => {
  it("is not starved: refused by the key's gate, it takes a release slot like a pending row and is performed at it", async () => {
    slack.current.script("reactions.add", reply.rateLimited(5)).always("reactions.add", reply.ok());
    const limited = await pending(eyes("C1", "1.1"));
    await deliverBatch(deliveryDeps(NOW, { random: () => 0 }).deps, [limited]);
    // Slots queued: the limited row's at NOW + 5 s, the next at NOW + 6 s.
    expect(await cooldowns()).toMatchObject([{ key: "T0TEAM/channel/C1", until: NOW + 5 * SECOND, next_slot: NOW + 6 * SECOND }]);

    // Claimed before the 429 (due long ago), its worker gone: the lease ran out at NOW + 1 s − 1.
    const overran = await insertRow(env.DB, {
      status: "leased",
      payload: eyes("C1", "1.2"),
      attempts: 1,
      claimToken: "overran",
      claimExpiresAt: NOW + SECOND - 1,
      nextAttemptAt: NOW - 10 * SECOND,
      createdAt: NOW - 10 * SECOND,
    });
    // The sweep re-sends it a second later: the gate refuses it, and it takes the next slot instead of being acked.
    const resent = await deliverBatch(deliveryDeps(NOW + SECOND).deps, [overran]);
    expect(resent.get(overran)).toEqual({ action: "resend", delaySeconds: 5 });
    expect(await readRow(env.DB, overran)).toMatchObject({
      status: "pending",
      attempts: 1,
      next_attempt_at: NOW + 6 * SECOND,
      enqueued_at: NOW + 6 * SECOND,
      sweep_at: NOW + 6 * SECOND + 60 * SECOND,
      // Its holder may still be performing it: a park that takes it pending (an uninstall, a dead letter) says so.
      maybe_performed: 1,
    });
    // The limited row waited pending, never leased past its lease: not marked.
    expect(await readRow(env.DB, limited)).toMatchObject({ status: "pending", maybe_performed: 0 });
    expect(await cooldowns()).toMatchObject([{ next_slot: NOW + 7 * SECOND }]);

    // One millisecond before its slot: not due. At it: performed, once.
    expect((await deliverBatch(deliveryDeps(NOW + 6 * SECOND - 1).deps, [overran])).get(overran)).toEqual({ action: "ack" });
    expect((await readRow(env.DB, overran)).status).toBe("pending");
    await deliverBatch(deliveryDeps(NOW + 6 * SECOND).deps, [overran]);
    expect(await readRow(env.DB, overran)).toMatchObject({ status: "done", attempts: 2 });
    expect(slack.current.calls.filter((call) => call.params.timestamp === "1.2")).toHaveLength(1);
  });

  it("still completes under its first holder while nobody has claimed it again (the slot keeps the holder's token)", async () => {
    slack.current.script("reactions.add", reply.rateLimited(5));
    const limited = await pending(eyes("C1", "1.1"));
    await deliverBatch(deliveryDeps(NOW, { random: () => 0 }).deps, [limited]);
    const overran = await insertRow(env.DB, {
      status: "leased",
      payload: eyes("C1", "1.2"),
      attempts: 1,
      claimToken: "overran",
      claimExpiresAt: NOW + SECOND - 1,
      createdAt: NOW - 10 * SECOND,
    });
    await deliverBatch(deliveryDeps(NOW + SECOND).deps, [overran]);
    const row = await readRow(env.DB, overran);
    const { finishClaim } = await import("../../shared/outbox/fence.ts");
    const late = await finishClaim(
      env.DB,
      {
        id: overran,
        receiptId: row.receipt_id,
        idempotencyKey: row.idempotency_key,
        depth: 0,
        effect: row.effect,
        payload: row.payload,
        attempts: 1,
        expiresAt: null,
        createdAt: row.created_at,
        claimToken: "overran",
        claimExpiresAt: NOW + SECOND - 1,
        rateLimitedSince: null,
        rateKey: "T0TEAM/channel/C1",
        keyHot: true,
        teamId: row.team_id,
        waitingSince: null,
      },
      { kind: "done", result: { ok: true } },
      NOW + 2 * SECOND,
      60 * SECOND,
      NOW,
    );
    expect(late.applied).toBe(true);
    expect(await readRow(env.DB, overran)).toMatchObject({ status: "done" });
  });
});

describe("the wall-clock limit of rate-limited waiting (RATE_LIMIT_MAX_WAIT_HOURS, 6 h)", () => {
  it("starts at the row's first 429, parks a row still rate limited at the limit, and starts afresh after a replay", async () => {
    slack.current.script("reactions.add", reply.rateLimited(1), reply.rateLimited(1), reply.rateLimited(1));
    const id = await pending(eyes("C1", "1.1"));
    const HOUR = 3600 * SECOND;

    // The first 429 stamps rate_limited_since; a later one keeps it.
    await deliverBatch(deliveryDeps(NOW, { random: () => 0 }).deps, [id]);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "pending", rate_limited_since: NOW });
    await deliverBatch(deliveryDeps(NOW + 6 * HOUR - SECOND, { random: () => 0 }).deps, [id]);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "pending", rate_limited_since: NOW, attempts: 0 });

    // Six hours after the first 429, still answered 429: parked, saying why.
    const last = deliveryDeps(NOW + 6 * HOUR, { random: () => 0 });
    await deliverBatch(last.deps, [id]);
    expect(await readRow(env.DB, id)).toMatchObject({
      status: "dead",
      last_error:
        "rate limited for longer than the wall-clock limit (21600 s since the first 429, limit 21600 s): reactions.add: HTTP 429 rate limited",
    });

    // An operator's replay gives the row a fresh clock.
    const { replayDead } = await import("../../shared/ops/replay.ts");
    const { recordingQueue } = await import("../support/rows.ts");
    const { testSettings } = await import("../support/consumer.ts");
    const { recordingLog } = await import("../../shared/log.ts");
    await replayDead(
      { shards: [env.DB], queue: recordingQueue(), settings: testSettings(), log: recordingLog() },
      { selection: { by: "refs", refs: [{ shard: 0, id }] }, dryRun: false },
      NOW + 7 * HOUR,
    );
    expect(await readRow(env.DB, id)).toMatchObject({ status: "pending", rate_limited_since: null });
  });
});

describe("in-batch pacing", () => {
  it("with PACE_AHEAD off (the default), sends a batch's rows of one channel at once and writes nothing until Slack answers 429", async () => {
    slack.current.always("reactions.add", reply.ok());
    const ids = [await pending(eyes("C1", "1.0")), await pending(eyes("C1", "1.1")), await pending(eyes("C1", "1.2"))];
    const { deps, sleeps } = deliveryDeps(NOW);
    expect(deps.settings.paceAhead).toBe(false);
    const actions = await deliverBatch(deps, ids);
    expect([...actions.values()]).toEqual([{ action: "ack" }, { action: "ack" }, { action: "ack" }]);
    expect(sleeps).toEqual([]);
    expect(await cooldowns()).toEqual([]);
  });

  it("writes nothing and waits for nothing when a batch holds one row per channel, PACE_AHEAD on", async () => {
    slack.current.always("reactions.add", reply.ok());
    const ids = [];
    for (let i = 0; i < 8; i++) ids.push(await pending(eyes(`C${i}`, `1.${i}`)));
    const { deps, sleeps } = deliveryDeps(NOW, { settings: { paceAhead: true } });
    const actions = await deliverBatch(deps, ids);
    expect([...actions.values()].every((a) => a.action === "ack")).toBe(true);
    expect(sleeps).toEqual([]);
    expect(await cooldowns()).toEqual([]);
  });

  it("with PACE_AHEAD on, sends one call per channel at once and gives the channel's later rows release slots a pace apart, shared through D1", async () => {
    slack.current.always("reactions.add", reply.ok());
    const busy = [await pending(eyes("C1", "1.0")), await pending(eyes("C1", "1.1")), await pending(eyes("C1", "1.2"))];
    const quiet = await pending(eyes("C2", "2.0"));
    const { deps, sleeps } = deliveryDeps(NOW, { settings: { paceAhead: true } });

    const actions = await deliverBatch(deps, [...busy, quiet]);

    expect(actions.get(busy[0] ?? 0)).toEqual({ action: "ack" });
    expect(actions.get(quiet)).toEqual({ action: "ack" });
    expect([actions.get(busy[1] ?? 0), actions.get(busy[2] ?? 0)]).toEqual([
      { action: "resend", delaySeconds: 1 },
      { action: "resend", delaySeconds: 2 },
    ]);
    expect(sleeps).toEqual([]);
    expect(slack.current.callsTo("reactions.add").map((c) => c.params.timestamp)).toEqual(["1.0", "2.0"]);
    expect(await cooldowns()).toEqual([{ key: "T0TEAM/channel/C1", until: NOW, next_slot: NOW + 3 * SECOND, pace_ms: CHANNEL_PACE_MS }]);
    // Given back without a call: pending at their slots, no attempt spent.
    expect(await readRow(env.DB, busy[1] ?? 0)).toMatchObject({ status: "pending", attempts: 0, next_attempt_at: NOW + SECOND });
    expect(await readRow(env.DB, busy[2] ?? 0)).toMatchObject({ status: "pending", attempts: 0, next_attempt_at: NOW + 2 * SECOND });

    // Another invocation meanwhile: a row of C1 recorded before the key turned busy queues for the next slot.
    const elsewhere = await pending(eyes("C1", "1.3"));
    const other = deliveryDeps(NOW + 100, { settings: { paceAhead: true } });
    expect((await deliverBatch(other.deps, [elsewhere])).get(elsewhere)).toEqual({ action: "resend", delaySeconds: 3 });
    expect(slack.current.callsTo("reactions.add")).toHaveLength(2);
  });
});
