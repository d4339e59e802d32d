import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { createApp } from "../../shared/app/app.ts";
import { slack } from "../../shared/app/intents.ts";
import { CANCELLED_AFTER_500, cancelUnattemptedRows } from "../../shared/outbox/cancel.ts";
import { signatureFor } from "../../shared/slack/signature.ts";
import { handleSlackRequest } from "../../workers/ingress/ack.ts";
import { ingressDeps } from "../support/ingress.ts";
import { insertRow, readRow, resetTables, tally } from "../support/rows.ts";
import { TEST_PREVIOUS_SECRET, TEST_SIGNING_SECRET } from "../support/settings.ts";
import {
  blockActions,
  channelMessage,
  commandForm,
  eventEnvelope,
  eventRequest,
  FORM,
  INGRESS_URL,
  interactionForm,
  JSON_TYPE,
  mention,
  NOW,
  signed,
  uniqueId,
} from "../support/slack-requests.ts";

const NOTHING = { receipts: 0, outbox: 0, attempts: 0 };

function firstOutboxId(line: { fields: Record<string, unknown> } | undefined): number {
  const ids = line?.fields.outbox_ids;
  if (!Array.isArray(ids) || typeof ids[0] !== "number") throw new Error("no outbox ids in the log line");
  return ids[0];
}

beforeEach(() => resetTables(env.DB));

async function send(request: Request, overrides: Parameters<typeof ingressDeps>[0] = {}, now = NOW) {
  const harness = ingressDeps(overrides);
  const response = await handleSlackRequest(request, harness.deps, now);
  await harness.settled();
  const line = harness.log.records.find((r) => r.msg === "slack request");
  return { response, line, log: harness.log, text: await response.text() };
}

describe("401: unauthenticated requests write nothing and say why", () => {
  const body = JSON.stringify(eventEnvelope(mention()));
  const ts = String(NOW / 1000);

  it.each([
    ["no X-Slack-Signature", { "x-slack-request-timestamp": ts }, "missing X-Slack-Signature"],
    ["no timestamp", { "x-slack-signature": `v0=${"a".repeat(64)}` }, "missing X-Slack-Request-Timestamp"],
    ["a garbled signature", { "x-slack-request-timestamp": ts, "x-slack-signature": "v1=abc" }, "garbled X-Slack-Signature"],
    [
      "a garbled timestamp",
      { "x-slack-request-timestamp": "soon", "x-slack-signature": `v0=${"a".repeat(64)}` },
      "garbled X-Slack-Request-Timestamp",
    ],
  ])("refuses %s", async (_, headers, reason) => {
    const { response, line } = await send(
      new Request(INGRESS_URL, { method: "POST", headers: { "content-type": JSON_TYPE, ...headers }, body }),
    );
    expect(response.status).toBe(401);
    expect(line?.fields.reason).toContain(reason);
    expect(await tally(env.DB)).toEqual(NOTHING);
  });

  it("refuses a signature made with another secret", async () => {
    const { response, line } = await send(await eventRequest(mention(), { secret: "not-the-secret" }));
    expect(response.status).toBe(401);
    expect(line?.fields.reason).toBe("signature mismatch");
    expect(await tally(env.DB)).toEqual(NOTHING);
  });

  it("refuses a body altered after signing", async () => {
    const request = await eventRequest(mention());
    const tampered = new Request(request, { body: (await request.text()).replace("hello", "HELLO") });
    const { response } = await send(tampered);
    expect(response.status).toBe(401);
    expect(await tally(env.DB)).toEqual(NOTHING);
  });

  it.each([
    ["301 s in the past", -301, "too old"],
    ["301 s in the future", 301, "in the future"],
  ])("refuses a timestamp %s", async (_, offset, reason) => {
    const { response, line } = await send(await eventRequest(mention(), { timestamp: NOW / 1000 + offset }));
    expect(response.status).toBe(401);
    expect(line?.fields.reason).toContain(reason);
    expect(await tally(env.DB)).toEqual(NOTHING);
  });

  it.each([
    ["299 s in the past", -299],
    ["299 s in the future", 299],
    ["exactly 300 s in the past", -300],
  ])("accepts a timestamp %s", async (_, offset) => {
    const { response } = await send(await eventRequest(mention(), { timestamp: NOW / 1000 + offset }));
    expect(response.status).toBe(200);
    expect((await tally(env.DB)).receipts).toBe(1);
  });

  it("accepts the previous signing secret during a rotation", async () => {
    const { response, line } = await send(await eventRequest(mention(), { secret: TEST_PREVIOUS_SECRET }));
    expect(response.status).toBe(200);
    expect(line?.fields.verdict).toBe("accepted");
  });

  it("never logs a secret or a signature", async () => {
    const request = await eventRequest(mention(), { secret: "wrong" });
    const signature = request.headers.get("x-slack-signature") ?? "";
    const { log } = await send(request);
    const logged = JSON.stringify(log.records);
    expect(logged).not.toContain(TEST_SIGNING_SECRET);
    expect(logged).not.toContain(TEST_PREVIOUS_SECRET);
    expect(logged).not.toContain(signature.slice(3));
  });
});

describe("413: oversized bodies are refused before they are hashed", () => {
  it("refuses a declared Content-Length over the limit", async () => {
    const big = JSON.stringify(eventEnvelope(mention({ text: "x".repeat(600_000) })));
    const { response, line } = await send(await signed(big, JSON_TYPE));
    expect(response.status).toBe(413);
    expect(line?.fields.reason).toContain("over the 524288-byte limit");
    expect(await tally(env.DB)).toEqual(NOTHING);
  });

  it("refuses a streamed body without a length once it passes the limit", async () => {
    const chunk = new TextEncoder().encode("x".repeat(64 * 1024));
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent++ < 20) controller.enqueue(chunk);
        else controller.close();
      },
    });
    const request = new Request(INGRESS_URL, {
      method: "POST",
      headers: { "content-type": JSON_TYPE, "x-slack-request-timestamp": String(NOW / 1000), "x-slack-signature": `v0=${"0".repeat(64)}` },
      body: stream,
      duplex: "half",
    } as RequestInit);
    const { response } = await send(request);
    expect(response.status).toBe(413);
    expect(sent).toBeLessThan(20);
    expect(await tally(env.DB)).toEqual(NOTHING);
  });
});

describe("400: signed, but not a Slack shape", () => {
  it.each([
    ["text that is not JSON", "{nope", JSON_TYPE, "not a JSON object"],
    ["a JSON array", "[1,2]", JSON_TYPE, "not a JSON object"],
    ["JSON without a type", '{"event_id":"Ev1"}', JSON_TYPE, "no type"],
    ["an event_callback without event_id", '{"type":"event_callback","event":{"type":"app_mention"}}', JSON_TYPE, "without an event_id"],
    ["an event_callback without an event", '{"type":"event_callback","event_id":"Ev1"}', JSON_TYPE, "without an event type"],
    ["url_verification without a challenge", '{"type":"url_verification"}', JSON_TYPE, "without a challenge"],
    ["an unsupported content type", "hello", "text/plain", "unsupported content type"],
    ["a form with neither command nor payload", "a=1&b=2", "application/x-www-form-urlencoded", "neither a command nor a payload"],
  ])("refuses %s", async (_, body, contentType, reason) => {
    const { response, line } = await send(await signed(body, contentType));
    expect(response.status).toBe(400);
    expect(line?.fields.reason).toContain(reason);
    expect(await tally(env.DB)).toEqual(NOTHING);
  });
});

describe("200 without a write", () => {
  it("answers url_verification with its challenge", async () => {
    const { response, text } = await send(
      await signed('{"type":"url_verification","token":"t","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}', JSON_TYPE),
    );
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("application/json");
    expect(JSON.parse(text)).toEqual({ challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" });
    expect(await tally(env.DB)).toEqual(NOTHING);
  });

  // What the app does with an input is the app's business (examples/reference/app.test.ts);
  // here: an input no handler matches is answered 200 and writes nothing.
  it.each([
    [
      "a message with a subtype (message() matches a user's plain messages)",
      channelMessage({ subtype: "message_changed" }),
      "no handler for event message (message_changed)",
    ],
    ["a bot's message", channelMessage({ bot_id: "B0BOT" }), "no handler for event message"],
    ["a bot_message subtype", channelMessage({ subtype: "bot_message" }), "no handler for event message (bot_message)"],
    ["an event type no handler matches", { type: "reaction_added", user: "U1", reaction: "eyes" }, "no handler for event reaction_added"],
  ])("ignores %s", async (_, event, reason) => {
    const { response, line } = await send(await eventRequest(event));
    expect(response.status).toBe(200);
    expect(line?.fields).toMatchObject({ verdict: "ignored", reason });
    expect(await tally(env.DB)).toEqual(NOTHING);
  });

  it("ignores an envelope type it does not know (app_rate_limited)", async () => {
    const body = JSON.stringify({
      token: "t",
      type: "app_rate_limited",
      team_id: "T0TEAM",
      minute_rate_limited: 1518467820,
      api_app_id: "A0APP",
    });
    const { response, line } = await send(await signed(body, JSON_TYPE));
    expect(response.status).toBe(200);
    expect(line?.fields.verdict).toBe("ignored");
    expect(await tally(env.DB)).toEqual(NOTHING);
  });
});

describe("200 with durable intent", () => {
  it("commits the receipt and the outbox row before answering, and enqueues after", async () => {
    // Every step recorded at the bindings, in the order it happens. The queue's send is held
    // until the test opens it, so an answer that waited for the enqueue could never arrive.
    const order: string[] = [];
    let openQueue = () => {};
    const queueOpen = new Promise<void>((resolve) => {
      openQueue = resolve;
    });
    const sent: number[] = [];
    const queue = {
      async sendBatch(messages: Iterable<MessageSendRequest<{ id: number }>>) {
        order.push("queue send called");
        await queueOpen;
        await env.OUTBOX_QUEUE.sendBatch(messages);
        for (const m of messages) sent.push(m.body.id);
        order.push("queue send done");
      },
    };
    const db = new Proxy(env.DB, {
      get(target, prop) {
        if (prop === "batch") {
          return async (statements: D1PreparedStatement[]) => {
            order.push("batch sent");
            const results = await target.batch(statements);
            order.push("batch committed");
            return results;
          };
        }
        const value = Reflect.get(target, prop);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const eventId = uniqueId("Ev");
    const harness = ingressDeps({ db, queue });
    const response = await handleSlackRequest(
      await eventRequest(mention({ ts: "1764504000.000777", channel: "C0ANY" }), { eventId }),
      harness.deps,
      NOW,
    );
    order.push("answered");
    expect(response.status).toBe(200);
    expect(sent).toEqual([]);
    openQueue();
    await harness.settled();
    // The answer follows the commit; the enqueue starts after the commit and completes after the answer
    // (whether it is handed off before or after the Response is built is the runtime's business).
    const at = (step: string) => order.indexOf(step);
    expect(order.toSorted()).toEqual(["answered", "batch committed", "batch sent", "queue send called", "queue send done"]);
    expect(at("batch committed")).toBeLessThan(at("answered"));
    expect(at("batch committed")).toBeLessThan(at("queue send called"));
    expect(at("answered")).toBeLessThan(at("queue send done"));
    const line = harness.log.records.find((r) => r.msg === "slack request");
    expect(line?.fields).toMatchObject({ verdict: "accepted", surface: "event", id: eventId });
    const receipt = await env.DB.prepare("SELECT * FROM receipts WHERE id = ?").bind(eventId).first();
    expect(receipt).toMatchObject({ kind: "event", type: "app_mention", team_id: "T0TEAM", received_at: NOW });
    const id = firstOutboxId(line);
    const row = await readRow(env.DB, id);
    expect(row).toMatchObject({
      // Keyed by the fact (shared/slack/facts.ts): the mention of this message, whatever its event_id.
      idempotency_key: "app_mention:T0TEAM:C0ANY:1764504000.000777:reply",
      effect: "chat.postMessage",
      status: "pending",
      attempts: 0,
      next_attempt_at: NOW,
      enqueued_at: NOW,
      sweep_at: NOW + 60_000,
    });
    expect(JSON.parse(row.payload)).toEqual({ channel: "C0ANY", thread_ts: "1764504000.000777", text: "Hi <@U0HUMAN>, ackbox heard you." });
    expect(sent).toEqual([id]);
  });

  it("reacts with eyes to a plain message in a watched channel", async () => {
    const { response, line } = await send(await eventRequest(channelMessage({ channel: "C0ALSO", ts: "1.5" })));
    expect(response.status).toBe(200);
    const row = await readRow(env.DB, firstOutboxId(line));
    expect(row.effect).toBe("reactions.add");
    expect(JSON.parse(row.payload)).toEqual({ channel: "C0ALSO", timestamp: "1.5", name: "eyes" });
  });

  it("answers a duplicate event_id 200 and writes nothing new", async () => {
    const eventId = uniqueId("Ev");
    const first = await send(await eventRequest(mention(), { eventId }));
    const second = await send(await eventRequest(mention(), { eventId, retryNum: 1, retryReason: "http_timeout" }));
    expect(first.response.status).toBe(200);
    expect(second.response.status).toBe(200);
    expect(second.line?.fields).toMatchObject({ verdict: "duplicate", retry_num: "1", retry_reason: "http_timeout" });
    expect(await tally(env.DB)).toEqual({ receipts: 1, outbox: 1, attempts: 0 });
  });

  it("dedupes by event_id, not by retry headers: a first delivery that carries a retry number is still new", async () => {
    const { response, line } = await send(await eventRequest(mention(), { retryNum: 2, retryReason: "http_error" }));
    expect(response.status).toBe(200);
    expect(line?.fields.verdict).toBe("accepted");
    const receipt = await env.DB.prepare("SELECT retry_num FROM receipts").first<{ retry_num: number }>();
    expect(receipt?.retry_num).toBe(2);
  });

  it("writes nothing for a duplicate even if the routing changed between deliveries", async () => {
    const eventId = uniqueId("Ev");
    await send(await eventRequest(mention(), { eventId }));
    const rerouted = createApp()
      .uses("chat.postMessage")
      .event("app_mention", () => [slack("chat.postMessage", { channel: "C", text: "x" }, { key: "other" })]);
    const { line } = await send(await eventRequest(mention(), { eventId }), { app: rerouted });
    expect(line?.fields.verdict).toBe("duplicate");
    expect(await tally(env.DB)).toEqual({ receipts: 1, outbox: 1, attempts: 0 });
  });
});

describe("concurrency", () => {
  it("50 concurrent deliveries of one event_id leave one receipt and one outbox row", async () => {
    const eventId = uniqueId("Ev");
    const requests = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        eventRequest(mention(), { eventId, ...(i % 3 === 0 ? { retryNum: (i % 3) + 1, retryReason: "http_timeout" } : {}) }),
      ),
    );
    const harness = ingressDeps();
    const responses = await Promise.all(requests.map((request) => handleSlackRequest(request, harness.deps, NOW)));
    await harness.settled();
    expect(responses.map((r) => r.status)).toEqual(Array(50).fill(200));
    const verdicts = harness.log.records.filter((r) => r.msg === "slack request").map((r) => r.fields.verdict);
    expect(verdicts.filter((v) => v === "accepted")).toHaveLength(1);
    expect(verdicts.filter((v) => v === "duplicate")).toHaveLength(49);
    expect(await tally(env.DB)).toEqual({ receipts: 1, outbox: 1, attempts: 0 });
  });
});

describe("500: no ack without a durable record", () => {
  it("answers 500 when the D1 batch fails, writes nothing, and the redelivery is then accepted", async () => {
    const failing = new Proxy(env.DB, {
      get(target, prop) {
        if (prop === "batch") return async () => Promise.reject(new Error("D1_ERROR: Network connection lost."));
        const value = Reflect.get(target, prop);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const eventId = uniqueId("Ev");
    const first = await send(await eventRequest(mention(), { eventId }), { db: failing });
    expect(first.response.status).toBe(500);
    expect(first.line?.fields).toMatchObject({ verdict: "not_recorded", reason: "Error: D1_ERROR: Network connection lost." });
    expect(await tally(env.DB)).toEqual(NOTHING);

    const retry = await send(await eventRequest(mention(), { eventId, retryNum: 1, retryReason: "http_error" }));
    expect(retry.response.status).toBe(200);
    expect(retry.line?.fields.verdict).toBe("accepted");
    expect(await tally(env.DB)).toEqual({ receipts: 1, outbox: 1, attempts: 0 });
  });

  it("answers 500 when the write overruns the budget; the late commit is enqueued and the redelivery is a duplicate", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const slow = new Proxy(env.DB, {
      get(target, prop) {
        if (prop === "batch") return async (statements: D1PreparedStatement[]) => gate.then(() => target.batch(statements));
        const value = Reflect.get(target, prop);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const sent: number[] = [];
    const queue = {
      async sendBatch(messages: Iterable<MessageSendRequest<{ id: number }>>) {
        for (const m of messages) sent.push(m.body.id);
      },
    };
    const eventId = uniqueId("Ev");
    const harness = ingressDeps({ db: slow, queue, settings: { ...ingressDeps().deps.settings, ackBudgetMs: 20 } });
    const response = await handleSlackRequest(await eventRequest(mention(), { eventId }), harness.deps, NOW);
    expect(response.status).toBe(500);
    expect(harness.log.records.find((r) => r.msg === "slack request")?.fields.reason).toContain("took longer than 20 ms");

    release();
    await harness.settled();
    expect(await tally(env.DB)).toEqual({ receipts: 1, outbox: 1, attempts: 0 });
    expect(sent).toHaveLength(1);
    expect(harness.log.records.some((r) => r.msg === "durable write committed after its 500; enqueued")).toBe(true);

    const retry = await send(await eventRequest(mention(), { eventId, retryNum: 1, retryReason: "http_timeout" }));
    expect(retry.response.status).toBe(200);
    expect(retry.line?.fields.verdict).toBe("duplicate");
    expect(await tally(env.DB)).toEqual({ receipts: 1, outbox: 1, attempts: 0 });
  });
});

describe("a command or interaction whose write overran its budget: 500, and its late rows cancelled (Slack never retries these)", () => {
  /** A D1 whose batches wait for a gate: the write overruns ACK_BUDGET_MS, then commits. */
  function slowDb() {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const db = new Proxy(env.DB, {
      get(target, prop) {
        if (prop === "batch") return async (statements: D1PreparedStatement[]) => gate.then(() => target.batch(statements));
        const value = Reflect.get(target, prop);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    return { db, release: () => release() };
  }

  it.each([
    ["a slash command", () => signed(commandForm({ trigger_id: uniqueId("trig") }), FORM)],
    ["a button click", () => signed(interactionForm(blockActions({ trigger_id: uniqueId("trig") })), FORM)],
  ])("%s: answered 500, the late-committed rows are parked as cancelled, never enqueued, never performed", async (_, request) => {
    const slow = slowDb();
    const sent: number[] = [];
    const queue = {
      async sendBatch(messages: Iterable<MessageSendRequest<{ id: number }>>) {
        for (const m of messages) sent.push(m.body.id);
      },
    };
    const harness = ingressDeps({ db: slow.db, queue, settings: { ...ingressDeps().deps.settings, ackBudgetMs: 20 } });
    const response = await handleSlackRequest(await request(), harness.deps, NOW);
    expect(response.status).toBe(500);

    slow.release();
    await harness.settled();
    expect(sent).toEqual([]);
    const line = harness.log.records.find((r) => r.msg.startsWith("durable write committed after its 500"));
    expect(line?.msg).toBe("durable write committed after its 500; cancelled (Slack does not retry this surface)");
    const ids = line?.fields.outbox_ids as number[];
    expect(ids.length).toBeGreaterThan(0);
    expect(line?.fields.cancelled).toBe(ids.length);
    for (const id of ids) {
      expect(await readRow(env.DB, id)).toMatchObject({ status: "dead", attempts: 0, sweep_at: null, last_error: CANCELLED_AFTER_500 });
    }
  });

  it("a cancel that D1 refuses is retried, and if it never lands, a log line says which rows will run anyway", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let batches = 0;
    const db = new Proxy(env.DB, {
      get(target, prop) {
        if (prop === "batch") {
          return async (statements: D1PreparedStatement[]) => {
            batches += 1;
            if (batches === 1) return gate.then(() => target.batch(statements));
            throw new Error("D1_ERROR: simulated overload");
          };
        }
        const value = Reflect.get(target, prop);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const harness = ingressDeps({ db, settings: { ...ingressDeps().deps.settings, ackBudgetMs: 20 } });
    const response = await handleSlackRequest(await signed(commandForm({ trigger_id: uniqueId("trig") }), FORM), harness.deps, NOW);
    expect(response.status).toBe(500);
    release();
    const outcomes = await harness.settled();
    expect(outcomes.every((o) => o.status === "fulfilled")).toBe(true);
    expect(batches).toBeGreaterThan(2);
    const line = harness.log.records.find((r) => r.msg.startsWith("durable write committed after its 500; could not cancel"));
    expect(line?.level).toBe("error");
    expect(line?.fields.outbox_ids).toEqual([expect.any(Number)]);
  });

  it("never cancels a row someone has already claimed (the sweep got there first)", async () => {
    const pending = await insertRow(env.DB, { status: "pending" });
    const claimed = await insertRow(env.DB, { status: "leased", attempts: 1 });
    expect(await cancelUnattemptedRows(env.DB, [pending, claimed], NOW)).toBe(1);
    expect((await readRow(env.DB, pending)).status).toBe("dead");
    expect((await readRow(env.DB, claimed)).status).toBe("leased");
  });
});

describe("the enqueue after the ack", () => {
  it("still answers 200 when the queue refuses, and leaves the row pending and marked not enqueued for the next sweep", async () => {
    let tries = 0;
    const queue = {
      async sendBatch() {
        tries += 1;
        throw new Error("Queue send failed: 503");
      },
    };
    const { response, line, log } = await send(await eventRequest(mention()), { queue });
    expect(response.status).toBe(200);
    expect(tries).toBe(3);
    const row = await readRow(env.DB, firstOutboxId(line));
    expect(row).toMatchObject({ status: "pending", enqueued_at: null, sweep_at: NOW });
    expect(log.records.find((r) => r.msg === "enqueue failed; rows left for the sweep")?.level).toBe("warn");
  });
});

describe("Slack's published signature example", () => {
  // From "Verifying requests from Slack" (api.slack.com/authentication/verifying-requests-from-slack).
  const secret = "8f742231b10e8888abcd99yyyzzz85a5";
  const timestamp = 1531420618;
  const body =
    "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
  const expected = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

  it("signs to Slack's expected value", async () => {
    expect(await signatureFor(secret, timestamp, body)).toBe(expected);
  });

  it("is accepted end to end with the clock at its timestamp, and refused a day later", async () => {
    const request = () =>
      new Request(INGRESS_URL, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          "x-slack-request-timestamp": String(timestamp),
          "x-slack-signature": expected,
        },
        body,
      });
    const settings = { ...ingressDeps().deps.settings, signingSecrets: [secret] };
    const accepted = await send(request(), { settings }, timestamp * 1000);
    expect(accepted.response.status).toBe(200);
    expect(accepted.line?.fields).toMatchObject({
      verdict: "accepted",
      surface: "command",
      id: "command:T1DC2JH3J:398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c",
    });
    const late = await send(request(), { settings }, (timestamp + 86_400) * 1000);
    expect(late.response.status).toBe(401);
  });
});
