import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { createApp } from "../../shared/app/app.ts";
import { slack } from "../../shared/app/intents.ts";
import { auditTrail } from "../../shared/ops/audit.ts";
import { handleSlackRequest } from "../../workers/ingress/ack.ts";
import { ingressDeps } from "../support/ingress.ts";
import { allRows, resetTables, tally } from "../support/rows.ts";
import { channelMessage, eventRequest, mention, NOW, uniqueId } from "../support/slack-requests.ts";

beforeEach(() => resetTables(env.DB));

async function deliver(event: Record<string, unknown>, overrides: Parameters<typeof ingressDeps>[0] = {}, eventId = uniqueId("Ev")) {
  const harness = ingressDeps(overrides);
  const response = await handleSlackRequest(await eventRequest(event, { eventId }), harness.deps, NOW);
  await harness.settled();
  return { status: response.status, eventId, line: harness.log.records.find((r) => r.msg === "slack request") };
}

const receiptsByFact = async () =>
  (await env.DB.prepare("SELECT id, fact FROM receipts ORDER BY id").all<{ id: string; fact: string | null }>()).results;

describe("one fact, one effect: copies of a message under new event_ids", () => {
  it("six copies of one mention at once, each a new event_id with no retry header, record one reply", async () => {
    const ts = "1764504000.600001";
    const harness = ingressDeps();
    const ids = Array.from({ length: 6 }, () => uniqueId("Ev"));
    const requests = await Promise.all(ids.map((eventId) => eventRequest(mention({ ts }), { eventId })));
    const responses = await Promise.all(requests.map((request) => handleSlackRequest(request, harness.deps, NOW)));
    await harness.settled();
    expect(responses.map((r) => r.status)).toEqual(Array(6).fill(200));
    const rows = await allRows(env.DB);
    expect(rows.map((r) => [r.effect, r.idempotency_key])).toEqual([["chat.postMessage", `app_mention:T0TEAM:C0WATCHED:${ts}:reply`]]);
    // Every copy is on record, and says which fact it was; the one row belongs to whichever copy won.
    const receipts = await receiptsByFact();
    expect(receipts.map((r) => r.id).sort()).toEqual([...ids].sort());
    expect(new Set(receipts.map((r) => r.fact))).toEqual(new Set([`app_mention:T0TEAM:C0WATCHED:${ts}`]));
    expect(ids).toContain(rows[0]?.receipt_id);
  });

  it("three copies one after another record one reply; a new message in the same channel gets its own", async () => {
    const ts = "1764504000.600002";
    const copies = [await deliver(mention({ ts })), await deliver(mention({ ts })), await deliver(mention({ ts }))];
    expect(copies.map((c) => [c.status, c.line?.fields.verdict, (c.line?.fields.outbox_ids as unknown[] | undefined)?.length])).toEqual([
      [200, "accepted", 1],
      [200, "accepted", 0],
      [200, "accepted", 0],
    ]);
    // The log says a copy was a copy, and of what.
    expect(copies[1]?.line?.fields).toMatchObject({ repeated: 1, fact: `app_mention:T0TEAM:C0WATCHED:${ts}` });
    expect(copies[0]?.line?.fields.repeated).toBeUndefined();
    const next = await deliver(mention({ ts: "1764504000.600003" }));
    expect(next.line?.fields.outbox_ids).toHaveLength(1);
    expect((await allRows(env.DB)).map((r) => r.receipt_id)).toEqual([copies[0]?.eventId, next.eventId]);
    expect(await tally(env.DB)).toEqual({ receipts: 4, outbox: 2, attempts: 0 });
    // The audit trail of a copy: its own receipt, the fact it repeated, and the row the first copy recorded.
    const trail = await auditTrail(env.DB, copies[2]?.eventId ?? "");
    expect(trail?.receipt).toMatchObject({ id: copies[2]?.eventId, fact: `app_mention:T0TEAM:C0WATCHED:${ts}` });
    expect(trail?.rows.map((r) => [r.key, r.receiptId])).toEqual([[`app_mention:T0TEAM:C0WATCHED:${ts}:reply`, copies[0]?.eventId]]);
    // The fact itself finds the same rows (after its receipts are pruned, too).
    expect((await auditTrail(env.DB, `app_mention:T0TEAM:C0WATCHED:${ts}`))?.rows).toHaveLength(1);
  });

  it("a message and the app_mention of the same message are two facts, each handled once", async () => {
    const ts = "1764504000.600004";
    await deliver(mention({ ts }));
    await deliver(channelMessage({ ts, text: "<@U0BOT> hello" }));
    await deliver(channelMessage({ ts, text: "<@U0BOT> hello" }));
    expect((await allRows(env.DB)).map((r) => r.effect)).toEqual(["chat.postMessage", "reactions.add"]);
  });

  it("an edit is handled as an edit, not absorbed as a duplicate of the message; a copy of the edit is", async () => {
    const app = createApp()
      .uses("chat.postMessage")
      .event("message", ({ payload: e }) => [
        slack(
          "chat.postMessage",
          { channel: String(e.channel), text: e.subtype === "message_changed" ? "edited" : "new" },
          { key: "note" },
        ),
      ]);
    const ts = "1764504000.600005";
    await deliver(channelMessage({ ts }), { app });
    const edit = (editTs: string) =>
      channelMessage({
        subtype: "message_changed",
        ts: editTs,
        message: { type: "message", user: "U0HUMAN", text: "hello team!", ts, edited: { user: "U0HUMAN", ts: editTs } },
        previous_message: { type: "message", user: "U0HUMAN", text: "hello team", ts },
      });
    await deliver(edit("1764504100.000001"), { app });
    await deliver(edit("1764504100.000001"), { app });
    await deliver(edit("1764504200.000001"), { app });
    const rows = await allRows(env.DB);
    expect(rows.map((r) => JSON.parse(r.payload).text)).toEqual(["new", "edited", "edited"]);
    expect(await tally(env.DB)).toEqual({ receipts: 4, outbox: 3, attempts: 0 });
  });

  it("a retry of a copy is still a duplicate by its event_id (the receipt), and writes nothing", async () => {
    const ts = "1764504000.600006";
    const first = await deliver(mention({ ts }));
    const retry = await deliver(mention({ ts }), {}, first.eventId);
    expect(retry.line?.fields.verdict).toBe("duplicate");
    expect(await tally(env.DB)).toEqual({ receipts: 1, outbox: 1, attempts: 0 });
  });
});
