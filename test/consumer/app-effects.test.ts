/**
 * Effects of an app's own (defineEffect) and follow-ups, through the
 * consumer's real claim → perform → fenced finish over local D1, with the
 * other service and Slack faked at the network edge.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { createApp } from "../../shared/app/app.ts";
import { defineEffect, followUps } from "../../shared/app/effects.ts";
import { run, slack } from "../../shared/app/intents.ts";
import { deliverBatch } from "../../shared/delivery/deliver.ts";
import { fatal, transient } from "../../shared/delivery/failure.ts";
import { completed, type EffectDefinition } from "../../shared/effects/effect.ts";
import { networkEdge } from "../../shared/effects/outbound.ts";
import { effectRegistry } from "../../shared/effects/registry.ts";
import { auditTrail } from "../../shared/ops/audit.ts";
import { claimRows } from "../../shared/outbox/claim.ts";
import { finishClaim } from "../../shared/outbox/fence.ts";
import { followUpKey, idempotencyKey, MAX_FOLLOW_UP_DEPTH } from "../../shared/outbox/model.ts";
import { slackWebApi } from "../../shared/slack/web-api.ts";
import { deliveryDeps } from "../support/consumer.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { allRows, insertRow, maybePerformedOf, readRow, recordingQueue, resetTables } from "../support/rows.ts";
import { TEST_BOT_TOKEN, TEST_SLACK_API_URL } from "../support/settings.ts";
import { NOW } from "../support/slack-requests.ts";

const slackFake = useFakeSlack();
beforeEach(() => resetTables(env.DB));

const SERVICE = "https://service.test/answer";
const LEASE = 300_000;

/** Asks the service with the row's idempotency key; then updates the message with the answer. */
const ask = defineEffect<{ channel: string; ts: string }>(
  "ask",
  async (args, ctx) => {
    const response = await ctx.fetch(SERVICE, { method: "POST", headers: { "idempotency-key": ctx.idempotencyKey }, body: "{}" });
    if (response.status === 400) throw new Error("the service refused the question");
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const { answer } = (await response.json()) as { answer: string };
    return followUps({ answer, attempt: ctx.attempt }, [slack("chat.update", { channel: args.channel, ts: args.ts, text: answer })]);
  },
  { timeoutMs: 50, isFatal: (error) => error instanceof Error && error.message.includes("refused") },
);
/** Calls a Slack method it did not declare. */
const sneaky = defineEffect("sneaky", async (_, ctx) => ctx.slack.call("chat.delete", { channel: "C1", ts: "1.1" }));
/** Asks for itself, forever: the depth limit's case. */
const loop = defineEffect("loop", async () => followUps(null, [run({ name: "loop" }, {})]));
/** Names an effect nobody registered. */
const stray = defineEffect("stray", async () => followUps(null, [run({ name: "nowhere" }, {})]));

const app = createApp().uses("chat.update").effect(ask).effect(loop).effect(stray).effect(sneaky);
const askArgs = { channel: "C1", ts: "1764504000.000100" };

function deps(start = NOW) {
  const queue = recordingQueue();
  const harness = deliveryDeps(start, { effects: app.effects, queue });
  return { ...harness, queue };
}

describe("a custom effect", () => {
  it("succeeds: calls the service with the row's idempotency key and keeps its result", async () => {
    slackFake.current.script(SERVICE, reply.ok({ answer: "42" }));
    const id = await insertRow(env.DB, { status: "pending", effect: "ask", payload: askArgs, key: "Ev1:ask" });
    await deliverBatch(deps().deps, [id]);
    const row = await readRow(env.DB, id);
    expect(row).toMatchObject({ status: "done", result: JSON.stringify({ answer: "42", attempt: 1 }) });
    expect(slackFake.current.callsTo(SERVICE)[0]?.headers["idempotency-key"]).toBe("Ev1:ask");
  });

  it("keeps the idempotency key stable across attempts", async () => {
    slackFake.current.script(SERVICE, reply.status(503), reply.ok({ answer: "42" }));
    const id = await insertRow(env.DB, { status: "pending", effect: "ask", payload: askArgs, key: "Ev2:ask" });
    const { deps: d, clock } = deps();
    await deliverBatch(d, [id]);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "pending", last_error: "Error: HTTP 503" });
    clock.advance(3_600_000);
    await deliverBatch(d, [id]);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "done", attempts: 2 });
    expect(slackFake.current.callsTo(SERVICE).map((c) => c.headers["idempotency-key"])).toEqual(["Ev2:ask", "Ev2:ask"]);
  });

  it("parks at once on an error its isFatal option calls fatal", async () => {
    slackFake.current.script(SERVICE, reply.status(400));
    const id = await insertRow(env.DB, { status: "pending", effect: "ask", payload: askArgs });
    await deliverBatch(deps().deps, [id]);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "dead", attempts: 1, last_error: "ask: the service refused the question" });
  });

  it("times out at its own timeoutMs: the call is aborted, not left running, and the row retries", async () => {
    slackFake.current.script(SERVICE, reply.hang());
    const id = await insertRow(env.DB, { status: "pending", effect: "ask", payload: askArgs });
    await deliverBatch(deps().deps, [id]);
    const row = await readRow(env.DB, id);
    expect(row.status).toBe("pending");
    // Cut by the attempt's timer, which aborts as a timeout: the error says how long it was given.
    expect(row.last_error).toContain("no result within 50 ms");
    expect(slackFake.current.callsTo(SERVICE)[0]?.aborted()).toBe(true);
  });

  it("times out: a Slack call it makes through ctx.slack is aborted with the attempt, not left running past it", async () => {
    // Ignores its signal until the engine aborts it, then posts: that post must not outlive the attempt
    // (the row is retried at once; a post still in flight could land after the retry's: a duplicate).
    const late = defineEffect(
      "late",
      async (_, ctx) => {
        await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve));
        return ctx.slack.call("chat.postMessage", { channel: "C1", text: "late" });
      },
      { timeoutMs: 500, slackMethods: ["chat.postMessage"] },
    );
    // The post as the Slack client hands it to the network edge, waited for rather than looked for once the attempt
    // is over: made after the abort, it may reach the edge a moment later (and, its signal aborted already, the fake
    // refuses it unsent, as a real fetch does: it is never among the fake's calls).
    let handed: (request: Request) => void = () => {};
    const post = new Promise<Request>((resolve) => {
      handed = resolve;
    });
    const edge: typeof fetch = (input, init) => {
      const request = new Request(input, init);
      if (request.url === `${TEST_SLACK_API_URL}chat.postMessage`) handed(request);
      return networkEdge(request);
    };
    slackFake.current.always("chat.postMessage", reply.hang());
    const { deps: d } = deliveryDeps(NOW, { effects: createApp().uses("chat.postMessage").effect(late).effects });
    const id = await insertRow(env.DB, { status: "pending", effect: "late", payload: {} });
    await deliverBatch({ ...d, context: { ...d.context, slack: slackWebApi(TEST_BOT_TOKEN, TEST_SLACK_API_URL, edge), edge } }, [id]);
    expect((await readRow(env.DB, id)).status).toBe("pending");
    const { signal } = await post; // the late post was made: a check of no post would prove nothing
    // Ended by the attempt's abort (deliver.ts's reason), not by the call's own timer, which would end it 500 ms on.
    expect(signal.aborted).toBe(true);
    expect(String(signal.reason)).toContain("no result within 500 ms");
    expect(slackFake.current.callsTo("chat.postMessage").filter((call) => !call.aborted())).toEqual([]);
  });

  it("parks, without calling Slack, when it calls a Slack method its slackMethods option does not declare", async () => {
    const id = await insertRow(env.DB, { status: "pending", effect: "sneaky", payload: {} });
    await deliverBatch(deps().deps, [id]);
    expect(await readRow(env.DB, id)).toMatchObject({
      status: "dead",
      last_error: "sneaky: calls Slack method chat.delete, which its slackMethods option does not declare",
    });
    expect(slackFake.current.calls).toEqual([]);
    expect(await maybePerformedOf(env.DB, id)).toBe(0); // nothing was performed: a filter replay may take it
  });
});

describe("a custom effect's error text, whichever way it fails: scrubbed of the credentials it names", () => {
  const url = "https://hooks.slack.com/commands/T0TEAM/123/SeCrEtPaTh";
  const text = `could not post to ${url} with xoxb-1-2-leakedToken`;
  const redacted = "could not post to https://hooks.slack.com/[redacted] with [redacted token]";
  it.each([
    ["fatal(…)", () => fatal(text), {}, "dead", redacted],
    ["transient(…)", () => transient(text), {}, "pending", redacted],
    ["an error its isFatal option calls fatal", () => new Error(text), { isFatal: () => true }, "dead", `leaky: ${redacted}`],
  ] as const)(
    "%s reaches last_error, the attempt and the log line without the response_url or the token",
    async (_, thrown, options, status, stored) => {
      const leaky = defineEffect(
        "leaky",
        async () => {
          throw thrown();
        },
        options,
      );
      const { deps: d, log } = deliveryDeps(NOW, { effects: createApp().effect(leaky).effects });
      const id = await insertRow(env.DB, { status: "pending", effect: "leaky", payload: { url } });
      await deliverBatch(d, [id]);
      const row = await readRow(env.DB, id);
      expect(row).toMatchObject({ status, last_error: stored });
      const attempts = await env.DB.prepare("SELECT error FROM outbox_attempts WHERE outbox_id = ?").bind(id).all<{ error: string }>();
      expect(attempts.results.map((a) => a.error)).toEqual([stored]);
      expect(JSON.stringify(log.records)).not.toMatch(/SeCrEtPaTh|leakedToken/);
    },
  );
});

describe("a custom effect's error text", () => {
  it("reaches last_error, the attempt and the log line without the response_url or the token it named", async () => {
    const url = "https://hooks.slack.com/commands/T0TEAM/123/SeCrEtPaTh";
    const leaky = defineEffect<{ url: string }>("leaky", async (args) => {
      throw new Error(`could not post to ${args.url} with xoxb-1-2-leakedToken`);
    });
    const { deps: d, log } = deliveryDeps(NOW, { effects: createApp().effect(leaky).effects });
    const id = await insertRow(env.DB, { status: "pending", effect: "leaky", payload: { url } });
    await deliverBatch(d, [id]);
    const row = await readRow(env.DB, id);
    expect(row.last_error).toBe("Error: could not post to https://hooks.slack.com/[redacted] with [redacted token]");
    const attempts = await env.DB.prepare("SELECT error FROM outbox_attempts WHERE outbox_id = ?").bind(id).all<{ error: string }>();
    expect(attempts.results.map((a) => a.error)).toEqual([row.last_error]);
    const logged = JSON.stringify(log.records);
    expect(logged).toContain("hooks.slack.com/[redacted]");
    expect(logged).not.toMatch(/SeCrEtPaTh|leakedToken/);
  });
});

describe("follow-ups", () => {
  it("are recorded with the completion: keyed under the parent, depth + 1, using the parent's result, and enqueued", async () => {
    slackFake.current.script(SERVICE, reply.ok({ answer: "42" }));
    const id = await insertRow(env.DB, { status: "pending", effect: "ask", payload: askArgs, key: "Ev3:ask" });
    const { deps: d, queue } = deps();
    await deliverBatch(d, [id]);
    const child = (await allRows(env.DB)).find((r) => r.id !== id);
    expect(child).toMatchObject({ idempotency_key: "Ev3:ask>chat.update", receipt_id: "Ev3", effect: "chat.update", status: "pending" });
    expect(JSON.parse(child?.payload ?? "{}")).toEqual({ channel: "C1", ts: "1764504000.000100", text: "42" });
    const link = await env.DB.prepare("SELECT parent_id, depth FROM outbox WHERE id = ?").bind(child?.id).first();
    expect(link).toEqual({ parent_id: id, depth: 1 });
    expect(queue.sent).toEqual([child?.id]);
  });

  it("are not recorded when the fence rejects the completion", async () => {
    const id = await insertRow(env.DB, { status: "pending", effect: "ask", payload: askArgs });
    const [slow] = await claimRows(env.DB, [id], "slow-worker", NOW, LEASE);
    if (!slow) throw new Error("no claim");
    // The lease runs out; another worker claims the row before the slow one finishes.
    await claimRows(env.DB, [id], "second-worker", NOW + LEASE + 1, LEASE);
    const outcome = await finishClaim(
      env.DB,
      slow,
      { kind: "done", result: {}, followUps: [{ key: "next", effect: "chat.update", payload: askArgs }] },
      NOW + LEASE + 2,
      60_000,
      NOW,
    );
    expect(outcome).toEqual({ applied: false, followUpIds: [] });
    expect(await allRows(env.DB)).toHaveLength(1);
  });

  it("are recorded once when the completion is written twice (a retried write) or the effect repeats after a crash", async () => {
    const id = await insertRow(env.DB, { status: "pending", effect: "ask", payload: askArgs });
    const followUp = [{ key: "next", effect: "chat.update", payload: askArgs }];
    // Worker A performs, then dies before its completion: its lease expires.
    await claimRows(env.DB, [id], "worker-a", NOW, LEASE);
    // Worker B re-claims, performs again (the allowed duplicate) and completes; its write is retried.
    const [b] = await claimRows(env.DB, [id], "worker-b", NOW + LEASE + 1, LEASE);
    if (!b) throw new Error("no claim");
    const first = await finishClaim(env.DB, b, { kind: "done", result: {}, followUps: followUp }, NOW + LEASE + 2, 60_000, NOW);
    const again = await finishClaim(env.DB, b, { kind: "done", result: {}, followUps: followUp }, NOW + LEASE + 3, 60_000, NOW);
    expect(first.followUpIds).toHaveLength(1);
    expect(again).toEqual({ applied: true, followUpIds: [] });
    expect((await allRows(env.DB)).filter((r) => r.id !== id)).toHaveLength(1);
  });

  it(`stop at depth ${MAX_FOLLOW_UP_DEPTH}: the row that asks for more is parked and records nothing`, async () => {
    const below = await insertRow(env.DB, { status: "pending", effect: "loop", payload: {}, key: "Ev5:loop" });
    await env.DB.prepare("UPDATE outbox SET depth = ? WHERE id = ?")
      .bind(MAX_FOLLOW_UP_DEPTH - 1, below)
      .run();
    const { deps: d, queue } = deps();
    await deliverBatch(d, [below]);
    const [child] = queue.sent;
    expect(await readRow(env.DB, below)).toMatchObject({ status: "done" });
    expect(await env.DB.prepare("SELECT depth FROM outbox WHERE id = ?").bind(child).first("depth")).toBe(MAX_FOLLOW_UP_DEPTH);
    await deliverBatch(d, [child ?? 0]);
    expect(await readRow(env.DB, child ?? 0)).toMatchObject({
      status: "dead",
      last_error: expect.stringContaining(`depth limit ${MAX_FOLLOW_UP_DEPTH}`),
    });
    expect(await allRows(env.DB)).toHaveLength(2);
  });

  it("naming an unregistered effect park the parent with the reason, and record nothing", async () => {
    const id = await insertRow(env.DB, { status: "pending", effect: "stray", payload: {} });
    await deliverBatch(deps().deps, [id]);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "dead", last_error: expect.stringContaining('no effect named "nowhere"') });
    expect(await maybePerformedOf(env.DB, id)).toBe(1); // the effect ran: a filter replay leaves it out
    expect(await allRows(env.DB)).toHaveLength(1);
  });
});

describe("follow-up keys: escaped in one place, and never a completion with one missing", () => {
  /** Performs, then asks for one follow-up with `key`. */
  const asking = (key: string): EffectDefinition => ({
    name: "test.ask",
    idempotentByShape: false,
    perform: async () => completed({ ok: true }, [{ key, effect: "chat.update", payload: { channel: "C1", ts: "1.1", text: key } }]),
  });
  const run = (key: string, ids: number[]) =>
    deliverBatch(deliveryDeps(NOW, { effects: effectRegistry([asking(key)]), queue: recordingQueue() }).deps, ids);

  it("a follow-up's key is written escaped (followUpKey): the follow-up 'x:y' of 'v:k' is not the input row 'v:k>x' + 'y'", async () => {
    // An input whose id a user typed (a block_suggestion's value): its row's key is "v:k>x:y".
    const input = await insertRow(env.DB, { status: "done", key: idempotencyKey("v:k>x", "y") });
    const parent = await insertRow(env.DB, { status: "pending", effect: "test.ask", payload: {}, key: idempotencyKey("v", "k") });
    await run("x:y", [parent]);
    expect(await readRow(env.DB, parent)).toMatchObject({ status: "done" });
    const child = (await allRows(env.DB)).find((r) => r.id !== input && r.id !== parent);
    expect(child).toMatchObject({ idempotency_key: followUpKey("v:k", "x:y"), status: "pending" });
    expect(child?.idempotency_key).toBe("v:k>x%3Ay");
  });

  it("a completion whose follow-up key another row holds is refused whole: the row is parked, marked maybe_performed, not completed with its follow-up missing", async () => {
    const parentKey = idempotencyKey("EvTAKEN", "ask");
    // Another row (no parent) already holds the key the follow-up would take.
    const holder = await insertRow(env.DB, { status: "done", key: followUpKey(parentKey, "next") });
    const before = await readRow(env.DB, holder);
    const parent = await insertRow(env.DB, { status: "pending", effect: "test.ask", payload: {}, key: parentKey });
    const { deps: d, log } = deliveryDeps(NOW, { effects: effectRegistry([asking("next")]), queue: recordingQueue() });
    await deliverBatch(d, [parent]);
    const parked = await readRow(env.DB, parent);
    expect(parked).toMatchObject({ status: "dead", maybe_performed: 1 });
    expect(parked.last_error).toBe(
      `follow-ups refused: a key of ${parentKey}'s follow-ups (${parentKey}>next) is already another row's; nothing was written (the effect was performed)`,
    );
    expect(await allRows(env.DB)).toHaveLength(2);
    expect(await readRow(env.DB, holder)).toEqual(before);
    expect(log.records.some((r) => r.msg === "follow-up key taken by another row; parked")).toBe(true);
  });

  it("a completion re-run under the same claim finds its own follow-up there: applied, nothing inserted, nothing refused", async () => {
    const parent = await insertRow(env.DB, { status: "pending", effect: "test.ask", payload: {}, key: idempotencyKey("EvRERUN", "ask") });
    const [claimed] = await claimRows(env.DB, [parent], "the-claim", NOW, LEASE);
    if (!claimed) throw new Error("no claim");
    const done = { kind: "done" as const, result: {}, followUps: [{ key: "next", effect: "chat.update", payload: {} }] };
    const first = await finishClaim(env.DB, claimed, done, NOW + 1, 60_000, NOW);
    const again = await finishClaim(env.DB, claimed, done, NOW + 2, 60_000, NOW);
    expect(first).toMatchObject({ applied: true, followUpIds: [expect.any(Number)] });
    expect(again).toEqual({ applied: true, followUpIds: [] });
    expect(await allRows(env.DB)).toHaveLength(2);
  });

  it("a follow-up carries its parent's fact: `events show <fact>` lists the chain (a message's, a mention's, a reaction's)", async () => {
    const fact = "app_mention:T0TEAM:C0WATCHED:1764504000.000100";
    const parent = await insertRow(env.DB, { status: "pending", effect: "test.ask", payload: {}, key: idempotencyKey(fact, "ask") });
    await env.DB.prepare("UPDATE outbox SET fact = ?1, receipt_id = 'EvFACT' WHERE id = ?2").bind(fact, parent).run();
    await run("next", [parent]);
    const trail = await auditTrail(env.DB, fact);
    expect(trail?.rows.map((r) => ({ key: r.key, parentId: r.parentId }))).toEqual([
      { key: `${fact}:ask`, parentId: null },
      { key: `${fact}:ask>next`, parentId: parent },
    ]);
  });

  it("migration 0017: a follow-up written before without its fact gets its chain's, so the trail finds it", async () => {
    const fact = "message:T0TEAM:C0WATCHED:1764504000.000200";
    const root = await insertRow(env.DB, { status: "done", key: idempotencyKey(fact, "eyes") });
    const child = await insertRow(env.DB, { status: "done", key: `${fact}:eyes>update` });
    const grandchild = await insertRow(env.DB, { status: "pending", key: `${fact}:eyes>update>again` });
    // A receipt-keyed chain (no fact): left as it is, found by its receipt id already.
    const byReceipt = await insertRow(env.DB, { status: "done", key: "EvPLAIN:ask>next" });
    // Recorded by the event EvMSG, as the ingress records a message: the receipt's id is not the fact.
    await env.DB.prepare("UPDATE outbox SET receipt_id = 'EvMSG' WHERE id IN (?1, ?2, ?3)").bind(root, child, grandchild).run();
    await env.DB.prepare("UPDATE outbox SET fact = ?1 WHERE id = ?2").bind(fact, root).run();
    await env.DB.prepare("UPDATE outbox SET parent_id = ?1, depth = 1 WHERE id IN (?2, ?3)").bind(root, child, byReceipt).run();
    await env.DB.prepare("UPDATE outbox SET parent_id = ?1, depth = 2 WHERE id = ?2").bind(child, grandchild).run();
    expect((await auditTrail(env.DB, fact))?.rows.map((r) => r.id)).toEqual([root]);
    const migration = env.TEST_MIGRATIONS.find((m) => m.name.startsWith("0017_"));
    expect(migration?.name).toBe("0017_follow_up_facts.sql");
    for (const query of migration?.queries ?? []) await env.DB.prepare(query).run();
    expect((await auditTrail(env.DB, fact))?.rows.map((r) => r.id)).toEqual([root, child, grandchild]);
    expect((await readRow(env.DB, byReceipt)) as unknown as { fact: string | null }).toMatchObject({ fact: null });
  });
});
