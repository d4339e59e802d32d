/**
 * Timers: effects that happen later, and can be called off.
 *
 *   /remind <minutes> <text>    → "I'll remind you…" in the ack, with a Done button; the reminder is posted in
 *                                 the channel that many minutes later: a timer ({ after }), named for the user
 *                                 and the request ({ name }), recorded in the ack's one batch like any intent
 *   its Done button             → cancel(name): the reminder is not posted (if its time has not come yet)
 *   /escalate <minutes> <text>  → a message with an Ack button (an effect: its ts is known once it is posted);
 *                                 with its completion, a timer named for that message: unacknowledged after
 *                                 that many minutes, a follow-up posts in its thread
 *   its Ack button              → cancel(the escalation) and the message updated: who acknowledged it
 *
 * A timer survives restarts and deploys: it is an outbox row, performed at or after its time, at least once,
 * with the same retries and audit trail as any effect (`npx ackbox timers list` shows the pending ones).
 * Names are the app's (`remind:<user>:<trigger_id>`, `escalate:<channel>:<ts>`), so the buttons need no row id.
 */
import { type App, cancel, createApp, defineEffect, followUps, respondTo, run, slack } from "../../shared/app/index.ts";

export const REMIND_DONE = "remind_done";
export const ESCALATION_ACK = "escalation_ack";

/** The longest a reminder may wait: the engine refuses a timer more than a year ahead. */
const MAX_MINUTES = 365 * 24 * 60;

/** "<minutes> <text>", or why not. */
function parseLater(text: string, usage: string): { minutes: number; what: string } | { usage: string } {
  const match = /^(\d{1,6})\s+(\S[\s\S]*)$/.exec(text.trim());
  const minutes = Number(match?.[1]);
  if (!match || minutes < 1 || minutes > MAX_MINUTES) return { usage: `Usage: ${usage} (minutes from 1 to ${MAX_MINUTES})` };
  return { minutes, what: (match[2] ?? "").trim() };
}

const minutesText = (minutes: number) => (minutes === 1 ? "1 minute" : `${minutes} minutes`);

/** Step 1 of an escalation: the message with its Ack button. Returns step 2, the escalation, due later. */
export const postEscalation = defineEffect<{ channel: string; minutes: number; what: string }>(
  "escalation-post",
  async (args, ctx) => {
    const posted = await ctx.slack.call("chat.postMessage", {
      channel: args.channel,
      text: `:rotating_light: ${args.what}`,
      blocks: [
        { type: "section", text: { type: "mrkdwn", text: `:rotating_light: *${args.what}*` } },
        {
          type: "actions",
          block_id: "escalation",
          elements: [{ type: "button", action_id: ESCALATION_ACK, text: { type: "plain_text", text: "Ack" }, style: "primary" }],
        },
        {
          type: "context",
          elements: [{ type: "mrkdwn", text: `Escalates in this thread if nobody acks within ${minutesText(args.minutes)}.` }],
        },
      ],
    });
    const ts = String(posted.ts);
    return followUps({ channel: args.channel, ts }, [
      slack(
        "chat.postMessage",
        { channel: args.channel, thread_ts: ts, text: `:rotating_light: Nobody acknowledged this within ${minutesText(args.minutes)}.` },
        { after: args.minutes * 60, name: escalationName(args.channel, ts) },
      ),
    ]);
  },
  { slackMethods: ["chat.postMessage"] },
);

/** The escalation of the message `ts` in `channel`: what its Ack button cancels. */
export const escalationName = (channel: string, ts: string) => `escalate:${channel}:${ts}`;

export function remindApp<V extends object>(app: App<V>) {
  return app
    .uses("chat.postMessage", "chat.update")
    .effect(postEscalation)
    .command(
      "/remind",
      ({ payload: command }) => {
        const later = parseLater(command.text, "/remind <minutes> <text>");
        if ("usage" in later) return { ack: { response_type: "ephemeral", text: later.usage } };
        const name = `remind:${command.userId}:${command.triggerId}`;
        const promise = `I'll remind this channel in ${minutesText(later.minutes)}: ${later.what}`;
        return {
          ack: {
            response_type: "ephemeral",
            text: promise,
            blocks: [
              { type: "section", text: { type: "mrkdwn", text: `:alarm_clock: ${promise}` } },
              {
                type: "actions",
                block_id: "remind",
                elements: [{ type: "button", action_id: REMIND_DONE, text: { type: "plain_text", text: "Done" }, value: name }],
              },
            ],
          },
          intents: [
            slack(
              "chat.postMessage",
              { channel: command.channelId, text: `:alarm_clock: Reminder from <@${command.userId}>: ${later.what}` },
              { after: later.minutes * 60, name },
            ),
          ],
        };
      },
      { description: "Remind this channel in a few minutes", usageHint: "<minutes> <text>" },
    )
    .action(REMIND_DONE, ({ payload: action, body }, { now }) => {
      if (!action.value) return;
      // The ack's message is ephemeral: its response_url is how it is replaced.
      return [
        cancel(action.value),
        ...(body.response_url
          ? [respondTo(body.response_url, { replace_original: true, text: ":white_check_mark: Reminder marked done." }, now)]
          : []),
      ];
    })
    .command(
      "/escalate",
      ({ payload: command }) => {
        const later = parseLater(command.text, "/escalate <minutes> <text>");
        if ("usage" in later) return { ack: { response_type: "ephemeral", text: later.usage } };
        return {
          ack: { response_type: "ephemeral", text: `Posting it; it escalates in ${minutesText(later.minutes)} unless someone acks.` },
          intents: [run(postEscalation, { channel: command.channelId, ...later })],
        };
      },
      { description: "Post something that needs an Ack, escalated if nobody gives one", usageHint: "<minutes> <text>" },
    )
    .action(ESCALATION_ACK, ({ body }, { userId }) => {
      const channel = (body.container?.channel_id ?? body.channel?.id) as string | undefined;
      const ts = (body.container?.message_ts ?? body.message?.ts) as string | undefined;
      if (!channel || !ts) return;
      const text = typeof body.message?.text === "string" ? body.message.text : "";
      return [
        cancel(escalationName(channel, ts)),
        slack("chat.update", {
          channel,
          ts,
          text: `${text} — acknowledged by <@${userId ?? "someone"}>`,
          blocks: [
            { type: "section", text: { type: "mrkdwn", text } },
            { type: "context", elements: [{ type: "mrkdwn", text: `:white_check_mark: Acknowledged by <@${userId ?? "someone"}>` }] },
          ],
        }),
      ];
    });
}

/** The example on its own, for its tests. */
export const remind = remindApp(createApp());
