/**
 * Your app, in one file: what each Slack input means, as intents the engine performs durably (once, retried,
 * never lost). Both Workers run `app` (workers/ingress and workers/consumer); `npm run manifest` derives the Slack manifest from
 * it. Add handlers here; docs: node_modules/ackbox/README.md and the guide it links.
 *
 *   @mention            → a threaded reply
 *   a channel message   → :eyes: on it
 *   /ackbox <text>      → "Working on it…" in the ack, the result through its response_url
 *   the "approve" button → the message it sits on updated
 */
import { createApp, respondTo, slack } from "ackbox";

export const app = createApp()
  .uses("chat.postMessage", "reactions.add", "chat.update")
  .event("app_mention", ({ payload: event }) => {
    if (event.bot_id || !event.channel || !event.ts) return;
    return [
      slack("chat.postMessage", { channel: event.channel, thread_ts: event.ts, text: `Hi <@${event.user ?? "there"}>!` }, { key: "reply" }),
    ];
  })
  .message(undefined, ({ payload: message }) => {
    if (!message.channel || !message.ts) return;
    return [slack("reactions.add", { channel: message.channel, timestamp: message.ts, name: "eyes" }, { key: "eyes" })];
  })
  .command(
    "/ackbox",
    ({ payload: command }, { now }) => ({
      ack: { response_type: "ephemeral", text: `Working on \`${command.text}\`…` },
      intents: [respondTo(command.responseUrl, { response_type: "ephemeral", text: `Done: \`${command.text}\`` }, now, { key: "result" })],
    }),
    { description: "Ask the app to do something" },
  )
  .action("approve", ({ body }, { userId }) => {
    const channel = (body.container?.channel_id ?? body.channel?.id) as string | undefined;
    const ts = (body.container?.message_ts ?? body.message?.ts) as string | undefined;
    if (!channel || !ts) return;
    return [slack("chat.update", { channel, ts, text: `<@${userId ?? "someone"}> approved.` }, { key: "update" })];
  });
