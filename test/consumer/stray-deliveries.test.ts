/**
 * The test Worker has a real queue consumer (the consumer project's Worker, over the engine's test app): a message
 * sent to env.OUTBOX_QUEUE is delivered to it about a hundred milliseconds later, onto whatever row has that id
 * then, judged by the wall clock. A test that calls the code directly must never be reached by it. Three things
 * make that impossible, each held here:
 *
 * - the helpers hand the code a queue that records (test/support/consumer.ts, ingress.ts): a direct call sends
 *   nothing real;
 * - the factory's ids never repeat in a file, across resetTables (test/support/rows.ts): a message another test
 *   sent names no row of this one;
 * - fixture time is ahead of the wall clock (test/support/slack-requests.ts, NOW): to the real consumer no
 *   fixture row is due and no lease taken at fixture time has expired, so even a message naming one claims nothing.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { claimRows } from "../../shared/outbox/claim.ts";
import { deliveryDeps } from "../support/consumer.ts";
import { ingressDeps } from "../support/ingress.ts";
import { insertRow, readRow, resetTables } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";
import { waitFor } from "../support/wait.ts";

beforeEach(() => resetTables(env.DB));

const DAY = 24 * 3_600_000;

describe("a direct-call test and the test Worker's real queue consumer", () => {
  it("fixture time is ahead of the wall clock (this fails the day the wall clock catches up: move NOW)", () => {
    expect(NOW).toBeGreaterThan(Date.now() + DAY);
  });

  it("the helpers' queues record what the code sends; none is the real queue", async () => {
    const consumer = deliveryDeps(NOW);
    const ingress = ingressDeps();
    expect(consumer.deps.queue).not.toBe(env.OUTBOX_QUEUE);
    expect(ingress.deps.queue).not.toBe(env.OUTBOX_QUEUE);
    await consumer.deps.queue.sendBatch([{ body: { id: 7 } }]);
    await ingress.deps.queue.sendBatch([{ body: { id: 8 } }]);
    expect(consumer.queue.sent).toEqual([7]);
    expect(ingress.queue.sent).toEqual([8]);
  });

  it("the factory's ids never repeat after a reset, so a message sent for an earlier test's row names none of this one's", async () => {
    const first = await insertRow(env.DB, { status: "pending" });
    await resetTables(env.DB);
    const second = await insertRow(env.DB, { status: "pending" });
    expect(second).toBeGreaterThan(first);
  });

  it("a real delivery naming fixture rows (due and lease-expired at NOW) claims none of them; a wall-clock row beside them is delivered", async () => {
    const fixture = {
      pending: await insertRow(env.DB, { status: "pending" }),
      retryDue: await insertRow(env.DB, { status: "pending", attempts: 1, nextAttemptAt: NOW }),
      expiredLease: await insertRow(env.DB, { status: "leased", claimToken: "held-at-fixture-time" }),
    };
    // At fixture time each of them is claimable: what a direct-call test would do with them next.
    const claimable = await env.DB.prepare(
      "SELECT COUNT(*) AS n FROM outbox WHERE id IN (?1, ?2, ?3) AND next_attempt_at <= ?4 AND (status = 'pending' OR claim_expires_at <= ?4)",
    )
      .bind(fixture.pending, fixture.retryDue, fixture.expiredLease, NOW)
      .first<number>("n");
    expect(claimable).toBe(3);
    const before = await Promise.all(Object.values(fixture).map((id) => readRow(env.DB, id)));
    // The canary: due by the wall clock, an effect nobody registered, so the real consumer parks it without a
    // Slack call. Sent in the same batch, after the fixture rows' messages: once it is dead, they were handled.
    const canary = await insertRow(env.DB, { status: "pending", effect: "no-such-effect", createdAt: Date.now() - 1_000 });
    await env.OUTBOX_QUEUE.sendBatch([...Object.values(fixture), canary].map((id) => ({ body: { id }, contentType: "json" as const })));

    const delivered = await waitFor(
      () => readRow(env.DB, canary),
      (row) => row.status === "dead",
    );
    expect(delivered).toMatchObject({ status: "dead", last_error: "unknown effect no-such-effect" });
    expect(await Promise.all(Object.values(fixture).map((id) => readRow(env.DB, id)))).toEqual(before);
    // And the fixture rows are still the test's to claim at NOW.
    expect((await claimRows(env.DB, Object.values(fixture), "the-test", NOW, 60_000)).map((r) => r.id).sort()).toEqual(
      Object.values(fixture).sort(),
    );
  });
});
