/**
 * The engine's own app. The pipeline's tests (ack, dedupe, the bad-input
 * corpus, the fence, the operator API) need inputs that record one known row
 * each; they run against this app, not the reference app, so changing the
 * reference app (examples/reference/app.ts) breaks only the reference app's tests.
 *
 *   app_mention       → 1 row: chat.postMessage (key "reply")
 *   a plain message   → 1 row: reactions.add (key "eyes")
 *   any command       → an ephemeral ack, 1 row: response_url (key "result"); "… modal" opens a modal
 *   block_actions     → 1 row: chat.update (key "update")
 *   view_submission   → response_action clear, 1 row: chat.postMessage (key "thanks")
 *   anything else     → ignored
 */
import { createApp } from "../../shared/app/app.ts";
import { respondTo, slack } from "../../shared/app/intents.ts";

export const TEST_MODAL = { type: "modal", callback_id: "test_modal", title: { type: "plain_text", text: "Test" }, blocks: [] };

export function testApp() {
  return createApp()
    .uses("chat.postMessage", "reactions.add", "chat.update")
    .event("app_mention", ({ payload: e }) =>
      e.channel && e.ts
        ? [slack("chat.postMessage", { channel: e.channel, thread_ts: e.ts, text: `Hi <@${e.user}>, ackbox heard you.` }, { key: "reply" })]
        : undefined,
    )
    .message(undefined, ({ payload: m }) => [
      slack("reactions.add", { channel: m.channel, timestamp: m.ts, name: "eyes" }, { key: "eyes" }),
    ])
    .command(/^\//, ({ payload: c }, { now }) => {
      const label = `${c.command}${c.text ? ` ${c.text}` : ""}`;
      return {
        ack: { response_type: "ephemeral", text: `Working on \`${label}\`…` },
        intents: [
          respondTo(c.responseUrl, { response_type: "ephemeral", replace_original: false, text: `Done: \`${label}\`` }, now, {
            key: "result",
          }),
        ],
        ...(c.text.trim() === "modal" ? { openView: TEST_MODAL } : {}),
      };
    })
    .action(/.*/, ({ payload: action, body }, { userId }) => {
      const channel = body.container?.channel_id as string | undefined;
      const ts = body.container?.message_ts as string | undefined;
      return channel && ts
        ? [slack("chat.update", { channel, ts, text: `<@${userId}> clicked ${action.action_id}.` }, { key: "update" })]
        : undefined;
    })
    .view(/.*/, (_, { userId }) =>
      userId
        ? {
            ack: { response_action: "clear" },
            intents: [slack("chat.postMessage", { channel: userId, text: "Thanks." }, { key: "thanks" })],
          }
        : undefined,
    );
}
