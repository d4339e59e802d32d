/**
 * The test kit's whole path (shared/app/whole-path.ts, `ackbox/testing`): a signed request through the ingress,
 * what it queued through the consumer, each on this project's real local D1, and the calls read at the fake
 * Slack — including an effect's outside service, a scripted Slack refusal, and a chain of follow-ups.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { createApp, defineEffect, followUps, run, slack, transient } from "../../shared/app/index.ts";
import { type FakeHost, fakeService, httpStatus, wholePath } from "../../shared/app/testing.ts";
import { allRows, dbOf, resetTables, shardDbs } from "../support/rows.ts";

beforeEach(() => Promise.all(shardDbs().map(resetTables)));

/** /weather <city>: asks an outside service (a custom effect), then posts its answer (a follow-up). */
const askWeather = defineEffect<{ channel: string; city: string }>("ask-weather", async (args, ctx) => {
  const response = await ctx.fetch(`https://weather.test/now?city=${encodeURIComponent(args.city)}`);
  if (!response.ok) throw transient(`weather: HTTP ${response.status}`);
  const { sky } = (await response.json()) as { sky: string };
  return followUps({ sky }, [slack("chat.postMessage", { channel: args.channel, text: `${args.city}: ${sky}` })]);
});
const app = createApp()
  .uses("chat.postMessage")
  .effect(askWeather)
  .command("/weather", ({ payload }) => ({
    ack: { response_type: "ephemeral", text: "Looking…" },
    intents: [run(askWeather, { channel: payload.channelId, city: payload.text })],
  }))
  .event("app_mention", ({ payload: event }) =>
    event.channel && event.ts ? [slack("chat.postMessage", { channel: event.channel, thread_ts: event.ts, text: "hi" })] : undefined,
  );

describe("wholePath: a request in, the calls out", () => {
  it("carries a follow-up chain through the consumer: the outside service's answer, then the Slack call it led to", async () => {
    const asked: string[] = [];
    const path = wholePath(app, env, {
      services: (request) => {
        asked.push(request.url);
        return Response.json({ sky: "clear" });
      },
    });
    const { response, body, calls } = await path.command("/weather", { text: "Oslo", channel_id: "C0W" });
    expect(response.status).toBe(200);
    expect(body).toEqual({ response_type: "ephemeral", text: "Looking…" });
    expect(asked).toEqual(["https://weather.test/now?city=Oslo"]);
    expect(calls).toEqual([{ method: "chat.postMessage", params: { channel: "C0W", text: "Oslo: clear" } }]);
    expect((await allRows(dbOf("T0TEAM"))).map((row) => [row.effect, row.status])).toEqual([
      ["ask-weather", "done"],
      ["chat.postMessage", "done"],
    ]);
  });

  it("refuses a call to a host no service answers: the effect fails (retried later), nothing reaches Slack", async () => {
    const { response, calls } = await wholePath(app, env).command("/weather", { text: "Oslo" });
    expect(response.status).toBe(200);
    expect(calls).toEqual([]);
    expect(await allRows(dbOf("T0TEAM"))).toMatchObject([{ effect: "ask-weather", status: "pending", attempts: 1 }]);
  });

  it("answers a method as the test scripts it: a refusal Slack would give parks the row dead", async () => {
    const path = wholePath(app, env, { answers: { "chat.postMessage": { ok: false, error: "channel_not_found" } } });
    const { calls } = await path.event({ type: "app_mention", user: "U1", text: "<@UBOT>", channel: "C0GONE", ts: "5.1" });
    expect(calls).toEqual([{ method: "chat.postMessage", params: { channel: "C0GONE", thread_ts: "5.1", text: "hi" } }]);
    expect(await allRows(dbOf("T0TEAM"))).toMatchObject([
      { effect: "chat.postMessage", status: "dead", last_error: "chat.postMessage: channel_not_found" },
    ]);
    expect(path.calls).toHaveLength(1);
  });

  it("sends a signature the ingress checks, and leaves the global fetch alone", async () => {
    const before = globalThis.fetch;
    const path = wholePath(app, env);
    const { response } = await path.request("not a slack body", "text/plain");
    expect(response.status).toBe(400);
    expect(globalThis.fetch).toBe(before);
    expect(await allRows(dbOf("T0TEAM"))).toEqual([]);
  });
});

describe("wholePath: two paths at once", () => {
  /** The weather service of one path: it answers only once the other path's has been asked too, so both run at once. */
  function meeting(sky: string, here: () => void, there: Promise<void>) {
    const service = fakeService("https://weather.test").answer(httpStatus(200, { sky }));
    const host: FakeHost = {
      origin: service.origin,
      handle: async (request) => {
        here();
        await there;
        return service.handle(request);
      },
    };
    return { service, host };
  }

  it("each path's Workers go out through its own fakes: each gets exactly its own calls, and none reaches globalThis.fetch", async () => {
    const stray: string[] = [];
    const original = globalThis.fetch;
    globalThis.fetch = (async (input: RequestInfo | URL) => {
      stray.push(input instanceof Request ? input.url : String(input));
      throw new TypeError("a path reached globalThis.fetch");
    }) as typeof fetch;
    try {
      let askedA = () => {};
      let askedB = () => {};
      const a = meeting("clear", () => askedA(), new Promise<void>((resolve) => (askedB = resolve)));
      const b = meeting("rain", () => askedB(), new Promise<void>((resolve) => (askedA = resolve)));
      const pathA = wholePath(app, env, { teamId: "T0ALPHA", hosts: [a.host] });
      const pathB = wholePath(app, env, { teamId: "T0BETA", hosts: [b.host] });
      // A command (its effect and follow-up through the consumer) and a mention (its reply at the ingress's first attempt).
      const [resultA, resultB, mentionA, mentionB] = await Promise.all([
        pathA.command("/weather", { text: "Oslo", channel_id: "C0A" }),
        pathB.command("/weather", { text: "Bergen", channel_id: "C0B" }),
        pathA.event({ type: "app_mention", user: "U1", text: "<@UBOT>", channel: "C0A", ts: "7.1" }),
        pathB.event({ type: "app_mention", user: "U1", text: "<@UBOT>", channel: "C0B", ts: "7.2" }),
      ]);
      expect(stray).toEqual([]);
      expect(a.service.calls.map((call) => call.path)).toEqual(["/now?city=Oslo"]);
      expect(b.service.calls.map((call) => call.path)).toEqual(["/now?city=Bergen"]);
      expect(resultA.calls).toEqual([{ method: "chat.postMessage", params: { channel: "C0A", text: "Oslo: clear" } }]);
      expect(resultB.calls).toEqual([{ method: "chat.postMessage", params: { channel: "C0B", text: "Bergen: rain" } }]);
      expect(mentionA.calls).toEqual([{ method: "chat.postMessage", params: { channel: "C0A", thread_ts: "7.1", text: "hi" } }]);
      expect(mentionB.calls).toEqual([{ method: "chat.postMessage", params: { channel: "C0B", thread_ts: "7.2", text: "hi" } }]);
      expect(pathA.calls).toHaveLength(2);
      expect(pathA.calls).toEqual(expect.arrayContaining([...resultA.calls, ...mentionA.calls]));
      expect(pathB.calls).toHaveLength(2);
      expect(pathB.calls).toEqual(expect.arrayContaining([...resultB.calls, ...mentionB.calls]));
      for (const team of ["T0ALPHA", "T0BETA"]) {
        const rows = (await allRows(dbOf(team))).filter((row) => row.team_id === team);
        expect(rows.map((row) => row.status)).toEqual(["done", "done", "done"]);
      }
    } finally {
      globalThis.fetch = original;
    }
  });
});
