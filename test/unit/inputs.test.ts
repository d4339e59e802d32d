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

/**
 * The team a row is performed for is the installing workspace, read from the
 * field Slack documents for each input kind (and Bolt's buildSource reads):
 * in a channel shared with another organisation the envelope's team_id can be
 * the other side's.
 */
describe("the installing team and org", () => {
  const event = (envelope: Record<string, unknown>) =>
    parseSlackBody(
      "application/json",
      JSON.stringify({ type: "event_callback", event_id: "Ev1", event_time: 1_700_000_000, event: { type: "message" }, ...envelope }),
    );
  const interaction = (payload: Record<string, unknown>) =>
    parseSlackBody(FORM, new URLSearchParams({ payload: JSON.stringify({ trigger_id: "9.9.z", ...payload }) }).toString());

  it("an event in a Slack Connect channel: authorizations[0].team_id (the installing workspace), not the envelope's team_id", () => {
    const shared = event({
      team_id: "T0OTHER",
      enterprise_id: "E0OTHER",
      context_team_id: "T0OTHER",
      is_ext_shared_channel: true,
      authorizations: [{ enterprise_id: null, team_id: "T0MINE", user_id: "U0BOT", is_bot: true, is_enterprise_install: false }],
    });
    expect(shared).toMatchObject({ ok: true, input: { teamId: "T0MINE", enterpriseId: undefined, isEnterpriseInstall: false } });
  });

  it("an event for an org-wide install: authorizations[0].team_id is null, so the envelope's team_id, with the org and the org-wide flag", () => {
    const orgWide = event({
      team_id: "T0WS",
      enterprise_id: "E0ORG",
      authorizations: [{ enterprise_id: "E0ORG", team_id: null, user_id: "U0BOT", is_bot: true, is_enterprise_install: true }],
    });
    expect(orgWide).toMatchObject({ ok: true, input: { teamId: "T0WS", enterpriseId: "E0ORG", isEnterpriseInstall: true } });
  });

  it("an event without authorizations: the flag from the envelope's top-level is_enterprise_install", () => {
    expect(event({ team_id: "T0ENV", enterprise_id: "E0ENV", is_enterprise_install: true })).toMatchObject({
      ok: true,
      input: { enterpriseId: "E0ENV", isEnterpriseInstall: true },
    });
    // authorizations[0] decides when present: a top-level true does not make a workspace install org-wide.
    const workspace = event({
      enterprise_id: "E0ENV",
      is_enterprise_install: true,
      authorizations: [{ enterprise_id: "E0ENV", team_id: "T0WS", is_enterprise_install: false }],
    });
    expect(workspace).toMatchObject({ ok: true, input: { teamId: "T0WS", isEnterpriseInstall: false } });
  });

  it("an event without authorizations (an old envelope): the envelope's team_id and enterprise_id; event_time is kept", () => {
    expect(event({ team_id: "T0ENV", enterprise_id: "E0ENV" })).toMatchObject({
      ok: true,
      input: { teamId: "T0ENV", enterpriseId: "E0ENV", isEnterpriseInstall: false, eventTime: 1_700_000_000 },
    });
  });

  it("a slash command: team_id, enterprise_id, and is_enterprise_install's text ('true' only is org-wide)", () => {
    expect(parseSlackBody(FORM, command({ team_id: "T0CMD", enterprise_id: "E0CMD", is_enterprise_install: "true" }))).toMatchObject({
      ok: true,
      input: { teamId: "T0CMD", enterpriseId: "E0CMD", isEnterpriseInstall: true },
    });
    for (const text of ["false", "", "TRUE", "1"]) {
      expect(parseSlackBody(FORM, command({ team_id: "T0CMD", enterprise_id: "E0CMD", is_enterprise_install: text }))).toMatchObject({
        ok: true,
        input: { isEnterpriseInstall: false },
      });
    }
    expect(parseSlackBody(FORM, command({ team_id: "T0CMD" }))).toMatchObject({ ok: true, input: { isEnterpriseInstall: false } });
  });

  it("an interaction: is_enterprise_install true is org-wide; false, absent or not a boolean is not", () => {
    const base = { type: "block_actions", team: null, enterprise: { id: "E0ORG" }, user: { id: "U1", team_id: "T0USER" } };
    expect(interaction({ ...base, is_enterprise_install: true })).toMatchObject({ ok: true, input: { isEnterpriseInstall: true } });
    for (const flag of [false, "true", undefined]) {
      expect(interaction({ ...base, is_enterprise_install: flag })).toMatchObject({ ok: true, input: { isEnterpriseInstall: false } });
    }
    const closed = parseSlackBody(
      FORM,
      new URLSearchParams({
        payload: JSON.stringify({
          type: "view_closed",
          is_enterprise_install: true,
          enterprise: { id: "E0ORG" },
          user: { id: "U1", team_id: "T0U" },
          view: { id: "V1", hash: "h" },
        }),
      }).toString(),
    );
    expect(closed).toMatchObject({ ok: true, input: { isEnterpriseInstall: true } });
  });

  it("a view submitted from another workspace of a Slack Connect channel: view.app_installed_team_id, and no org taken from the visible team", () => {
    const submitted = interaction({
      type: "view_submission",
      team: { id: "T0VISIBLE", domain: "other", enterprise_id: "E0VISIBLE" },
      enterprise: { id: "E0VISIBLE" },
      user: { id: "U1", team_id: "T0VISIBLE" },
      view: { id: "V1", hash: "h", team_id: "T0VISIBLE", app_installed_team_id: "T0INSTALLED" },
    });
    expect(submitted).toMatchObject({
      ok: true,
      input: { teamId: "T0INSTALLED", enterpriseId: undefined, id: "interaction:T0VISIBLE:9.9.z" },
    });
  });

  it("an interaction for an org-wide install: team is null, so user.team_id; the org from enterprise.id (or team.enterprise_id)", () => {
    expect(
      interaction({ type: "block_actions", team: null, enterprise: { id: "E0ORG" }, user: { id: "U1", team_id: "T0USER" } }),
    ).toMatchObject({ ok: true, input: { teamId: "T0USER", enterpriseId: "E0ORG" } });
    expect(
      interaction({ type: "shortcut", team: { id: "T0TEAM", enterprise_id: "E0TEAMORG" }, user: { id: "U1", team_id: "T0TEAM" } }),
    ).toMatchObject({ ok: true, input: { teamId: "T0TEAM", enterpriseId: "E0TEAMORG" } });
  });
});
