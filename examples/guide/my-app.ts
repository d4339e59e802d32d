/**
 * The examples of docs/building-an-app.md, as one app. Every ```ts block of
 * the guide is a verbatim part of this file or of my-app.test.ts
 * (test/node/guide.test.ts checks), and my-app.test.ts runs them.
 */
import { type App, createApp, defineEffect, fatal, followUps, run, setting, slack, transient } from "../../shared/app/index.ts";

// 1. A new handler
export function echo(app: App): App {
  return app.uses("chat.postMessage").command("/echo", ({ payload: command }) => ({
    ack: { response_type: "ephemeral", text: "Echoing…" },
    intents: [slack("chat.postMessage", { channel: command.channelId, text: command.text || "(nothing)" })],
  }));
}

// 2. A new Slack method
export function pinIt(app: App): App {
  return app.uses("pins.add").messageShortcut("pin_it", ({ payload }) => {
    const channel = (payload.channel as { id?: string } | undefined)?.id;
    const ts = (payload.message as { ts?: string } | undefined)?.ts;
    if (!channel || !ts) return;
    return [slack("pins.add", { channel, timestamp: ts })];
  });
}

// 3. A custom effect with a follow-up
export const TRANSLATE_SETTINGS = {
  TRANSLATE_URL: setting.url({ description: "The translation service", default: "https://translate.example/v1" }),
  TRANSLATE_API_KEY: setting.secret({ description: "Its API key, sent as a bearer token (unset: none is sent)" }),
};

export const translate = defineEffect(
  "translate",
  async (args: { channel: string; ts: string; text: string }, ctx) => {
    const { TRANSLATE_URL, TRANSLATE_API_KEY } = ctx.settings;
    const response = await ctx.fetch(TRANSLATE_URL, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "idempotency-key": ctx.idempotencyKey,
        ...(TRANSLATE_API_KEY ? { authorization: `Bearer ${TRANSLATE_API_KEY}` } : {}),
      },
      body: JSON.stringify({ text: args.text, to: "fr" }),
    });
    if (response.status >= 500) throw transient(`translate: HTTP ${response.status}`);
    if (!response.ok) throw fatal(`translate: HTTP ${response.status}`);
    const { translation } = (await response.json()) as { translation: string };
    return followUps({ translation }, [slack("chat.postMessage", { channel: args.channel, thread_ts: args.ts, text: translation })]);
  },
  { timeoutMs: 5000, maxAttempts: 5, settings: TRANSLATE_SETTINGS },
);

export function translateOnRequest(app: App): App {
  return app
    .uses("chat.postMessage")
    .effect(translate)
    .message(/^translate: /, ({ payload: message }) => [
      run(translate, { channel: message.channel, ts: message.ts, text: (message.text ?? "").replace(/^translate: /, "") }),
    ]);
}

// 7. A custom step for Workflow Builder
export function echoStep(app: App): App {
  return app.function(
    "echo_step",
    {
      title: "Echo",
      inputs: { text: { type: "string", title: "Text", required: true } },
      outputs: { text: { type: "string", title: "Text", required: true } },
    },
    ({ inputs }, { step }) => [step.complete({ text: inputs.text })],
  );
}

// 8. An AI assistant
export function askTheModel(app: App) {
  return app.assistant({
    description: "Answers questions about the team's work",
    suggestedPrompts: [{ title: "This week", message: "What did we ship this week?" }],
    userMessage: (_, { thread }) => [thread.answer({ instructions: "You answer for the Platform team. Be brief.", status: "is looking…" })],
  });
}

export const myApp = askTheModel(echoStep(translateOnRequest(pinIt(echo(createApp())))));
