/**
 * Timers at the ack (IntentOptions.at / after; shared/outbox/model.ts, scheduleOf): recorded in the ack's one
 * batch with their time, never taken by the first attempt before it, sent delayed to their time within the
 * queue's delay and not at all beyond it, refused past a year or their deadline; and what operators see of
 * them: the backlog's waiting vs late, GET /admin/timers, the trail's time.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { createApp } from "../../shared/app/app.ts";
import { cancel, respondTo, slack } from "../../shared/app/intents.ts";
import { firstAttemptOf, INLINE_MAX_IN_FLIGHT, INLINE_MAX_REQUESTS, INLINE_MAX_WAIT_MS } from "../../shared/delivery/first-attempt.ts";
import { InlineGate } from "../../shared/delivery/inline-gate.ts";
import { measureBacklog } from "../../shared/ops/backlog.ts";
import type { TimersPageAnswer } from "../../shared/ops/timers-answer.ts";
import { MAX_TIMER_AHEAD_MS, namedKey } from "../../shared/outbox/model.ts";
import { handleSlackRequest } from "../../workers/ingress/ack.ts";
import { deliveryDeps } from "../support/consumer.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { ingressDeps } from "../support/ingress.ts";
import { adminDeps, callAdmin, messageQueue } from "../support/ops.ts";
import { allRows, dbOf, insertRow, resetAllShards, resetTables } from "../support/rows.ts";
import { blockActions, commandForm, FORM, interactionForm, NOW, signed } from "../support/slack-requests.ts";

const slackFake = useFakeSlack();
beforeEach(async () => {
  await resetTables(env.DB);
});

const SECOND = 1000;
const HOUR = 3600 * SECOND;

/** /later <seconds> posts "later" that many seconds after the ack; /at <ms> at that time; /reply answers at once. */
const app = createApp()
  .uses("chat.postMessage")
  .command("/later", ({ payload }) => [
    slack(
      "chat.postMessage",
      { channel: payload.channelId, text: "later" },
      { after: Number(payload.text), name: `later:${payload.triggerId}` },
    ),
  ])
  .command("/at", ({ payload }) => [slack("chat.postMessage", { channel: payload.channelId, text: "at" }, { at: Number(payload.text) })])
  .command("/both", ({ payload }, { now }) => [
    slack("chat.postMessage", { channel: payload.channelId, text: "now" }, { key: "now" }),
    slack("chat.postMessage", { channel: payload.channelId, text: "later" }, { key: "later", after: 60 }),
    respondTo(payload.responseUrl, { text: "hi" }, now, { after: Number(payload.text) }),
  ])
  .action(/^stop:/, ({ payload }) => [cancel(payload.action_id.slice("stop:".length))]);

async function send(body: string, options: { queueDelayMaxSeconds?: number; firstAttempt?: boolean } = {}) {
  const queue = messageQueue();
  const inline = deliveryDeps(NOW, { queue, effects: app.effects });
  const harness = ingressDeps({
    app,
    queue,
    ...(options.queueDelayMaxSeconds
      ? { settings: { ...ingressDeps().deps.settings, queueDelayMaxMs: options.queueDelayMaxSeconds * SECOND } }
      : {}),
    ...(options.firstAttempt
      ? { firstAttempt: firstAttemptOf(inline.deps, new InlineGate(INLINE_MAX_IN_FLIGHT, INLINE_MAX_REQUESTS, INLINE_MAX_WAIT_MS)) }
      : {}),
  });
  const response = await handleSlackRequest(await signed(body, FORM), harness.deps, NOW);
  await harness.settled();
  return {
    status: response.status,
    line: harness.log.records.find((r) => r.msg === "slack request")?.fields ?? {},
    sent: queue.messages.map((m) => ({ id: m.body.id, delaySeconds: m.delaySeconds ?? 0 })),
  };
}
const command = (name: string, text: string) => commandForm({ command: name, text });

describe("a timer at the ack", () => {
  it("is recorded in the ack's batch with its time, and its message goes delayed to it", async () => {
    const { status, sent, line } = await send(command("/later", "90"));
    expect(status).toBe(200);
    const [row] = await allRows(env.DB);
    expect(row).toMatchObject({
      status: "pending",
      due_at: NOW + 90 * SECOND,
      next_attempt_at: NOW + 90 * SECOND,
      enqueued_at: NOW + 90 * SECOND,
      // Its time, not its time + grace: if the message is lost the first tick after it sends the row.
      sweep_at: NOW + 90 * SECOND,
      created_at: NOW,
    });
    expect(sent).toEqual([{ id: row?.id, delaySeconds: 90 }]);
    expect(line.timers).toEqual([[row?.id, 90]]);
  });

  it("beyond the queue's longest delay gets no message (enqueued_at null): the sweep sends it at its time", async () => {
    const { sent } = await send(command("/later", String(3 * 3600)), { queueDelayMaxSeconds: 3600 });
    const [row] = await allRows(env.DB);
    expect(row).toMatchObject({ due_at: NOW + 3 * HOUR, enqueued_at: null, sweep_at: NOW + 3 * HOUR });
    expect(sent).toEqual([]);
  });

  it("one second within the queue's delay is queued; one second beyond is not", async () => {
    const within = await send(command("/later", "3600"), { queueDelayMaxSeconds: 3600 });
    const beyond = await send(command("/later", "3601"), { queueDelayMaxSeconds: 3600 });
    expect(within.sent.map((m) => m.delaySeconds)).toEqual([3600]);
    expect(beyond.sent).toEqual([]);
  });

  it("a time in the past means now: recorded as any row, sent at once", async () => {
    const { sent } = await send(command("/at", String(NOW - 5 * SECOND)));
    const [row] = await allRows(env.DB);
    expect(row).toMatchObject({ due_at: null, next_attempt_at: NOW, enqueued_at: NOW, sweep_at: NOW + 60 * SECOND });
    expect(sent).toEqual([{ id: row?.id, delaySeconds: 0 }]);
  });

  it("is never taken by the first attempt before its time; the input's row due now is", async () => {
    slackFake.current.script("chat.postMessage", reply.ok({ ts: "1.1" }));
    const { sent, line } = await send(command("/both", "60"), { firstAttempt: true });
    const rows = await allRows(env.DB);
    const [now, later, respond] = rows;
    expect(now).toMatchObject({ status: "done", attempts: 1 });
    expect(later).toMatchObject({ status: "pending", attempts: 0, due_at: NOW + 60 * SECOND });
    expect(respond).toMatchObject({ status: "pending", attempts: 0, due_at: NOW + 60 * SECOND });
    expect(line.first_attempt).toBe("inline");
    expect(sent).toEqual(
      expect.arrayContaining([
        { id: later?.id, delaySeconds: 60 },
        { id: respond?.id, delaySeconds: 60 },
      ]),
    );
  });

  it("more than a year ahead, or after its deadline, is refused: 500 with why, nothing written", async () => {
    const cases = [
      [command("/at", String(NOW + MAX_TIMER_AHEAD_MS + SECOND)), "more than a year"],
      [command("/later", String(MAX_TIMER_AHEAD_MS / 1000 + 1)), "more than a year"],
      [command("/later", "nope"), "after is not a number of seconds"],
      // A response_url lives 30 minutes: a reply an hour later could only park.
      [command("/both", "3600"), "after its deadline"],
    ] as const;
    for (const [body, why] of cases) {
      const { status, line } = await send(body);
      expect(status).toBe(500);
      expect(line).toMatchObject({ verdict: "refused", reason: expect.stringContaining(why) });
    }
    // One year exactly is allowed.
    expect((await send(command("/at", String(NOW + MAX_TIMER_AHEAD_MS)))).status).toBe(200);
    expect(await allRows(env.DB)).toHaveLength(1);
  });
});

describe("what operators see of timers", () => {
  it("the backlog counts a future timer as waiting for its time, not late, however old; once past its time, late from it", async () => {
    // Recorded two hours ago, due in a minute: waiting. Due a minute ago: 60 s late, not two hours.
    const timer = (dueAt: number) =>
      insertRow(env.DB, { status: "pending", createdAt: NOW - 2 * HOUR, dueAt, nextAttemptAt: dueAt, sweepAt: dueAt });
    await timer(NOW + 60 * SECOND);
    const before = await measureBacklog(env.DB, NOW, { windowsMs: [60_000], cap: 100 });
    expect(before).toMatchObject({ pending: 1, waitingForTime: 1, nextTimerAt: NOW + 60 * SECOND, oldestPendingAgeMs: null });
    // One second either side of its time.
    expect(await measureBacklog(env.DB, NOW + 59 * SECOND, { windowsMs: [60_000], cap: 100 })).toMatchObject({ waitingForTime: 1 });
    const at = await measureBacklog(env.DB, NOW + 61 * SECOND, { windowsMs: [60_000], cap: 100 });
    expect(at).toMatchObject({ waitingForTime: 0, nextTimerAt: null, oldestPendingAgeMs: SECOND, oldestPendingDueAt: NOW + 60 * SECOND });
    // An ordinary row recorded ten minutes ago is the oldest, from its creation.
    await insertRow(env.DB, { status: "pending", createdAt: NOW - 10 * 60 * SECOND });
    const mixed = await measureBacklog(env.DB, NOW, { windowsMs: [60_000], cap: 100 });
    expect(mixed).toMatchObject({ pending: 2, waitingForTime: 1, oldestPendingAgeMs: 10 * 60 * SECOND });
  });

  it("the metrics say how many wait for their time", async () => {
    await insertRow(env.DB, { status: "pending", createdAt: NOW, dueAt: NOW + HOUR, nextAttemptAt: NOW + HOUR, sweepAt: NOW + HOUR });
    const { body } = await callAdmin<string>(adminDeps().deps, "/admin/metrics", NOW);
    expect(body).toContain("\nackbox_outbox_waiting_for_time 1\n");
    expect(body).not.toContain("\nackbox_outbox_oldest_pending_age_seconds ");
  });

  it("GET /admin/timers lists pending timers and cancelled ones, soonest first, each shard's, with their state", async () => {
    await resetAllShards();
    const teams = ["T0AAA", "T0BBB", "T0CCC", "T0DDD"];
    const ids: Record<string, number> = {};
    for (const [i, team] of teams.entries()) {
      const due = NOW + (i + 1) * 60 * SECOND;
      ids[team] = await insertRow(dbOf(team), {
        status: "pending",
        key: namedKey(team, `t${i}`),
        teamId: team,
        createdAt: NOW - SECOND,
        dueAt: due,
        nextAttemptAt: due,
        sweepAt: due,
      });
    }
    // Not timers: an ordinary pending row; a timer being performed (leased); a performed one (done).
    await insertRow(dbOf("T0AAA"), { status: "pending", teamId: "T0AAA" });
    await insertRow(dbOf("T0AAA"), { status: "leased", teamId: "T0AAA", dueAt: NOW - SECOND });
    await insertRow(dbOf("T0AAA"), { status: "done", teamId: "T0AAA", dueAt: NOW - 2 * SECOND });
    const ops = adminDeps();
    const list = async (query: string) => (await callAdmin<TimersPageAnswer>(ops.deps, `/admin/timers${query}`, NOW)).body;

    const all = await list("");
    expect(all.rows.map((r) => [r.teamId, r.name, r.state])).toEqual([
      ["T0AAA", "t0", "waiting"],
      ["T0BBB", "t1", "waiting"],
      ["T0CCC", "t2", "waiting"],
      ["T0DDD", "t3", "waiting"],
    ]);
    // Pages of two, across the shards, with no gap and no repeat.
    const first = await list("?limit=2");
    const second = await list(`?limit=2&cursor=${first.nextCursor}`);
    expect([...first.rows, ...second.rows].map((r) => r.teamId)).toEqual(teams);
    expect((await list(`?limit=2&cursor=${second.nextCursor}`)).rows).toEqual([]);
    // Before a time (a span from now), and one team's.
    expect((await list("?due_before=150s")).rows.map((r) => r.teamId)).toEqual(["T0AAA", "T0BBB"]);
    expect((await list("?team=T0CCC")).rows.map((r) => r.teamId)).toEqual(["T0CCC"]);

    // Cancel one through the ack: it stays in the list, as cancelled, with who cancelled it.
    const harness = ingressDeps({ app, db: dbOf("T0BBB") });
    const click = blockActions({ team: { id: "T0BBB", domain: "x" }, actions: [{ action_id: "stop:t1", block_id: "b", type: "button" }] });
    const response = await handleSlackRequest(await signed(interactionForm(click), FORM), harness.deps, NOW);
    await harness.settled();
    expect(response.status).toBe(200);
    const after = await list("?team=T0BBB");
    expect(after.rows).toMatchObject([{ name: "t1", state: "cancelled", cancelledBy: expect.stringMatching(/^interaction:T0BBB:/) }]);
    // Past its time, a timer not yet attempted is due (late until claimed).
    expect((await callAdmin<TimersPageAnswer>(ops.deps, "/admin/timers?team=T0AAA", NOW + 61 * SECOND)).body.rows[0]?.state).toBe("due");
  });

  it("GET /admin/timers refuses what it cannot read, with why", async () => {
    const ops = adminDeps();
    for (const [query, why] of [
      ["?team=t0aaa", "team: want a Slack team id"],
      ["?due_before=soon", "due_before: want epoch ms, ISO 8601 or a span from now"],
      ["?limit=0", "limit: want a whole number from 1 to 200"],
      ["?cursor=nope", "cursor: not a cursor this API handed out"],
      ["?until=1", "unknown parameter(s) until"],
    ] as const) {
      const { status, body } = await callAdmin<{ error: string }>(ops.deps, `/admin/timers${query}`, NOW);
      expect([status, body.error]).toEqual([400, expect.stringContaining(why)]);
    }
  });

  it("the trail shows a timer's time", async () => {
    await send(command("/later", "90"));
    const [row] = await allRows(env.DB);
    const { body } = await callAdmin<{ rows: { dueAt: string }[] }>(
      adminDeps().deps,
      `/admin/events/${encodeURIComponent(row?.receipt_id ?? "")}`,
      NOW,
    );
    expect(body.rows[0]?.dueAt).toBe(new Date(NOW + 90 * SECOND).toISOString());
  });
});
