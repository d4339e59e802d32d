/**
 * One reading of an empty field: a field Slack sends as "" reads exactly as a field it does not send (present(),
 * shared/slack/inputs.ts). Slack's SDK sample payloads carry "" for the fields that are not there, and a matcher
 * that told the two apart refused what it would have heard (a message whose channel_type was "", a bot_id of ""
 * before it). For every field a parse, a matcher or a fact reads, the same body is read twice — with the field
 * "" and without it — and what the engine makes of it (the input's ids and team, its fact, the app's routing and
 * the context its handler was given) must be the same.
 */
import { describe, expect, it } from "vitest";
import { createApp, type HandlerContext } from "../../shared/app/app.ts";
import { slack } from "../../shared/app/intents.ts";
import { parseAppSettings } from "../../shared/app/settings.ts";
import { factOf } from "../../shared/slack/facts.ts";
import { parseSlackBody } from "../../shared/slack/inputs.ts";

/** Every kind of matcher, each handler answering with the context it was given (no payload field in it). */
const echo = (label: string) => (_: unknown, ctx: HandlerContext) => [
  slack(
    "chat.postMessage",
    { channel: "C0", text: label, ctx: { teamId: ctx.teamId ?? null, userId: ctx.userId ?? null, channelId: ctx.channelId ?? null } },
    { key: "echo" },
  ),
];
const app = createApp()
  .uses("chat.postMessage")
  .function("step", { title: "Step" }, echo("function"))
  .message("deploy", echo("message:deploy, private channels"), { channelTypes: ["groups"] })
  .message(undefined, echo("message, private channels"), { channelTypes: ["groups"] })
  .event("message", echo("any message"))
  .event("app_mention", echo("mention"))
  .event("reaction_added", echo("reaction"))
  .command("/go", echo("command"))
  .action("approve", echo("action"))
  .action(/.*/, echo("any action"))
  .view("form", echo("view"))
  .view(/.*/, echo("any view"))
  .viewClosed(/.*/, echo("view closed"))
  .shortcut(/.*/, echo("shortcut"))
  .messageShortcut(/.*/, echo("message shortcut"))
  .options(/.*/, () => ({ ack: { options: [] } }));
const settings = parseAppSettings(app.declaredSettings, {});
if (!settings.ok) throw new Error(settings.errors.join("; "));

/** What the engine makes of a body: the parse's verdict, and for an input its ids, team, fact and routing. */
function reading(contentType: string, raw: string) {
  const parsed = parseSlackBody(contentType, raw);
  if (!parsed.ok) return parsed;
  const input = parsed.input;
  if (input.surface === "url_verification" || input.surface === "unhandled") return input;
  const { surface, id, teamId, enterpriseId, isEnterpriseInstall } = input;
  return {
    surface,
    id,
    teamId,
    enterpriseId,
    isEnterpriseInstall,
    fact: factOf(input),
    routing: app.route(input, { now: 0, settings: settings.ok ? settings.settings : (undefined as never) }),
  };
}

type Body = Record<string, unknown>;

/** The body with the field at `path` set to "", and without it. */
function both(body: Body, path: readonly string[]): [Body, Body] {
  const at = (value: unknown, depth: number, set: (leaf: Body) => void): unknown => {
    if (depth === path.length - 1) {
      const copy = Array.isArray(value) ? [...value] : { ...(value as Body) };
      set(copy as Body);
      return copy;
    }
    const key = path[depth] as string;
    const copy = (Array.isArray(value) ? [...value] : { ...(value as Body) }) as Body;
    copy[key] = at(copy[key], depth + 1, set);
    return copy;
  };
  const leaf = path[path.length - 1] as string;
  return [
    at(body, 0, (o) => {
      o[leaf] = "";
    }) as Body,
    at(body, 0, (o) => {
      delete o[leaf];
    }) as Body,
  ];
}

const envelope = (event: Body, extra: Body = {}): Body => ({
  type: "event_callback",
  event_id: "Ev1",
  team_id: "T0TEAM",
  enterprise_id: "E0ORG",
  authorizations: [{ team_id: "T0TEAM", enterprise_id: "E0ORG", is_enterprise_install: false }],
  event,
  ...extra,
});
const message: Body = {
  type: "message",
  channel: "C0PRIV",
  channel_type: "group",
  user: "U0HUMAN",
  text: "deploy now",
  ts: "1764504000.000100",
  event_ts: "1764504000.000100",
  thread_ts: "1764504000.000050",
};
const reaction = (item: Body) =>
  envelope({ type: "reaction_added", user: "U0HUMAN", reaction: "eyes", event_ts: "1764504002.000100", item });
const json = (body: Body) => ["application/json", JSON.stringify(body)] as const;
const form = (payload: Body) =>
  ["application/x-www-form-urlencoded", new URLSearchParams({ payload: JSON.stringify(payload) }).toString()] as const;

/** [what, the body, the fields it reads]: each field is checked "" against absent on that body. */
const CASES: readonly [string, Body, readonly (readonly string[])[], (body: Body) => readonly [string, string]][] = [
  [
    "an event's envelope",
    envelope(message),
    [["team_id"], ["enterprise_id"], ["authorizations", "0", "team_id"], ["authorizations", "0", "enterprise_id"]],
    json,
  ],
  [
    "a message",
    envelope(message),
    [
      ["event", "channel_type"],
      ["event", "subtype"],
      ["event", "bot_id"],
      ["event", "user"],
      ["event", "channel"],
      ["event", "text"],
      ["event", "ts"],
      ["event", "thread_ts"],
    ],
    json,
  ],
  [
    "a bot's message",
    envelope({ ...message, bot_id: "B0BOT", subtype: "bot_message" }),
    [
      ["event", "channel_type"],
      ["event", "user"],
    ],
    json,
  ],
  [
    "an edit",
    envelope({ ...message, subtype: "message_changed", message: { ts: "1764504000.000100", text: "x" }, ts: "1764504001.000100" }),
    [
      ["event", "message", "ts"],
      ["event", "ts"],
    ],
    json,
  ],
  ["a deletion", envelope({ ...message, subtype: "message_deleted", deleted_ts: "1764504000.000100" }), [["event", "deleted_ts"]], json],
  [
    "a mention",
    envelope({ ...message, type: "app_mention" }),
    [
      ["event", "channel"],
      ["event", "ts"],
      ["event", "user"],
    ],
    json,
  ],
  [
    "a reaction to a message",
    reaction({ type: "message", channel: "C0", ts: "1.1" }),
    [
      ["event", "item", "channel"],
      ["event", "item", "ts"],
      ["event", "user"],
      ["event", "reaction"],
      ["event", "event_ts"],
    ],
    json,
  ],
  [
    "a reaction to a file comment",
    reaction({ type: "file_comment", file_comment: "Fc1", file: "F1" }),
    [
      ["event", "item", "file_comment"],
      ["event", "item", "file"],
    ],
    json,
  ],
  [
    "a custom step",
    envelope({ type: "function_executed", function: { callback_id: "step" }, inputs: {}, function_execution_id: "Fx1", event_ts: "1.3" }),
    [["event", "function", "callback_id"]],
    json,
  ],
  [
    "a button click",
    {
      type: "block_actions",
      team: { id: "T0TEAM", enterprise_id: "E0ORG" },
      user: { id: "U0HUMAN", team_id: "T0TEAM" },
      enterprise: { id: "E0ORG" },
      trigger_id: "trg.1",
      channel: { id: "C0" },
      container: { channel_id: "C0", message_ts: "1.1" },
      actions: [{ action_id: "approve", block_id: "b1", type: "button" }],
    },
    [
      ["team", "id"],
      ["team", "enterprise_id"],
      ["user", "id"],
      ["user", "team_id"],
      ["enterprise", "id"],
      ["channel", "id"],
      ["container", "channel_id"],
      ["actions", "0", "action_id"],
      ["actions", "0", "block_id"],
      ["trigger_id"],
    ],
    form,
  ],
  [
    "a view submission",
    {
      type: "view_submission",
      team: { id: "T0TEAM" },
      user: { id: "U0HUMAN" },
      trigger_id: "trg.2",
      view: { id: "V1", callback_id: "form", hash: "h1", app_installed_team_id: "T0HOME" },
    },
    [
      ["view", "callback_id"],
      ["view", "app_installed_team_id"],
    ],
    form,
  ],
  [
    "a view closed",
    { type: "view_closed", team: { id: "T0TEAM" }, user: { id: "U0HUMAN" }, view: { id: "V1", callback_id: "form", hash: "h1" } },
    [
      ["view", "id"],
      ["view", "hash"],
      ["view", "callback_id"],
    ],
    form,
  ],
  [
    "a shortcut",
    { type: "shortcut", team: { id: "T0TEAM" }, user: { id: "U0HUMAN" }, trigger_id: "trg.3", callback_id: "sc" },
    [["callback_id"]],
    form,
  ],
  [
    "an options request",
    { type: "block_suggestion", team: { id: "T0TEAM" }, user: { id: "U0HUMAN" }, action_id: "pick", block_id: "b", value: "de" },
    [["action_id"], ["value"], ["user", "id"]],
    form,
  ],
];

describe('a field sent as "" reads as a field not sent: the same parse, fact, routing and handler context', () => {
  for (const [what, body, fields, encode] of CASES) {
    for (const path of fields) {
      it(`${what}: ${path.join(".")}`, () => {
        const [empty, absent] = both(body, path);
        expect(reading(...encode(empty))).toEqual(reading(...encode(absent)));
      });
    }
  }

  it('a command\'s enterprise_id and text (a form: an empty value is how a field is absent there, "" and missing alike)', () => {
    const command = {
      command: "/go",
      team_id: "T0TEAM",
      channel_id: "C0",
      user_id: "U0",
      response_url: "https://hooks.slack.com/x",
      trigger_id: "t.1",
    };
    for (const field of ["enterprise_id", "text"]) {
      const empty = new URLSearchParams({ ...command, [field]: "" }).toString();
      const absent = new URLSearchParams(command).toString();
      expect(reading("application/x-www-form-urlencoded", empty)).toEqual(reading("application/x-www-form-urlencoded", absent));
    }
  });

  it('the case that was refused: a message with channel_type "" is heard by a handler for private channels, as one without it is', () => {
    const [empty] = both(envelope(message), ["event", "channel_type"]);
    const routed = reading(...json(empty));
    expect(routed).toMatchObject({ routing: { action: "record", handler: "message(deploy)" } });
  });
});
