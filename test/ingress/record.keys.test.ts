import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { createApp } from "../../shared/app/app.ts";
import { slack } from "../../shared/app/intents.ts";
import { followUpKey, idempotencyKey } from "../../shared/outbox/model.ts";
import { KeyTaken, recordIntent } from "../../shared/outbox/record.ts";
import { handleSlackRequest } from "../../workers/ingress/ack.ts";
import { ingressDeps } from "../support/ingress.ts";
import { allRows, insertRow, resetTables, tally } from "../support/rows.ts";
import { eventRequest, NOW, uniqueId } from "../support/slack-requests.ts";

beforeEach(() => resetTables(env.DB));

const effect = (key: string) => ({ key, effect: "chat.postMessage", payload: { channel: "C", text: key } });
const receipt = (id: string) => ({ id, kind: "interaction" as const, type: "block_suggestion", teamId: "T0TEAM" });

describe("idempotency keys cannot collide across inputs (issue 26, defect 6)", () => {
  it("a receipt and key that both contain ':' are two rows, not one absorbed into the other", async () => {
    const first = await recordIntent(env.DB, receipt("X:foo"), [effect("k:z")], NOW, 60_000);
    const second = await recordIntent(env.DB, receipt("X:foo:k"), [effect("z")], NOW, 60_000);
    expect(first).toMatchObject({ firstDelivery: true, outboxIds: [expect.any(Number)] });
    expect(second).toMatchObject({ firstDelivery: true, outboxIds: [expect.any(Number)] });
    const rows = await allRows(env.DB);
    expect(rows.map((r) => [r.receipt_id, r.idempotency_key])).toEqual([
      ["X:foo", "X:foo:k%3Az"],
      ["X:foo:k", "X:foo:k:z"],
    ]);
  });

  it("keys of effect keys without ':' are written as they always were (rows already recorded keep deduping)", () => {
    expect(idempotencyKey("Ev1", "reply")).toBe("Ev1:reply");
    expect(idempotencyKey("command:T0TEAM:1.2", "result")).toBe("command:T0TEAM:1.2:result");
  });

  it("a follow-up's key is never an input's: a typed id 'v:k>x' with key 'y' is not the follow-up 'x:y' of the row 'v:k'", () => {
    const parent = idempotencyKey("v", "k");
    expect(followUpKey(parent, "x:y")).not.toBe(idempotencyKey("v:k>x", "y"));
    expect(followUpKey(parent, "x:y")).toBe("v:k>x%3Ay");
    // Without ":" as it always was.
    expect(followUpKey(parent, "update")).toBe("v:k>update");
  });

  it("a first delivery whose key is already another input's row is refused whole: no receipt, no row", async () => {
    // A row written under the old, ambiguous format by receipt "X:foo" with key "k:z".
    await insertRow(env.DB, { key: "X:foo:k:z", status: "done" });
    await env.DB.prepare("UPDATE outbox SET receipt_id = 'X:foo'").run();
    const refused = recordIntent(env.DB, receipt("X:foo:k"), [effect("z"), effect("other")], NOW, 60_000);
    await expect(refused).rejects.toBeInstanceOf(KeyTaken);
    await expect(refused).rejects.toThrow(/X:foo:k:z.*already another input's row; nothing was written/);
    expect(await tally(env.DB)).toEqual({ receipts: 0, outbox: 1, attempts: 0 });
  });

  it("two intents of one input with one key are refused before anything is written", async () => {
    await expect(recordIntent(env.DB, receipt("Y"), [effect("a"), effect("a")], NOW, 60_000)).rejects.toBeInstanceOf(KeyTaken);
    expect(await tally(env.DB)).toEqual({ receipts: 0, outbox: 0, attempts: 0 });
  });

  it("the ack answers 500 for a colliding key, acks nothing and says why, and Slack's retry is refused the same way", async () => {
    const eventId = uniqueId("Ev");
    await insertRow(env.DB, { key: `${eventId}:reply`, status: "done" });
    // The row above is another receipt's: its receipt_id is the key's prefix, but no receipt of this event exists.
    await env.DB.prepare("UPDATE outbox SET receipt_id = 'EvSomeoneElse'").run();
    const app = createApp()
      .uses("chat.postMessage")
      .event("app_home_opened", () => [slack("chat.postMessage", { channel: "C", text: "x" }, { key: "reply" })]);
    for (const retryNum of [undefined, 1]) {
      const harness = ingressDeps({ app });
      // An event with no natural identity: its rows are keyed by its event_id (shared/slack/facts.ts).
      const request = await eventRequest(
        { type: "app_home_opened", user: "U0HUMAN", tab: "home" },
        { eventId, ...(retryNum ? { retryNum } : {}) },
      );
      const response = await handleSlackRequest(request, harness.deps, NOW);
      await harness.settled();
      expect(response.status).toBe(500);
      const line = harness.log.records.find((r) => r.msg === "slack request");
      expect(line?.fields).toMatchObject({ verdict: "not_recorded", reason: expect.stringMatching(/^KeyTaken: refused/) });
    }
    expect(await tally(env.DB)).toEqual({ receipts: 0, outbox: 1, attempts: 0 });
  });
});
