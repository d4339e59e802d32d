/**
 * The example app: its handlers through the real ack path, and its /ask
 * chain (placeholder → answer service → update) through the consumer's real
 * delivery over local D1, with Slack and the answer service faked at the
 * network edge.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { parseAppSettings } from "../../shared/app/index.ts";
import { deliverBatch, deliveryDeps } from "../../test/support/consumer.ts";
import { reply, useFakeSlack } from "../../test/support/fake-slack.ts";
import { ingressDeps } from "../../test/support/ingress.ts";
import { allRows, recordingQueue, resetTables, tally } from "../../test/support/rows.ts";
import { commandForm, eventRequest, FORM, interactionForm, NOW, signed } from "../../test/support/slack-requests.ts";
import { handleSlackRequest } from "../../workers/ingress/ack.ts";
import { example } from "./app.ts";

const slack = useFakeSlack();
beforeEach(() => resetTables(env.DB));
const ANSWERS = "https://answers.test/answer";

/** The example's own settings as a deployment with these variables parses them (the test bindings, overridden). */
function appSettings(vars: Record<string, string> = {}) {
  const parsed = parseAppSettings(example.declaredSettings, { ...env, ...vars });
  if (!parsed.ok) throw new Error(parsed.errors.join("; "));
  return parsed.settings;
}

async function send(request: Request, vars: Record<string, string> = {}) {
  const harness = ingressDeps({ app: example });
  const deps = { ...harness.deps, appSettings: appSettings(vars) };
  const response = await handleSlackRequest(request, deps, NOW);
  await harness.settled();
  const text = await response.text();
  return { response, json: text ? JSON.parse(text) : null, rows: await allRows(env.DB) };
}

/** Delivers every row the queue was handed, follow-ups included, until none are left. */
async function drain(ids: number[], vars: Record<string, string> = {}) {
  const queue = recordingQueue();
  const harness = deliveryDeps(NOW, { effects: example.effects, queue });
  harness.deps = { ...harness.deps, context: { ...harness.deps.context, appSettings: appSettings(vars) } };
  let next = ids;
  for (let round = 0; next.length > 0 && round < 10; round++) {
    queue.sent.length = 0;
    await deliverBatch(harness.deps, next);
    harness.clock.advance(60 * 60_000); // past any backoff: time is a parameter
    next = [...queue.sent, ...(await pendingIds())];
  }
}
const pendingIds = async () => (await allRows(env.DB)).filter((r) => r.status === "pending").map((r) => r.id);

describe("/ask: placeholder → answer service → update, one durable chain", () => {
  it("posts the placeholder with blocks, asks the service with the row's idempotency key, and updates the placeholder", async () => {
    slack.current.script("chat.postMessage", reply.ok({ channel: "C0WATCHED", ts: "1764505000.000100" }));
    slack.current.script(ANSWERS, reply.ok({ answer: "Because." }));
    slack.current.script("chat.update", reply.ok({ channel: "C0WATCHED", ts: "1764505000.000100" }));

    const { json, rows } = await send(await signed(commandForm({ command: "/ask", text: "why?", trigger_id: "9.9.ask" }), FORM));
    expect(json).toEqual({ response_type: "ephemeral", text: "On it." });
    expect(rows).toMatchObject([{ effect: "ask-placeholder", idempotency_key: "command:T0TEAM:9.9.ask:ask-placeholder" }]);

    await drain(rows.map((r) => r.id));

    const placeholder = slack.current.callsTo("chat.postMessage")[0];
    expect(JSON.parse(placeholder?.params.blocks ?? "[]")[0]).toMatchObject({ type: "section" });
    const asked = slack.current.callsTo(ANSWERS)[0];
    expect(asked?.headers["idempotency-key"]).toBe("command:T0TEAM:9.9.ask:ask-placeholder>ask-service");
    expect(asked?.json).toEqual({ question: "why?" });
    expect(slack.current.callsTo("chat.update")[0]?.params).toMatchObject({
      channel: "C0WATCHED",
      ts: "1764505000.000100",
      text: "Because.",
    });

    const chain = await env.DB.prepare("SELECT effect, status, depth, parent_id FROM outbox ORDER BY id").all();
    expect(chain.results).toEqual([
      { effect: "ask-placeholder", status: "done", depth: 0, parent_id: null },
      { effect: "ask-service", status: "done", depth: 1, parent_id: rows[0]?.id },
      { effect: "chat.update", status: "done", depth: 2, parent_id: (rows[0]?.id ?? 0) + 1 },
    ]);
  });

  it("retries the answer service on a 503 with the same idempotency key, and never re-posts the placeholder", async () => {
    slack.current.script("chat.postMessage", reply.ok({ channel: "C0WATCHED", ts: "1764505000.000200" }));
    slack.current.script(ANSWERS, reply.status(503), reply.ok({ answer: "Later." }));
    slack.current.script("chat.update", reply.ok({}));
    const { rows } = await send(await signed(commandForm({ command: "/ask", text: "when?" }), FORM));
    await drain(rows.map((r) => r.id));
    const keys = slack.current.callsTo(ANSWERS).map((c) => c.headers["idempotency-key"]);
    expect(keys).toHaveLength(2);
    expect(new Set(keys).size).toBe(1);
    expect(slack.current.callsTo("chat.postMessage")).toHaveLength(1);
    expect(slack.current.callsTo("chat.update")[0]?.params.text).toBe("Later.");
  });

  it("says it is not set up, and writes nothing, without EXAMPLE_ANSWER_URL", async () => {
    const { json } = await send(await signed(commandForm({ command: "/ask", text: "why?" }), FORM), { EXAMPLE_ANSWER_URL: "" });
    expect(json.text).toContain("EXAMPLE_ANSWER_URL");
    expect(await tally(env.DB)).toEqual({ receipts: 0, outbox: 0, attempts: 0 });
  });

  it("sends EXAMPLE_ANSWER_KEY, a secret, to the service only: in no row, no attempt and no Slack call", async () => {
    const key = "example-answer-key-0123456789";
    slack.current.script("chat.postMessage", reply.ok({ channel: "C0WATCHED", ts: "1764505000.000300" }));
    slack.current.script(ANSWERS, reply.ok({ answer: "Keyed." }));
    slack.current.script("chat.update", reply.ok({}));
    const { rows } = await send(await signed(commandForm({ command: "/ask", text: "who?" }), FORM), { EXAMPLE_ANSWER_KEY: key });
    await drain(
      rows.map((r) => r.id),
      { EXAMPLE_ANSWER_KEY: key },
    );
    expect(slack.current.callsTo(ANSWERS)[0]?.headers.authorization).toBe(`Bearer ${key}`);
    const stored = await env.DB.prepare("SELECT * FROM outbox").all();
    const attempts = await env.DB.prepare("SELECT * FROM outbox_attempts").all();
    const toSlack = slack.current.calls.filter((c) => c.target !== ANSWERS);
    expect(JSON.stringify([stored.results, attempts.results, toSlack])).not.toContain(key);
  });
});

describe("the Home tab and the topic menu", () => {
  it("app_home_opened → views.publish of the Home tab for that user", async () => {
    const { rows } = await send(await eventRequest({ type: "app_home_opened", user: "U0HUMAN", channel: "D1", tab: "home" }));
    expect(rows).toMatchObject([{ effect: "views.publish" }]);
    expect(JSON.parse(rows[0]?.payload ?? "{}")).toMatchObject({ user_id: "U0HUMAN", view: { type: "home" } });
  });

  it("the topic menu's options are answered inline, and nothing is written", async () => {
    const request = {
      type: "block_suggestion",
      team: { id: "T0TEAM" },
      user: { id: "U0HUMAN" },
      action_id: "ask_topic",
      block_id: "topic",
      value: "de",
    };
    const { json } = await send(await signed(interactionForm(request), FORM));
    expect(json).toEqual({ options: [{ text: { type: "plain_text", text: "deploys" }, value: "deploys" }] });
    expect(await tally(env.DB)).toEqual({ receipts: 0, outbox: 0, attempts: 0 });
  });
});
