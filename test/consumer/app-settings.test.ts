/**
 * An app's settings reach its effects, and its secrets never leave them:
 * through the consumer's real claim → perform → fenced finish over local D1,
 * the outside service faked at the network edge. "Never" is checked where it
 * would land: every table of the database, every log line, every queue message.
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createApp } from "../../shared/app/app.ts";
import { defineEffect, followUps } from "../../shared/app/effects.ts";
import { slack } from "../../shared/app/intents.ts";
import { parseAppSettings, setting } from "../../shared/app/settings.ts";
import { deliverBatch } from "../../shared/delivery/deliver.ts";
import { consumer } from "../../workers/consumer/worker.ts";
import { captureLog } from "../support/console-capture.ts";
import { deliveryDeps } from "../support/consumer.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { insertRow, maybePerformedOf, readRow, recordingQueue, resetTables } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";

const fake = useFakeSlack();
beforeEach(() => resetTables(env.DB));
afterEach(() => vi.restoreAllMocks());

const KEY = "sk-live-5ecret-0123456789";
const SETTINGS = {
  SERVICE_URL: setting.url({ description: "The service", required: true }),
  SERVICE_KEY: setting.secret({ description: "Its key", required: true }),
};
const parsed = parseAppSettings(SETTINGS, { SERVICE_URL: "https://service.test/v1", SERVICE_KEY: KEY });
if (!parsed.ok) throw new Error(parsed.errors.join("; "));

/** What the effect does with the key, per test: the service call, then something careless. */
let careless:
  | "throw"
  | "result"
  | "follow-up"
  | "follow-up-key"
  | "refused-key"
  | "throwing-args"
  | "throwing-result"
  | "no-result"
  | "encoded"
  | "none" = "none";
const call = defineEffect(
  "call-service",
  async (_args: { q: string }, ctx) => {
    const url = `${ctx.settings.SERVICE_URL}?key=${ctx.settings.SERVICE_KEY}`;
    const response = await ctx.fetch(ctx.settings.SERVICE_URL, {
      method: "POST",
      headers: { authorization: `Bearer ${ctx.settings.SERVICE_KEY}` },
    });
    if (careless === "throw") throw new Error(`service refused key ${ctx.settings.SERVICE_KEY} (HTTP ${response.status})`);
    if (careless === "result") return { called: url };
    if (careless === "follow-up")
      return followUps(null, [slack("chat.postMessage", { channel: "C1", text: `key is ${ctx.settings.SERVICE_KEY}` })]);
    // The key as a follow-up's key (its row's idempotency key), valid and then one checkIntents refuses and quotes.
    if (careless === "follow-up-key")
      return followUps(null, [slack("chat.postMessage", { channel: "C1", text: "hi" }, { key: ctx.settings.SERVICE_KEY })]);
    if (careless === "refused-key")
      return followUps(null, [slack("chat.postMessage", { channel: "C1", text: "hi" }, { key: `${ctx.settings.SERVICE_KEY}>x` })]);
    // Args whose serialisation throws with the key in its message: the checks read them, and must not pass it on.
    if (careless === "throwing-args") {
      const key = ctx.settings.SERVICE_KEY;
      const args = {
        channel: "C1",
        get text(): string {
          throw new Error(`cannot serialise ${key}`);
        },
      };
      return followUps(null, [slack("chat.postMessage", args)]);
    }
    // No result beside its follow-ups (a JavaScript app, or a cast): completed with a null result, the follow-up kept.
    if (careless === "no-result")
      return followUps(undefined as unknown as null, [slack("chat.postMessage", { channel: "C1", text: "next" })]);
    if (careless === "throwing-result") {
      const key = ctx.settings.SERVICE_KEY;
      return {
        get status(): number {
          throw new Error(`cannot serialise ${key}`);
        },
      };
    }
    if (careless === "encoded") {
      const key = ctx.settings.SERVICE_KEY;
      throw new Error(`GET ?key=${encodeURIComponent(key)} and ${new URLSearchParams({ key })} and Basic ${btoa(key)} failed`);
    }
    return { status: response.status };
  },
  { settings: SETTINGS },
);
const app = createApp().uses("chat.postMessage").effect(call);

async function everything(log: unknown, queue: unknown): Promise<string> {
  const { results: tables } = await env.DB.prepare(
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_%' ESCAPE '\\'",
  ).all<{
    name: string;
  }>();
  const dump: Record<string, unknown> = {};
  for (const { name } of tables) dump[name] = (await env.DB.prepare(`SELECT * FROM "${name}"`).all()).results;
  return JSON.stringify({ dump, log, queue });
}

async function deliver() {
  const queue = recordingQueue();
  const harness = deliveryDeps(NOW, { effects: app.effects, queue });
  const deps = { ...harness.deps, context: { ...harness.deps.context, appSettings: parsed.ok ? parsed.settings : undefined } };
  const id = await insertRow(env.DB, { status: "pending", effect: "call-service", payload: { q: "why" }, key: "Ev1:call" });
  await deliverBatch(deps, [id]);
  return { id, row: await readRow(env.DB, id), log: harness.log.records, queue: queue.sent };
}

describe("an effect's settings", () => {
  it("are handed to it typed, the secret included: it reaches the service, and nothing else", async () => {
    careless = "none";
    fake.current.script("https://service.test/v1", reply.ok({}));
    const { row, log, queue } = await deliver();
    expect(row).toMatchObject({ status: "done", result: JSON.stringify({ status: 200 }) });
    expect(fake.current.callsTo("https://service.test/v1")[0]?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(await everything(log, queue)).not.toContain(KEY);
  });

  it("a thrown error carrying the key is kept with [secret NAME] in its place: in last_error, the attempts and the log", async () => {
    careless = "throw";
    fake.current.script("https://service.test/v1", reply.status(403));
    const { row, log, queue } = await deliver();
    expect(row.status).toBe("pending"); // an unclassified error is transient: retried, its text kept
    expect(row.last_error).toBe("Error: service refused key [secret SERVICE_KEY] (HTTP 403)");
    expect(await everything(log, queue)).not.toContain(KEY);
  });

  it("a result carrying the key is kept with [secret NAME] in its place", async () => {
    careless = "result";
    fake.current.script("https://service.test/v1", reply.ok({}));
    const { row, log, queue } = await deliver();
    expect(row).toMatchObject({ status: "done", result: JSON.stringify({ called: "https://service.test/v1?key=[secret SERVICE_KEY]" }) });
    expect(await everything(log, queue)).not.toContain(KEY);
  });

  it("a follow-up whose args carry the key is refused: the row parks, naming the setting, and no row is written for it", async () => {
    careless = "follow-up";
    fake.current.script("https://service.test/v1", reply.ok({}));
    const { id, row, log, queue } = await deliver();
    expect(row.status).toBe("dead");
    expect(row.last_error).toContain("follow-ups refused: they carry the secret SERVICE_KEY");
    expect(await maybePerformedOf(env.DB, id)).toBe(1);
    expect((await env.DB.prepare("SELECT COUNT(*) AS n FROM outbox").first<{ n: number }>())?.n).toBe(1);
    expect(queue).toEqual([]);
    expect(await everything(log, queue)).not.toContain(KEY);
  });
});

describe("a secret in other shapes", () => {
  it.each([
    ["as a follow-up's key (its row's idempotency key)", "follow-up-key" as const],
    ["in a follow-up key the checks refuse and quote", "refused-key" as const],
  ])("%s: the follow-ups are refused naming the setting, and the key is written nowhere", async (_, how) => {
    careless = how;
    fake.current.script("https://service.test/v1", reply.ok({}));
    const { row, log, queue } = await deliver();
    expect([row.status, row.last_error]).toEqual(["dead", expect.stringContaining("carry the secret SERVICE_KEY")]);
    expect((await env.DB.prepare("SELECT COUNT(*) AS n FROM outbox").first<{ n: number }>())?.n).toBe(1);
    expect(await everything(log, queue)).not.toContain(KEY);
  });

  it("no result beside its follow-ups: completed with a null result, and the follow-up recorded", async () => {
    careless = "no-result";
    fake.current.script("https://service.test/v1", reply.ok({}));
    const { row } = await deliver();
    expect([row.status, row.result]).toEqual(["done", "null"]);
    expect((await env.DB.prepare("SELECT COUNT(*) AS n FROM outbox").first<{ n: number }>())?.n).toBe(2);
  });

  it.each([
    ["a follow-up's args", "throwing-args" as const],
    ["its result", "throwing-result" as const],
  ])(
    "in an error thrown reading %s, after the effect was performed: the row parks, not retried, [secret NAME] in its place",
    async (_, how) => {
      careless = how;
      fake.current.script("https://service.test/v1", reply.ok({}));
      const { id, row, log, queue } = await deliver();
      expect([row.status, row.last_error]).toEqual([
        "dead",
        "call-service: performed, but what it returned could not be read: cannot serialise [secret SERVICE_KEY]",
      ]);
      expect(fake.current.callsTo("https://service.test/v1")).toHaveLength(1);
      expect(await maybePerformedOf(env.DB, id)).toBe(1); // performed: a filter replay leaves it out
      expect((await env.DB.prepare("SELECT COUNT(*) AS n FROM outbox").first<{ n: number }>())?.n).toBe(1);
      expect(await everything(log, queue)).not.toContain(KEY);
    },
  );

  it("URL-encoded, form-encoded or base64 in an error: each form is replaced by [secret NAME]", async () => {
    careless = "encoded";
    fake.current.script("https://service.test/v1", reply.ok({}));
    const { row, log, queue } = await deliver();
    expect(row.last_error).toContain("?key=[secret SERVICE_KEY] and key=[secret SERVICE_KEY] and Basic [secret SERVICE_KEY]");
    const dump = await everything(log, queue);
    for (const form of [KEY, encodeURIComponent(KEY), btoa(KEY).replace(/=+$/, "")]) expect(dump).not.toContain(form);
  });
});

describe("the consumer Worker with the app's settings unusable", () => {
  it("acks the batch, spends no attempt, leaves the row for the sweep, and logs which setting", async () => {
    const id = await insertRow(env.DB, { status: "pending" });
    const before = await readRow(env.DB, id);
    const batch = createMessageBatch("ackbox-outbox", [{ id: "m1", timestamp: new Date(), attempts: 1, body: { id } }]);
    const ctx = createExecutionContext();
    const lines = captureLog();
    // The consumer over this file's app, whose effect declares SERVICE_URL and SERVICE_KEY.
    await consumer(app).queue(batch, { ...env, SERVICE_URL: "ftp://service", SERVICE_KEY: KEY }, ctx);
    expect((await getQueueResult(batch, ctx)).ackAll).toBe(true);
    expect(await readRow(env.DB, id)).toEqual(before);
    expect(fake.current.calls).toEqual([]);
    expect(lines.join("\n")).toContain('SERVICE_URL must be an http(s) URL, got \\"ftp://service\\"');
    expect(lines.join("\n")).not.toContain(KEY);
  });

  it("still parks what the dead-letter queue hands it: a dead letter reads none of the app's settings", async () => {
    const id = await insertRow(env.DB, { status: "pending", attempts: 8 });
    const batch = createMessageBatch("ackbox-outbox-dlq", [{ id: "m1", timestamp: new Date(), attempts: 1, body: { id } }]);
    const ctx = createExecutionContext();
    captureLog();
    await consumer(app).queue(batch, { ...env, SERVICE_URL: "ftp://service", SERVICE_KEY: KEY }, ctx);
    expect((await getQueueResult(batch, ctx)).ackAll).toBe(false);
    expect((await readRow(env.DB, id)).status).toBe("dead");
  });
});
