/**
 * The reference app (SPEC §3): what ackbox does out of the box.
 *
 *   app_mention           → a threaded reply (chat.postMessage)
 *   a plain message       → :eyes: on it (reactions.add), in WATCHED_CHANNELS (empty = all)
 *   any slash command     → "Working on it…" in the ack, the result through its response_url;
 *                           "<command> modal" also opens a feedback modal
 *   a button click        → chat.update of the message it sits on
 *   the modal's submission → cleared, and a thank-you DM
 *   the custom step ackbox_echo (Workflow Builder) → completed in its own step with its input
 *                           (functions.completeSuccess, outputs { text }), exactly once
 *   an assistant thread (with MODEL_URL set) → suggested prompts when it starts; each question answered by the
 *                           model, streamed into the thread with the thread's history: one complete message
 *
 * Its command, button and view handlers are catch-alls (SPEC §3: any slash
 * command, any button), so it composes last: `referenceApp(yours(createApp()))`.
 * A handler composed after it that a catch-all covers is refused when the app
 * is built, naming the catch-all (shared/app/app.ts).
 */
import { type App, respondTo, setting, slack } from "../../shared/app/index.ts";

export const REFERENCE_SETTINGS = {
  WATCHED_CHANNELS: setting.list({ description: "Comma-separated channel ids the reference app reacts in; empty = all." }),
};

export function referenceApp<V extends object>(app: App<V>) {
  return app
    .settings(REFERENCE_SETTINGS)
    .uses("chat.postMessage", "reactions.add", "chat.update")
    .event("app_mention", ({ payload: event }) => {
      if (event.bot_id || !event.channel || !event.ts) return;
      return [
        slack(
          "chat.postMessage",
          { channel: event.channel, thread_ts: event.ts, text: `Hi <@${event.user ?? "there"}>, ackbox heard you.` },
          { key: "reply" },
        ),
      ];
    })
    .message(undefined, ({ payload: message }, { settings }) => {
      const watched = settings.WATCHED_CHANNELS;
      if (!message.channel || !message.ts || (watched.length > 0 && !watched.includes(message.channel))) return;
      return [slack("reactions.add", { channel: message.channel, timestamp: message.ts, name: "eyes" }, { key: "eyes" })];
    })
    .command(
      /^\//,
      ({ payload: command }, { now }) => {
        const label = `${command.command}${command.text ? ` ${command.text}` : ""}`;
        return {
          ack: { response_type: "ephemeral", text: `Working on \`${label}\`…` },
          intents: [
            respondTo(command.responseUrl, { response_type: "ephemeral", replace_original: false, text: `Done: \`${label}\`` }, now, {
              key: "result",
            }),
          ],
          ...(command.text.trim() === "modal" ? { openView: FEEDBACK_MODAL } : {}),
        };
      },
      { names: ["/ackbox"], description: "Ask ackbox to do something (try `/ackbox modal`)" },
    )
    .action(/.*/, ({ payload: action, body }, { userId }) => {
      const channel = (body.container?.channel_id ?? body.channel?.id) as string | undefined;
      const ts = (body.container?.message_ts ?? body.message?.ts) as string | undefined;
      if (!channel || !ts) return;
      return [
        slack(
          "chat.update",
          { channel, ts, text: `<@${userId ?? "someone"}> clicked ${action.action_id || "a button"}.` },
          { key: "update" },
        ),
      ];
    })
    .function(
      "ackbox_echo",
      {
        title: "Echo",
        description: "Gives back the text it is given",
        inputs: { text: { type: "string", title: "Text", required: true } },
        outputs: { text: { type: "string", title: "Text", required: true } },
      },
      ({ inputs }, { step }) => [step.complete({ text: inputs.text })],
    )
    .assistant({
      description: "Answers your questions with a model, streamed into the thread.",
      suggestedPrompts: PROMPTS,
      // Without a model (MODEL_URL unset) the app does not answer assistant threads: their inputs are ignored.
      threadStarted: (_, { thread, settings }) => (settings.MODEL_URL ? [thread.setSuggestedPrompts(PROMPTS)] : undefined),
      threadContextChanged: (_, { settings }) => (settings.MODEL_URL ? [] : undefined),
      userMessage: (_, { thread, settings }) => (settings.MODEL_URL ? [thread.answer()] : undefined),
    })
    .view(/.*/, (_, { userId }) => {
      if (!userId) return;
      return {
        ack: { response_action: "clear" },
        intents: [slack("chat.postMessage", { channel: userId, text: "Thanks, ackbox received your feedback." }, { key: "thanks" })],
      };
    });
}

/** What a new assistant thread offers (Slack shows at most four). */
const PROMPTS = [
  { title: "What can you do?", message: "What can you do?" },
  { title: "Explain ackbox", message: "Explain in three sentences how ackbox answers Slack within three seconds." },
];

const FEEDBACK_MODAL = {
  type: "modal",
  callback_id: "ackbox_feedback",
  title: { type: "plain_text", text: "Feedback" },
  submit: { type: "plain_text", text: "Send" },
  blocks: [
    {
      type: "input",
      block_id: "feedback",
      label: { type: "plain_text", text: "What should we know?" },
      element: { type: "plain_text_input", action_id: "text", multiline: true },
    },
  ],
};
