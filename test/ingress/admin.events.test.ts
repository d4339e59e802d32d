import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { deliverBatch } from "../../shared/delivery/deliver.ts";
import { auditTrail } from "../../shared/ops/audit.ts";
import { handleSlackRequest } from "../../workers/ingress/ack.ts";
import { capturingDb, queryPlan, statementMatching } from "../support/captured-sql.ts";
import { deliveryDeps } from "../support/consumer.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { ingressDeps } from "../support/ingress.ts";
import { adminDeps, callAdmin, insertAttempt, insertReceipt, postJson } from "../support/ops.ts";
import { insertRow, readRow, resetTables } from "../support/rows.ts";
import { eventRequest, mention, NOW, uniqueId } from "../support/slack-requests.ts";

const SECOND = 1000;

beforeEach(() => resetTables(env.DB));
const slack = useFakeSlack();

interface TrailBody {
  id: string;
  receipt: { id: string; kind: string; type: string; teamId: string | null; receivedAt: string } | null;
  complete: boolean;
  rows: {
    id: number;
    key: string;
    effect: string;
    status: string;
    attempts: number;
    lastError: string | null;
    payload: unknown;
    result: unknown;
    completedAt: string | null;
    history: { attempt: number; outcome: string; error: string | null; startedAt: string | null; finishedAt: string }[];
  }[];
  error?: string;
}

describe("GET /admin/events/<id>", () => {
  it("tells an event's whole story: receipt, row, each failed attempt with its error and time, completion", async () => {
    const eventId = uniqueId("Ev");
    const ingress = ingressDeps();
    await handleSlackRequest(await eventRequest(mention({ ts: "1764504000.000100" }), { eventId }), ingress.deps, NOW);
    await ingress.settled();
    const [row] = (await env.DB.prepare("SELECT id FROM outbox WHERE receipt_id = ?").bind(eventId).all<{ id: number }>()).results;
    const id = row?.id ?? 0;

    slack.current.script("chat.postMessage", reply.error("internal_error"), reply.ok({ channel: "C0WATCHED", ts: "1764504001.000100" }));
    const consumer = deliveryDeps(NOW + SECOND);
    await deliverBatch(consumer.deps, [id]);
    const retryAt = (await readRow(env.DB, id)).next_attempt_at;
    consumer.clock.set(retryAt);
    await deliverBatch(consumer.deps, [id]);

    const { deps } = adminDeps();
    const { status, body } = await callAdmin<TrailBody>(deps, `/admin/events/${eventId}`, NOW);
    expect(status).toBe(200);
    expect(body).toMatchObject({
      id: eventId,
      receipt: { id: eventId, kind: "event", type: "app_mention", teamId: "T0TEAM", receivedAt: new Date(NOW).toISOString() },
      complete: true,
    });
    expect(body.rows).toHaveLength(1);
    expect(body.rows[0]).toMatchObject({
      id,
      key: "app_mention:T0TEAM:C0WATCHED:1764504000.000100:reply",
      receiptId: eventId,
      effect: "chat.postMessage",
      status: "done",
      attempts: 2,
      lastError: "chat.postMessage: internal_error",
      payload: { channel: "C0WATCHED", thread_ts: "1764504000.000100" },
      result: { channel: "C0WATCHED", ts: "1764504001.000100" },
      completedAt: new Date(retryAt).toISOString(),
      history: [
        {
          attempt: 1,
          outcome: "retry",
          error: "chat.postMessage: internal_error",
          startedAt: new Date(NOW + SECOND).toISOString(),
          finishedAt: new Date(NOW + SECOND).toISOString(),
        },
      ],
    });
  });

  it("shows a dead row's attempts and its replay, in time order", async () => {
    const id = await insertRow(env.DB, {
      key: "EvDEAD1:reply",
      status: "dead",
      effect: "chat.postMessage",
      attempts: 1,
      lastError: "chat.postMessage: channel_not_found",
      completedAt: NOW - 10 * SECOND,
    });
    await insertReceipt(env.DB, "EvDEAD1", NOW - 20 * SECOND);
    await insertAttempt(env.DB, {
      outboxId: id,
      attempt: 1,
      outcome: "dead",
      error: "chat.postMessage: channel_not_found",
      finishedAt: NOW - 10 * SECOND,
    });
    const { deps } = adminDeps();
    await callAdmin(deps, "/admin/replay", NOW, postJson({ ids: [`0:${id}`] }));
    const { body } = await callAdmin<TrailBody>(deps, "/admin/events/EvDEAD1", NOW);
    expect(body.complete).toBe(false);
    expect(body.rows[0]?.status).toBe("pending");
    expect(body.rows[0]?.history.map((h) => [h.outcome, h.error, h.finishedAt])).toEqual([
      ["dead", "chat.postMessage: channel_not_found", new Date(NOW - 10 * SECOND).toISOString()],
      ["replay", "chat.postMessage: channel_not_found", new Date(NOW).toISOString()],
    ]);
  });

  it("still finds the rows when the receipt has been pruned", async () => {
    await insertRow(env.DB, { key: "EvPRUNED:eyes", status: "done" });
    const { deps } = adminDeps();
    const { status, body } = await callAdmin<TrailBody>(deps, "/admin/events/EvPRUNED", NOW);
    expect(status).toBe(200);
    expect(body.receipt).toBeNull();
    expect(body.rows.map((r) => r.key)).toEqual(["EvPRUNED:eyes"]);
  });

  it("finds an operation id with colons (URL-encoded or not), and never another receipt's rows that merely share its prefix", async () => {
    const alertId = `alert:new_dead:raised:${NOW}`;
    await insertReceipt(env.DB, alertId, NOW, "alert", "new_dead.raised");
    await insertRow(env.DB, { key: `${alertId}:post`, status: "pending", effect: "chat.postMessage" });
    await insertReceipt(env.DB, "alert:new_dead", NOW, "alert", "x");
    const { deps } = adminDeps();
    const encoded = await callAdmin<TrailBody>(deps, `/admin/events/${encodeURIComponent(alertId)}`, NOW);
    const plain = await callAdmin<TrailBody>(deps, `/admin/events/${alertId}`, NOW);
    expect(encoded.body.rows.map((r) => r.key)).toEqual([`${alertId}:post`]);
    expect(plain.body).toEqual(encoded.body);
    const prefix = await callAdmin<TrailBody>(deps, "/admin/events/alert:new_dead", NOW);
    expect(prefix.body.rows).toEqual([]);
    expect(prefix.body.receipt?.type).toBe("x");
  });

  it("answers 404 with a JSON reason for an id it has never seen", async () => {
    const { deps } = adminDeps();
    const { status, body } = await callAdmin<TrailBody>(deps, "/admin/events/EvNEVER", NOW);
    expect(status).toBe(404);
    expect(body.error).toBe("not_found");
  });

  it("finds a receipt's rows through the unique index, not by scanning the table", async () => {
    // The statements auditTrail really sends, captured at the D1 boundary and explained with their own values.
    await insertReceipt(env.DB, "EvX", NOW);
    await insertRow(env.DB, { status: "done", key: "EvX:eyes" });
    const { db, statements } = capturingDb(env.DB);
    expect((await auditTrail(db, "EvX"))?.rows).toHaveLength(1);
    expect(await queryPlan(env.DB, statementMatching(statements, /FROM outbox\s+WHERE idempotency_key/))).toMatch(
      /USING INDEX sqlite_autoindex_outbox_1 \(idempotency_key>\? AND idempotency_key<\?\)/,
    );
    for (const statement of statements) expect(await queryPlan(env.DB, statement)).not.toMatch(/^SCAN (outbox|receipts)$/m);
  });

  it("shows a follow-up with the row that asked for it: parentId and depth, found under the same receipt", async () => {
    const parent = await insertRow(env.DB, { status: "done", effect: "ask-placeholder", key: "EvCHAIN:ask-placeholder", payload: {} });
    const child = await insertRow(env.DB, {
      status: "pending",
      effect: "chat.update",
      key: "EvCHAIN:ask-placeholder>chat.update",
      payload: {},
    });
    await env.DB.prepare("UPDATE outbox SET receipt_id = 'EvCHAIN', parent_id = ?, depth = 1 WHERE id = ?").bind(parent, child).run();
    const { deps } = adminDeps();
    const { body } = await callAdmin<TrailBody>(deps, "/admin/events/EvCHAIN", NOW);
    expect(
      body.rows.map((r) => ({ id: r.id, parentId: (r as { parentId?: unknown }).parentId, depth: (r as { depth?: unknown }).depth })),
    ).toEqual([
      { id: parent, parentId: null, depth: 0 },
      { id: child, parentId: parent, depth: 1 },
    ]);
  });
});
