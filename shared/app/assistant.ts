/**
 * An AI assistant, in the shape Bolt users know (`app.assistant`, shared/app/app.ts):
 *
 *   app.assistant({
 *     suggestedPrompts: [{ title: "Summarise", message: "Summarise this channel" }],
 *     userMessage: (_, { thread }) => [thread.answer()],
 *   });
 *
 * Slack's assistant threads: a user opens the app's assistant pane
 * (assistant_thread_started), may switch the channel they look at
 * (assistant_thread_context_changed), and asks in the thread (a `message` in
 * the app's DM, channel_type im, with a thread_ts). A handler gets `thread`:
 * intents for the thread (its status line, suggested prompts, title, a
 * message), and, for a question, `thread.answer()`: the model's answer
 * streamed into the thread, once and complete (shared/assistant/answer.ts).
 *
 * The engine keeps what an answer is asked with in D1, in the ack's batch
 * (shared/assistant/records.ts): the thread's context, and each question as a
 * turn — never read back through conversations.replies (1 request a minute
 * for apps outside the Marketplace). The user's stop (agent_session_stopped)
 * is recorded the same way, and ends the answer at its next write.
 */
import { ANSWER_EFFECT, type ThreadRecord } from "../assistant/thread.ts";
import type { IntendedEffect } from "../outbox/model.ts";
import { isObject, type JsonObject, present, type RecordableInput } from "../slack/inputs.ts";
import { type Intent, slack } from "./intents.ts";
import { setting } from "./settings.ts";

/** The thread a handler of an assistant input is in, and what it may ask of it. */
export interface AssistantThread {
  /** The app's DM with the user (D…). */
  readonly channelId: string;
  readonly threadTs: string;
  readonly userId: string | undefined;
  /** What Slack says the user is looking at (assistant_thread_started / _context_changed only): channel_id, team_id, … */
  readonly context: JsonObject | undefined;
  /** The status line under the thread ("is thinking…"): assistant.threads.setStatus; "" clears it. */
  setStatus(status: string, loadingMessages?: readonly string[]): Intent;
  /** Up to four prompts offered in the thread: assistant.threads.setSuggestedPrompts. */
  setSuggestedPrompts(prompts: readonly { readonly title: string; readonly message: string }[], title?: string): Intent;
  /** The thread's title in the user's history: assistant.threads.setTitle. */
  setTitle(title: string): Intent;
  /** A message in the thread (chat.postMessage, markdown). */
  say(markdown: string): Intent;
  /**
   * The question answered by the model (MODEL_URL), streamed into the thread: one complete message per question,
   * whatever fails (shared/assistant/answer.ts). Only in userMessage.
   */
  answer(options?: AnswerOptions): Intent;
}

export interface AnswerOptions {
  /** The system prompt (default: a helpful assistant in Slack, answering in Markdown). */
  readonly instructions?: string;
  /** The status line while the model thinks (default "is thinking…"). */
  readonly status?: string;
  /** Up to ten short lines Slack rotates under the status. */
  readonly loadingMessages?: readonly string[];
}

/** The settings an assistant's answers read: an OpenAI-compatible chat completions endpoint. */
export const ASSISTANT_SETTINGS = {
  MODEL_URL: setting.url({
    description: "The assistant's model: an OpenAI-compatible endpoint's base URL ({MODEL_URL}/chat/completions, stream: true)",
  }),
  MODEL_API_KEY: setting.secret({ description: "The model's API key (sent as Authorization: Bearer)" }),
  MODEL_NAME: setting.text({ description: "The model's name, sent as `model` (some servers with one model need none)" }),
} as const;

/** The Slack methods an assistant calls: its handlers' intents, and its answers (shared/assistant/reply.ts). */
export const ASSISTANT_METHODS = [
  "assistant.threads.setStatus",
  "assistant.threads.setSuggestedPrompts",
  "assistant.threads.setTitle",
  "chat.postMessage",
  "chat.startStream",
  "chat.appendStream",
  "chat.stopStream",
  "chat.update",
  "conversations.replies",
] as const;

/** Which assistant input a registration takes. */
export type AssistantKind = "started" | "context" | "message" | "stopped";

/** The event types of each kind (a question is a `message`). */
export const ASSISTANT_EVENT_OF: Readonly<Record<AssistantKind, string>> = {
  started: "assistant_thread_started",
  context: "assistant_thread_context_changed",
  message: "message",
  stopped: "agent_session_stopped",
};

/**
 * Whether a message event is a user's question in an assistant thread, as Bolt reads one: in the app's DM
 * (channel_type im), in a thread, a person's (no bot_id), with no subtype but file_share.
 */
export function isAssistantQuestion(event: JsonObject): boolean {
  const subtype = present(event.subtype);
  return (
    event.type === "message" &&
    present(event.channel_type) === "im" &&
    present(event.thread_ts) !== undefined &&
    present(event.channel) !== undefined &&
    present(event.ts) !== undefined &&
    present(event.bot_id) === undefined &&
    (subtype === undefined || subtype === "file_share")
  );
}

/** The thread an assistant input is in: from its assistant_thread, or the message itself. */
export function threadOf(
  kind: AssistantKind,
  event: JsonObject,
): { channelId: string; threadTs: string; userId: string | undefined; context: JsonObject | undefined } | undefined {
  if (kind === "started" || kind === "context") {
    const t = isObject(event.assistant_thread) ? event.assistant_thread : undefined;
    const channelId = t ? present(t.channel_id) : undefined;
    const threadTs = t ? present(t.thread_ts) : undefined;
    if (!t || !channelId || !threadTs) return undefined;
    return { channelId, threadTs, userId: present(t.user_id), context: isObject(t.context) ? t.context : undefined };
  }
  const channelId = present(event.channel);
  const threadTs = present(event.thread_ts);
  if (!channelId || !threadTs) return undefined;
  return { channelId, threadTs, userId: present(event.user), context: undefined };
}

/** A handler's `thread`. `question`: the message a userMessage handler answers (answer() needs it). */
export function assistantThread(
  where: { channelId: string; threadTs: string; userId: string | undefined; context: JsonObject | undefined },
  teamId: string | undefined,
  question: { readonly ts: string } | undefined,
): AssistantThread {
  const { channelId, threadTs } = where;
  return {
    ...where,
    setStatus: (status, loadingMessages) =>
      slack(
        "assistant.threads.setStatus",
        {
          channel_id: channelId,
          thread_ts: threadTs,
          status,
          ...(loadingMessages?.length ? { loading_messages: [...loadingMessages] } : {}),
        },
        { key: "status" },
      ),
    setSuggestedPrompts: (prompts, title) =>
      slack(
        "assistant.threads.setSuggestedPrompts",
        {
          channel_id: channelId,
          thread_ts: threadTs,
          prompts: prompts.map((p) => ({ title: p.title, message: p.message })),
          ...(title ? { title } : {}),
        },
        { key: "prompts" },
      ),
    setTitle: (title) => slack("assistant.threads.setTitle", { channel_id: channelId, thread_ts: threadTs, title }, { key: "title" }),
    say: (markdown) => slack("chat.postMessage", { channel: channelId, thread_ts: threadTs, markdown_text: markdown }, { key: "say" }),
    answer(options = {}) {
      if (!question || !teamId) throw new Error("thread.answer() answers a user's question: call it from userMessage");
      return {
        key: "answer",
        effect: ANSWER_EFFECT,
        args: {
          team: teamId,
          channel: channelId,
          thread_ts: threadTs,
          message_ts: question.ts,
          user: where.userId ?? null,
          instructions: options.instructions ?? null,
          status: options.status ?? null,
          loading_messages: options.loadingMessages ? [...options.loadingMessages] : null,
        },
      };
    },
  };
}

/** What the ack records for an assistant input (beside the rows its handler asked for), or why it is refused. */
export function assistantRecords(
  kind: AssistantKind,
  input: RecordableInput,
  effects: readonly IntendedEffect[],
): { readonly records: readonly ThreadRecord[] } | { readonly refuse: string } {
  if (input.surface !== "event" || !input.teamId) return { records: [] };
  const event = input.event;
  const teamId = input.teamId;
  const answers = effects.filter((e) => e.effect === ANSWER_EFFECT);
  if (kind === "stopped") {
    const channelId = present(event.channel);
    const threadTs = present(event.thread_ts);
    const eventTs = present(event.event_ts);
    return { records: channelId && threadTs && eventTs ? [{ kind: "stop", thread: { teamId, channelId, threadTs }, eventTs }] : [] };
  }
  const where = threadOf(kind, event);
  if (!where) return { records: [] };
  const thread = { teamId, channelId: where.channelId, threadTs: where.threadTs };
  if (kind !== "message") {
    if (answers.length > 0) return { refuse: "thread.answer() answers a question: return it from userMessage" };
    const eventTs = present(event.event_ts) ?? "0";
    return { records: [{ kind: "context", thread, userId: where.userId, context: where.context, eventTs }] };
  }
  if (answers.length > 1) return { refuse: "a question is answered once: return one thread.answer()" };
  const answer = answers[0];
  if (!answer) return { records: [] };
  if (answer.name !== undefined) return { refuse: "thread.answer() is keyed by its question: it takes no name" };
  const messageTs = present(event.ts) as string;
  const args = answer.payload as JsonObject;
  if (args.channel !== where.channelId || args.thread_ts !== where.threadTs || args.message_ts !== messageTs || args.team !== teamId) {
    return { refuse: "thread.answer() answers the question the handler was given, in its own thread" };
  }
  const question = present(event.text) ?? "";
  return {
    records: [{ kind: "turn", turn: { ...thread, messageTs }, userId: where.userId, question, answerKey: answer.key }],
  };
}
