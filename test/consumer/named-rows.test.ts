/**
 * Named rows and cancel(name) as an effect's follow-ups, through the consumer's real claim → perform → fenced
 * finish over local D1: a named follow-up is the workspace's one row of that name (a repeat records nothing,
 * and the completion is not refused), and a cancel rides in the completion's fenced batch — a completion the
 * fence rejects cancels nothing.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { createApp } from "../../shared/app/app.ts";
import { defineEffect, followUps } from "../../shared/app/effects.ts";
import { cancel, slack } from "../../shared/app/intents.ts";
import { deliverBatch } from "../../shared/delivery/deliver.ts";
import { measureBacklog } from "../../shared/ops/backlog.ts";
import { claimRows } from "../../shared/outbox/claim.ts";
import { finishClaim } from "../../shared/outbox/fence.ts";
import { namedKey } from "../../shared/outbox/model.ts";
import { scrubDueRows } from "../../shared/outbox/scrub.ts";
import { deliveryDeps } from "../support/consumer.ts";
import { useFakeSlack } from "../support/fake-slack.ts";
import { allRows, insertRow, readRow, recordingQueue, resetTables } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";

const slackFake = useFakeSlack();
beforeEach(() => resetTables(env.DB));

/** Posts, then names the reminder it asks for after the post. */
const post = defineEffect<{ name: string }>("post-then-name", async (args) =>
  followUps({ posted: true }, [slack("chat.postMessage", { channel: "C1", text: "later" }, { name: args.name })]),
);
/** Acknowledges: cancels the named row. */
const ack = defineEffect<{ name: string }>("ack-it", async (args) => followUps(null, [cancel(args.name)]));
const app = createApp().uses("chat.postMessage").effect(post).effect(ack);

function deps() {
  const queue = recordingQueue();
  return { ...deliveryDeps(NOW, { effects: app.effects, queue }), queue };
}
const cancelsOf = async () =>
  (await env.DB.prepare("SELECT receipt_id, by_row, name, outcome, outbox_id FROM outbox_cancels").all()).results;

describe("a named follow-up", () => {
  it("is keyed by its name and the row's team, and enqueued like any follow-up", async () => {
    const id = await insertRow(env.DB, { status: "pending", effect: "post-then-name", payload: { name: "n1" }, key: "Ev1:post" });
    const { deps: d, queue } = deps();
    await deliverBatch(d, [id]);
    const rows = await allRows(env.DB);
    expect(rows.map((r) => [r.idempotency_key, r.status])).toEqual([
      ["Ev1:post", "done"],
      [namedKey("T0TEAM", "n1"), "pending"],
    ]);
    expect(queue.sent).toEqual([rows[1]?.id]);
  });

  it("of a name an input already recorded is a repeat: nothing inserted, and the completion is not refused", async () => {
    const existing = await insertRow(env.DB, { status: "pending", key: namedKey("T0TEAM", "n2"), effect: "chat.postMessage" });
    const before = await readRow(env.DB, existing);
    const id = await insertRow(env.DB, { status: "pending", effect: "post-then-name", payload: { name: "n2" }, key: "Ev2:post" });
    await deliverBatch(deps().deps, [id]);
    expect((await readRow(env.DB, id)).status).toBe("done");
    expect(await allRows(env.DB)).toHaveLength(2);
    expect(await readRow(env.DB, existing)).toEqual(before);
  });

  it("of a row with no team parks the row with the reason (the effect was performed), recording nothing", async () => {
    const id = await insertRow(env.DB, { status: "pending", effect: "post-then-name", payload: { name: "n3" }, teamId: null });
    await deliverBatch(deps().deps, [id]);
    expect(await readRow(env.DB, id)).toMatchObject({
      status: "dead",
      last_error: expect.stringContaining("this row has no team (names are per workspace"),
    });
    expect(await allRows(env.DB)).toHaveLength(1);
  });
});

describe("a cancel as a follow-up", () => {
  it("rides in the completion's batch: the named row is cancelled by the row's input, and the verdict names the row", async () => {
    const named = await insertRow(env.DB, { status: "pending", key: namedKey("T0TEAM", "esc"), effect: "chat.postMessage" });
    const id = await insertRow(env.DB, { status: "pending", effect: "ack-it", payload: { name: "esc" }, key: "EvA:ack" });
    const { deps: d, log } = deps();
    await deliverBatch(d, [id]);
    expect(await readRow(env.DB, named)).toMatchObject({ status: "done", cancelled_by: "EvA" });
    expect(await cancelsOf()).toEqual([{ receipt_id: "EvA", by_row: id, name: "esc", outcome: "cancelled", outbox_id: named }]);
    expect(log.records.find((r) => r.msg === "delivered")?.fields).toMatchObject({ cancels: ["esc: cancelled"] });
  });

  it("cancels nothing when the fence rejects the completion, and a re-run of the accepted one keeps its verdict", async () => {
    const named = await insertRow(env.DB, { status: "pending", key: namedKey("T0TEAM", "esc2"), effect: "chat.postMessage" });
    const id = await insertRow(env.DB, { status: "pending", effect: "ack-it", payload: {}, key: "EvB:ack" });
    const [stale] = await claimRows(env.DB, [id], "stale", NOW, 1_000);
    const [current] = await claimRows(env.DB, [id], "current", NOW + 2_000, 60_000);
    if (!stale || !current) throw new Error("claims failed");
    const lost = await finishClaim(env.DB, stale, { kind: "done", result: null, cancels: ["esc2"] }, NOW + 3_000, 60_000, NOW);
    expect(lost).toMatchObject({ applied: false });
    expect((await readRow(env.DB, named)).status).toBe("pending");
    expect(await cancelsOf()).toEqual([]);

    const won = await finishClaim(env.DB, current, { kind: "done", result: null, cancels: ["esc2"] }, NOW + 4_000, 60_000, NOW);
    expect(won).toMatchObject({ applied: true, cancels: [{ name: "esc2", outcome: "cancelled", rowId: named }] });
    const rerun = await finishClaim(env.DB, current, { kind: "done", result: null, cancels: ["esc2"] }, NOW + 4_000, 60_000, NOW);
    expect(rerun).toMatchObject({ applied: true, cancels: [] });
    expect((await cancelsOf()).map((c) => c.outcome)).toEqual(["cancelled"]);
    expect(slackFake.current.calls).toEqual([]);
  });

  it("is too late for a row already claimed: the named row keeps its lease", async () => {
    const named = await insertRow(env.DB, { status: "leased", key: namedKey("T0TEAM", "esc3"), claimExpiresAt: NOW + 60_000 });
    const before = await readRow(env.DB, named);
    const id = await insertRow(env.DB, { status: "pending", effect: "ack-it", payload: { name: "esc3" }, key: "EvC:ack" });
    await deliverBatch(deps().deps, [id]);
    expect(await readRow(env.DB, named)).toEqual(before);
    expect((await cancelsOf()).map((c) => c.outcome)).toEqual(["too_late"]);
  });
});

describe("a cancelled row, after", () => {
  it("is not performed work in the backlog's window (nor a failure), and the next scrub drops its response_url", async () => {
    const url = "https://hooks.slack.com/commands/T0TEAM/1/secret-path";
    const named = await insertRow(env.DB, {
      status: "pending",
      key: namedKey("T0TEAM", "later"),
      effect: "response_url",
      payload: { url, body: { text: "later" } },
      expiresAt: NOW + 30 * 60_000,
      createdAt: NOW - 1000,
    });
    await insertRow(env.DB, { status: "done", createdAt: NOW - 2000, completedAt: NOW - 500 });
    const id = await insertRow(env.DB, { status: "pending", effect: "ack-it", payload: { name: "later" }, key: "EvD:ack" });
    await deliverBatch(deps().deps, [id]);
    expect((await readRow(env.DB, named)).cancelled_by).toBe("EvD");

    // Performed in the window: the ack-it row and the done row; the cancelled one is neither done nor failed.
    const figures = await measureBacklog(env.DB, NOW + 1000, { windowsMs: [60_000], cap: 100 });
    expect(figures.windows[0]).toMatchObject({ done: 2, failed: 0, parkedDead: 0 });

    expect(await scrubDueRows(env.DB, NOW + 1000)).toBe(1);
    const payload = JSON.parse((await readRow(env.DB, named)).payload) as { url: string };
    expect(payload.url).toMatch(/^\[redacted https:\/\/hooks\.slack\.com #[0-9a-f]{8}\]$/);
  });
});
