/**
 * The /standup app, tested on the app's test kit (shared/app/testing.ts)
 * alone: its handlers on Slack's payloads, its chain against a fake Slack and
 * a fake notes service — an outage, a 429, a refusal — and its composition
 * beside the reference app.
 */
import { describe, expect, it } from "vitest";
import { createApp, manifestOf } from "../../shared/app/index.ts";
import {
  buttonClick,
  fakeService,
  fakeSlack,
  httpStatus,
  rateLimited,
  runChain,
  runEffect,
  runHandler,
  slashCommand,
} from "../../shared/app/testing.ts";
import { referenceApp } from "../reference/app.ts";
import { DONE_BUTTON, standup, standupApp } from "./app.ts";

const NOW = Date.UTC(2026, 11, 2, 9, 0);
const KEY = "sk-standup-test-key";
/** What a deployment's vars and secrets would give (.dev.vars locally, `npm run setup` when deployed). */
const settings = { STANDUP_NOTES_URL: "https://notes.example", STANDUP_NOTES_KEY: KEY };
const notes = () => fakeService("https://notes.example");

describe("/standup", () => {
  it("answers in the ack and records one step: the standup message", () => {
    const run = runHandler(standup, slashCommand({ command: "/standup", channel: "C0TEAM" }), { now: NOW, settings });
    expect(run).toMatchObject({
      outcome: "recorded",
      handler: "command(/standup)",
      ack: { response_type: "ephemeral", text: "Posting today's standup…" },
      intents: [{ key: "standup-post", effect: "standup-post", args: { channel: "C0TEAM", date: "2026-12-02" } }],
    });
  });

  it("posts the message with its Done button, asks the notes service with the key and the row's Idempotency-Key, and posts the summary in the thread", async () => {
    const slack = fakeSlack();
    const service = notes().answer(httpStatus(200, { summary: "Ada: shipped the kit. Bo: reviewing." }));
    const { intents } = runHandler(standup, slashCommand({ command: "/standup", channel: "C0TEAM" }), { now: NOW, settings });
    const steps = await runChain(standup, intents, { slack, services: [service], settings, keyPrefix: "command:T0TEAM:1.2.3" });

    expect(steps.map((s) => [s.key, s.status, s.attempts.length])).toEqual([
      ["command:T0TEAM:1.2.3:standup-post", "done", 1],
      ["command:T0TEAM:1.2.3:standup-post>standup-notes", "done", 1],
      ["command:T0TEAM:1.2.3:standup-post>standup-notes>chat.postMessage", "done", 1],
    ]);
    const [message, summary] = slack.callsTo("chat.postMessage");
    expect(message?.args).toMatchObject({ channel: "C0TEAM", text: "Standup · 2026-12-02" });
    expect(message?.args.blocks).toContainEqual(
      expect.objectContaining({ type: "actions", elements: [expect.objectContaining({ action_id: DONE_BUTTON, value: "2026-12-02" })] }),
    );
    const ts = message?.reply?.ts;
    expect(summary?.args).toEqual({ channel: "C0TEAM", thread_ts: ts, text: "Ada: shipped the kit. Bo: reviewing." });
    expect(service.calls).toMatchObject([
      {
        method: "POST",
        path: "/v1/summary",
        json: { date: "2026-12-02" },
        headers: { authorization: `Bearer ${KEY}`, "idempotency-key": "command:T0TEAM:1.2.3:standup-post>standup-notes" },
      },
    ]);
  });

  it("rides out the service's outage: two 503s, delivered on the third attempt with the same key, the message posted once", async () => {
    const slack = fakeSlack();
    const service = notes().answer(httpStatus(503), httpStatus(503), httpStatus(200, { summary: "Late, but here." }));
    const steps = await runChain(standup, runHandler(standup, slashCommand({ command: "/standup" }), { now: NOW, settings }).intents, {
      slack,
      services: [service],
      settings,
    });
    expect(steps[1]?.attempts.map((a) => a.outcome)).toEqual(["retry", "retry", "done"]);
    expect(steps[1]?.attempts[0]).toEqual({ outcome: "retry", error: "notes service: HTTP 503" });
    expect(new Set(service.calls.map((c) => c.headers["idempotency-key"])).size).toBe(1);
    expect(slack.callsTo("chat.postMessage").map((c) => c.args.text)).toEqual(["Standup · 2026-12-02", "Late, but here."]);
  });

  it("waits out Slack's 429 on the thread post without asking the (paid) service again", async () => {
    const slack = fakeSlack().answer("chat.postMessage", httpStatus(200, { ok: true, channel: "C0CHANNEL", ts: "1.1" }), rateLimited(30));
    const service = notes().answer(httpStatus(200, { summary: "Quiet day." }));
    const steps = await runChain(standup, [{ key: "standup-post", effect: "standup-post", args: { channel: "C0CHANNEL", date: "d" } }], {
      slack,
      services: [service],
      settings,
    });
    expect(steps[2]?.attempts).toEqual([
      { outcome: "retry", error: "chat.postMessage: HTTP 429 rate limited", retryAfterMs: 30_000 },
      expect.objectContaining({ outcome: "done" }),
    ]);
    expect(service.calls).toHaveLength(1);
  });

  it("parks the chain, posting nothing in the thread, when the service refuses the key (401), and never writes the key down", async () => {
    const slack = fakeSlack();
    const service = notes().answer(httpStatus(401, { error: "bad key" }));
    const steps = await runChain(standup, runHandler(standup, slashCommand({ command: "/standup" }), { now: NOW, settings }).intents, {
      slack,
      services: [service],
      settings,
    });
    expect(steps.map((s) => s.status)).toEqual(["done", "dead"]);
    expect(steps[1]?.attempts).toEqual([{ outcome: "park", error: "notes service: HTTP 401" }]);
    expect(slack.callsTo("chat.postMessage")).toHaveLength(1);
    // Every row the chain would write (args, results, errors): the key is in none of them.
    expect(JSON.stringify(steps)).not.toContain(KEY);
  });
});

describe("its settings", () => {
  it("are its own, declared: the notes service's URL and key required, the key a secret no handler sees", async () => {
    expect(Object.keys(standup.declaredSettings).sort()).toEqual(["STANDUP_NOTES_KEY", "STANDUP_NOTES_URL"]);
    expect(standup.declaredSettings.STANDUP_NOTES_KEY).toMatchObject({ kind: "secret", required: true });
    // Without them a deployment answers 500 naming them; the kit refuses the same way.
    const intent = { key: "k", effect: "standup-notes", args: { channel: "C", ts: "1.1", date: "d" } };
    await expect(runEffect(standup, intent, { slack: fakeSlack() })).rejects.toThrow(/STANDUP_NOTES_URL is required/);
    expect(() => runHandler(standup, slashCommand({ command: "/standup" }))).toThrow(/STANDUP_NOTES_KEY is required/);
  });
});

describe("the Done button", () => {
  const click = (user: string, message = {}) =>
    buttonClick({ actionId: DONE_BUTTON, value: "2026-12-02", channel: "C0TEAM", messageTs: "1764600000.000001", user, message });

  it("updates the message with who is done and reacts on it; a second click's reaction is already there and counts as done", async () => {
    const first = runHandler(standup, click("U0ADA"), { now: NOW, settings });
    expect(first.intents.map((i) => i.effect)).toEqual(["chat.update", "reactions.add"]);
    expect(first.intents[0]?.args).toMatchObject({ channel: "C0TEAM", ts: "1764600000.000001", text: "Standup · 2026-12-02: 1 done" });

    // The second click comes on the message as updated: Slack echoes its blocks.
    const second = runHandler(standup, click("U0BO", { blocks: first.intents[0]?.args.blocks }), { now: NOW, settings });
    expect(JSON.stringify(second.intents[0]?.args.blocks)).toContain("Done: <@U0ADA>, <@U0BO>");

    const slack = fakeSlack();
    const reactions = [first, second].map((run) => run.intents[1]);
    const runs = [];
    for (const intent of reactions) if (intent) runs.push(await runEffect(standup, intent, { slack, settings }));
    expect(runs).toEqual([
      { outcome: "done", result: {}, followUps: [] },
      { outcome: "done", result: { already: "already_reacted" }, followUps: [] },
    ]);
    expect(slack.callsTo("reactions.add").map((c) => c.reply)).toEqual([{ ok: true }, { ok: false, error: "already_reacted" }]);
  });

  it("ignores another app's button: 200, nothing written", () => {
    expect(runHandler(standup, buttonClick({ actionId: "something_else" }), { settings })).toEqual({
      outcome: "ignored",
      intents: [],
      reason: "no handler for block_actions",
    });
  });
});

describe("beside the reference app", () => {
  it("composes before its catch-alls: /standup and its button are the standup's, every other command the reference app's", () => {
    const app = referenceApp(standupApp(createApp()));
    expect(runHandler(app, slashCommand({ command: "/standup" }), { settings }).handler).toBe("command(/standup)");
    expect(runHandler(app, slashCommand({ command: "/ackbox" }), { settings }).handler).toBe("command(/^\\//)");
    expect(runHandler(app, buttonClick({ actionId: DONE_BUTTON }), { settings }).handler).toBe(`action(${DONE_BUTTON})`);
  });

  it("is refused, naming the catch-all, when composed after it (it would never run)", () => {
    expect(() => standupApp(referenceApp(createApp()))).toThrow("command(/standup) would never run: command(/^\\//), registered before it");
  });

  it("has a manifest with its command, interactivity and the scopes of its methods, and no warning", () => {
    const { manifest, warnings } = manifestOf(standup, { url: "https://standup.example" });
    expect(warnings).toEqual([]);
    expect(manifest.features).toMatchObject({ slash_commands: [{ command: "/standup", description: "Post today's standup" }] });
    expect(manifest.settings).toMatchObject({ interactivity: { is_enabled: true } });
    expect(manifest.oauth_config).toEqual({ scopes: { bot: ["chat:write", "commands", "reactions:write"] } });
  });
});
