/**
 * An app's own settings (shared/app/settings.ts): how each kind is read and
 * checked, what a declaration may not do, and that a handler never sees a
 * secret — neither in its types nor at run time.
 */
import { describe, expect, it } from "vitest";
import { createApp } from "../../shared/app/app.ts";
import { slack } from "../../shared/app/intents.ts";
import { parseAppSettings, redactSecrets, secretIn, setting } from "../../shared/app/settings.ts";
import type { RecordableInput } from "../../shared/slack/inputs.ts";

const DECLARED = {
  ANSWER_URL: setting.url({ description: "The answer service", required: true }),
  ANSWER_API_KEY: setting.secret({ description: "Its API key", required: true }),
  MAX_TOPICS: setting.number({ description: "Topics listed", default: 5, min: 1, max: 20 }),
  TEAM_NAME: setting.text({ description: "Shown in replies" }),
  CHANNELS: setting.list({ description: "Where it answers" }),
};
const GOOD = { ANSWER_URL: "https://answers.test/a", ANSWER_API_KEY: "sk-live-0123456789" };

describe("parseAppSettings", () => {
  it("reads each kind, applies defaults, and leaves an unset optional one undefined (a list: empty)", () => {
    const result = parseAppSettings(DECLARED, { ...GOOD, CHANNELS: " C1, C2,, ", UNRELATED: "x" });
    if (!result.ok) throw new Error(result.errors.join("; "));
    expect(result.settings.all).toEqual({
      ANSWER_URL: "https://answers.test/a",
      ANSWER_API_KEY: "sk-live-0123456789",
      MAX_TOPICS: 5,
      TEAM_NAME: undefined,
      CHANNELS: ["C1", "C2"],
    });
    expect(parseAppSettings(DECLARED, { ...GOOD, MAX_TOPICS: "7" })).toMatchObject({ ok: true, settings: { all: { MAX_TOPICS: 7 } } });
  });

  it("splits off the secrets: handlers get the public part, the secrets are listed for redaction", () => {
    const result = parseAppSettings(DECLARED, GOOD);
    if (!result.ok) throw new Error(result.errors.join("; "));
    expect(Object.keys(result.settings.public)).toEqual(["ANSWER_URL", "MAX_TOPICS", "TEAM_NAME", "CHANNELS"]);
    expect(result.settings.secrets).toEqual([{ name: "ANSWER_API_KEY", value: "sk-live-0123456789" }]);
  });

  it("reports every problem at once, naming the setting, and never quotes a secret's value", () => {
    const result = parseAppSettings(DECLARED, { ANSWER_URL: "ftp://x", ANSWER_API_KEY: "short", MAX_TOPICS: "21" });
    expect(result).toEqual({
      ok: false,
      errors: [
        'ANSWER_URL must be an http(s) URL, got "ftp://x"',
        "ANSWER_API_KEY must be at least 8 characters (it is a secret)",
        'MAX_TOPICS must be a number from 1 to 20, got "21"',
      ],
    });
  });

  it("a required setting unset or blank is an error that says what it is for", () => {
    expect(parseAppSettings(DECLARED, { ANSWER_URL: "  " })).toEqual({
      ok: false,
      errors: ["ANSWER_URL is required: The answer service", "ANSWER_API_KEY is required: Its API key"],
    });
    const list = { CHANNELS: setting.list({ description: "Where", required: true }) };
    expect(parseAppSettings(list, { CHANNELS: " , " })).toEqual({ ok: false, errors: ["CHANNELS is required: Where"] });
  });
});

describe("a declaration", () => {
  it("refuses an engine setting's name, a malformed name, and a second different declaration", () => {
    expect(() => createApp().settings({ SLACK_BOT_TOKEN: setting.secret({ description: "x" }) })).toThrow(/is the engine's/);
    expect(() => createApp().settings({ "answer-url": setting.url({ description: "x" }) })).toThrow(/upper case/);
    const app = createApp().settings({ X: setting.text({ description: "x" }) });
    expect(() => app.settings({ X: setting.url({ description: "x" }) })).toThrow(/declared twice, differently/);
    expect(() => app.settings({ X: setting.text({ description: "x" }) })).not.toThrow(); // the same one again is fine
  });

  it("refuses a default its own kind would refuse, and a required setting with a default", () => {
    expect(() => createApp().settings({ U: setting.url({ description: "x", default: "nope" }) })).toThrow(/U: its default: U must be/);
    expect(() => createApp().settings({ N: setting.number({ description: "x", default: 0, min: 1 }) })).toThrow(/N: its default/);
    expect(() => createApp().settings({ T: setting.text({ description: "x", required: true, default: "a" }) })).toThrow(/required/);
  });
});

describe("what a handler reads", () => {
  const command: RecordableInput = {
    surface: "command",
    id: "command:T1:t1",
    teamId: "T1",
    command: {
      command: "/ask",
      text: "",
      teamId: "T1",
      userId: "U1",
      channelId: "C1",
      responseUrl: "https://hooks.slack.com/commands/T1/1/x",
      triggerId: "t1",
    },
  };

  it("gets the public settings typed by kind, and no secret at all", () => {
    const parsed = parseAppSettings(DECLARED, { ...GOOD, CHANNELS: "C1" });
    if (!parsed.ok) throw new Error(parsed.errors.join("; "));
    let seen: unknown;
    const app = createApp()
      .settings(DECLARED)
      .uses("chat.postMessage")
      .command("/ask", (_, { settings }) => {
        seen = settings;
        const topics: number = settings.MAX_TOPICS; // a number, defaulted: never undefined
        const channels: readonly string[] = settings.CHANNELS;
        // @ts-expect-error a secret is an effect's, never a handler's
        settings.ANSWER_API_KEY;
        return [slack("chat.postMessage", { channel: channels[0] ?? "C0", text: `${topics} topics` })];
      });
    const routing = app.route(command, { now: 1, settings: parsed.settings });
    expect(routing).toMatchObject({ action: "record", effects: [{ payload: { channel: "C1", text: "5 topics" } }] });
    expect(seen).toEqual({ ANSWER_URL: "https://answers.test/a", MAX_TOPICS: 5, TEAM_NAME: undefined, CHANNELS: ["C1"] });
    expect(JSON.stringify(seen)).not.toContain("sk-live");
  });

  it("lists what the app and its effects declared, as one declaration", () => {
    const app = createApp().settings({ A: setting.text({ description: "a" }) });
    expect(Object.keys(app.declaredSettings)).toEqual(["A"]);
    expect(app.declaredSettings.A).toMatchObject({ kind: "text", required: false, default: "" });
  });
});

describe("finding and replacing a secret's value", () => {
  const secrets = [{ name: "KEY", value: 'k"ey-0123456' }];
  it("in its raw and its JSON-escaped forms", () => {
    expect(secretIn('token k"ey-0123456', secrets)).toBe("KEY");
    expect(secretIn(JSON.stringify({ a: 'k"ey-0123456' }), secrets)).toBe("KEY");
    expect(secretIn("nothing here", secrets)).toBeUndefined();
    expect(redactSecrets(`GET /?key=k"ey-0123456 and ${JSON.stringify('k"ey-0123456')}`, secrets)).toBe(
      'GET /?key=[secret KEY] and "[secret KEY]"',
    );
  });

  it("URL-encoded, form-encoded and base64, as an effect may have sent it; a part of it is not recognised", () => {
    const key = [{ name: "KEY", value: "ab+cd/ef== x" }];
    const sent = `?k=${encodeURIComponent("ab+cd/ef== x")}&${new URLSearchParams({ k: "ab+cd/ef== x" })} Basic ${btoa("ab+cd/ef== x")}`;
    expect(secretIn(sent, key)).toBe("KEY");
    expect(redactSecrets(sent, key)).toBe("?k=[secret KEY]&k=[secret KEY] Basic [secret KEY]");
    expect(secretIn("ab+cd/e", key)).toBeUndefined();
  });

  it("whole, when one secret's value contains another's: the longer is replaced first", () => {
    const nested = [
      { name: "A", value: "abcdefgh" },
      { name: "B", value: "abcdefgh-LONGTAIL-9999" },
    ];
    expect(redactSecrets("token=abcdefgh-LONGTAIL-9999 short=abcdefgh", nested)).toBe("token=[secret B] short=[secret A]");
  });
});
