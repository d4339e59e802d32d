/**
 * Named rows and cancel(name) at the ack (shared/outbox/record.ts, shared/outbox/cancel-named.ts): a row the
 * app names is one per workspace, whichever input records it; a cancel, in the ack's one batch, ends it only
 * while it is pending and never attempted, says what it found in the ack's log line and the asking input's
 * audit trail, and is harmless twice.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { createApp } from "../../shared/app/app.ts";
import { cancel, checkIntents, MAX_CANCELS, slack } from "../../shared/app/intents.ts";
import { claimRows } from "../../shared/outbox/claim.ts";
import { namedKey } from "../../shared/outbox/model.ts";
import { recordIntent } from "../../shared/outbox/record.ts";
import { handleSlackRequest } from "../../workers/ingress/ack.ts";
import { ingressDeps } from "../support/ingress.ts";
import { adminDeps, callAdmin } from "../support/ops.ts";
import { allRows, insertRow, readRow, resetTables, tally } from "../support/rows.ts";
import {
  blockActions,
  commandForm,
  eventEnvelope,
  FORM,
  interactionForm,
  JSON_TYPE,
  NOW,
  signed,
  uniqueId,
} from "../support/slack-requests.ts";

beforeEach(async () => {
  await resetTables(env.DB);
  await env.DB.prepare("DELETE FROM outbox_cancels").run();
});

/** /remind names its post by the command's text; a click on "done:<name>" cancels it. */
const app = createApp()
  .uses("chat.postMessage")
  .command("/remind", ({ payload }) => ({
    ack: { text: "ok" },
    intents: [slack("chat.postMessage", { channel: payload.channelId, text: payload.text }, { name: `remind:${payload.text}` })],
  }))
  .action(/^done:/, ({ payload }) => [cancel(payload.action_id.slice("done:".length))])
  .event("app_home_opened", () => [slack("chat.postMessage", { channel: "C1", text: "x" }, { name: "home" })]);

async function send(body: string, contentType = FORM) {
  const harness = ingressDeps({ app });
  const response = await handleSlackRequest(await signed(body, contentType), harness.deps, NOW);
  await harness.settled();
  return { status: response.status, line: harness.log.records.find((r) => r.msg === "slack request")?.fields ?? {} };
}
const remind = (text: string, over: Record<string, string> = {}) => send(commandForm({ command: "/remind", text, ...over }));
const done = (name: string, over: Record<string, unknown> = {}) =>
  send(interactionForm(blockActions({ actions: [{ action_id: `done:${name}`, block_id: "b", type: "button" }], ...over })));
const cancelsOf = async () =>
  (
    await env.DB.prepare(
      "SELECT receipt_id, by_row, name, outcome, outbox_id, row_status FROM outbox_cancels ORDER BY at, receipt_id",
    ).all()
  ).results;

describe("a named row is one per workspace, whichever input names it", () => {
  it("the same name from two inputs is one row, and the second input is accepted, not refused", async () => {
    const first = await remind("stretch");
    const second = await remind("stretch");
    expect([first.status, second.status]).toEqual([200, 200]);
    expect([first.line.verdict, second.line.verdict]).toEqual(["accepted", "accepted"]);
    expect(second.line).toMatchObject({ outbox_ids: [], repeated: 1 });
    const rows = await allRows(env.DB);
    expect(rows.map((r) => r.idempotency_key)).toEqual([namedKey("T0TEAM", "remind:stretch")]);
    // Both inputs have their receipt: the second one's is a repeat of the name, not a duplicate delivery.
    expect(await tally(env.DB)).toEqual({ receipts: 2, outbox: 1, attempts: 0 });
  });

  it("the key is name:<team>:<name>, the name's ':' escaped as an input's effect key's is", () => {
    expect(namedKey("T0TEAM", "remind:U1:1764504000.000100")).toBe("name:T0TEAM:remind%3AU1%3A1764504000.000100");
  });

  it("names of two workspaces on one shard never collide: two rows", async () => {
    await remind("stretch", { team_id: "T0AAA" });
    await remind("stretch", { team_id: "T0BBB" });
    expect((await allRows(env.DB)).map((r) => [r.team_id, r.idempotency_key])).toEqual([
      ["T0AAA", "name:T0AAA:remind%3Astretch"],
      ["T0BBB", "name:T0BBB:remind%3Astretch"],
    ]);
  });

  it("an input without a team cannot name rows: 500, refused with the reason, nothing written", async () => {
    const envelope = eventEnvelope({ type: "app_home_opened", user: "U0HUMAN", tab: "home" });
    delete envelope.team_id;
    const { status, line } = await send(JSON.stringify(envelope), JSON_TYPE);
    expect(status).toBe(500);
    expect(line).toMatchObject({ verdict: "refused", reason: expect.stringContaining("the input has no team (names are per workspace)") });
    expect(await tally(env.DB)).toEqual({ receipts: 0, outbox: 0, attempts: 0 });
  });

  it("a name that is not well formed, or named twice in one input, or both named and cancelled, is refused with why", () => {
    const checks = { isAppEffect: () => false, usesMethod: () => true };
    const post = (name: string, key = "a") => slack("chat.postMessage", { channel: "C", text: "t" }, { name, key });
    expect(checkIntents([post("has space")], checks)).toMatchObject({ ok: false, reason: expect.stringContaining("name must match") });
    expect(checkIntents([post("x".repeat(129))], checks)).toMatchObject({ ok: false, reason: expect.stringContaining("name must match") });
    expect(checkIntents([post("50%")], checks)).toMatchObject({ ok: false });
    expect(checkIntents([post("n"), post("n", "b")], checks)).toMatchObject({
      ok: false,
      reason: expect.stringContaining("two intents name"),
    });
    expect(checkIntents([post("n"), cancel("n")], checks)).toMatchObject({ ok: false, reason: expect.stringContaining("also name") });
    expect(checkIntents([cancel("n"), cancel("n")], checks)).toMatchObject({ ok: false, reason: expect.stringContaining("twice") });
    expect(checkIntents([cancel("a b")], checks)).toMatchObject({ ok: false, reason: expect.stringContaining("a name must match") });
    expect(checkIntents([post("x".repeat(128)), cancel("m")], checks)).toMatchObject({ ok: true, cancels: ["m"] });
  });

  it(`at most ${MAX_CANCELS} cancels in one input or completion (each is three statements of its batch): one more is refused with why`, () => {
    const checks = { isAppEffect: () => false, usesMethod: () => true };
    const cancels = (n: number) => Array.from({ length: n }, (_, i) => cancel(`remind:U${i}`));
    expect(checkIntents(cancels(MAX_CANCELS), checks)).toMatchObject({ ok: true, cancels: cancels(MAX_CANCELS).map((c) => c.cancel) });
    expect(checkIntents(cancels(MAX_CANCELS + 1), checks)).toMatchObject({
      ok: false,
      reason: expect.stringContaining(`more than ${MAX_CANCELS} cancels`),
    });
  });
});

describe("cancel(name) at the ack", () => {
  it("ends a pending, never attempted row as cancelled: done, cancelled_by the asking input, said in the log and the trail", async () => {
    await remind("stretch");
    const { status, line } = await done("remind:stretch");
    expect(status).toBe(200);
    expect(line).toMatchObject({ verdict: "accepted", cancels: ["remind:stretch: cancelled"] });
    const [row] = await allRows(env.DB);
    expect(row).toMatchObject({ status: "done", sweep_at: null, completed_at: NOW, attempts: 0 });
    const receipt = String(line.id);
    expect((row as unknown as { cancelled_by: string }).cancelled_by).toBe(receipt);
    expect(await cancelsOf()).toEqual([
      { receipt_id: receipt, by_row: 0, name: "remind:stretch", outcome: "cancelled", outbox_id: row?.id, row_status: "pending" },
    ]);
    // Its payload is due for scrubbing now: no replay will need it.
    expect((await env.DB.prepare("SELECT due_at, outbox_id FROM outbox_scrub_due").all()).results).toEqual([
      { due_at: NOW, outbox_id: row?.id },
    ]);

    // The asking input's trail says what its cancel found; the cancelled row's says it is cancelled, by whom.
    const ops = adminDeps();
    const get = async (id: string) => (await callAdmin(ops.deps, `/admin/events/${encodeURIComponent(id)}`, NOW)).body;
    const asked = await get(receipt);
    expect(asked).toMatchObject({ complete: true, rows: [], cancels: [{ name: "remind:stretch", byRow: null, outcome: "cancelled" }] });
    const recorded = await get(String(row?.receipt_id));
    expect(recorded).toMatchObject({
      complete: true,
      rows: [{ status: "cancelled", name: "remind:stretch", cancelledBy: receipt, key: "name:T0TEAM:remind%3Astretch" }],
    });
  });

  it("is too late for a row already done, claimed, attempted or dead: each left exactly as it was", async () => {
    const states = [
      { name: "d", status: "done" as const },
      { name: "l", status: "leased" as const, claimExpiresAt: NOW + 60_000 },
      { name: "a", status: "pending" as const, attempts: 1 },
      { name: "x", status: "dead" as const },
    ];
    const ids: number[] = [];
    for (const s of states) ids.push(await insertRow(env.DB, { key: namedKey("T0TEAM", s.name), ...s, createdAt: NOW - 1000 }));
    const before = await allRows(env.DB);
    for (const s of states) {
      const { line } = await done(s.name);
      expect(line.cancels).toEqual([`${s.name}: too_late (${s.status})`]);
    }
    expect(await allRows(env.DB)).toEqual(before);
    expect((await cancelsOf()).map((c) => [c.name, c.outcome, c.outbox_id])).toEqual(states.map((s, i) => [s.name, "too_late", ids[i]]));
  });

  it("a name no row has is nothing to cancel: accepted, not an error, nothing else written", async () => {
    const { status, line } = await done("never");
    expect([status, line.verdict, line.cancels]).toEqual([200, "accepted", ["never: nothing_to_cancel"]]);
    expect(await tally(env.DB)).toEqual({ receipts: 1, outbox: 0, attempts: 0 });
  });

  it("a duplicate delivery of the same cancel is a duplicate; a second click is 'already cancelled': harmless both", async () => {
    await remind("stretch");
    const trigger = uniqueId("trg.");
    const first = await done("remind:stretch", { trigger_id: trigger });
    const before = await allRows(env.DB);
    const redelivered = await done("remind:stretch", { trigger_id: trigger });
    expect(redelivered.line).toMatchObject({ verdict: "duplicate" });
    const again = await done("remind:stretch");
    expect(again.line).toMatchObject({ verdict: "accepted", cancels: ["remind:stretch: already_cancelled"] });
    expect(await allRows(env.DB)).toEqual(before);
    expect((await cancelsOf()).map((c) => c.outcome)).toEqual(["cancelled", "already_cancelled"]);
    expect(first.line.cancels).toEqual(["remind:stretch: cancelled"]);
  });

  it("a click that found nothing to cancel, redelivered after another input recorded the row, cancels nothing: the row stays pending", async () => {
    // The receipt guard (cancel-named.ts): only the delivery that won the input's receipt runs its cancels.
    const trigger = uniqueId("trg.");
    const first = await done("remind:stretch", { trigger_id: trigger });
    expect(first.line).toMatchObject({ verdict: "accepted", cancels: ["remind:stretch: nothing_to_cancel"] });
    // The row is recorded afterwards, by another input.
    await remind("stretch");
    const [row] = await allRows(env.DB);
    expect(row).toMatchObject({ status: "pending", cancelled_by: null });

    // Slack sends the same click again (the same delivery: a retry). It is the click's duplicate, and its cancel
    // must not reach a row that did not exist when the click was answered.
    const redelivered = await done("remind:stretch", { trigger_id: trigger });
    expect(redelivered.line).toMatchObject({ verdict: "duplicate" });
    expect(await readRow(env.DB, row?.id as number)).toEqual(row);
    expect((await cancelsOf()).map((c) => [c.name, c.outcome])).toEqual([["remind:stretch", "nothing_to_cancel"]]);
  });

  it("racing claims of the row, the cancel and the claims never both win: cancelled and unclaimed, or claimed and too late", async () => {
    const outcomes = new Set<string>();
    for (let round = 0; round < 12; round++) {
      await resetTables(env.DB);
      const id = await insertRow(env.DB, { key: namedKey("T0TEAM", `race${round}`), status: "pending", createdAt: NOW - 1000 });
      const receipt = { id: `interaction:T0TEAM:race${round}`, kind: "interaction" as const, type: "block_actions", teamId: "T0TEAM" };
      // Issued together, the cancel first in even rounds and last in odd ones.
      const cancelling = () => recordIntent(env.DB, receipt, [], NOW, 60_000, undefined, undefined, { cancels: [`race${round}`] });
      const claiming = Array.from({ length: 4 }, (_, i) => () => claimRows(env.DB, [id], `claimer-${round}-${i}`, NOW, 60_000));
      const started = round % 2 === 0 ? [cancelling(), ...claiming.map((c) => c())] : [...claiming.map((c) => c()), cancelling()];
      const settled = await Promise.all(started);
      const recorded = (round % 2 === 0 ? settled[0] : settled.at(-1)) as Awaited<ReturnType<typeof recordIntent>>;
      const claimed = settled.filter((r): r is Awaited<ReturnType<typeof claimRows>> => Array.isArray(r)).flat();
      const verdict = recorded.firstDelivery ? recorded.cancels[0]?.outcome : undefined;
      const row = await readRow(env.DB, id);
      if (verdict === "cancelled") {
        expect(claimed).toEqual([]);
        expect(row.status).toBe("done");
      } else {
        expect(verdict).toBe("too_late");
        expect(claimed).toHaveLength(1);
        expect(row).toMatchObject({ status: "leased", claim_token: claimed[0]?.claimToken });
      }
      outcomes.add(String(verdict));
    }
    // Which one wins a round is the database's to decide; that the two never both win is the test. Both won some.
    expect([...outcomes].sort()).toEqual(["cancelled", "too_late"]);
  });
});
