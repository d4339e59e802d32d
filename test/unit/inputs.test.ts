import { describe, expect, it } from "vitest";
import { parseSlackBody } from "../../shared/slack/inputs.ts";

const FORM = "application/x-www-form-urlencoded";
const command = (over: Record<string, string> = {}) =>
  new URLSearchParams({
    team_id: "T1",
    channel_id: "C1",
    user_id: "U1",
    command: "/deploy",
    text: "api",
    response_url: "https://hooks.slack.com/commands/T1/1/x",
    trigger_id: "111.222.abc",
    ...over,
  }).toString();

describe("operation ids", () => {
  it("keys a slash command by team and trigger_id, so the same text typed twice is two operations", () => {
    const first = parseSlackBody(FORM, command({ trigger_id: "111.1.a" }));
    const second = parseSlackBody(FORM, command({ trigger_id: "111.2.b" }));
    expect(first).toMatchObject({ ok: true, input: { surface: "command", id: "command:T1:111.1.a" } });
    expect(second).toMatchObject({ ok: true, input: { surface: "command", id: "command:T1:111.2.b" } });
  });

  it("keys an interaction by trigger_id, and a view_closed (which has none) by view id and hash", () => {
    const click = new URLSearchParams({
      payload: JSON.stringify({ type: "block_actions", team: { id: "T1" }, trigger_id: "9.9.z" }),
    }).toString();
    expect(parseSlackBody(FORM, click)).toMatchObject({ ok: true, input: { id: "interaction:T1:9.9.z", type: "block_actions" } });
    const closed = new URLSearchParams({
      payload: JSON.stringify({ type: "view_closed", team: { id: "T1" }, view: { id: "V1", hash: "h1" } }),
    }).toString();
    expect(parseSlackBody(FORM, closed)).toMatchObject({ ok: true, input: { id: "interaction:T1:view_closed:V1:h1" } });
  });

  it("parses the content type case-insensitively and with parameters", () => {
    expect(parseSlackBody("Application/JSON; charset=utf-8", '{"type":"url_verification","challenge":"c"}')).toEqual({
      ok: true,
      input: { surface: "url_verification", challenge: "c" },
    });
  });
});

describe("malformed inputs are refused with a reason", () => {
  it.each([
    [FORM, "payload=%7Bnot-json", "interactivity payload is not a JSON object"],
    [FORM, `payload=${encodeURIComponent("[1]")}`, "interactivity payload is not a JSON object"],
    [FORM, `payload=${encodeURIComponent('{"team":{"id":"T"}}')}`, "interactivity payload has no type"],
    [FORM, `payload=${encodeURIComponent('{"type":"block_actions"}')}`, "block_actions payload has no trigger_id to key it by"],
    [FORM, command({ command: "deploy" }), "slash command name must start with /"],
    [FORM, command({ trigger_id: "" }), "slash command without trigger_id"],
    [FORM, command({ response_url: "", team_id: "" }), "slash command without team_id, response_url"],
    [FORM, "", "form body has neither a command nor a payload"],
    ["", "{}", 'unsupported content type ""'],
    ["application/json", '"a string"', "body is not a JSON object"],
    ["application/json", "null", "body is not a JSON object"],
  ])("%s %s", (type, body, reason) => {
    expect(parseSlackBody(type, body)).toEqual({ ok: false, reason });
  });

  it("treats an interactivity type it does not know as unhandled, not malformed", () => {
    const body = `payload=${encodeURIComponent('{"type":"dialog_submission","trigger_id":"t"}')}`;
    expect(parseSlackBody(FORM, body)).toEqual({ ok: true, input: { surface: "unhandled", type: "dialog_submission" } });
  });

  it("keys an options request (block_suggestion, no trigger_id) by user, action_id and the text typed", () => {
    const payload = { type: "block_suggestion", team: { id: "T1" }, user: { id: "U1" }, action_id: "topic", block_id: "b", value: "bil" };
    const parsed = parseSlackBody(FORM, `payload=${encodeURIComponent(JSON.stringify(payload))}`);
    expect(parsed).toMatchObject({
      ok: true,
      input: { surface: "interaction", type: "block_suggestion", id: "interaction:T1:block_suggestion:U1:topic:bil" },
    });
    const long = { ...payload, value: "x".repeat(600) };
    expect(parseSlackBody(FORM, `payload=${encodeURIComponent(JSON.stringify(long))}`)).toMatchObject({ ok: false });
  });
});
