/**
 * The app authors' test kit (shared/app/testing.ts) holds to what it
 * promises: payloads the ingress's own parser accepts, a fake Slack that
 * answers as Slack does and the engine's real client classifies, and chains
 * retried and parked as the consumer would.
 */
import { describe, expect, it } from "vitest";
import { createApp, defineEffect, followUps, run, slack } from "../../shared/app/index.ts";
import * as kit from "../../shared/app/testing.ts";
import {
  blockSuggestion,
  buttonClick,
  eventCallback,
  type FakeHost,
  fakeService,
  fakeSlack,
  httpStatus,
  mention,
  message,
  networkDown,
  rateLimited,
  runChain,
  runEffect,
  runHandler,
  slackError,
  slashCommand,
  viewSubmission,
} from "../../shared/app/testing.ts";

const app = createApp()
  .uses("chat.postMessage", "reactions.add")
  .event("app_mention", ({ payload }) => [slack("chat.postMessage", { channel: payload.channel, thread_ts: payload.ts, text: "hi" })])
  .message("hello", ({ payload }) => [slack("reactions.add", { channel: payload.channel, timestamp: payload.ts, name: "wave" })])
  .command("/x", ({ payload }) => ({ ack: { text: `got ${payload.text}` } }))
  .action("go", ({ payload }) => [slack("chat.postMessage", { channel: "C1", text: payload.value ?? "" })])
  .view("form", ({ payload }) => ({
    ack: { response_action: "clear" },
    intents: [slack("chat.postMessage", { channel: "C1", text: payload.callback_id })],
  }))
  .options("pick", ({ payload }) => ({ ack: { options: [{ text: { type: "plain_text", text: payload.value }, value: payload.value }] } }));

describe("runHandler: a payload in Slack's shape, through the ingress's parser and app.route", () => {
  it.each([
    ["an app_mention", mention({ ts: "1.1", channel: "C9" }), "event(app_mention)"],
    ["a plain message", message({ text: "hello there" }), "message(hello)"],
    ["a slash command", slashCommand({ command: "/x", text: "y" }), "command(/x)"],
    ["a button click", buttonClick({ actionId: "go", value: "v" }), "action(go)"],
    ["a view submission", viewSubmission({ callbackId: "form" }), "view(form)"],
    ["an options request", blockSuggestion({ actionId: "pick", value: "de" }), "options(pick)"],
  ])("%s reaches its handler", (_, payload, handler) => {
    expect(runHandler(app, payload)).toMatchObject({ outcome: "recorded", handler });
  });

  it("returns the ack, and the intents the ingress would record", () => {
    expect(runHandler(app, mention({ ts: "1.1", channel: "C9" })).intents).toEqual([
      { key: "chat.postMessage", effect: "chat.postMessage", args: { channel: "C9", thread_ts: "1.1", text: "hi" } },
    ]);
    expect(runHandler(app, slashCommand({ command: "/x", text: "y" }))).toEqual({
      outcome: "recorded",
      handler: "command(/x)",
      ack: { text: "got y" },
      intents: [],
    });
  });

  it("says ignored for what no handler matches, and refused (with the reason) for what cannot be recorded", () => {
    expect(runHandler(app, eventCallback({ type: "reaction_added" }))).toEqual({
      outcome: "ignored",
      intents: [],
      reason: "no handler for event reaction_added",
    });
    const undeclared = createApp().command("/y", () => [slack("pins.add", { channel: "C1" })]);
    expect(runHandler(undeclared, slashCommand({ command: "/y" }))).toMatchObject({
      outcome: "refused",
      reason: expect.stringContaining("Slack method pins.add is not declared"),
    });
  });

  it("throws on a body the ingress would answer 400: a mistake in the test, not an outcome", () => {
    expect(() => runHandler(app, { contentType: "application/json", body: "{}" })).toThrow("JSON body has no type");
  });
});

describe("fakeSlack: answers as Slack does, and the engine's client classifies it", () => {
  const post = (args: Record<string, unknown>) => ({ key: "p", effect: "chat.postMessage", args });

  it("a post gets a ts and the message; no channel is channel_not_found and no text is no_text, each parked", async () => {
    const fake = fakeSlack();
    const ok = await runEffect(app, post({ channel: "C1", text: "a", blocks: [{ type: "divider" }] }), { slack: fake });
    expect(ok).toMatchObject({ outcome: "done", result: { channel: "C1", ts: expect.stringMatching(/^\d+\.\d{6}$/) } });
    expect(await runEffect(app, post({ text: "a" }), { slack: fake })).toEqual({
      outcome: "park",
      error: "chat.postMessage: channel_not_found",
    });
    expect(await runEffect(app, post({ channel: "C1" }), { slack: fake })).toEqual({ outcome: "park", error: "chat.postMessage: no_text" });
    expect(fake.calls[0]).toMatchObject({ method: "chat.postMessage", authorized: true, args: { blocks: [{ type: "divider" }] } });
  });

  it("scripted answers first: a retryable ok:false, a 429 with its Retry-After, a 503 and no answer are retries; other errors park", async () => {
    const fake = fakeSlack().answer(
      "chat.postMessage",
      slackError("internal_error"),
      rateLimited(7),
      httpStatus(503),
      networkDown(),
      slackError("not_in_channel"),
    );
    const outcomes = [];
    for (let i = 0; i < 5; i++) outcomes.push(await runEffect(app, post({ channel: "C1", text: "a" }), { slack: fake }));
    expect(outcomes).toEqual([
      { outcome: "retry", error: "chat.postMessage: internal_error" },
      { outcome: "retry", error: "chat.postMessage: HTTP 429 rate limited", retryAfterMs: 7000 },
      { outcome: "retry", error: "chat.postMessage: HTTP 503" },
      { outcome: "retry", error: expect.stringContaining("chat.postMessage: no answer") },
      { outcome: "park", error: "chat.postMessage: not_in_channel" },
    ]);
    expect(fake.unused()).toEqual([]);
  });

  it("answers a response_url as Slack does, and the engine's response_url effect posts its body there", async () => {
    const fake = fakeSlack();
    const intent = { key: "r", effect: "response_url", args: { url: "https://hooks.slack.com/commands/T1/1/x", body: { text: "done" } } };
    expect(await runEffect(app, intent, { slack: fake })).toEqual({ outcome: "done", result: { status: 200 }, followUps: [] });
    expect(fake.callsTo("response_url")).toMatchObject([{ args: { text: "done" } }]);
  });
});

describe("fakeService and runChain", () => {
  const ask = defineEffect<{ n: number }>(
    "ask",
    async (args, ctx) => {
      const response = await ctx.fetch("https://svc.example/q", { method: "POST", body: JSON.stringify(args) });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      return followUps({ n: args.n }, [slack("chat.postMessage", { channel: "C1", text: String(args.n) })]);
    },
    { maxAttempts: 3, slackMethods: [] },
  );
  const chained = createApp().uses("chat.postMessage").effect(ask);

  it("records each request, answers in order, and runs the follow-ups after their parent, keyed from its key", async () => {
    const service = fakeService("https://svc.example").answer(httpStatus(500), httpStatus(200, {}));
    const fake = fakeSlack();
    const steps = await runChain(chained, [run(ask, { n: 1 })], { slack: fake, services: [service] });
    expect(steps.map((s) => [s.key, s.depth, s.status, s.attempts.map((a) => a.outcome)])).toEqual([
      ["kit:ask", 0, "done", ["retry", "done"]],
      ["kit:ask>chat.postMessage", 1, "done", ["done"]],
    ]);
    expect(service.calls.map((c) => [c.method, c.path, c.json])).toEqual([
      ["POST", "/q", { n: 1 }],
      ["POST", "/q", { n: 1 }],
    ]);
  });

  it("parks a step whose attempts are spent (the effect's maxAttempts), and runs none of its follow-ups", async () => {
    const service = fakeService("https://svc.example").otherwise(httpStatus(503));
    const steps = await runChain(chained, [run(ask, { n: 2 })], { slack: fakeSlack(), services: [service] });
    expect(steps).toHaveLength(1);
    expect(steps[0]).toMatchObject({ status: "dead", attempts: [{ outcome: "retry" }, { outcome: "retry" }, { outcome: "retry" }] });
    expect(service.calls).toHaveLength(3);
  });

  it("says which fake is missing when an effect calls a host nobody fakes", async () => {
    expect(await runEffect(chained, run(ask, { n: 3 }), { slack: fakeSlack() })).toEqual({
      outcome: "retry",
      error: 'fetch: no answer (TypeError: no fake answers https://svc.example: pass fakeService("https://svc.example") in services)',
    });
  });

  it("leaves the global fetch alone, even when the effect throws", async () => {
    const before = globalThis.fetch;
    await runEffect(chained, run(ask, { n: 4 }), { slack: fakeSlack() });
    expect(globalThis.fetch).toBe(before);
  });
});

describe("the test kit (the app's second door)", () => {
  it("carries payloads in Slack's shapes, a handler run, an effect run, the fakes and the whole path", () => {
    const names = ["runHandler", "runEffect", "runChain", "fakeSlack", "fakeService", "slashCommand", "mention", "message", "wholePath"];
    for (const name of [...names, "eventCallback", "buttonClick", "viewSubmission", "blockSuggestion", "slackError", "rateLimited"]) {
      expect(typeof (kit as Record<string, unknown>)[name], name).toBe("function");
    }
  });
});

describe("the kit's network edge: each run its own", () => {
  // Every kind of call an effect makes: its own ctx.fetch, ctx.slack, and (the next intent) a response_url.
  const relay = defineEffect<{ who: string }>(
    "relay",
    async (args, ctx) => {
      const response = await ctx.fetch("https://svc.example/q", { method: "POST", body: JSON.stringify(args) });
      const { said } = (await response.json()) as { said: string };
      await ctx.slack.call("chat.postMessage", { channel: "C1", text: said });
      return { said };
    },
    { slackMethods: ["chat.postMessage"] },
  );
  const relaying = createApp().uses("chat.postMessage").effect(relay);
  const answer = (who: string) => ({
    key: "r",
    effect: "response_url",
    args: { url: `https://hooks.slack.com/commands/T1/1/${who}`, body: { text: who } },
  });

  /** A service that answers only once `there` has been asked too: the two runs are then under way at once. */
  function meeting(who: string, here: () => void, there: Promise<void>) {
    const service = fakeService("https://svc.example").answer(httpStatus(200, { said: `from ${who}` }));
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

  it("two runs at once, each with its own fakes: each fake gets exactly its run's calls, and none reaches globalThis.fetch", async () => {
    const stray: string[] = [];
    const original = globalThis.fetch;
    globalThis.fetch = (async (input: RequestInfo | URL) => {
      stray.push(input instanceof Request ? input.url : String(input));
      throw new TypeError("a kit run reached globalThis.fetch");
    }) as typeof fetch;
    try {
      let askedA = () => {};
      let askedB = () => {};
      const a = meeting("a", () => askedA(), new Promise<void>((resolve) => (askedB = resolve)));
      const b = meeting("b", () => askedB(), new Promise<void>((resolve) => (askedA = resolve)));
      const [slackA, slackB] = [fakeSlack(), fakeSlack()];
      const [stepsA, stepsB] = await Promise.all([
        runChain(relaying, [run(relay, { who: "a" }), answer("a")], { slack: slackA, services: [a.host] }),
        runChain(relaying, [run(relay, { who: "b" }), answer("b")], { slack: slackB, services: [b.host] }),
      ]);
      expect(stray).toEqual([]);
      for (const steps of [stepsA, stepsB])
        expect(steps.map((step) => [step.effect, step.status])).toEqual([
          ["relay", "done"],
          ["response_url", "done"],
        ]);
      expect(a.service.calls.map((call) => call.json)).toEqual([{ who: "a" }]);
      expect(b.service.calls.map((call) => call.json)).toEqual([{ who: "b" }]);
      expect(slackA.calls.map((call) => [call.method, call.args])).toEqual([
        ["chat.postMessage", { channel: "C1", text: "from a" }],
        ["response_url", { text: "a" }],
      ]);
      expect(slackB.calls.map((call) => [call.method, call.args])).toEqual([
        ["chat.postMessage", { channel: "C1", text: "from b" }],
        ["response_url", { text: "b" }],
      ]);
    } finally {
      globalThis.fetch = original;
    }
  });

  it("routes by origin to any fake of a host, beside Slack and the services (how a model's fake plugs in)", async () => {
    const seen: string[] = [];
    const model: FakeHost = {
      origin: "https://model.test",
      handle: async (request) => {
        seen.push(new URL(request.url).pathname);
        return Response.json({ said: "from the model" });
      },
    };
    const asking = defineEffect(
      "ask-model",
      async (_, ctx) => {
        const { said } = (await (await ctx.fetch("https://model.test/v1/chat/completions", { method: "POST" })).json()) as { said: string };
        return { said };
      },
      { slackMethods: [] },
    );
    const outcome = await runEffect(createApp().effect(asking), run(asking, {}), { slack: fakeSlack(), services: [model] });
    expect(outcome).toEqual({ outcome: "done", result: { said: "from the model" }, followUps: [] });
    expect(seen).toEqual(["/v1/chat/completions"]);
  });
});

describe("an effect whose follow-ups are not JSON", () => {
  it("is parked, not retried: it was performed, and a retry would perform it again", async () => {
    const other = defineEffect("other", async () => undefined);
    const first = defineEffect("first", async () => followUps(null, [run(other, { n: 1n } as never)]));
    const app = createApp().effect(other).effect(first);
    const outcome = await kit.runEffect(app, { key: "k", effect: "first", args: {} }, { slack: kit.fakeSlack() });
    expect(outcome.outcome).toBe("park");
  });
});
