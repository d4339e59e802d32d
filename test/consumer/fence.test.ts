import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { deliverBatch } from "../../shared/delivery/deliver.ts";
import { claimRows } from "../../shared/outbox/claim.ts";
import { finishClaim } from "../../shared/outbox/fence.ts";
import { deliveryDeps } from "../support/consumer.ts";
import { fakeSlack, gate, reply } from "../support/fake-slack.ts";
import { meteredDb } from "../support/metered-db.ts";
import { attemptsOf, insertRow, readRow, resetTables } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";
import { waitFor } from "../support/wait.ts";

const LEASE = 120_000;
const GRACE = 60_000;

beforeEach(() => resetTables(env.DB));

describe("the fence (invariant 4)", () => {
  it("a worker whose lease expired and was reclaimed cannot complete; the reclaimer can", async () => {
    const id = await insertRow(env.DB, { status: "pending" });
    const [slow] = await claimRows(env.DB, [id], "worker-a", NOW, LEASE);
    if (!slow) throw new Error("worker-a did not claim");

    // worker-a overruns. A millisecond before its lease ends the row is still its own;
    // at the expiry instant worker-b may claim it.
    expect(await claimRows(env.DB, [id], "worker-b", NOW + LEASE - 1, LEASE)).toEqual([]);
    const [fast] = await claimRows(env.DB, [id], "worker-b", NOW + LEASE, LEASE);
    expect(fast?.attempts).toBe(2);
    if (!fast) throw new Error("worker-b did not claim");

    const late = await finishClaim(env.DB, slow, { kind: "done", result: { by: "a" } }, NOW + LEASE + 5, GRACE, NOW);
    expect(late.applied).toBe(false);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "leased", claim_token: "worker-b", result: null });
    expect(await attemptsOf(env.DB, id)).toMatchObject([
      { attempt: 1, outcome: "fence_lost", claim_token: "worker-a", error: "performed, but the lease was lost before completion" },
    ]);

    const owner = await finishClaim(env.DB, fast, { kind: "done", result: { by: "b" } }, NOW + LEASE + 9, GRACE, NOW + LEASE);
    expect(owner.applied).toBe(true);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "done", claim_token: "worker-b", result: '{"by":"b"}' });
  });

  it("a lost fence cannot park or reschedule the row either", async () => {
    const id = await insertRow(env.DB, { status: "pending" });
    const [a] = await claimRows(env.DB, [id], "worker-a", NOW, LEASE);
    await claimRows(env.DB, [id], "worker-b", NOW + LEASE, LEASE);
    if (!a) throw new Error("no claim");
    expect((await finishClaim(env.DB, a, { kind: "dead", error: "boom" }, NOW + LEASE + 1, GRACE, NOW)).applied).toBe(false);
    expect((await finishClaim(env.DB, a, { kind: "retry", error: "again", nextAttemptAt: NOW }, NOW + LEASE + 1, GRACE, NOW)).applied).toBe(
      false,
    );
    expect(await readRow(env.DB, id)).toMatchObject({ status: "leased", claim_token: "worker-b", last_error: null });
  });

  it("a lost fence's 429 or wait is not applied either, and says so: the verdict is the fenced UPDATE's, never assumed", async () => {
    const id = await insertRow(env.DB, { status: "pending", effect: "chat.postMessage", payload: { channel: "C1", text: "x" } });
    const [a] = await claimRows(env.DB, [id], "worker-a", NOW, LEASE);
    await claimRows(env.DB, [id], "worker-b", NOW + LEASE, LEASE);
    if (!a) throw new Error("no claim");
    const held = await readRow(env.DB, id);
    const limited = { kind: "rate_limited" as const, error: "ratelimited", nextAttemptAt: NOW + LEASE + 30_000, retryAfterMs: 30_000 };
    expect(await finishClaim(env.DB, a, limited, NOW + LEASE + 1, GRACE, NOW)).toEqual({ applied: false, followUpIds: [] });
    const wait = { kind: "wait" as const, error: "no installation", nextAttemptAt: NOW + LEASE + 60_000 };
    expect(await finishClaim(env.DB, a, wait, NOW + LEASE + 1, GRACE, NOW)).toEqual({ applied: false, followUpIds: [] });
    // worker-b's row as it was: its attempt not given back, not rescheduled.
    expect(await readRow(env.DB, id)).toEqual(held);
    // The 429 itself is a fact about Slack, whoever holds the row: the key cools down anyway.
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM rate_cooldowns").first("n")).toBe(1);
  });

  it("the consumer acks a message whose row's 429 lost the fence (no resend for another claim's row), and logs the lost fence", async () => {
    const slack = fakeSlack();
    try {
      const id = await insertRow(env.DB, {
        status: "pending",
        effect: "chat.postMessage",
        payload: { channel: "C1", text: "x" },
        nextAttemptAt: NOW,
      });
      const answering = gate();
      slack.script("chat.postMessage", reply.held(answering, reply.rateLimited(30)));
      const { deps, log, clock } = deliveryDeps(NOW, { settings: { leaseMs: LEASE } });
      const delivering = deliverBatch(deps, [id]);
      await waitFor(
        async () => slack.calls.length,
        (n) => n === 1,
      );
      // While the call hangs, its lease runs out and another worker claims the row.
      await claimRows(env.DB, [id], "worker-b", NOW + LEASE, LEASE);
      clock.set(NOW + LEASE + 1);
      answering.open();
      const actions = await delivering;
      expect(actions.get(id)).toEqual({ action: "ack" });
      expect(log.records.find((r) => r.msg.startsWith("fence rejected"))?.fields).toMatchObject({ outbox_id: id, outcome: "rate_limited" });
      expect(await readRow(env.DB, id)).toMatchObject({ status: "leased", claim_token: "worker-b", attempts: 2 });
    } finally {
      slack.restore();
    }
  });

  it("a lease that expired but was not reclaimed still completes: the effect happened and nobody else holds the row", async () => {
    const id = await insertRow(env.DB, { status: "pending" });
    const [a] = await claimRows(env.DB, [id], "worker-a", NOW, LEASE);
    if (!a) throw new Error("no claim");
    expect((await finishClaim(env.DB, a, { kind: "done", result: null }, NOW + LEASE + 1, GRACE, NOW)).applied).toBe(true);
    expect((await readRow(env.DB, id)).status).toBe("done");
  });

  it("re-running the same fenced write is harmless (what lets the consumer retry it)", async () => {
    const id = await insertRow(env.DB, { status: "pending" });
    const [a] = await claimRows(env.DB, [id], "worker-a", NOW, LEASE);
    if (!a) throw new Error("no claim");
    const retry = { kind: "retry" as const, error: "HTTP 500", nextAttemptAt: NOW + 5000 };
    expect((await finishClaim(env.DB, a, retry, NOW + 10, GRACE, NOW)).applied).toBe(true);
    const once = await readRow(env.DB, id);
    expect((await finishClaim(env.DB, a, retry, NOW + 10, GRACE, NOW)).applied).toBe(true);
    expect(await readRow(env.DB, id)).toEqual(once);
    expect(await attemptsOf(env.DB, id)).toHaveLength(1);
  });
});

describe("what a claim costs (invariant 6)", () => {
  it("reads 3 rows per claimed row, with or without 3 000 done rows in the table", async () => {
    const { db, meter } = meteredDb(env.DB);
    const claimTen = async (token: string) => {
      const ids: number[] = [];
      for (let i = 0; i < 10; i++) ids.push(await insertRow(env.DB, { status: "pending" }));
      meter.reset();
      expect(await claimRows(db, ids, token, NOW, LEASE)).toHaveLength(10);
      return meter.rowsRead;
    };
    const empty = await claimTen("first");
    await env.DB.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
       INSERT INTO outbox (idempotency_key, receipt_id, effect, payload, status, attempts, next_attempt_at, created_at, updated_at, completed_at, claim_token)
       SELECT 'old' || i || ':k', 'old' || i, 'reactions.add', '{}', 'done', 1, 0, 0, 0, 1, 't' FROM n`,
    ).run();
    expect(await claimTen("second")).toBe(empty);
    expect(empty).toBe(30);
  });
});

describe("claims under concurrency", () => {
  it("twenty concurrent claimers lease disjoint rows whose union is exactly the claimable set", async () => {
    const claimable: number[] = [];
    for (let i = 0; i < 30; i++) claimable.push(await insertRow(env.DB, { status: "pending" }));
    claimable.push(await insertRow(env.DB, { status: "leased", claimExpiresAt: NOW - 1, sweepAt: NOW - 1 }));
    const unclaimable = [
      await insertRow(env.DB, { status: "done" }),
      await insertRow(env.DB, { status: "dead" }),
      await insertRow(env.DB, { status: "leased", claimExpiresAt: NOW + 1 }),
      await insertRow(env.DB, { status: "pending", nextAttemptAt: NOW + 1 }),
    ];
    const everything = [...claimable, ...unclaimable];
    const shuffled = (seed: number) => [...everything].sort((a, b) => ((a * 7919 + seed) % 101) - ((b * 7919 + seed) % 101));

    const claims = await Promise.all(Array.from({ length: 20 }, (_, i) => claimRows(env.DB, shuffled(i), `claimer-${i}`, NOW, LEASE)));

    const won = claims.flatMap((rows) => rows.map((r) => r.id));
    expect(new Set(won).size).toBe(won.length); // disjoint
    expect([...won].sort((a, b) => a - b)).toEqual([...claimable].sort((a, b) => a - b)); // union = claimable
    for (const [i, rows] of claims.entries()) {
      for (const row of rows) expect((await readRow(env.DB, row.id)).claim_token).toBe(`claimer-${i}`);
    }
  });
});
