import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { DELIVERY_CONCURRENCY, deliverBatch, INFRASTRUCTURE_RETRY_SECONDS } from "../../shared/delivery/deliver.ts";
import { deliveryDeps } from "../support/consumer.ts";
import { gate, reply, useFakeSlack } from "../support/fake-slack.ts";
import { attemptsOf, insertRow, readRow, resetTables } from "../support/rows.ts";
import { TEST_BOT_TOKEN } from "../support/settings.ts";
import { NOW } from "../support/slack-requests.ts";
import { waitFor } from "../support/wait.ts";

const slack = useFakeSlack();
beforeEach(() => resetTables(env.DB));

const SECOND = 1000;
const post = { channel: "C0WATCHED", text: "hi", thread_ts: "1.2" };
const eyes = { channel: "C0WATCHED", timestamp: "1764504000.000200", name: "eyes" };

// Tests of the lanes put each row in its own channel: two rows of one channel in a batch are paced
// (shared/delivery/pacing.ts), which test/consumer/rate-limits.test.ts covers.
describe("claim → perform → fenced completion", () => {
  it("performs a due pending row, records the result and acks its message", async () => {
    slack.current.script("chat.postMessage", reply.ok({ channel: "C0WATCHED", ts: "1764504100.000100" }));
    const id = await insertRow(env.DB, { status: "pending", effect: "chat.postMessage", payload: post, createdAt: NOW - 5 * SECOND });
    const { deps, log } = deliveryDeps(NOW);

    const actions = await deliverBatch(deps, [id]);

    expect(actions.get(id)).toEqual({ action: "ack" });
    const [call] = slack.current.callsTo("chat.postMessage");
    expect(call?.params).toEqual({ channel: "C0WATCHED", text: "hi", thread_ts: "1.2" });
    expect(call?.authorization).toBe(`Bearer ${TEST_BOT_TOKEN}`);
    expect(await readRow(env.DB, id)).toMatchObject({
      status: "done",
      attempts: 1,
      claim_token: "claim-1",
      claim_expires_at: null,
      sweep_at: null,
      completed_at: NOW,
      result: JSON.stringify({ channel: "C0WATCHED", ts: "1764504100.000100" }),
    });
    expect(await attemptsOf(env.DB, id)).toEqual([]);
    expect(log.records.find((r) => r.msg === "delivered")?.fields).toMatchObject({ outbox_id: id, effect: "chat.postMessage" });
  });

  it("counts already_reacted as success", async () => {
    slack.current.script("reactions.add", reply.error("already_reacted"));
    const id = await insertRow(env.DB, { status: "pending", payload: eyes });
    const { deps } = deliveryDeps(NOW);
    expect((await deliverBatch(deps, [id])).get(id)).toEqual({ action: "ack" });
    expect(await readRow(env.DB, id)).toMatchObject({ status: "done", result: JSON.stringify({ already: "already_reacted" }) });
  });

  it("acks without claiming rows that are done, dead, validly leased or not yet due, and leaves them unchanged", async () => {
    const ids = {
      done: await insertRow(env.DB, { status: "done" }),
      dead: await insertRow(env.DB, { status: "dead" }),
      leased: await insertRow(env.DB, { status: "leased", claimToken: "someone-else", claimExpiresAt: NOW + SECOND }),
      notDue: await insertRow(env.DB, { status: "pending", attempts: 1, nextAttemptAt: NOW + SECOND }),
      missing: 999_999,
    };
    const before = await Promise.all(
      Object.values(ids)
        .slice(0, 4)
        .map((id) => readRow(env.DB, id)),
    );
    const { deps } = deliveryDeps(NOW);
    const actions = await deliverBatch(deps, Object.values(ids));
    expect([...actions.values()]).toEqual(Array(5).fill({ action: "ack" }));
    expect(
      await Promise.all(
        Object.values(ids)
          .slice(0, 4)
          .map((id) => readRow(env.DB, id)),
      ),
    ).toEqual(before);
    expect(slack.current.calls).toEqual([]);
  });

  it("claims a row whose lease expired one millisecond ago, and counts the attempt", async () => {
    slack.current.script("reactions.add", reply.ok());
    const id = await insertRow(env.DB, {
      status: "leased",
      attempts: 1,
      claimToken: "dead-worker",
      claimExpiresAt: NOW - 1,
      sweepAt: NOW - 1,
    });
    const { deps } = deliveryDeps(NOW);
    await deliverBatch(deps, [id]);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "done", attempts: 2, claim_token: "claim-1" });
  });

  it("claims a row that became due exactly now, not one that is due a millisecond later", async () => {
    slack.current.script("reactions.add", reply.ok());
    const due = await insertRow(env.DB, { status: "pending", attempts: 1, nextAttemptAt: NOW });
    const later = await insertRow(env.DB, { status: "pending", attempts: 1, nextAttemptAt: NOW + 1 });
    const { deps } = deliveryDeps(NOW);
    await deliverBatch(deps, [due, later]);
    expect((await readRow(env.DB, due)).status).toBe("done");
    expect((await readRow(env.DB, later)).status).toBe("pending");
  });

  it("calls Slack at most 6 at a time, and delivers a whole batch of 40", async () => {
    // Every call is held until the test opens the gate: the lanes fill and stay full,
    // whatever the machine's speed, and the seventh row can only wait.
    const held = gate();
    slack.current.always("reactions.add", reply.held(held, reply.ok()));
    const ids: number[] = [];
    for (let i = 0; i < 40; i++)
      ids.push(await insertRow(env.DB, { status: "pending", payload: { ...eyes, channel: `C1${i}`, timestamp: `1.${i}` } }));
    const { deps } = deliveryDeps(NOW);
    const running = deliverBatch(deps, ids);
    await waitFor(
      async () => slack.current.inFlight(),
      (n) => n >= DELIVERY_CONCURRENCY,
    );
    // The rows claimed are the rows in flight: no lane is between calls, none is waiting to claim a seventh.
    const leased = () => env.DB.prepare("SELECT COUNT(*) AS n FROM outbox WHERE status = 'leased'").first<number>("n");
    expect(await leased()).toBe(DELIVERY_CONCURRENCY);
    expect(slack.current.callsTo("reactions.add")).toHaveLength(DELIVERY_CONCURRENCY);
    held.open();
    const actions = await running;
    expect([...actions.values()]).toEqual(Array(40).fill({ action: "ack" }));
    expect(slack.current.callsTo("reactions.add")).toHaveLength(40);
    expect(slack.current.maxInFlight()).toBe(DELIVERY_CONCURRENCY);
    expect(new Set((await Promise.all(ids.map((id) => readRow(env.DB, id)))).map((r) => r.status))).toEqual(new Set(["done"]));
  });

  it("claims each row just before its effect: the 7th claim waits for a lane to finish a row", async () => {
    slack.current.always("reactions.add", reply.ok());
    const ids: number[] = [];
    for (let i = 0; i < 8; i++)
      ids.push(await insertRow(env.DB, { status: "pending", payload: { ...eyes, channel: `C2${i}`, timestamp: `2.${i}` } }));
    const claims: { size: number; slackCallsBefore: number }[] = [];
    const watched = new Proxy(env.DB, {
      get(target, prop) {
        if (prop === "batch") {
          return (statements: D1PreparedStatement[]) => {
            claims.push({ size: statements.length, slackCallsBefore: slack.current.calls.length });
            return target.batch(statements);
          };
        }
        const value = Reflect.get(target, prop);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const { deps } = deliveryDeps(NOW);
    await deliverBatch({ ...deps, db: watched }, ids);
    // Each claim one batch of its own: the claim and its cooldown check (claimOrTakeSlot), never several rows' claims.
    expect(claims.map((c) => c.size)).toEqual(Array(8).fill(3));
    expect(claims.slice(0, 6).map((c) => c.slackCallsBefore)).toEqual(Array(6).fill(0));
    expect(claims[6]?.slackCallsBefore).toBeGreaterThan(0);
  });

  it("lets a slow call hold up only its own lane", async () => {
    // The first call is held until the test says so; every other answers at once. The other
    // 29 rows must all be done through the other five lanes while it is still held.
    const held = gate();
    slack.current.script("reactions.add", reply.held(held, reply.ok()));
    slack.current.always("reactions.add", reply.ok());
    const ids: number[] = [];
    for (let i = 0; i < 30; i++)
      ids.push(await insertRow(env.DB, { status: "pending", payload: { ...eyes, channel: `C3${i}`, timestamp: `3.${i}` } }));
    const base = deliveryDeps(NOW, { settings: { leaseMs: 120_000 } });
    const running = deliverBatch({ ...base.deps, context: { ...base.deps.context, timeoutMs: 60_000 } }, ids);
    const delivered = () => base.log.records.filter((r) => r.msg === "delivered").map((r) => r.fields.outbox_id);
    expect(
      await waitFor(
        async () => delivered().length,
        (n) => n >= 29,
      ),
    ).toBe(29);
    const slowTimestamp = slack.current.callsTo("reactions.add")[0]?.params.timestamp;
    const statuses = await env.DB.prepare("SELECT status, json_extract(payload, '$.timestamp') AS ts FROM outbox").all<{
      status: string;
      ts: string;
    }>();
    expect(statuses.results.filter((r) => r.status !== "done")).toEqual([{ status: "leased", ts: slowTimestamp }]);
    held.open();
    await running;
    expect(delivered()).toHaveLength(30);
    expect((await readRow(env.DB, delivered().at(-1) as number)).payload).toContain(`"${slowTimestamp}"`);
  });

  it("retries only the message whose D1 call failed, and delivers the rest of the batch", async () => {
    slack.current.always("reactions.add", reply.ok());
    const ids: number[] = [];
    for (let i = 0; i < 8; i++)
      ids.push(await insertRow(env.DB, { status: "pending", payload: { ...eyes, channel: `C4${i}`, timestamp: `4.${i}` } }));
    const unlucky = ids[3] as number;
    const flaky = new Proxy(env.DB, {
      get(target, prop) {
        if (prop === "batch") {
          return async (statements: D1PreparedStatement[]) => {
            // A claim is a batch of 3 (the claim and its cooldown check); a completion is a single statement.
            if (statements.length === 3 && claimedIds.next().value === unlucky) throw new Error("D1_ERROR: Network connection lost.");
            return target.batch(statements);
          };
        }
        const value = Reflect.get(target, prop);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const claimedIds = ids.values();
    const { deps, log } = deliveryDeps(NOW);
    const actions = await deliverBatch({ ...deps, db: flaky }, ids);
    expect(actions.get(unlucky)).toEqual({ action: "retry", delaySeconds: INFRASTRUCTURE_RETRY_SECONDS });
    expect([...actions.entries()].filter(([id]) => id !== unlucky).map(([, a]) => a)).toEqual(Array(7).fill({ action: "ack" }));
    expect((await readRow(env.DB, unlucky)).status).toBe("pending");
    expect(log.records.find((r) => r.msg.startsWith("could not claim"))?.fields.outbox_id).toBe(unlucky);
  });

  it("claims a row once when two messages name it", async () => {
    slack.current.script("reactions.add", reply.ok());
    const id = await insertRow(env.DB, { status: "pending", payload: eyes });
    // Count the claims: without the dedupe a second lane would try to claim the same row
    // (and find it leased), so Slack's call count alone could not tell.
    let claims = 0;
    const watched = new Proxy(env.DB, {
      get(target, prop) {
        if (prop === "batch") {
          return (statements: D1PreparedStatement[]) => {
            claims += 1;
            return target.batch(statements);
          };
        }
        const value = Reflect.get(target, prop);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const { deps, log } = deliveryDeps(NOW);
    const actions = await deliverBatch({ ...deps, db: watched }, [id, id]);
    expect(claims).toBe(1);
    expect(log.records.filter((r) => r.msg.startsWith("not claimable"))).toEqual([]);
    expect([...actions.entries()]).toEqual([[id, { action: "ack" }]]);
    expect(slack.current.callsTo("reactions.add")).toHaveLength(1);
    expect((await readRow(env.DB, id)).attempts).toBe(1);
  });
});

describe("failures: retry with backoff, or park", () => {
  it("waits Retry-After on a 429 (jitter pinned to 0), spends no attempt, records a rate_limited audit row, then completes", async () => {
    slack.current.script("chat.postMessage", reply.rateLimited(7), reply.ok({ channel: "C0WATCHED", ts: "9.9" }));
    const id = await insertRow(env.DB, { status: "pending", effect: "chat.postMessage", payload: post, createdAt: NOW - 5 * SECOND });
    const { deps, clock } = deliveryDeps(NOW, { random: () => 0 });

    expect((await deliverBatch(deps, [id])).get(id)).toEqual({ action: "resend", delaySeconds: 7 });
    expect(await readRow(env.DB, id)).toMatchObject({
      status: "pending",
      attempts: 0,
      next_attempt_at: NOW + 7 * SECOND,
      enqueued_at: NOW + 7 * SECOND,
      sweep_at: NOW + 7 * SECOND + 60 * SECOND,
      last_error: "chat.postMessage: HTTP 429 rate limited",
      claim_expires_at: null,
    });
    expect(await attemptsOf(env.DB, id)).toMatchObject([
      { attempt: 1, outcome: "rate_limited", error: "chat.postMessage: HTTP 429 rate limited" },
    ]);

    clock.set(NOW + 7 * SECOND - 1);
    expect((await deliverBatch(deps, [id])).get(id)).toEqual({ action: "ack" });
    expect(slack.current.callsTo("chat.postMessage")).toHaveLength(1);

    clock.set(NOW + 7 * SECOND);
    expect((await deliverBatch(deps, [id])).get(id)).toEqual({ action: "ack" });
    expect(await readRow(env.DB, id)).toMatchObject({ status: "done", attempts: 1 });
  });

  it("backs off exponentially through three 500s, then completes", async () => {
    slack.current.script("chat.postMessage", reply.status(500), reply.status(502), reply.status(503), reply.ok({ ts: "1.1" }));
    const id = await insertRow(env.DB, { status: "pending", effect: "chat.postMessage", payload: post });
    const { deps, clock } = deliveryDeps(NOW, { settings: { backoffBaseMs: 2 * SECOND } });
    const delays: number[] = [];
    for (let i = 0; i < 3; i++) {
      const action = (await deliverBatch(deps, [id])).get(id);
      if (action?.action !== "retry") throw new Error(`expected a retry, got ${JSON.stringify(action)}`);
      delays.push(action.delaySeconds);
      clock.set((await readRow(env.DB, id)).next_attempt_at);
    }
    // random pinned at 0.5: half the step + a quarter = 0.75 × 2 s, 4 s, 8 s.
    expect(delays).toEqual([2, 3, 6]);
    await deliverBatch(deps, [id]);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "done", attempts: 4, last_error: "chat.postMessage: HTTP 503" });
    expect((await attemptsOf(env.DB, id)).map((a) => a.outcome)).toEqual(["retry", "retry", "retry"]);
  });

  it.each([
    ["channel_not_found", reply.error("channel_not_found"), "chat.postMessage: channel_not_found"],
    ["not_in_channel", reply.error("not_in_channel"), "chat.postMessage: not_in_channel"],
    ["invalid_auth", reply.error("invalid_auth"), "chat.postMessage: invalid_auth"],
    ["account_inactive", reply.error("account_inactive"), "chat.postMessage: account_inactive"],
    ["an HTTP 404", reply.status(404), "chat.postMessage: HTTP 404"],
  ])("parks after one attempt on %s", async (_, answer, reason) => {
    slack.current.script("chat.postMessage", answer);
    const id = await insertRow(env.DB, { status: "pending", effect: "chat.postMessage", payload: post });
    const { deps, log } = deliveryDeps(NOW);
    expect((await deliverBatch(deps, [id])).get(id)).toEqual({ action: "ack" });
    expect(await readRow(env.DB, id)).toMatchObject({ status: "dead", attempts: 1, last_error: reason, completed_at: NOW, sweep_at: null });
    expect(await attemptsOf(env.DB, id)).toMatchObject([{ outcome: "dead", error: reason }]);
    expect(log.records.find((r) => r.msg === "parked as dead")?.fields.reason).toBe(reason);
  });

  it.each([
    ["internal_error", reply.error("internal_error")],
    ["service_unavailable", reply.error("service_unavailable")],
    ["a dropped connection", reply.networkError()],
  ])("retries on %s", async (_, answer) => {
    slack.current.script("reactions.add", answer);
    const id = await insertRow(env.DB, { status: "pending", payload: eyes });
    const { deps } = deliveryDeps(NOW);
    expect((await deliverBatch(deps, [id])).get(id)).toMatchObject({ action: "retry" });
    expect((await readRow(env.DB, id)).status).toBe("pending");
  });

  it("gives up on a call that hangs, and retries it", async () => {
    slack.current.script("reactions.add", reply.hang());
    const id = await insertRow(env.DB, { status: "pending", payload: eyes });
    const { deps } = deliveryDeps(NOW, {
      context: { ...deliveryDeps(NOW).deps.context, timeoutMs: 30 },
    });
    expect((await deliverBatch(deps, [id])).get(id)).toMatchObject({ action: "retry" });
    expect((await readRow(env.DB, id)).last_error).toBe("reactions.add: no answer within 30 ms");
    // The call was cancelled, not abandoned: an abandoned call would keep one of the
    // six connections and could still reach Slack after its failure was recorded.
    expect(slack.current.callsTo("reactions.add")[0]?.aborted()).toBe(true);
  });

  it("parks on the attempt that reaches MAX_ATTEMPTS", async () => {
    slack.current.script("reactions.add", reply.status(500));
    const id = await insertRow(env.DB, { status: "pending", attempts: 2, payload: eyes });
    const { deps } = deliveryDeps(NOW, { settings: { maxAttempts: 3 } });
    expect((await deliverBatch(deps, [id])).get(id)).toEqual({ action: "ack" });
    expect(await readRow(env.DB, id)).toMatchObject({
      status: "dead",
      attempts: 3,
      last_error: "attempts exhausted (3 of 3): reactions.add: HTTP 500",
    });
  });

  it("parks without calling Slack a row whose claims kept dying past MAX_ATTEMPTS", async () => {
    const id = await insertRow(env.DB, { status: "leased", attempts: 3, claimExpiresAt: NOW - 1, sweepAt: NOW - 1, payload: eyes });
    const { deps } = deliveryDeps(NOW, { settings: { maxAttempts: 3 } });
    await deliverBatch(deps, [id]);
    expect(await readRow(env.DB, id)).toMatchObject({
      status: "dead",
      attempts: 4,
      last_error: "attempts exhausted (3 of 3 ended without a result)",
    });
    expect(slack.current.calls).toEqual([]);
  });

  it("parks a row naming an effect the app does not register (a deploy removed it), and one whose payload is not an object", async () => {
    const unknown = await insertRow(env.DB, { status: "pending", effect: "teleport" });
    const garbled = await insertRow(env.DB, { status: "pending", effect: "reactions.add", payload: [1, 2] });
    const { deps } = deliveryDeps(NOW);
    await deliverBatch(deps, [unknown, garbled]);
    expect(await readRow(env.DB, unknown)).toMatchObject({ status: "dead", last_error: "unknown effect teleport" });
    expect(await readRow(env.DB, garbled)).toMatchObject({ status: "dead", last_error: "reactions.add: payload is not a JSON object" });
    expect(slack.current.calls).toEqual([]);
  });
});
