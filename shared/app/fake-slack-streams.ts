/**
 * Slack's side of assistant threads and message streams, as a model: what Slack keeps (each thread's messages,
 * which of them are still streaming, the thread's status, prompts and title) and how it answers the methods an
 * assistant calls, in Slack's shapes and with Slack's errors. The engine's tests and the local stand-in answer
 * those methods through it, so an answer effect is tested against Slack's behaviour, not against a script of it.
 * Dependency-free and clock-injected: every time rule (a stream's lifetime, the status's two minutes) is read
 * from `now()`, so a test crosses a boundary by moving its clock, never by waiting.
 *
 * Sources: Slack's method references (docs.slack.dev, as scraped in slack-ruby/slack-api-ref), node-slack-sdk's
 * and python-slack-sdk's stream helpers, and their issue threads (python-slack-sdk 1859, node-slack-sdk 2702,
 * vercel/chat 637) for what Slack does but does not document.
 *
 * Glossary:
 *   stream       a message started by chat.startStream; it takes chat.appendStream until chat.stopStream, the
 *                user's stop button, or its lifetime ends it.
 *   lifetime     Slack closes a stream about five minutes after startStream, whatever the traffic since
 *                (undocumented; python-slack-sdk 1859): appends and stops then answer
 *                message_not_in_streaming_state and the message stays a "broken pill" until chat.update.
 *   flight       one call, from its arrival at Slack (`begin`) to its answer reaching the caller (`deliver`)
 *                or being lost (`drop`); Slack applies the call (`apply`) in between.
 *   lost answer  applied on Slack's side, never delivered (a timeout, a dropped connection): the caller does
 *                not know what happened. startStream and appendStream take no idempotency key, so a caller
 *                that re-sends such a call posts a second message or repeats a chunk.
 *   overlap      a second flight for one stream (or a second start in one thread) beginning while another is
 *                in flight: appends must be one at a time per stream, or their order is Slack's guess.
 */

export const STREAM_LIFETIME_MS = 5 * 60_000;
/** "A two minute timeout applies, which will cause the status to be removed if no message has been sent." */
export const STATUS_TIMEOUT_MS = 2 * 60_000;
/** markdown_text's limit on chat.startStream, appendStream, stopStream, update and postMessage. */
export const MARKDOWN_TEXT_LIMIT = 12_000;
/** chat.update's msg_too_long: "text field cannot exceed 4,000 characters" (markdown_text has 12 000). */
export const UPDATE_TEXT_LIMIT = 4_000;

/** The methods the model answers. */
export const STREAMS_METHODS = [
  "chat.startStream",
  "chat.appendStream",
  "chat.stopStream",
  "chat.update",
  "chat.postMessage",
  "assistant.threads.setStatus",
  "assistant.threads.setSuggestedPrompts",
  "assistant.threads.setTitle",
  "conversations.replies",
] as const;
export type StreamsMethod = (typeof STREAMS_METHODS)[number];
export const isStreamsMethod = (method: string): method is StreamsMethod => (STREAMS_METHODS as readonly string[]).includes(method);

/** A call's arguments: form fields (objects JSON-encoded, string arrays comma-joined, as slack-web-api-client sends them) or JSON. */
export type SlackParams = Readonly<Record<string, unknown>>;
/** A Web API answer body: {ok:true, …} or {ok:false, error, …}. */
export type SlackAnswer = { readonly ok: boolean; readonly error?: string; readonly [field: string]: unknown };

export interface SlackBot {
  readonly user: string;
  readonly bot_id: string;
  readonly app_id: string;
  readonly team: string;
}

export interface FakeSlackStreamsOptions {
  /** Milliseconds since the epoch: the only clock the model reads. */
  readonly now: () => number;
  /** How long after startStream Slack closes a stream (default 5 minutes). */
  readonly streamLifetimeMs?: number;
  /** How long a status lives without a message (default 2 minutes). */
  readonly statusTimeoutMs?: number;
  /** The app's bot user, as its messages carry it. */
  readonly bot?: SlackBot;
  /** A fresh message ts (default: from `now()`, strictly increasing). */
  readonly freshTs?: () => string;
  /**
   * Answer assistant.threads.* in a thread the model was not told of (userMessage, assistantThread, or a message
   * posted into it) as Slack does — invalid_thread_ts, or channel_not_found for an unknown channel — instead of
   * taking the thread as it comes (the default, so a test need not tell the model of every thread).
   */
  readonly knownThreadsOnly?: boolean;
}

/** How a stream stopped streaming. */
export type StreamEnd = "stopStream" | "stopped_by_user" | "expired";

export interface MessageCounts {
  readonly started: number;
  readonly appended: number;
  readonly stopped: number;
  readonly updated: number;
  /** Calls applied to this message whose answers were lost. */
  readonly lostAnswers: number;
}

/** A message as the model holds it, for a test's assertions. */
export interface FakeMessage {
  readonly channel: string;
  readonly ts: string;
  /** Absent for a thread's root. */
  readonly thread_ts?: string;
  readonly from: "app" | "user";
  readonly user: string;
  readonly bot_id?: string;
  readonly subtype?: string;
  readonly text: string;
  readonly blocks?: unknown;
  readonly metadata?: unknown;
  /** Chunks other than markdown_text (task_update, plan_update, …), in order. */
  readonly chunks: readonly unknown[];
  /** A stream still taking appends now. */
  readonly streaming: boolean;
  /** How a stream ended; absent for a posted message and a stream still streaming. */
  readonly ended?: StreamEnd;
  /** chat.update succeeded after the stream ended by the user or its lifetime (the SDKs' repair). */
  readonly repaired: boolean;
  /** What the issue forbids: still streaming, or closed by its lifetime and never repaired (a broken pill). */
  readonly leftStreaming: boolean;
  readonly counts: MessageCounts;
}

export interface StatusChange {
  readonly at: number;
  /** "" when cleared. */
  readonly status: string;
  readonly loading_messages?: readonly string[];
  /** setStatus (the app set or cleared it), reply (the app posted or started a stream), timeout (2 minutes passed). */
  readonly cause: "setStatus" | "reply" | "timeout";
}

export interface FakeThread {
  readonly channel: string;
  readonly thread_ts: string;
  /** Root (when known) and replies, oldest first. */
  readonly messages: readonly FakeMessage[];
  /** The status shown now, if any. */
  readonly status?: { readonly status: string; readonly loading_messages?: readonly string[]; readonly setAt: number };
  readonly statusLog: readonly StatusChange[];
  readonly suggestedPrompts?: { readonly title?: string; readonly prompts: readonly { title: string; message: string }[] };
  readonly title?: string;
}

/** What Slack sends the app when the user presses the stop button (docs.slack.dev, events/agent_session_stopped). */
export interface AgentSessionStopped {
  readonly type: "agent_session_stopped";
  readonly channel: string;
  readonly thread_ts: string;
  readonly user: string;
  readonly event_ts: string;
  /** The streams Slack stopped; empty if none was streaming. */
  readonly streaming_message_ts: readonly string[];
}

export interface Overlap {
  /** "<channel> <ts>" of a stream, or "<channel> <thread_ts> start" for two starts in one thread. */
  readonly key: string;
  /** The method in flight, and the one that began beside it. */
  readonly first: string;
  readonly second: string;
  readonly at: number;
}

export interface FlightRecord {
  readonly n: number;
  readonly method: string;
  readonly key?: string;
  readonly begunAt: number;
  readonly endedAt?: number;
  /** Slack applied it (a call refused before, e.g. a scripted 429, was not). */
  readonly applied: boolean;
  readonly answer?: SlackAnswer;
  readonly lost: boolean;
}

/** One call in flight. apply() at most once, then deliver() or drop() once. */
export interface Flight {
  readonly method: string;
  readonly key?: string;
  /** Slack applies the call: its state changes and its answer is decided. */
  apply(): SlackAnswer;
  /** The answer reached the caller (or, unapplied, a refusal did: a 429, a 500). */
  deliver(): void;
  /** The answer was lost on the way: the caller never learns it. */
  drop(): void;
}

export interface FakeSlackStreams {
  readonly bot: SlackBot;
  /** A call arrives at Slack: it is in flight until deliver() or drop(). */
  begin(method: string, params: SlackParams): Flight;
  /** begin, apply and deliver at once: a call with nothing between its arrival and its answer. */
  answer(method: string, params: SlackParams): SlackAnswer;
  /** A user's message (in a thread when thread_ts is given), which conversations.replies then shows. */
  userMessage(message: { channel: string; user: string; text: string; thread_ts?: string; ts?: string }): FakeMessage;
  /** An assistant thread opened by a user: its root (subtype assistant_app_thread), as Slack creates it in the DM. */
  assistantThread(thread: { channel: string; user: string; ts?: string }): { readonly channel: string; readonly thread_ts: string };
  /**
   * The user presses the stop button on a stream (or in a thread): every stream of that thread that is still
   * streaming stops, and what Slack then sends the app is returned, for a caller to deliver to the ingress.
   */
  stopByUser(channel: string, ts: string, user?: string): AgentSessionStopped;
  thread(channel: string, thread_ts: string): FakeThread;
  message(channel: string, ts: string): FakeMessage | undefined;
  /** Every message, in every channel, that is left streaming (see FakeMessage.leftStreaming). */
  leftStreaming(): readonly FakeMessage[];
  overlaps(): readonly Overlap[];
  flights(): readonly FlightRecord[];
}

export const DEFAULT_BOT: SlackBot = { user: "U0ACKBOXBOT", bot_id: "B0ACKBOX", app_id: "A0ACKBOX", team: "T0LOCAL" };

interface StoredMessage {
  readonly channel: string;
  readonly ts: string;
  readonly thread_ts?: string;
  readonly from: "app" | "user";
  readonly user: string;
  readonly subtype?: string;
  text: string;
  blocks?: unknown;
  metadata?: unknown;
  readonly chunks: unknown[];
  stream?: { readonly startedAt: number; readonly recipient?: string; end?: "stopStream" | "stopped_by_user" };
  repaired: boolean;
  readonly counts: { started: number; appended: number; stopped: number; updated: number; lostAnswers: number };
}

interface StoredThread {
  readonly channel: string;
  readonly thread_ts: string;
  status?: { status: string; loading_messages?: readonly string[]; setAt: number };
  readonly statusLog: StatusChange[];
  suggestedPrompts?: { title?: string; prompts: { title: string; message: string }[] };
  title?: string;
  /** Who asks in it: the user who opened it, or who wrote in it first (agent_session_stopped's `user`). */
  user?: string;
}

export function fakeSlackStreams(options: FakeSlackStreamsOptions): FakeSlackStreams {
  const { now } = options;
  const lifetime = options.streamLifetimeMs ?? STREAM_LIFETIME_MS;
  const statusTimeout = options.statusTimeoutMs ?? STATUS_TIMEOUT_MS;
  const bot = options.bot ?? DEFAULT_BOT;
  const messages = new Map<string, StoredMessage>(); // "<channel> <ts>"
  const threads = new Map<string, StoredThread>(); // "<channel> <thread_ts>"
  // Indexes, so a long local run (every chat.postMessage passes through here) costs the same per call.
  const repliesOf = new Map<string, StoredMessage[]>(); // "<channel> <thread_ts>" → replies, oldest first
  const channels = new Set<string>();
  const streamed: StoredMessage[] = [];
  const taken = new Set<string>();
  const inFlight = new Map<number, { method: string; key: string }>();
  const overlaps: Overlap[] = [];
  const flights: FlightRecord[] = [];
  let lastMicros = 0n;

  const id = (channel: string, ts: string) => `${channel} ${ts}`;

  /** A ts from the clock, strictly after every ts the model has seen (Slack's are unique per channel). */
  const freshTs = (): string => {
    if (options.freshTs) {
      // A given generator knows nothing of the ts the model was told (a user's message): skip any taken.
      for (;;) {
        const ts = options.freshTs();
        if (!taken.has(ts)) return seen(ts);
      }
    }
    const fromClock = BigInt(Math.floor(now())) * 1000n;
    lastMicros = fromClock > lastMicros ? fromClock : lastMicros + 1n;
    return tsOf(lastMicros);
  };
  const seen = (ts: string): string => {
    const at = micros(ts);
    if (at > lastMicros) lastMicros = at;
    return ts;
  };

  const stateOf = (m: StoredMessage): "posted" | "streaming" | StreamEnd => {
    if (!m.stream) return "posted";
    if (m.stream.end) return m.stream.end;
    return now() - m.stream.startedAt >= lifetime ? "expired" : "streaming";
  };

  const threadOf = (channel: string, thread_ts: string): StoredThread => {
    const key = id(channel, thread_ts);
    let thread = threads.get(key);
    if (!thread) {
      thread = { channel, thread_ts, statusLog: [] };
      threads.set(key, thread);
    }
    settleStatus(thread);
    return thread;
  };
  /** The two-minute rule, applied when the thread is next looked at: the clearing is logged at the time it happened. */
  const settleStatus = (thread: StoredThread) => {
    if (thread.status && now() - thread.status.setAt >= statusTimeout) {
      thread.statusLog.push({ at: thread.status.setAt + statusTimeout, status: "", cause: "timeout" });
      thread.status = undefined;
    }
  };
  /** "The status will be automatically cleared when the app sends a reply." */
  const clearStatusByReply = (channel: string, thread_ts: string | undefined) => {
    if (thread_ts === undefined) return;
    const thread = threadOf(channel, thread_ts);
    if (thread.status) {
      thread.statusLog.push({ at: now(), status: "", cause: "reply" });
      thread.status = undefined;
    }
  };
  const threadKnown = (channel: string, thread_ts: string): boolean =>
    threads.has(id(channel, thread_ts)) || messages.has(id(channel, thread_ts));
  const channelKnown = (channel: string): boolean => channels.has(channel);

  const store = (m: Omit<StoredMessage, "chunks" | "repaired" | "counts"> & Partial<Pick<StoredMessage, "chunks">>): StoredMessage => {
    const full: StoredMessage = {
      ...m,
      chunks: m.chunks ?? [],
      repaired: false,
      counts: { started: 0, appended: 0, stopped: 0, updated: 0, lostAnswers: 0 },
    };
    if (messages.has(id(m.channel, m.ts))) throw new Error(`a message ${m.ts} is already in ${m.channel}`);
    for (const ts of [m.ts, m.thread_ts]) if (ts !== undefined && !TS.test(ts)) throw new Error(`not a Slack ts: ${ts}`);
    messages.set(id(m.channel, m.ts), full);
    taken.add(m.ts);
    channels.add(m.channel);
    if (m.stream) streamed.push(full);
    if (m.thread_ts !== undefined) {
      threadOf(m.channel, m.thread_ts);
      const list = repliesOf.get(id(m.channel, m.thread_ts)) ?? [];
      // Usually the newest; a told message may be older than some.
      let at = list.length;
      while (at > 0 && byTs(list[at - 1] as StoredMessage, full) > 0) at -= 1;
      list.splice(at, 0, full);
      repliesOf.set(id(m.channel, m.thread_ts), list);
    }
    return full;
  };

  const view = (m: StoredMessage): FakeMessage => {
    const state = stateOf(m);
    const ended = state === "posted" || state === "streaming" ? undefined : state;
    return {
      channel: m.channel,
      ts: m.ts,
      ...(m.thread_ts !== undefined ? { thread_ts: m.thread_ts } : {}),
      from: m.from,
      user: m.user,
      ...(m.from === "app" ? { bot_id: bot.bot_id } : {}),
      ...(m.subtype !== undefined ? { subtype: m.subtype } : {}),
      text: m.text,
      ...(m.blocks !== undefined ? { blocks: m.blocks } : {}),
      ...(m.metadata !== undefined ? { metadata: m.metadata } : {}),
      chunks: [...m.chunks],
      streaming: state === "streaming",
      ...(ended ? { ended } : {}),
      repaired: m.repaired,
      leftStreaming: state === "streaming" || (state === "expired" && !m.repaired),
      counts: { ...m.counts },
    };
  };

  /** A message as Slack's Web API shows it (conversations.replies, chat.postMessage's `message`). */
  const wire = (m: StoredMessage, withMetadata: boolean): Record<string, unknown> => {
    const root = m.thread_ts === undefined ? threadReplies(m.channel, m.ts) : [];
    const parent = m.thread_ts === undefined ? undefined : messages.get(id(m.channel, m.thread_ts));
    return {
      type: "message",
      ...(m.subtype !== undefined ? { subtype: m.subtype } : {}),
      user: m.user,
      ...(m.from === "app" ? { bot_id: bot.bot_id, app_id: bot.app_id } : {}),
      team: bot.team,
      text: m.text,
      ...(m.blocks !== undefined ? { blocks: m.blocks } : {}),
      ts: m.ts,
      ...(m.thread_ts !== undefined ? { thread_ts: m.thread_ts, ...(parent ? { parent_user_id: parent.user } : {}) } : {}),
      ...(root.length > 0 ? { thread_ts: m.ts, reply_count: root.length, latest_reply: root.at(-1)?.ts } : {}),
      ...(withMetadata && m.metadata !== undefined ? { metadata: m.metadata } : {}),
    };
  };
  const threadReplies = (channel: string, thread_ts: string): readonly StoredMessage[] => repliesOf.get(id(channel, thread_ts)) ?? [];

  // ── The methods ─────────────────────────────────────────────────────────────

  /** markdown_text plus the text of markdown_text chunks; the other chunks kept apart. */
  const textOf = (p: SlackParams): { text: string; chunks: unknown[] } | SlackAnswer => {
    const markdown = str(p.markdown_text);
    if (markdown !== undefined && markdown.length > MARKDOWN_TEXT_LIMIT)
      return invalidArguments(`must be less than ${MARKDOWN_TEXT_LIMIT + 1} characters [json-pointer:/markdown_text]`);
    const chunks = p.chunks === undefined ? [] : structured(p.chunks);
    if (
      !Array.isArray(chunks) ||
      !chunks.every((c) => typeof c === "object" && c !== null && typeof (c as { type?: unknown }).type === "string")
    )
      return invalidArguments("chunks must be an array of chunk objects [json-pointer:/chunks]");
    let text = markdown ?? "";
    const others: unknown[] = [];
    for (const chunk of chunks as { type: string; text?: unknown }[]) {
      if (chunk.type === "markdown_text" && typeof chunk.text === "string") text += chunk.text;
      else others.push(chunk);
    }
    return { text, chunks: others };
  };

  const stream = (p: SlackParams): { m: StoredMessage } | SlackAnswer => {
    const channel = str(p.channel);
    if (!channel) return error("channel_not_found");
    const ts = str(p.ts);
    const m = ts === undefined ? undefined : messages.get(id(channel, ts));
    if (!m) return error("message_not_found");
    if (m.from !== "app") return error("message_not_owned_by_app");
    if (stateOf(m) !== "streaming") return error("message_not_in_streaming_state");
    return { m };
  };

  const methods: Record<StreamsMethod, (p: SlackParams) => SlackAnswer> = {
    "chat.startStream": (p) => {
      const channel = str(p.channel);
      if (!channel) return error("channel_not_found");
      const thread_ts = str(p.thread_ts);
      // The 2025-10 reference and slack-web-api-client's types require it: "Streamed messages should always be
      // replies to a user request". (Newer pages allow a top-level stream in a channel; the engine never needs one.)
      if (!thread_ts) return invalidArguments("missing required field: thread_ts [json-pointer:/thread_ts]");
      if (!TS.test(thread_ts)) return error("invalid_thread_ts");
      // Outside a DM a stream is live only for its recipient, whom Slack must be told.
      if (!channel.startsWith("D")) {
        if (!str(p.recipient_user_id)) return error("missing_recipient_user_id");
        if (!str(p.recipient_team_id)) return error("missing_recipient_team_id");
      }
      const content = textOf(p);
      if ("ok" in content) return content;
      const ts = freshTs();
      const recipient = str(p.recipient_user_id);
      const m = store({
        channel,
        ts,
        thread_ts,
        from: "app",
        user: bot.user,
        text: content.text,
        chunks: content.chunks,
        stream: { startedAt: now(), ...(recipient ? { recipient } : {}) },
      });
      m.counts.started += 1;
      clearStatusByReply(channel, thread_ts);
      return ok({ channel, ts });
    },
    "chat.appendStream": (p) => {
      const found = stream(p);
      if ("ok" in found) return found;
      const content = textOf(p);
      if ("ok" in content) return content;
      if (content.text === "" && content.chunks.length === 0) return error("no_text");
      found.m.text += content.text;
      found.m.chunks.push(...content.chunks);
      found.m.counts.appended += 1;
      return ok({ channel: found.m.channel, ts: found.m.ts });
    },
    "chat.stopStream": (p) => {
      const found = stream(p);
      if ("ok" in found) return found;
      const content = textOf(p);
      if ("ok" in content) return content;
      const metadata = p.metadata === undefined ? undefined : structured(p.metadata);
      if (p.metadata !== undefined && !isMetadata(metadata)) return error("invalid_metadata_format");
      const blocks = p.blocks === undefined ? undefined : structured(p.blocks);
      if (p.blocks !== undefined && !Array.isArray(blocks)) return error("invalid_blocks_format");
      const { m } = found;
      m.text += content.text;
      m.chunks.push(...content.chunks);
      if (blocks !== undefined) m.blocks = blocks;
      if (metadata !== undefined) m.metadata = metadata;
      if (m.stream) m.stream.end = "stopStream";
      m.counts.stopped += 1;
      return ok({
        channel: m.channel,
        ts: m.ts,
        message: {
          type: "message",
          subtype: "bot_message",
          text: m.text,
          user: m.user,
          bot_id: bot.bot_id,
          ts: m.ts,
          ...(m.thread_ts !== undefined ? { thread_ts: m.thread_ts } : {}),
          ...(m.blocks !== undefined ? { blocks: m.blocks } : {}),
        },
      });
    },
    "chat.update": (p) => {
      const channel = str(p.channel);
      if (!channel) return error("channel_not_found");
      const ts = str(p.ts);
      const m = ts === undefined ? undefined : messages.get(id(channel, ts));
      if (!m) return error("message_not_found");
      const markdown = str(p.markdown_text);
      const text = str(p.text);
      const blocks = p.blocks === undefined ? undefined : structured(p.blocks);
      if (markdown !== undefined && (text !== undefined || blocks !== undefined)) return error("markdown_text_conflict");
      if (!markdown && !text && blocks === undefined && p.attachments === undefined) return error("no_text");
      if (markdown !== undefined && markdown.length > MARKDOWN_TEXT_LIMIT)
        return invalidArguments(`must be less than ${MARKDOWN_TEXT_LIMIT + 1} characters [json-pointer:/markdown_text]`);
      if (text !== undefined && text.length > UPDATE_TEXT_LIMIT) return error("msg_too_long");
      if (blocks !== undefined && !Array.isArray(blocks)) return error("invalid_blocks_format");
      const metadata = p.metadata === undefined ? undefined : structured(p.metadata);
      // Omitted keeps the old metadata; {} removes it.
      const removesMetadata = isEmptyObject(metadata);
      if (p.metadata !== undefined && !removesMetadata && !isMetadata(metadata)) return error("invalid_metadata_format");
      if (m.from !== "app") return error("cant_update_message");
      const state = stateOf(m);
      // "The message is currently streaming text and cannot be edited."
      if (state === "streaming") return error("streaming_state_conflict");
      m.text = markdown ?? text ?? "";
      if (blocks !== undefined) m.blocks = blocks;
      if (removesMetadata) m.metadata = undefined;
      else if (metadata !== undefined) m.metadata = metadata;
      m.counts.updated += 1;
      if (state === "expired" || state === "stopped_by_user") m.repaired = true;
      return ok({ channel, ts: m.ts, text: m.text, message: { ...wire(m, false) } });
    },
    "chat.postMessage": (p) => {
      const channel = str(p.channel);
      if (!channel) return error("channel_not_found");
      const markdown = str(p.markdown_text);
      const text = str(p.text);
      const blocks = p.blocks === undefined ? undefined : structured(p.blocks);
      if (markdown !== undefined && (text !== undefined || blocks !== undefined)) return error("markdown_text_conflict");
      if (!markdown && !text && blocks === undefined && p.attachments === undefined) return error("no_text");
      if (markdown !== undefined && markdown.length > MARKDOWN_TEXT_LIMIT)
        return invalidArguments(`must be less than ${MARKDOWN_TEXT_LIMIT + 1} characters [json-pointer:/markdown_text]`);
      const metadata = p.metadata === undefined ? undefined : structured(p.metadata);
      if (p.metadata !== undefined && !isMetadata(metadata)) return error("invalid_metadata_format");
      const thread_ts = str(p.thread_ts) || undefined;
      // What users report Slack answers for a thread_ts that is not one.
      if (thread_ts !== undefined && !TS.test(thread_ts)) return error("invalid_thread_ts");
      const m = store({
        channel,
        ts: freshTs(),
        ...(thread_ts !== undefined ? { thread_ts } : {}),
        from: "app",
        user: bot.user,
        text: markdown ?? text ?? "",
        ...(blocks !== undefined ? { blocks } : {}),
        ...(metadata !== undefined ? { metadata } : {}),
      });
      clearStatusByReply(channel, thread_ts);
      return ok({ channel, ts: m.ts, message: wire(m, false) });
    },
    "assistant.threads.setStatus": (p) => {
      const found = assistantThread(p);
      if ("ok" in found) return found;
      const status = str(p.status);
      if (status === undefined) return invalidArguments("missing required field: status [json-pointer:/status]");
      let loading: string[] | undefined;
      if (p.loading_messages !== undefined) {
        loading = stringList(p.loading_messages);
        if (!loading || loading.length < 1 || loading.length > 10 || loading.some((s) => s.length < 1 || s.length > 50))
          return invalidArguments("loading_messages must hold 1 to 10 strings of 1 to 50 characters [json-pointer:/loading_messages]");
      }
      const { thread } = found;
      if (status === "") thread.status = undefined;
      else thread.status = { status, ...(loading ? { loading_messages: loading } : {}), setAt: now() };
      thread.statusLog.push({ at: now(), status, ...(loading && status !== "" ? { loading_messages: loading } : {}), cause: "setStatus" });
      return ok({});
    },
    "assistant.threads.setSuggestedPrompts": (p) => {
      const found = assistantThread(p);
      if ("ok" in found) return found;
      const prompts = structured(p.prompts);
      if (
        !Array.isArray(prompts) ||
        prompts.length < 1 ||
        prompts.length > 4 ||
        !prompts.every((x) => typeof x?.title === "string" && typeof x?.message === "string")
      )
        return invalidArguments("prompts must hold 1 to 4 {title, message} [json-pointer:/prompts]");
      const title = str(p.title);
      found.thread.suggestedPrompts = {
        ...(title !== undefined ? { title } : {}),
        prompts: prompts.map((x: { title: string; message: string }) => ({ title: x.title, message: x.message })),
      };
      return ok({});
    },
    "assistant.threads.setTitle": (p) => {
      const found = assistantThread(p);
      if ("ok" in found) return found;
      const title = str(p.title);
      if (title === undefined) return invalidArguments("missing required field: title [json-pointer:/title]");
      found.thread.title = title;
      return ok({});
    },
    "conversations.replies": (p) => {
      const channel = str(p.channel);
      if (!channel) return error("channel_not_found");
      const ts = str(p.ts);
      if (!ts) return error("thread_not_found");
      // `ts` may name the root or any message in the thread.
      const named = messages.get(id(channel, ts));
      const thread_ts = named?.thread_ts ?? (named || threadReplies(channel, ts).length > 0 ? ts : undefined);
      if (thread_ts === undefined) return error("thread_not_found");
      const oldest = str(p.oldest) ?? "0";
      const latest = str(p.latest);
      if (!TS.test(oldest)) return error("invalid_ts_oldest");
      if (latest !== undefined && !TS.test(latest)) return error("invalid_ts_latest");
      const inclusive = p.inclusive === true || p.inclusive === "true" || p.inclusive === "1" || p.inclusive === 1;
      const limitAsked = Number(p.limit ?? 1000);
      const limit = Number.isInteger(limitAsked) ? Math.min(Math.max(limitAsked, 1), 1000) : 1000;
      const from = micros(oldest);
      const to = latest === undefined ? undefined : micros(latest);
      const root = messages.get(id(channel, thread_ts));
      const all = [...(root ? [root] : []), ...threadReplies(channel, thread_ts)].filter((m) => {
        const at = micros(m.ts);
        return (inclusive ? at >= from : at > from) && (to === undefined || (inclusive ? at <= to : at < to));
      });
      let start = 0;
      const cursor = str(p.cursor);
      if (cursor) {
        const next = safeAtob(cursor)?.match(/^next_ts:(.+)$/)?.[1];
        start = next === undefined ? -1 : all.findIndex((m) => m.ts === next);
        if (start < 0) return error("invalid_cursor");
      }
      const page = all.slice(start, start + limit);
      const following = all[start + limit];
      const withMetadata = p.include_all_metadata === true || p.include_all_metadata === "true" || p.include_all_metadata === "1";
      return ok({
        messages: page.map((m) => wire(m, withMetadata)),
        has_more: following !== undefined,
        response_metadata: { next_cursor: following ? btoa(`next_ts:${following.ts}`) : "" },
      });
    },
  };

  const assistantThread = (p: SlackParams): { thread: StoredThread } | SlackAnswer => {
    const channel = str(p.channel_id);
    if (!channel) return error("channel_not_found");
    const thread_ts = str(p.thread_ts);
    if (!thread_ts || !TS.test(thread_ts)) return error("invalid_thread_ts");
    if (options.knownThreadsOnly) {
      if (!channelKnown(channel) && !threads.has(id(channel, thread_ts))) return error("channel_not_found");
      if (!threadKnown(channel, thread_ts)) return error("invalid_thread_ts");
    }
    return { thread: threadOf(channel, thread_ts) };
  };

  // ── Flights ─────────────────────────────────────────────────────────────────

  /** What a call is "for", when two at once would be an overlap. */
  const keyOf = (method: string, p: SlackParams): string | undefined => {
    const channel = str(p.channel) ?? "";
    if (method === "chat.startStream") return `${channel} ${str(p.thread_ts) ?? ""} start`;
    if (method === "chat.appendStream" || method === "chat.stopStream" || method === "chat.update") return id(channel, str(p.ts) ?? "");
    return undefined;
  };

  const begin = (method: string, params: SlackParams): Flight => {
    const n = flights.length + 1;
    const key = keyOf(method, params);
    if (key !== undefined) {
      for (const other of inFlight.values()) if (other.key === key) overlaps.push({ key, first: other.method, second: method, at: now() });
      inFlight.set(n, { method, key });
    }
    const record: { -readonly [K in keyof FlightRecord]: FlightRecord[K] } = {
      n,
      method,
      ...(key !== undefined ? { key } : {}),
      begunAt: now(),
      applied: false,
      lost: false,
    };
    flights.push(record);
    let touched: StoredMessage | undefined;
    const end = (lost: boolean) => {
      if (record.endedAt !== undefined) throw new Error(`${method}: its answer was already delivered or dropped`);
      record.endedAt = now();
      record.lost = lost;
      inFlight.delete(n);
      if (lost && touched) touched.counts.lostAnswers += 1;
    };
    return {
      method,
      ...(key !== undefined ? { key } : {}),
      apply() {
        if (record.applied) throw new Error(`${method}: applied twice`);
        if (!isStreamsMethod(method)) throw new Error(`the streams model does not answer ${method}`);
        const answer = methods[method](params);
        record.applied = true;
        record.answer = answer;
        const channel = str(params.channel) ?? "";
        const ts = method === "chat.startStream" || method === "chat.postMessage" ? str(answer.ts) : str(params.ts);
        touched = answer.ok && ts !== undefined ? messages.get(id(channel, ts)) : undefined;
        return answer;
      },
      deliver: () => end(false),
      drop: () => end(true),
    };
  };

  return {
    bot,
    begin,
    answer(method, params) {
      const flight = begin(method, params);
      const answer = flight.apply();
      flight.deliver();
      return answer;
    },
    userMessage({ channel, user, text, thread_ts, ts }) {
      const m = store({
        channel,
        ts: ts === undefined ? freshTs() : seen(ts),
        ...(thread_ts !== undefined ? { thread_ts } : {}),
        from: "user",
        user,
        text,
      });
      const thread = threadOf(channel, thread_ts ?? m.ts);
      thread.user ??= user;
      return view(m);
    },
    assistantThread({ channel, user, ts }) {
      // The root is the app's (Slack creates it in the app's DM); the user who opened it is the thread's asker.
      const root = store({
        channel,
        ts: ts === undefined ? freshTs() : seen(ts),
        from: "app",
        user: bot.user,
        subtype: "assistant_app_thread",
        text: "",
      });
      threadOf(channel, root.ts).user = user;
      return { channel, thread_ts: root.ts };
    },
    stopByUser(channel, ts, user) {
      const named = messages.get(id(channel, ts));
      const thread_ts = named?.thread_ts ?? ts;
      if (!named && !threads.has(id(channel, thread_ts))) throw new Error(`stopByUser: no message or thread ${ts} in ${channel}`);
      const inThread = [...(named && named.thread_ts === undefined ? [named] : []), ...threadReplies(channel, thread_ts)];
      const stopped = inThread.filter((m) => stateOf(m) === "streaming");
      for (const m of stopped) if (m.stream) m.stream.end = "stopped_by_user";
      const asker =
        user ?? threads.get(id(channel, thread_ts))?.user ?? stopped.find((m) => m.stream?.recipient)?.stream?.recipient ?? "U0USER";
      return {
        type: "agent_session_stopped",
        channel,
        thread_ts,
        user: asker,
        event_ts: freshTs(),
        streaming_message_ts: stopped.map((m) => m.ts),
      };
    },
    thread(channel, thread_ts) {
      const thread = threads.get(id(channel, thread_ts));
      if (thread) settleStatus(thread);
      const root = messages.get(id(channel, thread_ts));
      return {
        channel,
        thread_ts,
        messages: [...(root ? [root] : []), ...threadReplies(channel, thread_ts)].map(view),
        ...(thread?.status ? { status: { ...thread.status } } : {}),
        statusLog: [...(thread?.statusLog ?? [])],
        ...(thread?.suggestedPrompts ? { suggestedPrompts: thread.suggestedPrompts } : {}),
        ...(thread?.title !== undefined ? { title: thread.title } : {}),
      };
    },
    message(channel, ts) {
      const m = messages.get(id(channel, ts));
      return m ? view(m) : undefined;
    },
    leftStreaming: () => streamed.map(view).filter((m) => m.leftStreaming),
    overlaps: () => [...overlaps],
    flights: () => flights.map((f) => ({ ...f })),
  };
}

// ── Helpers ───────────────────────────────────────────────────────────────────

const TS = /^\d{1,12}(\.\d{1,6})?$/;

/** A ts as microseconds, exactly (a double would round the sixth digit). */
function micros(ts: string): bigint {
  const [seconds = "0", fraction = ""] = ts.split(".");
  return BigInt(seconds) * 1_000_000n + BigInt(fraction.padEnd(6, "0").slice(0, 6) || "0");
}
const tsOf = (at: bigint): string => `${at / 1_000_000n}.${String(at % 1_000_000n).padStart(6, "0")}`;
const byTs = (a: { ts: string }, b: { ts: string }) => {
  const x = micros(a.ts);
  const y = micros(b.ts);
  return x === y ? 0 : x < y ? -1 : 1;
};

const ok = (fields: Record<string, unknown>): SlackAnswer => ({ ok: true, ...fields });
const error = (code: string): SlackAnswer => ({ ok: false, error: code });
/** Slack's answer to arguments its schema refuses: the reason in response_metadata.messages. */
const invalidArguments = (why: string): SlackAnswer => ({
  ok: false,
  error: "invalid_arguments",
  response_metadata: { messages: [`[ERROR] ${why}`] },
});

const str = (value: unknown): string | undefined =>
  typeof value === "string" ? value : typeof value === "number" ? String(value) : undefined;

/** An object argument: as given in JSON, or JSON-encoded in a form field. */
function structured(value: unknown): unknown {
  if (typeof value !== "string") return value;
  try {
    return JSON.parse(value);
  } catch {
    return Symbol.for("invalid");
  }
}

/** A list of strings: a JSON array, a JSON-encoded one, or comma-joined (slack-web-api-client joins string arrays). */
function stringList(value: unknown): string[] | undefined {
  const list = typeof value === "string" && !value.startsWith("[") ? value.split(",") : structured(value);
  return Array.isArray(list) && list.every((s) => typeof s === "string") ? list : undefined;
}

const isMetadata = (value: unknown): boolean =>
  typeof value === "object" && value !== null && typeof (value as { event_type?: unknown }).event_type === "string";

const isEmptyObject = (value: unknown): boolean =>
  typeof value === "object" && value !== null && !Array.isArray(value) && Object.keys(value).length === 0;

function safeAtob(text: string): string | undefined {
  try {
    return atob(text);
  } catch {
    return undefined;
  }
}
