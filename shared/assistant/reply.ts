/**
 * One answer's one message in Slack, streamed: chat.startStream on the first
 * text, chat.appendStream as the text grows (one call at a time, buffered),
 * chat.stopStream at the end. What Slack's streams do that this must survive
 * (docs/how-it-works.md, "Assistant answers"):
 *
 * - startStream and appendStream take no idempotency key, so a call whose
 *   answer was lost is never sent again on a guess. A start whose answer was
 *   lost is looked for in the thread (the app's own message after the
 *   question: conversations.replies) and adopted; only when Slack shows none,
 *   once more after a call's timeout has passed, is it started again. An
 *   append whose answer was lost ends the appends, and the message is made
 *   whole at the end by chat.update.
 * - A stream stops accepting appends about five minutes after it starts —
 *   sooner, some report — (message_not_in_streaming_state): it is stopped at
 *   STREAM_MAX_MS, and the rest arrives by chat.update of the same message.
 *   A stream Slack ended earlier is repaired the same way, unless the user
 *   stopped it (stopped_by_user, or their stop recorded). chat.update refuses
 *   a message still streaming (streaming_state_conflict): it is stopped first.
 * - A 429 means the call was not made: it is sent again after Retry-After,
 *   the text meanwhile kept in the buffer.
 * - One message holds at most MARKDOWN_MAX characters: a longer answer is cut
 *   there, with a note, the same way whichever way the message is finished.
 *
 * Progress that a later attempt needs is reported through `record` before
 * the next call goes out: "starting" before a start is sent, the message's ts
 * as soon as Slack answers it, so a later attempt finishes this message
 * rather than starting a second one.
 */
import { EffectError, transient } from "../delivery/failure.ts";
import type { JsonObject } from "../slack/inputs.ts";
import { refusal, type SlackAnswer, type SlackWebApi } from "../slack/web-api.ts";
import type { Progress } from "./store.ts";

/** A stream is stopped this long after it started: Slack ends streams about five minutes after their start. */
export const STREAM_MAX_MS = 4 * 60_000;
/** Text is appended once this much waits, or FLUSH_AFTER_MS after the last call (node-slack-sdk buffers 256). */
export const BUFFER_CHARS = 256;
export const FLUSH_AFTER_MS = 1_000;
/** What one markdown_text may hold (Slack: 12 000 characters, for startStream, appendStream, stopStream and chat.update). */
export const MARKDOWN_MAX = 12_000;
/** The longest a 429's Retry-After is waited inside an answer; longer, the attempt ends and the row comes back. */
export const RATE_LIMIT_WAIT_MAX_MS = 60_000;
/** What ends an answer cut at MARKDOWN_MAX. */
export const CUT_NOTE = "\n\n_(answer cut at Slack's message limit)_";

/** The answer as its one message holds it: whole, or cut at MARKDOWN_MAX with CUT_NOTE. */
export function fitted(whole: string): string {
  return whole.length <= MARKDOWN_MAX ? whole : `${whole.slice(0, MARKDOWN_MAX - CUT_NOTE.length)}${CUT_NOTE}`;
}

/** Where the answer goes: a thread; outside a DM, live only for its recipient (Slack requires both ids there). */
export interface ReplyPlace {
  readonly channel: string;
  readonly threadTs: string;
  /** The question's ts: the message a lost start is looked for after. */
  readonly afterTs: string;
  readonly recipient?: { readonly userId: string; readonly teamId: string };
}

export interface ReplyDeps {
  readonly slack: SlackWebApi;
  readonly timeoutMs: number;
  /** Ends the answer's work: the attempt's end, the user's stop, a lost claim. */
  readonly signal: AbortSignal;
  /** Ends only with the attempt: what closes the message (a stop after the user's stop) still goes out. */
  readonly closing: AbortSignal;
  readonly clock: () => number;
  readonly sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  /** Writes progress under the row's claim (answer.ts); throws when the claim is lost or the user's stop is recorded. */
  readonly record: (progress: Progress) => Promise<void>;
  /** The app's own messages already answering other turns of the thread: never adopted as this one's. */
  readonly otherAnswers: ReadonlySet<string>;
}

/** How the message stands. */
type Mode =
  /** Appending: what Slack confirmed is exactly `sent` characters of the text. */
  | "stream"
  /** Appends ended (a lost answer, an ended stream, STREAM_MAX_MS): the message is made whole by chat.update at the end. */
  | "repair";

/** The user stopped the answer (the stop button, or Slack answering stopped_by_user). */
export class StoppedByUser extends Error {
  constructor() {
    super("the user stopped the answer");
    this.name = "StoppedByUser";
  }
}

export class Reply {
  private ts: string | undefined;
  private startedAt: number | undefined;
  private mode: Mode;
  private text = "";
  private sent = 0;
  private lastSendAt = 0;
  /** The stream has been stopped (by us, or found stopped). */
  private stopped = false;
  /** Slack calls made, by method (for the row's result and the closing figures). */
  readonly calls: Record<string, number> = {};
  private readonly deps: ReplyDeps;
  private readonly place: ReplyPlace;

  constructor(
    deps: ReplyDeps,
    place: ReplyPlace,
    /** A message an earlier attempt started: its ts, and when. Its appends' fate is unknown: it is repaired. */
    earlier?: { readonly ts: string; readonly startedAt: number | null },
  ) {
    this.deps = deps;
    this.place = place;
    this.ts = earlier?.ts;
    this.startedAt = earlier?.startedAt ?? undefined;
    this.mode = earlier ? "repair" : "stream";
  }

  /** The message's ts, once there is one. */
  get messageTs(): string | undefined {
    return this.ts;
  }

  /** Whether something is in the thread already (then a status line is no longer what the user sees). */
  get visible(): boolean {
    return this.ts !== undefined;
  }

  /** What Slack confirmed of the stream, in characters. */
  get confirmed(): number {
    return this.sent;
  }

  /**
   * An earlier attempt sent a start whose answer it never read: its message, if Slack made one, is found in the
   * thread and adopted (repaired at the end); if none is there, the next text starts one.
   */
  async recoverLostStart(): Promise<void> {
    const found = await this.findLostStart();
    if (found !== undefined) await this.adopt(found, 0, "repair");
  }

  /** More of the answer: sent when enough waits (BUFFER_CHARS, FLUSH_AFTER_MS), one call at a time, never past the cut. */
  async push(text: string): Promise<void> {
    this.text += text;
    const pending = Math.min(this.text.length, MARKDOWN_MAX - CUT_NOTE.length) - this.sent;
    if (this.mode !== "stream" || pending <= 0) return;
    if (pending >= BUFFER_CHARS || this.deps.clock() - this.lastSendAt >= FLUSH_AFTER_MS) await this.flush();
  }

  /**
   * Finishes the message with the model's whole answer (fitted: cut at MARKDOWN_MAX): the rest appended and the
   * stream stopped; or, for a message whose stream cannot be trusted (repair), the stream stopped and the message
   * updated whole.
   */
  async finish(whole: string): Promise<void> {
    const final = fitted(whole);
    this.text = final;
    if (this.ts === undefined) {
      await this.start(final);
      if (this.ts === undefined) throw transient("chat.startStream: no message to finish");
    }
    if (this.mode === "stream" && (await this.stop(final.slice(this.sent)))) {
      this.sent = final.length;
      return;
    }
    await this.repair(final);
  }

  /** Ends the stream where it stands (the user stopped it, or the model failed): what Slack shows stays. */
  async abandon(note?: string): Promise<void> {
    if (this.ts === undefined || this.stopped) return;
    await this.stop(note ?? "", false, this.deps.closing).catch(() => false);
  }

  /** Sends what waits: the start, or an append; past STREAM_MAX_MS the stream is stopped and repaired at the end. */
  private async flush(): Promise<void> {
    if (this.ts === undefined) {
      await this.start(this.text.slice(0, MARKDOWN_MAX - CUT_NOTE.length));
      return;
    }
    if (this.startedAt !== undefined && this.deps.clock() - this.startedAt >= STREAM_MAX_MS) {
      // Before Slack ends it: stop it with what is confirmed, and deliver the rest by chat.update at the end.
      await this.stop("", false);
      this.mode = "repair";
      return;
    }
    await this.append();
  }

  private async start(first: string): Promise<void> {
    await this.deps.record({ state: "starting" });
    let looked = 0;
    for (;;) {
      let answer: SlackAnswer;
      try {
        answer = await this.call("chat.startStream", {
          channel: this.place.channel,
          thread_ts: this.place.threadTs,
          markdown_text: first,
          ...(this.place.recipient
            ? { recipient_user_id: this.place.recipient.userId, recipient_team_id: this.place.recipient.teamId }
            : {}),
        });
      } catch (error) {
        if (!(error instanceof LostAnswer)) throw error;
        // The start may have made the message: find it before anything is sent again — and, if the thread shows
        // none, look once more after a whole call's timeout, so a start Slack applies late is seen, not doubled.
        let found = await this.findLostStart(first);
        if (found === undefined) {
          await this.deps.sleep(this.deps.timeoutMs + 1_000, this.deps.signal);
          found = await this.findLostStart(first);
        }
        if (found !== undefined) {
          await this.adopt(found, first.length, "repair");
          return;
        }
        if (++looked >= 2) throw transient("chat.startStream: its answers were lost twice and no message of it is in the thread");
        continue;
      }
      if (!answer.ok) throw refusal("chat.startStream", answer.error);
      const ts = typeof answer.body.ts === "string" ? answer.body.ts : undefined;
      if (ts === undefined) throw transient("chat.startStream: answered without a ts");
      await this.adopt(ts, first.length, "stream");
      return;
    }
  }

  private async adopt(ts: string, sent: number, mode: Mode): Promise<void> {
    this.ts = ts;
    this.startedAt = this.deps.clock();
    this.sent = sent;
    this.lastSendAt = this.startedAt;
    this.mode = mode;
    await this.deps.record({ state: "streaming", streamTs: ts, streamStartedAt: this.startedAt, sentChars: sent });
  }

  /**
   * The app's own message in the thread after the question that no other turn owns: a start whose answer was
   * lost, if Slack made it. When the start's text is known (this attempt sent it), a message holding exactly that
   * text is taken first, so a message the app posted beside the answer (its handler's thread.say) is not taken
   * for it. One conversations.replies read (the rare path: limited to 1 a minute for apps outside the
   * Marketplace; its 429 is waited out like any).
   */
  private async findLostStart(sent?: string): Promise<string | undefined> {
    let answer: SlackAnswer;
    try {
      answer = await this.call("conversations.replies", {
        channel: this.place.channel,
        ts: this.place.threadTs,
        oldest: this.place.afterTs,
        inclusive: false,
        limit: 15,
      });
    } catch (error) {
      if (error instanceof LostAnswer)
        throw transient("chat.startStream: its answer was lost, and the thread could not be read to find it");
      throw error;
    }
    if (!answer.ok) throw transient(`chat.startStream: its answer was lost, and conversations.replies answered ${answer.error}`);
    const messages = Array.isArray(answer.body.messages) ? answer.body.messages : [];
    const ours = messages.filter(
      (m): m is JsonObject =>
        typeof m === "object" &&
        m !== null &&
        typeof (m as JsonObject).ts === "string" &&
        tsAfter((m as JsonObject).ts as string, this.place.afterTs) &&
        typeof (m as JsonObject).bot_id === "string" &&
        !this.deps.otherAnswers.has((m as JsonObject).ts as string),
    );
    const start = (sent !== undefined ? ours.find((m) => m.text === sent) : undefined) ?? ours[0];
    return start?.ts as string | undefined;
  }

  /** Appends what waits (within the cut). A lost answer or an ended stream turns to repair. */
  private async append(): Promise<void> {
    const chunk = this.text.slice(this.sent, MARKDOWN_MAX - CUT_NOTE.length);
    if (chunk === "") return;
    let answer: SlackAnswer;
    try {
      answer = await this.call("chat.appendStream", { channel: this.place.channel, ts: this.ts, markdown_text: chunk });
    } catch (error) {
      if (!(error instanceof LostAnswer)) throw error;
      this.mode = "repair"; // Slack may or may not have it: never sent again, the message is updated whole at the end
      return;
    }
    this.lastSendAt = this.deps.clock();
    if (answer.ok) {
      this.sent += chunk.length;
      return;
    }
    await this.endedBySlack(answer.error, "chat.appendStream");
  }

  /**
   * Stops the stream with `last` appended; false when its fate is unknown or Slack had ended it (repair follows).
   * `live`: the stream is this attempt's own, appended to so far (Slack having ended it may be the user's stop).
   */
  private async stop(last: string, live = true, signal = this.deps.signal): Promise<boolean> {
    let answer: SlackAnswer;
    try {
      answer = await this.call(
        "chat.stopStream",
        { channel: this.place.channel, ts: this.ts, ...(last === "" ? {} : { markdown_text: last }) },
        signal,
      );
    } catch (error) {
      if (!(error instanceof LostAnswer)) throw error;
      this.mode = "repair";
      return false;
    }
    this.stopped = true;
    if (answer.ok) return true;
    if (live) await this.endedBySlack(answer.error, "chat.stopStream");
    else if (answer.error !== "message_not_in_streaming_state") throw refusal("chat.stopStream", answer.error);
    this.mode = "repair";
    return false;
  }

  /**
   * Slack says a live stream is over. The user's stop (stopped_by_user, or their agent_session_stopped recorded —
   * the write below reads it) is a StoppedByUser; any other end (Slack's own, sooner than STREAM_MAX_MS) is
   * repaired at the end: the answer still arrives whole.
   */
  private async endedBySlack(error: string, method: string): Promise<void> {
    if (error === "stopped_by_user") throw new StoppedByUser();
    if (error !== "message_not_in_streaming_state") throw refusal(method, error);
    this.stopped = true;
    this.mode = "repair";
    await this.deps.record({});
  }

  /** The message made whole: its stream stopped (if it still runs), then chat.update with the whole answer. */
  private async repair(final: string): Promise<void> {
    for (let tries = 0; tries < 3; tries++) {
      if (!this.stopped) await this.stop("", false);
      let answer: SlackAnswer;
      try {
        answer = await this.call("chat.update", { channel: this.place.channel, ts: this.ts, markdown_text: final });
      } catch (error) {
        if (error instanceof LostAnswer) continue; // an update is harmless to repeat
        throw error;
      }
      if (answer.ok) {
        this.sent = final.length;
        return;
      }
      if (answer.error === "streaming_state_conflict") {
        this.stopped = false;
        continue;
      }
      throw refusal("chat.update", answer.error);
    }
    throw transient("chat.update: the answer's message could not be made whole (its answers lost, or still streaming)");
  }

  /** One Slack call: a 429 waited out and sent again (it was not made); no answer is a LostAnswer. */
  async call(method: string, args: JsonObject, signal = this.deps.signal): Promise<SlackAnswer> {
    for (;;) {
      this.calls[method] = (this.calls[method] ?? 0) + 1;
      try {
        return await this.deps.slack.call(method, args, this.deps.timeoutMs, signal);
      } catch (error) {
        if (signal.aborted) throw signal.reason;
        if (error instanceof EffectError && error.failure.kind === "rate_limited") {
          if (error.failure.retryAfterMs > RATE_LIMIT_WAIT_MAX_MS) throw error;
          await this.deps.sleep(error.failure.retryAfterMs, signal);
          continue;
        }
        if (error instanceof EffectError && error.failure.kind === "fatal") throw error;
        throw new LostAnswer(method, error);
      }
    }
  }
}

/** A call whose answer never came (a timeout, a dropped connection, a 5xx): Slack may or may not have made it. */
export class LostAnswer extends Error {
  constructor(method: string, cause: unknown) {
    super(`${method}: its answer was lost (${cause instanceof Error ? cause.message : String(cause)})`, { cause });
    this.name = "LostAnswer";
  }
}

/** Whether Slack ts `a` ("seconds.micro") is later than `b`, compared as numbers of microseconds. */
export function tsAfter(a: string, b: string): boolean {
  const micros = (ts: string) => {
    const [seconds = "0", fraction = ""] = ts.split(".");
    return BigInt(seconds) * 1_000_000n + BigInt(fraction.padEnd(6, "0").slice(0, 6) || "0");
  };
  try {
    return micros(a) > micros(b);
  } catch {
    return false;
  }
}
