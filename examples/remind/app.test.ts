/**
 * /remind and /escalate: timers and cancel, on the test kit (shared/app/testing.ts) for the handlers and the
 * escalation's first step, and through both Workers over the real local D1 (wholePath) for what is recorded:
 * a timer is a pending row with its time, not performed before it, and a Done or Ack click cancels it.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { createApp, manifestOf } from "../../shared/app/index.ts";
import { buttonClick, fakeSlack, runEffect, runHandler, slashCommand, wholePath } from "../../shared/app/testing.ts";
import { referenceApp } from "../reference/app.ts";
import { ESCALATION_ACK, escalationName, REMIND_DONE, remind, remindApp } from "./app.ts";

const NOW = Date.UTC(2026, 11, 2, 9, 0);

describe("/remind <minutes> <text>", () => {
  it("promises in the ack, with a Done button carrying the reminder's name, and records the reminder as a timer", () => {
    const run = runHandler(
      remind,
      slashCommand({ command: "/remind", text: "1 stretch", user: "U0ADA", channel: "C0TEAM", triggerId: "1.2.3" }),
      {
        now: NOW,
      },
    );
    const name = "remind:U0ADA:1.2.3";
    expect(run).toMatchObject({
      outcome: "recorded",
      ack: { response_type: "ephemeral", text: "I'll remind this channel in 1 minute: stretch" },
      intents: [
        {
          effect: "chat.postMessage",
          args: { channel: "C0TEAM", text: ":alarm_clock: Reminder from <@U0ADA>: stretch" },
          after: 60,
          name,
        },
      ],
    });
    expect(JSON.stringify(run.ack?.blocks)).toContain(`"action_id":"${REMIND_DONE}"`);
    expect(JSON.stringify(run.ack?.blocks)).toContain(`"value":"${name}"`);
  });

  it("answers its usage, recording nothing, for a missing text, no minutes, 0 minutes or more than a year", () => {
    for (const text of ["", "5", "soon stretch", "0 stretch", "525601 stretch"]) {
      const run = runHandler(remind, slashCommand({ command: "/remind", text }), { now: NOW });
      expect(run.outcome).toBe("recorded");
      expect(run.intents).toEqual([]);
      expect(run.ack?.text).toMatch(/^Usage: \/remind <minutes> <text>/);
    }
  });

  it("its Done button cancels the reminder by its name and replaces the promise", () => {
    const run = runHandler(remind, buttonClick({ actionId: REMIND_DONE, value: "remind:U0ADA:1.2.3" }), { now: NOW });
    expect(run.cancels).toEqual(["remind:U0ADA:1.2.3"]);
    expect(run.intents).toMatchObject([{ effect: "response_url", args: { body: { replace_original: true } } }]);
  });
});

describe("/escalate <minutes> <text>", () => {
  it("posts the message with its Ack button, and asks for the escalation in its thread that many minutes later, named for it", async () => {
    const { intents, ack } = runHandler(remind, slashCommand({ command: "/escalate", text: "15 prod is down", channel: "C0OPS" }), {
      now: NOW,
    });
    expect(ack?.text).toBe("Posting it; it escalates in 15 minutes unless someone acks.");
    const slack = fakeSlack();
    const [first] = intents;
    if (!first) throw new Error("no intent");
    const step = await runEffect(remind, first, { slack });
    const ts = slack.callsTo("chat.postMessage")[0]?.reply?.ts as string;
    expect(JSON.stringify(slack.callsTo("chat.postMessage")[0]?.args.blocks)).toContain(ESCALATION_ACK);
    expect(step).toMatchObject({
      outcome: "done",
      followUps: [{ effect: "chat.postMessage", args: { channel: "C0OPS", thread_ts: ts }, after: 900, name: escalationName("C0OPS", ts) }],
    });
  });

  it("its Ack button cancels the escalation of the message it sits on and updates the message", () => {
    const run = runHandler(
      remind,
      buttonClick({
        actionId: ESCALATION_ACK,
        channel: "C0OPS",
        messageTs: "1764600000.000001",
        user: "U0BO",
        message: { text: "prod is down" },
      }),
      { now: NOW },
    );
    expect(run.cancels).toEqual(["escalate:C0OPS:1764600000.000001"]);
    expect(run.intents).toMatchObject([{ effect: "chat.update", args: { channel: "C0OPS", ts: "1764600000.000001" } }]);
  });
});

describe("through both Workers, on the real local D1", () => {
  type Timer = { idempotency_key: string; status: string; due_at: number; created_at: number; cancelled_by: string | null };
  /** Every shard's timers (the test deployment splits workspaces over DB and DB_1). */
  const timers = async () => {
    const shards = [env.DB, (env as unknown as { DB_1: D1Database }).DB_1];
    const sql = "SELECT idempotency_key, status, due_at, created_at, cancelled_by FROM outbox WHERE due_at IS NOT NULL ORDER BY id";
    return (await Promise.all(shards.map(async (db) => (await db.prepare(sql).all<Timer>()).results))).flat();
  };

  it("a reminder is a pending row due a minute after the ack, not posted before; Done cancels it", async () => {
    const path = wholePath(remind, env);
    const { response, calls } = await path.command("/remind", { text: "1 stretch", trigger_id: "9.9.remind" });
    expect(response.status).toBe(200);
    // Its message went to the consumer at once in this harness (it does not hold messages): the claim refused it.
    expect(calls).toEqual([]);
    const [row] = (await timers()).filter((t) => t.idempotency_key.endsWith("9.9.remind"));
    expect(row).toMatchObject({ status: "pending", cancelled_by: null });
    expect((row?.due_at ?? 0) - (row?.created_at ?? 0)).toBe(60_000);

    const clicked = await path.interaction({
      type: "block_actions",
      user: { id: "U0PATH" },
      container: { type: "message", is_ephemeral: true, message_ts: "1.1", channel_id: "C0PATH" },
      response_url: "https://hooks.slack.com/actions/T0TEAM/1/done",
      actions: [{ type: "button", action_id: REMIND_DONE, block_id: "remind", value: "remind:U0PATH:9.9.remind" }],
    });
    expect(clicked.response.status).toBe(200);
    expect(clicked.calls).toMatchObject([{ method: "response_url", params: { replace_original: true } }]);
    const [cancelled] = (await timers()).filter((t) => t.idempotency_key.endsWith("9.9.remind"));
    expect(cancelled).toMatchObject({ status: "done", cancelled_by: expect.stringMatching(/^interaction:T0TEAM:/) });
  });

  it("an escalation posts its message now and its escalation later, named for the message", async () => {
    const path = wholePath(remind, env, { answers: { "chat.postMessage": { ok: true, ts: "1764600000.000777", channel: "C0PATH" } } });
    const { calls } = await path.command("/escalate", { text: "5 the build is red" });
    expect(calls.map((c) => c.method)).toEqual(["chat.postMessage"]);
    const [row] = (await timers()).filter((t) => t.idempotency_key === "name:T0TEAM:escalate%3AC0PATH%3A1764600000.000777");
    expect(row).toMatchObject({ status: "pending" });
  });
});

describe("composed", () => {
  it("before the reference app's catch-alls, its commands and buttons are its own; the manifest declares both commands", () => {
    const app = referenceApp(remindApp(createApp()));
    expect(runHandler(app, slashCommand({ command: "/remind", text: "2 tea" })).handler).toBe("command(/remind)");
    expect(runHandler(app, buttonClick({ actionId: ESCALATION_ACK })).handler).toBe(`action(${ESCALATION_ACK})`);
    const { manifest } = manifestOf(app, { url: "https://x.example" });
    const commands = (manifest.features as { slash_commands?: { command: string }[] }).slash_commands?.map((c) => c.command);
    expect(commands).toEqual(expect.arrayContaining(["/remind", "/escalate"]));
  });
});
