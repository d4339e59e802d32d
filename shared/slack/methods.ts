/**
 * What each Slack Web API method's outcome means for its outbox row, and the
 * bot scopes it needs. The effect author names a method and its arguments;
 * what to do with Slack's answer comes from here, not from each app.
 *
 * For every method:
 * - `ok: true` → done; the row keeps the answer's top-level scalars (ts,
 *   channel, …) and the id of each object it returns (view.id, channel.id).
 * - an `ok: false` error in `alreadyDone` → done: the state asked for is
 *   already there (a repeat of the effect, or someone got there first).
 * - an error in RETRYABLE_API_ERRORS (web-api.ts) or the method's own
 *   `retryable` → retried with backoff; a 429 waits Slack's Retry-After; no
 *   answer, a timeout or a 5xx → retried.
 * - any other `ok: false` (channel_not_found, invalid_auth, not_in_channel,
 *   invalid_blocks, …) → fatal: parked dead, for an operator (a retry would
 *   get the same answer).
 * - `repeat`: what at-least-once costs. "harmless": performing it twice leaves
 *   the same state (an update, a reaction, a publish). "visible": a repeat is
 *   a second message, modal or reminder (the README's delivery semantics).
 *
 * A method not listed is still callable: it gets the safe default (retry
 * transport failures and the retryable errors, park every other ok:false,
 * repeat "visible", no scope: the manifest says it could not name one).
 * To extend, add a line here; test/unit/methods.test.ts checks its shape.
 */
export interface MethodSemantics {
  /** ok:false errors that mean success already happened. */
  readonly alreadyDone?: readonly string[];
  /** ok:false errors, beyond the shared retryable ones, that a retry can cure. */
  readonly retryable?: readonly string[];
  readonly repeat: "harmless" | "visible";
  /** Bot token scopes (Slack's method docs, "Required scopes"). */
  readonly scopes: readonly string[];
}

const CHAT_WRITE = ["chat:write"];

export const SLACK_METHODS: Readonly<Record<string, MethodSemantics>> = {
  "chat.postMessage": { repeat: "visible", scopes: CHAT_WRITE },
  "chat.postEphemeral": { repeat: "visible", scopes: CHAT_WRITE },
  "chat.scheduleMessage": { repeat: "visible", scopes: CHAT_WRITE },
  "chat.meMessage": { repeat: "visible", scopes: CHAT_WRITE },
  "chat.update": { repeat: "harmless", scopes: CHAT_WRITE },
  // A streamed message (an assistant's answer: shared/assistant/reply.ts reads these answers itself). A repeated
  // start is a second message and a repeated append a repeated chunk: neither takes an idempotency key. A stop of a
  // stream already over is answered message_not_in_streaming_state: it is over.
  "chat.startStream": { repeat: "visible", scopes: CHAT_WRITE },
  "chat.appendStream": { repeat: "visible", scopes: CHAT_WRITE },
  "chat.stopStream": { repeat: "harmless", alreadyDone: ["message_not_in_streaming_state"], scopes: CHAT_WRITE },
  "chat.delete": { repeat: "harmless", alreadyDone: ["message_not_found"], scopes: CHAT_WRITE },
  "chat.unfurl": { repeat: "harmless", scopes: ["links:write"] },
  "reactions.add": { repeat: "harmless", alreadyDone: ["already_reacted"], scopes: ["reactions:write"] },
  "reactions.remove": { repeat: "harmless", alreadyDone: ["no_reaction"], scopes: ["reactions:write"] },
  "pins.add": { repeat: "harmless", alreadyDone: ["already_pinned"], scopes: ["pins:write"] },
  "pins.remove": { repeat: "harmless", alreadyDone: ["no_pin"], scopes: ["pins:write"] },
  "bookmarks.add": { repeat: "visible", scopes: ["bookmarks:write"] },
  "reminders.add": { repeat: "visible", scopes: ["reminders:write"] },
  "views.publish": { repeat: "harmless", scopes: [] },
  "views.update": { repeat: "harmless", scopes: [] },
  "views.open": { repeat: "visible", scopes: [] },
  "views.push": { repeat: "visible", scopes: [] },
  "conversations.join": { repeat: "harmless", alreadyDone: ["already_in_channel"], scopes: ["channels:join"] },
  "conversations.invite": { repeat: "harmless", alreadyDone: ["already_in_channel"], scopes: ["channels:manage", "groups:write"] },
  "conversations.open": { repeat: "harmless", scopes: ["im:write"] },
  "conversations.archive": { repeat: "harmless", alreadyDone: ["already_archived"], scopes: ["channels:manage", "groups:write"] },
  "conversations.unarchive": { repeat: "harmless", alreadyDone: ["not_archived"], scopes: ["channels:manage", "groups:write"] },
  "conversations.setTopic": { repeat: "harmless", scopes: ["channels:manage", "groups:write"] },
  // An assistant thread's status, title and prompts: set again, the same result. setStatus takes chat:write since
  // 2026-03-05 (Slack's changelog: assistant:write "will eventually no longer" be accepted for it).
  "assistant.threads.setStatus": { repeat: "harmless", scopes: ["chat:write"] },
  "assistant.threads.setSuggestedPrompts": { repeat: "harmless", scopes: ["assistant:write"] },
  "assistant.threads.setTitle": { repeat: "harmless", scopes: ["assistant:write"] },
  // A custom step's completion (performed by shared/steps/effects.ts, which reads the same answers): Slack completes
  // an execution once; "no longer running" and "cannot be found" (its docs: "the function has been completed and
  // cannot be found") mean it has its completion. No scopes (Slack's method docs).
  "functions.completeSuccess": {
    repeat: "harmless",
    alreadyDone: ["execution_not_in_running_state", "function_execution_not_found"],
    scopes: [],
  },
  "functions.completeError": {
    repeat: "harmless",
    alreadyDone: ["execution_not_in_running_state", "function_execution_not_found"],
    scopes: [],
  },
  "users.info": { repeat: "harmless", scopes: ["users:read"] },
  // A thread's messages: the history scope of the conversation's kind (channels:, groups:, im:, mpim:history), which
  // the manifest asks for with the message.* subscription of the conversations the app hears.
  "conversations.replies": { repeat: "harmless", scopes: [] },
};

/** The safe default for a method the table does not list. */
export const UNKNOWN_METHOD: MethodSemantics = { repeat: "visible", scopes: [] };

export function semanticsOf(method: string): MethodSemantics {
  return Object.hasOwn(SLACK_METHODS, method) ? (SLACK_METHODS[method] as MethodSemantics) : UNKNOWN_METHOD;
}

/** A Web API method name: dotted lower-camel segments ("chat.postMessage", "admin.conversations.search"). */
export function isSlackMethodName(name: string): boolean {
  return /^[a-z][a-zA-Z]*(\.[a-z][a-zA-Z0-9]*)+$/.test(name) && name.length <= 100;
}
