/**
 * The example app: what the reference app cannot do.
 *
 *   /ask <question>   → a placeholder with blocks (chat.postMessage), then the
 *                       answer service asked (a custom effect, with an
 *                       Idempotency-Key), then the placeholder updated with the
 *                       answer (chat.update): one durable chain of follow-ups.
 *   app_home_opened   → the Home tab published (views.publish)
 *   topic menu        → its options answered inline (block_suggestion), nothing written
 *
 * Each step is its own outbox row, recorded with the completion of the step
 * before it, so a crash anywhere resumes at that step and nowhere else.
 *
 * Its settings are its own (EXAMPLE_SETTINGS): the service's URL, which the
 * handler reads to say whether /ask is set up, and an optional API key,
 * a secret only the effect that calls the service sees.
 */
import { type App, createApp, defineEffect, fatal, followUps, run, setting, slack, transient } from "../../shared/app/index.ts";

export const EXAMPLE_SETTINGS = {
  EXAMPLE_ANSWER_URL: setting.url({
    description:
      "The example app's answer service (examples/ask/app.ts), called by its /ask; empty = /ask says it is not set up. The local run points it at the stand-in.",
  }),
  EXAMPLE_ANSWER_KEY: setting.secret({
    description: "Optional: the answer service's API key, sent as `Authorization: Bearer <key>`.",
  }),
};

const TOPICS = ["billing", "deploys", "incidents", "onboarding", "security"];

/** Step 1: the placeholder. Returns step 2, which needs the placeholder's ts. */
export const postPlaceholder = defineEffect<{ channel: string; question: string }>(
  "ask-placeholder",
  async (args, ctx) => {
    const posted = await ctx.slack.call("chat.postMessage", {
      channel: args.channel,
      text: `Thinking about: ${args.question}`,
      blocks: [
        { type: "section", text: { type: "mrkdwn", text: `:hourglass: *Thinking about:* ${args.question}` } },
        { type: "context", elements: [{ type: "mrkdwn", text: "ackbox example · the answer replaces this message" }] },
      ],
    });
    const ts = String(posted.ts);
    return followUps({ channel: args.channel, ts }, [run(askService, { channel: args.channel, ts, question: args.question })]);
  },
  { slackMethods: ["chat.postMessage"] },
);

/** Step 2: the answer service, asked with this row's idempotency key (and its key, if set). Returns step 3. */
export const askService = defineEffect(
  "ask-service",
  async (args: { channel: string; ts: string; question: string }, ctx) => {
    const { EXAMPLE_ANSWER_URL: service, EXAMPLE_ANSWER_KEY: key } = ctx.settings;
    if (!service) throw fatal("answer service: EXAMPLE_ANSWER_URL is not set");
    const response = await ctx.fetch(service, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "idempotency-key": ctx.idempotencyKey,
        ...(key ? { authorization: `Bearer ${key}` } : {}),
      },
      body: JSON.stringify({ question: args.question }),
    });
    if (response.status >= 500 || response.status === 429) throw transient(`answer service: HTTP ${response.status}`);
    if (!response.ok) throw fatal(`answer service: HTTP ${response.status}`);
    const { answer } = (await response.json()) as { answer?: unknown };
    if (typeof answer !== "string") throw fatal("answer service: no answer in its reply");
    return followUps({ answer }, [
      slack("chat.update", {
        channel: args.channel,
        ts: args.ts,
        text: answer,
        blocks: [
          { type: "section", text: { type: "mrkdwn", text: `*${args.question}*\n${answer}` } },
          { type: "context", elements: [{ type: "mrkdwn", text: "ackbox example · answered" }] },
        ],
      }),
    ]);
  },
  { timeoutMs: 5000, maxAttempts: 5, settings: EXAMPLE_SETTINGS },
);

export function exampleApp<V extends object>(app: App<V>) {
  return app
    .settings(EXAMPLE_SETTINGS)
    .uses("chat.update", "views.publish")
    .effect(postPlaceholder)
    .effect(askService)
    .command(
      "/ask",
      ({ payload: command }, { settings }) => {
        const question = command.text.trim();
        if (!settings.EXAMPLE_ANSWER_URL)
          return { ack: { response_type: "ephemeral", text: "The answer service is not set up (EXAMPLE_ANSWER_URL)." } };
        if (question === "") return { ack: { response_type: "ephemeral", text: "Usage: /ask <question>" } };
        return {
          ack: { response_type: "ephemeral", text: "On it." },
          intents: [run(postPlaceholder, { channel: command.channelId, question })],
        };
      },
      { description: "Ask the example answer service", usageHint: "<question>" },
    )
    .event("app_home_opened", ({ payload: event }) => {
      if (event.tab !== "home") return;
      return [
        slack("views.publish", {
          user_id: event.user,
          view: {
            type: "home",
            blocks: [
              { type: "section", text: { type: "mrkdwn", text: `Welcome, <@${event.user}>. Ask anything with \`/ask\`.` } },
              {
                type: "section",
                block_id: "topic",
                text: { type: "mrkdwn", text: "Or pick a topic:" },
                accessory: {
                  type: "external_select",
                  action_id: "ask_topic",
                  placeholder: { type: "plain_text", text: "Topic" },
                  min_query_length: 0,
                },
              },
            ],
          },
        }),
      ];
    })
    .options("ask_topic", ({ payload }) => {
      const typed = payload.value.toLowerCase();
      const options = TOPICS.filter((topic) => topic.startsWith(typed)).map((topic) => ({
        text: { type: "plain_text", text: topic },
        value: topic,
      }));
      return { ack: { options } };
    });
}

/** The example on its own, for its tests. */
export const example = exampleApp(createApp());
