/**
 * The manifest (shared/app/manifest.ts) subscribes what every registered
 * surface needs, and writes only fields Slack's manifest schema knows
 * (slackapi/manifest-schema, schemas/manifest.schema.2.0.0.json: each object
 * there is `additionalProperties: false`, so an unknown key is refused by Slack).
 */
import { describe, expect, it } from "vitest";
import { createApp } from "../../shared/app/app.ts";
import { botScopesOf, manifestOf } from "../../shared/app/manifest.ts";
import { NO_APP_SETTINGS } from "../../shared/app/settings.ts";
import type { RecordableInput } from "../../shared/slack/inputs.ts";

const URL_ = "https://ackbox.example.test";
const REQUEST_URL = `${URL_}/slack/events`;
type Json = Record<string, unknown>;

/** The keys Slack's schema allows, per object (manifest.schema.2.0.0.json). */
const SCHEMA_KEYS: Readonly<Record<string, readonly string[]>> = {
  "": [
    "$schema",
    "_metadata",
    "app_directory",
    "display_information",
    "features",
    "oauth_config",
    "settings",
    "functions",
    "workflows",
    "datastores",
    "outgoing_domains",
    "types",
    "external_auth_providers",
    "mcp_servers",
  ],
  _metadata: ["schema_version", "min_version", "major_version", "minor_version"],
  display_information: ["name", "description", "background_color", "long_description"],
  features: [
    "app_home",
    "bot_user",
    "functions",
    "shortcuts",
    "slash_commands",
    "workflow_steps",
    "unfurl_domains",
    "assistant_view",
    "agent_view",
    "code_channels",
  ],
  "features.app_home": ["home_tab_enabled", "messages_tab_enabled", "messages_tab_read_only_enabled"],
  "features.bot_user": ["display_name", "always_online"],
  "features.assistant_view": ["assistant_description", "suggested_prompts"],
  oauth_config: ["redirect_urls", "scopes", "token_management_enabled", "pkce_enabled"],
  "oauth_config.scopes": ["user", "bot", "user_optional", "bot_optional"],
  settings: [
    "allowed_ip_address_ranges",
    "event_subscriptions",
    "incoming_webhooks",
    "interactivity",
    "org_deploy_enabled",
    "socket_mode_enabled",
    "is_hosted",
    "token_rotation_enabled",
    "siws_links",
    "hermes_app_type",
    "function_runtime",
    "is_mcp_enabled",
  ],
  "settings.event_subscriptions": ["request_url", "user_events", "bot_events", "metadata_subscriptions"],
  "settings.interactivity": ["is_enabled", "request_url", "message_menu_options_url"],
};
const FUNCTION_KEYS = ["title", "description", "input_parameters", "output_parameters"];
const COMMAND_KEYS = ["command", "url", "description", "usage_hint", "should_escape"];
const SHORTCUT_KEYS = ["name", "type", "callback_id", "description"];

/** Every key of the manifest that Slack's schema does not allow where it stands. */
function unknownKeys(manifest: Json): string[] {
  const found: string[] = [];
  const check = (object: unknown, allowed: readonly string[], path: string) => {
    for (const key of Object.keys(object as Json)) if (!allowed.includes(key)) found.push(path ? `${path}.${key}` : key);
  };
  for (const [path, allowed] of Object.entries(SCHEMA_KEYS)) {
    const object = path === "" ? manifest : path.split(".").reduce<unknown>((o, k) => (o as Json | undefined)?.[k], manifest);
    if (object !== undefined) check(object, allowed, path);
  }
  const features = manifest.features as Json;
  for (const command of (features.slash_commands as Json[] | undefined) ?? []) check(command, COMMAND_KEYS, "features.slash_commands[]");
  for (const shortcut of (features.shortcuts as Json[] | undefined) ?? []) check(shortcut, SHORTCUT_KEYS, "features.shortcuts[]");
  for (const [id, fn] of Object.entries((manifest.functions as Json | undefined) ?? {})) {
    check(fn, FUNCTION_KEYS, `functions.${id}`);
    for (const side of ["input_parameters", "output_parameters"])
      check((fn as Json)[side], ["properties", "required"], `functions.${id}.${side}`);
  }
  return found;
}

const events = (manifest: Json) =>
  (manifest.settings as { event_subscriptions?: { bot_events: string[] } }).event_subscriptions?.bot_events;
const bot = (manifest: Json) => (manifest.oauth_config as { scopes: { bot: string[] } }).scopes.bot;

describe("message handlers", () => {
  it("subscribe message.<type> with its history scope for each conversation they hear; public channels by default", () => {
    const dms = createApp().message(undefined, () => undefined, { channelTypes: ["im", "mpim"] });
    const { manifest } = manifestOf(dms, { url: URL_ });
    expect(events(manifest)).toEqual(["message.im", "message.mpim"]);
    // Each with its :read scope: a backfill asks conversations.info what kind of conversation it reads.
    expect(bot(manifest)).toEqual(["im:history", "im:read", "mpim:history", "mpim:read"]);
    // A user can write to the app only with the Messages tab on and writable.
    expect(manifest.features).toMatchObject({
      app_home: { home_tab_enabled: false, messages_tab_enabled: true, messages_tab_read_only_enabled: false },
    });

    const plain = manifestOf(
      createApp().event("message", () => undefined),
      { url: URL_ },
    ).manifest;
    expect(events(plain)).toEqual(["message.channels"]);
    expect(plain.features).not.toHaveProperty("app_home");
  });

  it("hear only the conversations they name: a DM handler is not handed a channel's message", () => {
    const heard: string[] = [];
    const app = createApp()
      .message(undefined, ({ payload }) => void heard.push(`dm ${payload.text}`), { channelTypes: ["im"] })
      .message(undefined, ({ payload }) => void heard.push(`channel ${payload.text}`), { channelTypes: ["channels", "groups"] });
    const message = (channel_type: string, text: string): RecordableInput => ({
      surface: "event",
      id: `Ev-${text}`,
      teamId: "T1",
      event: { type: "message", channel: "C1", user: "U1", ts: "1.1", text, channel_type },
    });
    for (const [type, text] of [
      ["im", "a"],
      ["channel", "b"],
      ["group", "c"],
      ["mpim", "d"],
    ] as const) {
      app.route(message(type, text), { now: 1, settings: NO_APP_SETTINGS });
    }
    expect(heard).toEqual(["dm a", "channel b", "channel c"]);
  });
});

describe("an assistant", () => {
  it("gets its view, its thread events, the DMs its threads are made of, and assistant:write", () => {
    const app = createApp()
      .manifest({ assistant: { description: "Answers questions", suggestedPrompts: [{ title: "Start", message: "What can you do?" }] } })
      .event("assistant_thread_started", () => undefined)
      .uses("assistant.threads.setSuggestedPrompts");
    const { manifest, warnings } = manifestOf(app, { url: URL_ });
    expect(warnings).toEqual([]);
    expect(manifest.features).toMatchObject({
      assistant_view: { assistant_description: "Answers questions", suggested_prompts: [{ title: "Start", message: "What can you do?" }] },
      app_home: { messages_tab_enabled: true },
    });
    expect(events(manifest)).toEqual(["assistant_thread_context_changed", "assistant_thread_started", "message.im"]);
    expect(bot(manifest)).toEqual(["assistant:write", "im:history", "im:read"]);
    expect(unknownKeys(manifest)).toEqual([]);
  });

  it("handled without a declared view: a view all the same (Slack requires its description), and a warning saying how", () => {
    const { manifest, warnings } = manifestOf(
      createApp().event("assistant_thread_started", () => undefined),
      { url: URL_, name: "helper" },
    );
    expect(manifest.features).toMatchObject({ assistant_view: { assistant_description: "helper assistant" } });
    expect(warnings).toEqual([expect.stringContaining("app.manifest({ assistant:")]);
  });
});

describe("a custom step (function)", () => {
  const app = createApp().function(
    "summarize",
    {
      title: "Summarize a channel",
      inputs: { channel: { type: "slack#/types/channel_id", title: "Channel", required: true }, days: { type: "integer" } },
      outputs: { summary: { type: "string", description: "The summary", required: true } },
    },
    ({ inputs }, { step }) => [step.complete({ summary: `${inputs.channel}, ${inputs.days ?? 1} days` })],
  );

  it("is declared with its parameters, subscribes function_executed, and makes the app org-ready with a remote runtime", () => {
    const { manifest, warnings } = manifestOf(app, { url: URL_ });
    expect(warnings).toEqual([]);
    expect(manifest.functions).toEqual({
      summarize: {
        title: "Summarize a channel",
        description: "Summarize a channel",
        input_parameters: {
          properties: { channel: { type: "slack#/types/channel_id", title: "Channel" }, days: { type: "integer", title: "days" } },
          required: ["channel"],
        },
        output_parameters: {
          properties: { summary: { type: "string", description: "The summary", title: "summary" } },
          required: ["summary"],
        },
      },
    });
    expect(events(manifest)).toEqual(["function_executed"]);
    expect(manifest.settings).toMatchObject({ org_deploy_enabled: true, function_runtime: "remote" });
    expect(unknownKeys(manifest)).toEqual([]);
  });

  it("says what such an app needs that no manifest field sets: an install at the organisation level", () => {
    expect(manifestOf(app, { url: URL_ }).notes).toEqual([
      expect.stringContaining(
        "custom steps (summarize): Slack requires the app to be org-ready (org_deploy_enabled, set here) and installed at the organisation level",
      ),
    ]);
    expect(
      manifestOf(
        createApp().event("app_mention", () => undefined),
        { url: URL_ },
      ).notes,
    ).toEqual([]);
  });

  it("routes only its own function_executed events to its handler", () => {
    const executed = (callback_id: string): RecordableInput => ({
      surface: "event",
      id: `Ev-${callback_id}`,
      teamId: "T1",
      event: { type: "function_executed", function: { callback_id }, inputs: {}, function_execution_id: "Fx1" },
    });
    expect(app.route(executed("summarize"), { now: 1, settings: NO_APP_SETTINGS })).toMatchObject({
      action: "record",
      handler: "function(summarize)",
    });
    expect(app.route(executed("other"), { now: 1, settings: NO_APP_SETTINGS })).toMatchObject({ action: "ignore" });
    expect(() => app.function("summarize", { title: "again" }, () => undefined)).toThrow(/registered twice/);
  });
});

describe("distributed mode and the app's own scopes", () => {
  it("adds the redirect URL and the events the engine handles for every installation", () => {
    const { manifest } = manifestOf(
      createApp().event("app_mention", () => undefined),
      { url: `${URL_}/`, distributed: true },
    );
    expect(manifest.oauth_config).toEqual({ redirect_urls: [`${URL_}/slack/oauth_redirect`], scopes: { bot: ["app_mentions:read"] } });
    expect(events(manifest)).toEqual(["app_mention", "app_uninstalled", "tokens_revoked"]);
    const single = manifestOf(
      createApp().event("app_mention", () => undefined),
      { url: URL_ },
    ).manifest;
    expect(single.oauth_config).not.toHaveProperty("redirect_urls");
    expect(events(single)).toEqual(["app_mention"]);
  });

  it("asks for the scopes the app declares, and an install asks for them too", () => {
    const app = createApp()
      .manifest({ scopes: ["users:read", "team:read"] })
      .manifest({ scopes: ["users:read"] });
    expect(bot(manifestOf(app, { url: URL_ }).manifest)).toEqual(["team:read", "users:read"]);
    expect(botScopesOf(app)).toEqual(["team:read", "users:read"]);
    expect(() => createApp().manifest({ scopes: ["Users Read"] })).toThrow(/not a Slack scope/);
  });
});

describe("every field", () => {
  it("is one Slack's manifest schema knows, for an app that registers every surface", () => {
    const app = createApp()
      .uses("chat.postMessage", "views.publish")
      .event("app_home_opened", () => undefined)
      .message(undefined, () => undefined, { channelTypes: ["channels", "im"] })
      .command("/x", () => undefined, { description: "X", usageHint: "[what]" })
      .action("go", () => undefined)
      .view("v", () => undefined)
      .shortcut("s", () => undefined, { title: "S" })
      .messageShortcut("m", () => undefined)
      .options("o", () => undefined)
      .function("f", { title: "F" }, () => undefined)
      .manifest({ assistant: { description: "A" } });
    const { manifest } = manifestOf(app, { url: URL_, distributed: true });
    expect(unknownKeys(manifest)).toEqual([]);
    expect(manifest._metadata).toEqual({ major_version: 2, minor_version: 1 });
    expect(manifest.settings).toMatchObject({
      interactivity: { is_enabled: true, request_url: REQUEST_URL, message_menu_options_url: REQUEST_URL },
    });
  });

  it("the check itself finds a key the schema does not know", () => {
    expect(unknownKeys({ features: { bot_user: { display_name: "x", colour: "red" } }, settings: {}, oauth_config: {} })).toEqual([
      "features.bot_user.colour",
    ]);
  });
});
