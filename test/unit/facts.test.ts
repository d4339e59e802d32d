import { describe, expect, it } from "vitest";
import { factOf } from "../../shared/slack/facts.ts";
import { type EventInput, parseSlackBody, type RecordableInput } from "../../shared/slack/inputs.ts";

const event = (body: Record<string, unknown>, id = "Ev1"): EventInput => ({
  surface: "event",
  id,
  teamId: "T1",
  event: body as EventInput["event"],
});
const fact = (input: RecordableInput) => factOf(input).fact;

describe("fact identity: one per event type, the same for every copy of one fact", () => {
  it("a message: team, channel, ts; the same message under another event_id is the same fact", () => {
    const message = { type: "message", channel: "C1", user: "U1", text: "hi", ts: "1700000000.000100" };
    expect(factOf(event(message, "Ev1"))).toEqual({ fact: "message:T1:C1:1700000000.000100" });
    expect(fact(event(message, "Ev2"))).toBe(fact(event(message, "Ev1")));
    expect(fact(event({ ...message, ts: "1700000000.000200" }))).not.toBe(fact(event(message)));
    expect(fact(event({ ...message, channel: "C2" }))).not.toBe(fact(event(message)));
    expect(fact({ ...event(message), teamId: "T2" })).not.toBe(fact(event(message)));
  });

  it("a message's subtypes other than an edit or a deletion are the message (a backfill sees them the same way)", () => {
    const share = { type: "message", subtype: "file_share", channel: "C1", ts: "5.5" };
    expect(fact(event(share))).toBe("message:T1:C1:5.5");
  });

  it("an app_mention of a message is a fact of its own, beside the message's", () => {
    const ts = "1700000000.000100";
    const mention = fact(event({ type: "app_mention", channel: "C1", user: "U1", text: "<@UB> hi", ts }));
    expect(mention).toBe(`app_mention:T1:C1:${ts}`);
    expect(mention).not.toBe(fact(event({ type: "message", channel: "C1", ts })));
  });

  it("an edit is keyed by the edit: two edits of one message are two facts, neither the message", () => {
    const edit = (eventTs: string) => ({
      type: "message",
      subtype: "message_changed",
      channel: "C1",
      ts: eventTs,
      message: { type: "message", user: "U1", text: "fixed", ts: "1.0", edited: { user: "U1", ts: eventTs } },
      previous_message: { type: "message", user: "U1", text: "fxied", ts: "1.0" },
    });
    expect(fact(event(edit("2.0")))).toBe("message_changed:T1:C1:1.0:2.0");
    expect(fact(event(edit("3.0")))).not.toBe(fact(event(edit("2.0"))));
    expect(fact(event(edit("2.0"), "EvCopy"))).toBe(fact(event(edit("2.0"))));
    expect(fact(event(edit("2.0")))).not.toBe(fact(event({ type: "message", channel: "C1", ts: "1.0" })));
  });

  it("a deletion is keyed by the message deleted", () => {
    expect(fact(event({ type: "message", subtype: "message_deleted", channel: "C1", ts: "9.0", deleted_ts: "1.0" }))).toBe(
      "message_deleted:T1:C1:1.0",
    );
  });

  it("a reaction: item, user, event time and reaction; added and removed are two facts", () => {
    const reaction = (type: string, over: Record<string, unknown> = {}) => ({
      type,
      user: "U1",
      reaction: "thumbsup::skin-tone-2",
      item: { type: "message", channel: "C1", ts: "1.0" },
      item_user: "U2",
      event_ts: "4.0",
      ...over,
    });
    expect(factOf(event(reaction("reaction_added")))).toEqual({ fact: "reaction_added:T1:C1/1.0:U1:4.0:thumbsup::skin-tone-2" });
    expect(fact(event(reaction("reaction_removed")))).toBe("reaction_removed:T1:C1/1.0:U1:4.0:thumbsup::skin-tone-2");
    expect(fact(event(reaction("reaction_added", { event_ts: "5.0" })))).not.toBe(fact(event(reaction("reaction_added"))));
    expect(fact(event(reaction("reaction_added", { item: { type: "file", file: "F1" } })))).toBe(
      "reaction_added:T1:F1:U1:4.0:thumbsup::skin-tone-2",
    );
  });

  it("an event with no natural identity, or a message without a channel or ts, is its event_id", () => {
    expect(factOf(event({ type: "app_home_opened", user: "U1", tab: "home" }, "EvHome"))).toEqual({ fact: "EvHome" });
    expect(fact(event({ type: "message", channel: "C1" }, "EvNoTs"))).toBe("EvNoTs");
    expect(fact(event({ type: "app_mention", ts: "1.0", channel: "" }, "EvNoChannel"))).toBe("EvNoChannel");
  });

  it("a command and an interaction are their operation ids", () => {
    const form = new URLSearchParams({
      team_id: "T1",
      channel_id: "C1",
      user_id: "U1",
      command: "/deploy",
      text: "api",
      response_url: "https://hooks.slack.com/commands/T1/1/x",
      trigger_id: "111.1.a",
    }).toString();
    const command = parseSlackBody("application/x-www-form-urlencoded", form);
    if (!command.ok || command.input.surface !== "command") throw new Error("not a command");
    expect(factOf(command.input)).toEqual({ fact: "command:T1:111.1.a" });
    const click = new URLSearchParams({ payload: JSON.stringify({ type: "block_actions", team: { id: "T1" }, trigger_id: "9.9.z" }) });
    const interaction = parseSlackBody("application/x-www-form-urlencoded", click.toString());
    if (!interaction.ok || interaction.input.surface !== "interaction") throw new Error("not an interaction");
    expect(factOf(interaction.input)).toEqual({ fact: "interaction:T1:9.9.z" });
  });
});
