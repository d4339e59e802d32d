/**
 * The Slack app manifest (npm run manifest) held to the handlers: what the
 * reference app registers and declares is exactly what its manifest asks
 * Slack for, and composed with the /ask example (as the starter app/index.ts
 * is) it adds only the example's.
 */
import { describe, expect, it } from "vitest";
import { createApp, manifestOf } from "../../shared/app/index.ts";
import { exampleApp } from "../ask/app.ts";
import { referenceApp } from "./app.ts";

const URL_ = "https://ackbox.example.test";
const REQUEST_URL = `${URL_}/slack/events`;

describe("the reference app's manifest", () => {
  const reference = referenceApp(createApp());
  const { manifest, warnings } = manifestOf(reference, { url: URL_ });

  it("subscribes to the events its handlers match, and asks for the scopes of those events and of its declared methods", () => {
    expect(warnings).toEqual([]);
    expect(manifest.settings).toMatchObject({
      event_subscriptions: {
        request_url: REQUEST_URL,
        bot_events: [
          "agent_session_stopped",
          "app_mention",
          "assistant_thread_context_changed",
          "assistant_thread_started",
          "function_executed",
          "message.channels",
          "message.im",
        ],
      },
    });
    expect(manifest.oauth_config).toEqual({
      scopes: {
        bot: [
          "app_mentions:read",
          "assistant:write",
          "channels:history",
          "channels:read",
          "chat:write",
          "commands",
          "im:history",
          "im:read",
          "reactions:write",
        ],
      },
    });
    expect(reference.slackMethods).toEqual([
      "assistant.threads.setStatus",
      "assistant.threads.setSuggestedPrompts",
      "assistant.threads.setTitle",
      "chat.appendStream",
      "chat.postMessage",
      "chat.startStream",
      "chat.stopStream",
      "chat.update",
      "conversations.replies",
      "functions.completeError",
      "functions.completeSuccess",
      "reactions.add",
    ]);
  });

  it("declares its custom step ackbox_echo, input text and output text, and the settings a custom step needs", () => {
    expect(manifest.functions).toEqual({
      ackbox_echo: {
        title: "Echo",
        description: "Gives back the text it is given",
        input_parameters: { properties: { text: { type: "string", title: "Text" } }, required: ["text"] },
        output_parameters: { properties: { text: { type: "string", title: "Text" } }, required: ["text"] },
      },
    });
    expect(manifest.settings).toMatchObject({ org_deploy_enabled: true, function_runtime: "remote" });
  });

  it("declares its slash command on the one Request URL, and interactivity for its button and modal", () => {
    expect(manifest.features).toMatchObject({ slash_commands: [{ command: "/ackbox", url: REQUEST_URL, should_escape: false }] });
    expect(manifest.settings).toMatchObject({ interactivity: { is_enabled: true, request_url: REQUEST_URL } });
    expect(JSON.stringify(manifest)).not.toContain("message_menu_options_url"); // no options handler
    // The assistant's questions arrive in the app's DM: its Messages tab, and no Home tab.
    expect(manifest.features).toMatchObject({ app_home: { home_tab_enabled: false, messages_tab_enabled: true } });
  });

  it("declares its assistant: the view with its description and prompts, from app.assistant alone", () => {
    expect(manifest.features).toMatchObject({
      assistant_view: {
        assistant_description: "Answers your questions with a model, streamed into the thread.",
        suggested_prompts: [
          { title: "What can you do?", message: "What can you do?" },
          { title: "Explain ackbox", message: expect.stringContaining("three seconds") },
        ],
      },
    });
  });
});

describe("the reference app beside the /ask example", () => {
  const app = referenceApp(exampleApp(createApp()));

  it("adds the example's /ask, Home tab, options URL and views.publish's need for no extra scope", () => {
    const { manifest, warnings } = manifestOf(app, { url: `${URL_}/`, name: "my-bot" });
    expect(warnings).toEqual([]);
    expect(manifest.display_information).toEqual({ name: "my-bot" });
    expect((manifest.features as { slash_commands: { command: string }[] }).slash_commands.map((c) => c.command)).toEqual([
      "/ask",
      "/ackbox",
    ]);
    expect(manifest.features).toMatchObject({ app_home: { home_tab_enabled: true } });
    expect(manifest.settings).toMatchObject({
      event_subscriptions: {
        bot_events: [
          "agent_session_stopped",
          "app_home_opened",
          "app_mention",
          "assistant_thread_context_changed",
          "assistant_thread_started",
          "function_executed",
          "message.channels",
          "message.im",
        ],
      },
      interactivity: { message_menu_options_url: REQUEST_URL },
    });
  });
});

describe("what it cannot derive, it says", () => {
  it("warns about a RegExp command without names, and a method or event with no known scope; declares shortcuts", () => {
    const odd = createApp()
      .uses("bots.info")
      .command(/^\/x/, () => undefined)
      .event("emoji_changed", () => undefined)
      .shortcut("new_ticket", () => undefined, { title: "New ticket", description: "File one" })
      .messageShortcut("file_it", () => undefined);
    const { manifest, warnings } = manifestOf(odd, { url: URL_ });
    expect(warnings).toEqual([
      expect.stringContaining("command(/^\\/x/): a RegExp"),
      expect.stringContaining("event emoji_changed: no scope known"),
      expect.stringContaining("Slack method bots.info: no scope known"),
    ]);
    expect(manifest.features).toMatchObject({
      shortcuts: [
        { name: "New ticket", type: "global", callback_id: "new_ticket", description: "File one" },
        { name: "file_it", type: "message", callback_id: "file_it" },
      ],
    });
  });
});
