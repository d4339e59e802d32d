/**
 * /standup: a team's own app, written as a Slack developer who knows Bolt
 * would, with nothing but the app's door (shared/app/index.ts).
 *
 *   /standup            → "Posting today's standup…" in the ack; then the standup
 *                         message with blocks and a Done button (chat.postMessage),
 *                         then the notes service asked for today's summary (a custom
 *                         effect, with an API key and an Idempotency-Key), then the
 *                         summary posted in the standup's thread: one durable chain
 *   the Done button     → the message updated with who is done (chat.update) and a
 *                         :white_check_mark: on it (reactions.add; a second click's
 *                         already_reacted counts as done)
 *
 * The paid call and the Slack calls are separate steps: a 429 on the thread
 * post waits out Retry-After without asking the service again.
 *
 * Its settings are its own (STANDUP_SETTINGS): where the notes service is, and
 * its API key, a secret only the effect that calls the service sees — never an
 * intent's args (a row), a log line or an answer. `npm start` refuses to start
 * without them; `npm run setup` uploads the key as a secret of both Workers.
 *
 * To run it as your app: `export const app = standupApp(createApp())` in app/index.ts.
 */
import { type App, createApp, defineEffect, fatal, followUps, run, setting, slack, transient } from "../../shared/app/index.ts";

export const STANDUP_SETTINGS = {
  STANDUP_NOTES_URL: setting.url({ description: "The notes service that writes a standup's summary", required: true }),
  STANDUP_NOTES_KEY: setting.secret({ description: "The notes service's API key, sent as `Authorization: Bearer <key>`", required: true }),
};

export const DONE_BUTTON = "standup_done";

const standupBlocks = (date: string, done: readonly string[]) => [
  { type: "header", text: { type: "plain_text", text: `Standup · ${date}` } },
  {
    type: "section",
    text: { type: "mrkdwn", text: done.length === 0 ? "Nobody is done yet." : `Done: ${done.map((u) => `<@${u}>`).join(", ")}` },
  },
  {
    type: "actions",
    block_id: "standup",
    elements: [{ type: "button", action_id: DONE_BUTTON, text: { type: "plain_text", text: "Done" }, style: "primary", value: date }],
  },
];

/** The standup app's effects and handlers. */
export function standupApp<V extends object>(app: App<V>) {
  /** Step 1: the standup message. Returns step 2, which needs its ts. */
  const postStandup = defineEffect<{ channel: string; date: string }>(
    "standup-post",
    async (args, ctx) => {
      const posted = await ctx.slack.call("chat.postMessage", {
        channel: args.channel,
        text: `Standup · ${args.date}`,
        blocks: standupBlocks(args.date, []),
      });
      const ts = String(posted.ts);
      return followUps({ channel: args.channel, ts }, [run(askNotes, { channel: args.channel, ts, date: args.date })]);
    },
    { slackMethods: ["chat.postMessage"] },
  );

  /** Step 2: the notes service, asked once per standup (its Idempotency-Key is this row's). Returns step 3. */
  const askNotes = defineEffect(
    "standup-notes",
    async (args: { channel: string; ts: string; date: string }, ctx) => {
      const { STANDUP_NOTES_URL, STANDUP_NOTES_KEY } = ctx.settings;
      const response = await ctx.fetch(`${STANDUP_NOTES_URL.replace(/\/+$/, "")}/v1/summary`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${STANDUP_NOTES_KEY}`,
          "content-type": "application/json",
          "idempotency-key": ctx.idempotencyKey,
        },
        body: JSON.stringify({ date: args.date }),
      });
      if (response.status >= 500 || response.status === 429) throw transient(`notes service: HTTP ${response.status}`);
      if (!response.ok) throw fatal(`notes service: HTTP ${response.status}`);
      const { summary } = (await response.json()) as { summary?: unknown };
      if (typeof summary !== "string" || summary === "") throw fatal("notes service: no summary in its answer");
      return followUps({ summary: summary.slice(0, 200) }, [
        slack("chat.postMessage", { channel: args.channel, thread_ts: args.ts, text: summary }),
      ]);
    },
    { timeoutMs: 5000, maxAttempts: 5, settings: STANDUP_SETTINGS },
  );

  return app
    .uses("chat.postMessage", "chat.update", "reactions.add")
    .effect(postStandup)
    .effect(askNotes)
    .command(
      "/standup",
      ({ payload: command }, { now }) => ({
        ack: { response_type: "ephemeral", text: "Posting today's standup…" },
        intents: [run(postStandup, { channel: command.channelId, date: new Date(now).toISOString().slice(0, 10) })],
      }),
      { description: "Post today's standup" },
    )
    .action(DONE_BUTTON, ({ payload: action, body }, { userId }) => {
      const channel = (body.container?.channel_id ?? body.channel?.id) as string | undefined;
      const ts = (body.container?.message_ts ?? body.message?.ts) as string | undefined;
      if (!channel || !ts || !userId) return;
      const date = action.value ?? "today";
      // Who was done already: the message as Slack echoes it with the click (its blocks, as posted or last updated).
      const done = [...new Set([...JSON.stringify(body.message?.blocks ?? []).matchAll(/<@(U[A-Z0-9]+)>/g)].map((m) => m[1] ?? ""))];
      if (!done.includes(userId)) done.push(userId);
      return [
        slack("chat.update", { channel, ts, text: `Standup · ${date}: ${done.length} done`, blocks: standupBlocks(date, done) }),
        slack("reactions.add", { channel, timestamp: ts, name: "white_check_mark" }),
      ];
    });
}

/** The standup app on its own, for its tests. */
export const standup = standupApp(createApp());
