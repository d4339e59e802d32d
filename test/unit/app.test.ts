/**
 * The app API's matching (shared/app/app.ts) and the checks on what a
 * handler returns (shared/app/intents.ts), on inputs as the parser makes them.
 */
import { describe, expect, it } from "vitest";
import { type App, createApp, type Routing } from "../../shared/app/app.ts";
import { defineEffect } from "../../shared/app/effects.ts";
import { MAX_ARGS_BYTES, MAX_INTENTS, run, slack } from "../../shared/app/intents.ts";
import { NO_APP_SETTINGS } from "../../shared/app/settings.ts";
import { parseSlackBody, type RecordableInput } from "../../shared/slack/inputs.ts";

const context = { now: 1_000, settings: NO_APP_SETTINGS };
const noop = () => undefined;
const post = (text: string) => [slack("chat.postMessage", { channel: "C1", text })];

const event = (e: Record<string, unknown>): RecordableInput => ({
  surface: "event",
  id: "Ev1",
  teamId: "T1",
  event: { type: "message", ...e },
});
const command = (name: string): RecordableInput => ({
  surface: "command",
  id: "command:T1:t",
  teamId: "T1",
  command: {
    command: name,
    text: "hi",
    teamId: "T1",
    channelId: "C1",
    userId: "U1",
    responseUrl: "https://hooks.slack.com/x",
    triggerId: "t",
  },
});
const interaction = (type: string, payload: Record<string, unknown>): RecordableInput => ({
  surface: "interaction",
  id: "interaction:T1:t",
  teamId: "T1",
  type,
  payload: { type, team: { id: "T1" }, user: { id: "U1" }, trigger_id: "t", ...payload },
});

/** An array with a hole at 0 (JSON.stringify would write null there). */
function sparse(): unknown[] {
  const array: unknown[] = [];
  array[1] = "x";
  return array;
}

function texts(routing: Routing): string[] {
  return routing.action === "record" ? routing.effects.map((e) => String((e.payload as { text?: string }).text)) : [routing.action];
}

const app = createApp()
  .uses("chat.postMessage")
  .event("app_mention", () => post("event"))
  .message("deploy", () => post("message string"))
  .message(/^status\b/, () => post("message regexp"))
  .command("/ask", () => post("command"))
  .action("approve", () => post("action by action_id"))
  .action(/^row-/, () => post("action by block_id"))
  .view("feedback", () => ({ ack: { response_action: "clear" } }))
  .viewClosed("feedback", () => post("view closed"))
  .shortcut("new_ticket", () => post("global shortcut"))
  .messageShortcut("file_it", () => post("message shortcut"))
  .options("topic", () => ({ ack: { options: [{ text: { type: "plain_text", text: "a" }, value: "a" }] } }));

describe("every matcher kind, matched and unmatched", () => {
  it.each<[string, RecordableInput, string[]]>([
    ["event(type)", event({ type: "app_mention" }), ["event"]],
    ["event(type), another type", event({ type: "reaction_added" }), ["ignore"]],
    ["message(string) contained", event({ text: "please deploy now" }), ["message string"]],
    ["message(RegExp)", event({ text: "status of api" }), ["message regexp"]],
    ["message(), neither pattern", event({ text: "hello" }), ["ignore"]],
    ["message() skips a subtype", event({ text: "deploy", subtype: "message_changed" }), ["ignore"]],
    ["message() skips a bot", event({ text: "deploy", bot_id: "B1" }), ["ignore"]],
    ["command(name)", command("/ask"), ["command"]],
    ["command(name), another command", command("/other"), ["ignore"]],
    ["action(action_id)", interaction("block_actions", { actions: [{ action_id: "approve", block_id: "b1" }] }), ["action by action_id"]],
    ["action(block_id RegExp)", interaction("block_actions", { actions: [{ action_id: "x", block_id: "row-3" }] }), ["action by block_id"]],
    ["action(), no id matches", interaction("block_actions", { actions: [{ action_id: "x", block_id: "y" }] }), ["ignore"]],
    ["viewClosed(callback_id)", interaction("view_closed", { view: { id: "V", hash: "h", callback_id: "feedback" } }), ["view closed"]],
    ["view(), another callback_id", interaction("view_submission", { view: { id: "V", callback_id: "other" } }), ["ignore"]],
    ["shortcut(callback_id)", interaction("shortcut", { callback_id: "new_ticket" }), ["global shortcut"]],
    ["shortcut() does not match a message shortcut", interaction("message_action", { callback_id: "new_ticket" }), ["ignore"]],
    ["messageShortcut(callback_id)", interaction("message_action", { callback_id: "file_it" }), ["message shortcut"]],
    ["options(action_id), another menu", interaction("block_suggestion", { action_id: "other", value: "" }), ["ignore"]],
  ])("%s", (_, input, expected) => {
    expect(texts(app.route(input, context))).toEqual(expected);
  });

  it("view(callback_id): the ack body and no intents", () => {
    const routing = app.route(interaction("view_submission", { view: { id: "V", callback_id: "feedback" } }), context);
    expect(routing).toEqual({ action: "record", effects: [], reply: { response_action: "clear" }, handler: "view(feedback)" });
  });

  it("options(action_id): answered inline with the list, nothing to record", () => {
    const routing = app.route(interaction("block_suggestion", { action_id: "topic", value: "a" }), context);
    expect(routing).toMatchObject({ action: "record", effects: [], reply: { options: [{ value: "a" }] } });
  });

  it("gives the handler the context of the input and the request's time", () => {
    const seen: unknown[] = [];
    const probe = createApp().action("go", (_, ctx) => {
      seen.push(ctx);
      return [];
    });
    probe.route(interaction("block_actions", { enterprise: { id: "E1" }, channel: { id: "C9" }, actions: [{ action_id: "go" }] }), context);
    expect(seen).toEqual([{ teamId: "T1", enterpriseId: "E1", userId: "U1", channelId: "C9", now: 1_000, settings: {} }]);
  });
});

describe("a field Slack sends empty is absent, as in its SDKs' sample payloads", () => {
  // The shape of Slack's SDK sample payloads (json-logs/samples/events): every field present, the absent ones "".
  const samplePayload = (event: Record<string, unknown>) =>
    JSON.stringify({
      token: "",
      team_id: "T1",
      api_app_id: "A1",
      type: "event_callback",
      event_id: "Ev1",
      event_time: 123,
      authed_users: [""],
      event: {
        type: "message",
        subtype: "",
        channel: "C1",
        user: "U1",
        bot_id: "",
        text: "please deploy now",
        ts: "1.000001",
        thread_ts: "",
        event_ts: "1.000001",
        channel_type: "channel",
        ...event,
      },
    });
  const parsed = (event: Record<string, unknown> = {}): RecordableInput => {
    const result = parseSlackBody("application/json", samplePayload(event));
    if (!result.ok || result.input.surface !== "event") throw new Error("the sample did not parse as an event");
    return result.input;
  };

  it("a user's message with an empty bot_id and subtype is a user's message, not a bot's", () => {
    expect(texts(app.route(parsed(), context))).toEqual(["message string"]);
  });

  it("a message with a non-empty bot_id or subtype is still skipped", () => {
    expect(texts(app.route(parsed({ bot_id: "B1" }), context))).toEqual(["ignore"]);
    expect(texts(app.route(parsed({ subtype: "message_changed" }), context))).toEqual(["ignore"]);
  });

  it("an empty user or channel reaches the handler's context as absent", () => {
    const seen: unknown[] = [];
    const probe = createApp().event("message", (_, ctx) => {
      seen.push([ctx.userId, ctx.channelId]);
      return [];
    });
    probe.route(parsed({ user: "", channel: "" }), context);
    probe.route(parsed(), context);
    expect(seen).toEqual([
      [undefined, undefined],
      ["U1", "C1"],
    ]);
  });
});

describe("first match wins", () => {
  it("runs only the first registered handler that matches, even when it returns nothing", () => {
    const ordered = createApp()
      .uses("chat.postMessage")
      .message("deploy", () => undefined)
      .message(/deploy/, () => post("never"));
    expect(ordered.route(event({ text: "deploy now" }), context)).toEqual({ action: "record", effects: [], handler: "message(deploy)" });
    expect(texts(ordered.route(event({ text: "redeploy" }), context))).toEqual([]);
  });

  it("so a specific handler registered before a catch-all wins", () => {
    const specificFirst = createApp()
      .uses("chat.postMessage")
      .command("/ask", () => post("specific"))
      .command(/^\//, () => post("catch-all"));
    expect(texts(specificFirst.route(command("/ask"), context))).toEqual(["specific"]);
    expect(texts(specificFirst.route(command("/other"), context))).toEqual(["catch-all"]);
  });

  it.each<[string, (app: App) => App, string]>([
    ["a command after a catch-all command", (a) => a.command(/^\//, noop).command("/standup", noop), "command(/standup)"],
    ["the same command twice", (a) => a.command("/ask", noop).command("/ask", noop), "command(/ask)"],
    ["a button after a catch-all action", (a) => a.action(/.*/, noop).action("standup_done", noop), "action(standup_done)"],
    ["a block_id already taken", (a) => a.action("b1", noop).action("b1", noop), "action(b1)"],
    ["a message pattern after message()", (a) => a.message(undefined, noop).message("deploy", noop), "message(deploy)"],
    ["a message pattern containing an earlier one", (a) => a.message("dep", noop).message("deploy", noop), "message(deploy)"],
    ["message() after event(message)", (a) => a.event("message", noop).message(undefined, noop), "message()"],
    ["a view after a catch-all view", (a) => a.view(/.*/, noop).view("standup_modal", noop), "view(standup_modal)"],
    ["options after the same options", (a) => a.options("topic", noop).options("topic", noop), "options(topic)"],
  ])("refuses, when it is registered, %s: it could never run", (_, register, label) => {
    expect(() => register(createApp())).toThrow(`${label} would never run`);
  });

  it("allows what an earlier handler does not always take: another command, event(message) after message(), a RegExp", () => {
    const app = createApp()
      .uses("chat.postMessage")
      .command("/ask", noop)
      .command("/standup", () => post("standup"))
      .message(undefined, noop)
      .event("message", () => post("any message"))
      .command(/^\/st/, noop)
      .action("a", noop)
      .action("b", noop);
    expect(texts(app.route(command("/standup"), context))).toEqual(["standup"]);
    expect(texts(app.route(event({ subtype: "message_changed" }), context))).toEqual(["any message"]);
  });
});

describe("the conversations a message handler hears", () => {
  const step = { title: "Step" };
  it("are public channels when it names none (what the manifest subscribes): a DM is another handler's", () => {
    const routed = createApp()
      .uses("chat.postMessage")
      .message(undefined, () => post("channels"))
      .message(undefined, () => post("dm"), { channelTypes: ["im"] });
    expect(texts(routed.route(event({ text: "hi", channel_type: "channel" }), context))).toEqual(["channels"]);
    expect(texts(routed.route(event({ text: "hi", channel_type: "im" }), context))).toEqual(["dm"]);
    expect(
      texts(
        createApp()
          .message(undefined, noop)
          .route(event({ text: "hi", channel_type: "group" }), context),
      ),
    ).toEqual(["ignore"]);
  });

  it("decide what an earlier catch-all covers: other conversations, and other custom steps, are not shadowed", () => {
    expect(() =>
      createApp()
        .message(undefined, noop, { channelTypes: ["im"] })
        .message("deploy", noop, { channelTypes: ["channels"] })
        .function("step_a", step, noop)
        .function("step_b", step, noop)
        .event("function_executed", noop),
    ).not.toThrow();
    expect(() =>
      createApp()
        .message(undefined, noop, { channelTypes: ["channels", "im"] })
        .message("deploy", noop),
    ).toThrow("message(deploy) would never run");
  });
});

describe("what a handler returns is checked before anything is written", () => {
  const one = (intents: unknown) =>
    createApp()
      .uses("chat.postMessage")
      .command("/x", () => intents as never);
  const refusal = (intents: unknown) => {
    const routing = one(intents).route(command("/x"), context);
    return routing.action === "refuse" ? routing.reason : `not refused: ${routing.action}`;
  };

  it("refuses, naming the handler, when the handler throws", () => {
    const throwing = createApp().command("/x", () => {
      throw new TypeError("boom");
    });
    expect(throwing.route(command("/x"), context)).toEqual({ action: "refuse", reason: "handler command(/x) threw: TypeError: boom" });
  });

  it.each<[string, unknown, string]>([
    ["a duplicate key", [slack("chat.postMessage", { text: "a" }), slack("chat.postMessage", { text: "b" })], "duplicate key"],
    ["an effect nobody registered", [run({ name: "nowhere" }, {})], 'no effect named "nowhere"'],
    ["a key with the follow-up separator", [slack("chat.postMessage", {}, { key: "a>b" })], "key must match"],
    ["args with a function", [slack("chat.postMessage", { text: () => 1 } as never)], "args.text is a function, not JSON"],
    ["args with undefined", [slack("chat.postMessage", { blocks: [undefined] } as never)], "args.blocks[0] is a undefined, not JSON"],
    ["args with a hole in an array", [slack("chat.postMessage", { blocks: sparse() } as never)], "args.blocks[0] is a undefined, not JSON"],
    ["args with NaN", [slack("chat.postMessage", { n: Number.NaN })], "args.n is NaN, not a JSON number"],
    ["args with a BigInt", [slack("chat.postMessage", { n: 1n } as never)], "args.n is a bigint, not JSON"],
    ["args with a Date", [slack("chat.postMessage", { at: new Date(0) } as never)], "args.at is a Date, not a plain object"],
    ["args that are an array", [{ key: "k", effect: "chat.postMessage", args: [] }], "args must be a JSON object"],
    ["oversized args", [slack("chat.postMessage", { text: "x".repeat(MAX_ARGS_BYTES) })], `more than ${MAX_ARGS_BYTES}`],
    [
      "too many intents",
      Array.from({ length: MAX_INTENTS + 1 }, (_, i) => slack("chat.postMessage", {}, { key: `k${i}` })),
      `more than ${MAX_INTENTS}`,
    ],
  ])("refuses %s", (_, intents, reason) => {
    expect(refusal(intents)).toContain(reason);
    expect(refusal(intents)).toContain("handler command(/x)");
  });

  it("refuses a Slack method the app did not declare with uses(), saying how to", () => {
    expect(refusal([slack("reactions.add", {})])).toContain('Slack method reactions.add is not declared: add app.uses("reactions.add")');
  });

  it("refuses a handler that returns a Promise (an async handler would do I/O before the ack)", () => {
    const asyncHandler = createApp().command("/x", (async () => []) as never);
    expect(asyncHandler.route(command("/x"), context)).toMatchObject({
      action: "refuse",
      reason: expect.stringContaining("returned a Promise"),
    });
  });

  it("stores an intent's args as read once: a getter on the intent that answers otherwise later changes nothing", () => {
    let reads = 0;
    const intent = Object.defineProperty({ key: "k", effect: "chat.postMessage" }, "args", {
      get: () => (++reads === 1 ? { text: "checked" } : { text: "later", f: () => 1 }),
      enumerable: true,
    });
    const routed = createApp()
      .uses("chat.postMessage")
      .command("/x", () => [intent as never])
      .route(command("/x"), context);
    expect(routed).toMatchObject({ action: "record", effects: [{ key: "k", payload: { text: "checked" } }] });
    expect(reads).toBe(1);
  });

  it("refuses, naming the handler, when reading its intents throws (a getter), instead of failing the ack", () => {
    const intent = Object.defineProperty({ key: "k", effect: "chat.postMessage" }, "args", {
      get: () => {
        throw new RangeError("no args today");
      },
      enumerable: true,
    });
    const routed = createApp()
      .uses("chat.postMessage")
      .command("/x", () => [intent as never])
      .route(command("/x"), context);
    expect(routed).toEqual({ action: "refuse", reason: "handler command(/x): its intents could not be read: RangeError: no args today" });
  });

  it("refuses a self-referencing object", () => {
    const args: Record<string, unknown> = {};
    args.self = args;
    expect(refusal([slack("chat.postMessage", args)])).toContain("args.self refers to itself");
  });

  it("accepts an effect the app registered, any Slack method, and a response_url", () => {
    const mine = defineEffect("mine", async () => null);
    const ok = createApp()
      .uses("admin.conversations.search", "chat.postMessage")
      .effect(mine)
      .command("/x", () => [
        run(mine, { a: 1 }),
        slack("admin.conversations.search", { query: "x" }),
        slack("chat.postMessage", { text: "t" }, { key: "two" }),
      ]);
    expect(ok.route(command("/x"), context)).toMatchObject({
      action: "record",
      effects: [{ effect: "mine" }, { effect: "admin.conversations.search" }, { effect: "chat.postMessage" }],
    });
  });

  it("refuses an effect name that could be a Slack method, and a second registration of a name", () => {
    expect(() => defineEffect("chat.post", async () => null)).toThrow(/no dot/);
    const twice = defineEffect("twice", async () => null);
    expect(() => createApp().effect(twice).effect(twice)).toThrow(/registered twice/);
  });

  it("refuses openView from an input with no trigger_id", () => {
    const modal = createApp().event("app_mention", () => ({ openView: { type: "modal" } }));
    expect(modal.route(event({ type: "app_mention" }), context)).toMatchObject({
      action: "refuse",
      reason: expect.stringContaining("no trigger_id"),
    });
  });
});
