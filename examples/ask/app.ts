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
 */
import { type App, createApp, defineEffect, fatal, followUps, run, slack, transient } from "../../shared/app/index.ts";

const TOPICS = ["billing", "deploys", "incidents", "onboarding", "security"];

/** Step 1: the placeholder. Returns step 2, which needs the placeholder's ts. */
export const postPlaceholder = defineEffect<{ channel: string; question: string; service: string }>(
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
    return followUps({ channel: args.channel, ts }, [
      run(askService, { channel: args.channel, ts, question: args.question, service: args.service }),
    ]);
  },
  { slackMethods: ["chat.postMessage"] },
);

/** Step 2: the answer service, asked with this row's idempotency key. Returns step 3. */
export const askService = defineEffect<{ channel: string; ts: string; question: string; service: string }>(
  "ask-service",
  async (args, ctx) => {
    const response = await ctx.fetch(args.service, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": ctx.idempotencyKey },
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
  { timeoutMs: 5000, maxAttempts: 5 },
);

export function exampleApp(app: App): App {
  return app
    .uses("chat.update", "views.publish")
    .effect(postPlaceholder)
    .effect(askService)
    .command(
      "/ask",
      ({ payload: command }, { settings }) => {
        const question = command.text.trim();
        if (!settings.exampleAnswerUrl)
          return { ack: { response_type: "ephemeral", text: "The answer service is not set up (EXAMPLE_ANSWER_URL)." } };
        if (question === "") return { ack: { response_type: "ephemeral", text: "Usage: /ask <question>" } };
        return {
          ack: { response_type: "ephemeral", text: "On it." },
          intents: [run(postPlaceholder, { channel: command.channelId, question, service: settings.exampleAnswerUrl })],
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
