/**
 * THE ANSWER: one user message in an assistant thread, answered by a model
 * and streamed into the thread — once, complete, whatever fails. An outbox
 * row (its key the message's fact, so a retry or the same message under
 * another event_id is one row) whose effect is long (shared/effects/effect.ts,
 * ClaimLease): its one attempt runs as long as the answer does, renewing its
 * claim as it writes its turn's progress (store.ts), each write fenced on
 * that claim.
 *
 * One attempt:
 *   1. Read the thread (one round trip): the turn, its earlier turns, the
 *      context. An earlier turn still being answered: not yet (the row comes
 *      back in TURN_WAIT_MS, its attempt given back) — one turn at a time.
 *   2. The model's answer: kept from an earlier attempt, or asked for
 *      (its history is the earlier turns, never conversations.replies) while
 *      the status line says it is thinking, refreshed before Slack's two
 *      minutes clear it; streamed into the thread as it comes (reply.ts).
 *      Kept in the turn as soon as it is whole: a later attempt delivers it
 *      without asking the model again.
 *   3. The message finished: the rest appended and the stream stopped, or —
 *      if the stream cannot be trusted — stopped and updated whole. Then the
 *      turn is delivered and the row completes.
 *
 * What ends it early: the user's stop (agent_session_stopped, recorded by the
 * ack; or Slack's stopped_by_user): the model call ends, the stream is
 * stopped where it stands, the row completes (not dead, not retried). A model
 * that refuses (a 4xx, a refusal, a content filter): the user is told in the
 * thread, and the row parks with the reason. A model that fails or stalls:
 * the stream is stopped where it stands and the row is retried; the next
 * attempt asks again and makes the message whole. A lost claim: every call
 * ends at once (the fence already refuses its writes).
 */
import { fatal, notYet, transient } from "../delivery/failure.ts";
import type { AttemptContext, EffectDefinition } from "../effects/effect.ts";
import { type ClaimLease, leaseOf } from "../effects/lease.ts";
import { isObject, type JsonObject } from "../slack/inputs.ts";
import { askModel, type ChatMessage, ModelFailure, type ModelSettings } from "./model.ts";
import { fitted, Reply, type ReplyPlace, StoppedByUser } from "./reply.ts";
import { FINISHED_STATES, type Progress, progressStatement, readThread, type ThreadView, type TurnKey } from "./store.ts";
import { ANSWER_EFFECT } from "./thread.ts";

/** One attempt's longest time: inside a consumer invocation's 15 minutes, with room for its finish. */
export const ANSWER_MAX_MS = 12 * 60_000;
/** A model that sends nothing for this long has stalled: the attempt ends, and is retried. */
export const MODEL_IDLE_MS = 120_000;
/** How soon a question waiting for the thread's earlier answer looks again, at the soonest… */
export const TURN_WAIT_MS = 2_000;
/** …and at the latest (an earlier row waiting for a long retry is looked at when it is due, but not later than this). */
export const TURN_WAIT_MAX_MS = 60_000;
/** The status line is set again this long after it was set, while nothing of the answer shows (Slack clears it at 2 minutes; the heartbeat, every 30 s at most, meets it between 90 and 120). */
export const STATUS_REFRESH_MS = 90_000;
/**
 * The most writes of its turn one attempt makes (each a batch of two statements: the lease's renewal and the
 * progress), a heartbeat every 30 s at most over ANSWER_MAX_MS and the state changes: its D1 statements are bounded
 * by construction, whatever LEASE_SECONDS makes the heartbeat. With the thread's read (two statements) that is
 * ANSWER_WORST_QUERIES, which the answer declares (`long.queries`) and the consumer reserves from its invocation's
 * budget while the attempt runs (shared/delivery/query-budget.ts), beside what its row's lane counts.
 */
export const ANSWER_MAX_WRITES = Math.ceil(ANSWER_MAX_MS / 30_000) + 7;
export const ANSWER_WORST_QUERIES = 2 + 2 * ANSWER_MAX_WRITES;

/** The history a question is asked with, at most, in characters (the newest turns kept). */
export const HISTORY_MAX_CHARS = 48_000;

export const DEFAULT_INSTRUCTIONS =
  "You are a helpful assistant in Slack. Answer concisely in Markdown; use Slack mentions such as <#C123> and <@U123> as they are given.";
export const DEFAULT_STATUS = "is thinking…";

/** What the row carries (shared/app/assistant.ts writes it): where, which question, and how to ask. */
export interface AnswerArgs extends JsonObject {
  readonly team: string;
  readonly channel: string;
  readonly thread_ts: string;
  readonly message_ts: string;
  readonly user: string | null;
  readonly instructions: string | null;
  readonly status: string | null;
  readonly loading_messages: readonly string[] | null;
}

export interface AnswerOptions {
  /** The clock the stream's age, the status's refresh and the progress writes are read on (tests move it). */
  readonly clock?: () => number;
  /** Waits (a 429's Retry-After); ends when the signal aborts. */
  readonly sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** Calls `fn` every `ms` until the returned function is called (the heartbeat): setInterval, or a test's clock. */
  readonly every?: (ms: number, fn: () => void) => () => void;
  /** A model silent this long has stalled (default MODEL_IDLE_MS). */
  readonly modelIdleMs?: number;
}

/** The answer effect (registered by app.assistant: shared/app/assistant.ts). */
export function answerEffect(options: AnswerOptions = {}): EffectDefinition {
  const time: Time = {
    clock: options.clock ?? Date.now,
    sleep: options.sleep ?? sleepFor,
    every: options.every ?? everyMs,
    modelIdleMs: options.modelIdleMs ?? MODEL_IDLE_MS,
  };
  return {
    name: ANSWER_EFFECT,
    // A repeat would be a second message: never, by the turn's record (the message's ts), not by shape.
    idempotentByShape: false,
    inline: false,
    long: { maxMs: ANSWER_MAX_MS, queries: ANSWER_WORST_QUERIES },
    perform: (payload, ctx) => answer(payload, ctx, time),
  };
}

type Time = Required<AnswerOptions>;

async function answer(payload: JsonObject, ctx: AttemptContext, time: Time) {
  const { clock, sleep } = time;
  const lease = leaseOf(ctx);
  if (!lease) throw fatal(`${ANSWER_EFFECT}: performed without its claim (the engine runs it as a long effect)`);
  const args = argsOf(payload);
  const key: TurnKey = { teamId: args.team, channelId: args.channel, threadTs: args.thread_ts, messageTs: args.message_ts };
  const view = await readThread(lease.db, key);
  const turn = view.turn;
  if (!turn) throw fatal(`${ANSWER_EFFECT}: no turn is recorded for message ${key.messageTs} (pruned?)`);
  if (turn.state === "delivered" || turn.state === "stopped") return { already: turn.state, ts: turn.streamTs };
  const busy = view.earlier.find(
    (t) => !FINISHED_STATES.has(t.state) && t.rowStatus !== null && t.rowStatus !== "done" && t.rowStatus !== "dead",
  );
  if (busy) {
    // Looked at again when the earlier row is due next (a retry's backoff), within TURN_WAIT_MS and TURN_WAIT_MAX_MS.
    const due = busy.rowDueAt === null ? 0 : busy.rowDueAt - clock();
    const waitMs = Math.min(TURN_WAIT_MAX_MS, Math.max(TURN_WAIT_MS, due));
    throw notYet(waitMs, `the thread's earlier question (${busy.messageTs}) is still being answered`);
  }

  // Ends the model call and every Slack call: the user's stop, or the claim lost.
  const stop = new AbortController();
  const signal = AbortSignal.any([ctx.signal, stop.signal]);
  const keeper = new Keeper(lease, key, stop, ctx.timeoutMs, time);
  const place: ReplyPlace = {
    channel: args.channel,
    threadTs: args.thread_ts,
    afterTs: args.message_ts,
    // Outside a DM a stream is live only for its recipient, and Slack requires both ids there.
    ...(args.channel.startsWith("D") || !args.user ? {} : { recipient: { userId: args.user, teamId: args.team } }),
  };
  const otherAnswers = new Set(view.earlier.flatMap((t) => (t.streamTs ? [t.streamTs] : [])));
  const reply = new Reply(
    {
      slack: ctx.slack,
      timeoutMs: ctx.timeoutMs,
      signal,
      closing: ctx.signal,
      clock,
      sleep,
      record: (p) => keeper.record(p),
      otherAnswers,
    },
    place,
    turn.streamTs ? { ts: turn.streamTs, startedAt: turn.streamStartedAt } : undefined,
  );
  const status = new StatusLine(reply, place, args, clock);
  keeper.onBeat = async () => {
    keeper.note({ sentChars: reply.confirmed });
    await status.refreshIfDue().catch(() => {});
  };
  let said = "";
  let asked = false;
  try {
    if (turn.stopRequestedAt !== null) throw new StoppedByUser();
    if (turn.state === "starting" && turn.streamTs === null) await reply.recoverLostStart();
    let whole = turn.answer;
    if (whole === null) {
      const model = modelSettingsOf(ctx);
      if (!reply.visible || turn.state === "streaming") await status.set();
      await keeper.record({ modelCall: true, state: "answering" });
      asked = true;
      whole = "";
      for await (const part of askModel({
        settings: model,
        messages: messagesOf(view, args),
        idempotencyKey: ctx.idempotencyKey,
        edge: ctx.edge,
        signal,
        idleMs: time.modelIdleMs,
      })) {
        if (part.kind !== "text") continue;
        whole += part.text;
        said = whole;
        await reply.push(part.text);
        keeper.note({ sentChars: reply.confirmed });
      }
      // What the user gets is the answer cut to one message (fitted): kept as such, never the model's whole output,
      // which a model could make larger than a D1 row (2 MB).
      whole = fitted(whole);
      await keeper.record({ state: "generated", answer: whole });
    }
    await reply.finish(whole);
    await keeper.record({ state: "delivered", sentChars: whole.length }, { final: true });
    await status.clearIfLeft();
    return { ts: reply.messageTs ?? null, chars: whole.length, model_called: asked, calls: reply.calls };
  } catch (error) {
    const reason = stop.signal.aborted ? stop.signal.reason : error;
    if (reason instanceof StoppedByUser) {
      // Not dead, not retried: the user has what was said, the stream ends where it stands and the status goes
      // (Slack's agent_session_stopped reference: the app moves the session out of its work) — on the attempt's
      // own signal, not the one the stop aborted.
      await reply.abandon().catch(() => {});
      await status.clear(ctx.signal).catch(() => {});
      const kept = said.slice(0, reply.confirmed);
      await keeper.record({ state: "stopped", ...(kept ? { answer: kept } : {}) }, { final: true }).catch(() => {});
      return { stopped: true, ts: reply.messageTs ?? null, chars: reply.confirmed, model_called: asked, calls: reply.calls };
    }
    if (reason instanceof LeaseLost) throw transient(`${ANSWER_EFFECT}: ${reason.message}`);
    if (reason instanceof WritesSpent) {
      await reply.abandon().catch(() => {});
      throw transient(`${ANSWER_EFFECT}: ${reason.message}`);
    }
    if (error instanceof ModelFailure && error.kind === "refused") {
      // Asking again gets the same answer: the user is told, in the thread, and the row parks with the reason.
      await tellUser(reply, place, "Sorry, I couldn't answer that: the model refused the request.").catch(() => {});
      await keeper.record({ state: "failed" }, { final: true }).catch(() => {});
      throw fatal(`${ANSWER_EFFECT}: ${error.message}`);
    }
    // A model that failed or stalled, a Slack call that kept failing: nothing is left streaming, and the row is retried.
    await reply.abandon().catch(() => {});
    if (error instanceof ModelFailure) throw transient(`${ANSWER_EFFECT}: ${error.message}`);
    throw error;
  } finally {
    keeper.close();
  }
}

/** The row's args, checked: what the app wrote (shared/app/assistant.ts); a row without them is a bug and parks. */
function argsOf(payload: JsonObject): AnswerArgs {
  for (const field of ["team", "channel", "thread_ts", "message_ts"] as const) {
    if (typeof payload[field] !== "string" || payload[field] === "") throw fatal(`${ANSWER_EFFECT}: payload has no ${field}`);
  }
  const text = (field: string) => (typeof payload[field] === "string" ? (payload[field] as string) : null);
  const loading = Array.isArray(payload.loading_messages)
    ? payload.loading_messages.filter((m): m is string => typeof m === "string")
    : null;
  return {
    team: payload.team as string,
    channel: payload.channel as string,
    thread_ts: payload.thread_ts as string,
    message_ts: payload.message_ts as string,
    user: text("user"),
    instructions: text("instructions"),
    status: text("status"),
    loading_messages: loading,
  };
}

/** MODEL_URL, MODEL_API_KEY, MODEL_NAME, as the deployment parsed them (the app declared them: shared/app/assistant.ts). */
function modelSettingsOf(ctx: AttemptContext): ModelSettings {
  const all = ctx.appSettings?.all ?? {};
  const url = typeof all.MODEL_URL === "string" && all.MODEL_URL !== "" ? all.MODEL_URL : undefined;
  if (url === undefined) throw new ModelFailure("refused", "MODEL_URL is not set: there is no model to ask");
  const apiKey = typeof all.MODEL_API_KEY === "string" && all.MODEL_API_KEY !== "" ? all.MODEL_API_KEY : undefined;
  const name = typeof all.MODEL_NAME === "string" && all.MODEL_NAME !== "" ? all.MODEL_NAME : undefined;
  return { url, apiKey, name };
}

/**
 * What the model is asked with: the app's instructions and what the user is looking at (the thread's context),
 * the thread's earlier questions with their answers (the newest, within HISTORY_MAX_CHARS), then the question.
 */
export function messagesOf(view: ThreadView, args: Pick<AnswerArgs, "instructions">): ChatMessage[] {
  const channel = view.context && typeof view.context.channel_id === "string" ? view.context.channel_id : undefined;
  const system = [args.instructions ?? DEFAULT_INSTRUCTIONS, channel ? `The user is looking at the channel <#${channel}>.` : ""]
    .filter(Boolean)
    .join("\n");
  const history: ChatMessage[][] = view.earlier.flatMap((t) =>
    t.answer !== null
      ? [
          [
            { role: "user", content: t.question },
            { role: "assistant", content: t.answer },
          ],
        ]
      : [],
  );
  let chars = history.reduce((sum, pair) => sum + pair.reduce((n, m) => n + m.content.length, 0), 0);
  while (history.length > 0 && chars > HISTORY_MAX_CHARS) {
    const dropped = history.shift() ?? [];
    chars -= dropped.reduce((n, m) => n + m.content.length, 0);
  }
  return [{ role: "system", content: system }, ...history.flat(), { role: "user", content: view.turn?.question ?? "" }];
}

/** The thread's status line ("is thinking…"): set while nothing of the answer shows, set again before Slack's two minutes clear it. */
class StatusLine {
  private setAt: number | undefined;
  private shownBefore = false;

  private readonly reply: Reply;
  private readonly place: ReplyPlace;
  private readonly args: AnswerArgs;
  private readonly clock: () => number;

  constructor(reply: Reply, place: ReplyPlace, args: AnswerArgs, clock: () => number) {
    this.reply = reply;
    this.place = place;
    this.args = args;
    this.clock = clock;
  }

  async set(): Promise<void> {
    this.shownBefore = this.reply.visible;
    await this.send(this.args.status ?? DEFAULT_STATUS);
    this.setAt = this.clock();
  }

  /** While the answer is not showing (nothing streamed yet, or a message being made whole), before two minutes pass. */
  async refreshIfDue(): Promise<void> {
    if (this.setAt === undefined || (this.reply.visible && !this.shownBefore)) return;
    if (this.clock() - this.setAt < STATUS_REFRESH_MS) return;
    await this.set();
  }

  /** Slack clears it when the app replies; a message that existed before it was set did not reply again: cleared. */
  async clearIfLeft(): Promise<void> {
    if (this.setAt === undefined || !this.shownBefore) return;
    await this.send("").catch(() => {});
  }

  /** Cleared, whatever showed (the user's stop), on `signal`. */
  async clear(signal: AbortSignal): Promise<void> {
    if (this.setAt === undefined) return;
    await this.send("", signal);
  }

  private async send(status: string, signal?: AbortSignal): Promise<void> {
    const loading =
      status !== "" && this.args.loading_messages?.length ? { loading_messages: this.args.loading_messages.slice(0, 10) } : {};
    const args = { channel_id: this.place.channel, thread_ts: this.place.threadTs, status, ...loading };
    // A status is a courtesy: Slack refusing it (a thread that is not an assistant's) never fails the answer.
    await this.reply.call("assistant.threads.setStatus", args, ...(signal ? [signal] : []));
  }
}

/** Tells the user in the thread why there is no answer: at the end of its message if there is one, else a message of its own. */
async function tellUser(reply: Reply, place: ReplyPlace, text: string): Promise<void> {
  if (reply.visible) {
    await reply.abandon(`\n\n_${text}_`);
    return;
  }
  await reply.call("chat.postMessage", { channel: place.channel, thread_ts: place.threadTs, text });
}

class WritesSpent extends Error {
  constructor() {
    super(`this attempt wrote its turn ${ANSWER_MAX_WRITES} times, its most: the row comes back to finish it`);
    this.name = "WritesSpent";
  }
}

class LeaseLost extends Error {
  constructor() {
    super("its claim was lost to another (its lease was not renewed in time): this attempt stops");
    this.name = "LeaseLost";
  }
}

/**
 * The answer's writes, one at a time, each a renewal of its lease with the turn's progress in the same batch
 * (store.ts): state changes at once, and a heartbeat that renews the lease (and notes how much Slack confirmed)
 * well before it would end. A write that finds the claim lost, or a stop the user asked for, aborts `stop`.
 */
class Keeper {
  private chain: Promise<void> = Promise.resolve();
  private writes = 0;
  private readonly cancel: () => void;
  private noted: Progress = {};
  onBeat: (() => Promise<void>) | undefined;
  private readonly lease: ClaimLease;
  private readonly key: TurnKey;
  private readonly stop: AbortController;
  private readonly clock: () => number;

  constructor(lease: ClaimLease, key: TurnKey, stop: AbortController, timeoutMs: number, time: Time) {
    this.lease = lease;
    this.key = key;
    this.stop = stop;
    this.clock = time.clock;
    // A renewal a third of the way into what the lease leaves past one call's timeout (the engine ends an
    // attempt that long before its lease: shared/delivery/deliver.ts), whatever the answer is doing.
    const beatMs = Math.max(1_000, Math.min(30_000, Math.floor((lease.leaseMs - timeoutMs) / 3)));
    // The beat's promise is returned: a test's virtual clock waits for it (setInterval ignores it).
    this.cancel = time.every(beatMs, () => Promise.all([this.onBeat?.().catch(() => {}), this.record(this.noted).catch(() => {})]));
  }

  /** Progress to carry on the next heartbeat (not worth a write of its own). */
  note(progress: Progress): void {
    this.noted = progress;
  }

  /** Writes `progress` under the claim. Throws (and aborts `stop`) when the claim is lost or the user asked to stop. */
  record(progress: Progress, options: { readonly final?: boolean } = {}): Promise<void> {
    const write = this.chain.then(async () => {
      if (this.stop.signal.aborted && !options.final) throw this.stop.signal.reason;
      // Bounded by construction: an attempt past ANSWER_MAX_WRITES gives its row back (a final write still goes).
      if (++this.writes > ANSWER_MAX_WRITES && !options.final) {
        const spent = new WritesSpent();
        this.stop.abort(spent);
        throw spent;
      }
      const statement = progressStatement(
        this.lease.db,
        this.key,
        { rowId: this.lease.rowId, claimToken: this.lease.claimToken },
        progress,
        this.clock(),
      );
      const results = await this.lease.renew([statement]);
      if (results === undefined) {
        const lost = new LeaseLost();
        this.stop.abort(lost);
        throw lost;
      }
      const row = results[0]?.results[0];
      if (!options.final && isObject(row as JsonObject | undefined) && row?.stop_requested_at != null) {
        const stopped = new StoppedByUser();
        this.stop.abort(stopped);
        throw stopped;
      }
    });
    this.chain = write.catch(() => {});
    return write;
  }

  close(): void {
    this.cancel();
  }
}

function everyMs(ms: number, fn: () => void): () => void {
  const timer = setInterval(fn, ms);
  return () => clearInterval(timer);
}

function sleepFor(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}
