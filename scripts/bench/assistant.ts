/**
 * Section "assistant": what an assistant's answer costs through `npm start` itself, with its own stand-in and the
 * stand-in's fake model (no SLACK_BOT_TOKEN, SLACK_API_URL or MODEL_URL: what a plain `npm start` runs), the app
 * the bench's (the reference app as shipped, whose assistant answers with the model).
 *
 * Questions, each in an assistant thread of its own (its own user's DM with the app), in two phases: first `alone`
 * questions one at a time (each sent once the previous answer is whole: what the pipeline adds to one answer), then
 * `questions` sent evenly over a window while earlier answers still stream (what answers in flight add to a new
 * one's wait). Per answer, read back from the stand-in's record (GET /_standin/calls, GET /_standin/thread):
 *
 *   - the time from the question's ack (its 200 at the bench) to the answer's first streamed text at the stand-in
 *     (chat.startStream carries it: the first text starts the stream), ÷ the model's own time to first token (the
 *     fake model records when it sent its first content chunk, from the call's start). The ratio says how much the
 *     pipeline adds before the user sees anything: 1 would be a model called at the ack and its first token shown
 *     at once. Both clocks are this machine's (the bench and the stand-in, one process tree).
 *   - model calls, and Slack calls by method;
 *   - whether it ended as one message, complete (the fake model's exact text), no longer streaming.
 *
 * Bounded: the start, the answers and every wait have a ceiling; the run is stopped (its process group) whatever
 * happens. The model's delays are the stand-in's defaults (a first chunk after 400 ms, 40 chunks 90 ms apart).
 */
import { expectedAnswer } from "../../cli/local/demo-assistant.ts";
import { freePort } from "../../cli/local/processes.ts";
import { readRunInfo } from "../../cli/local/run-info.ts";
import { assistantQuestion, eventCallback, postSigned } from "../../cli/local/slack-payloads.ts";
import {
  fetchStandinCalls,
  fetchStandinThread,
  openStandinAssistantThread,
  type StandinCall,
  tellStandinMessage,
} from "../../cli/local/slack-standin.ts";
import { BENCH_APP } from "./build.ts";
import { onInterrupt } from "./cleanup.ts";
import { launchNpmStart, waitUntilUp } from "./pipeline.ts";
import { BENCH_SIGNING_SECRET } from "./signed-events.ts";
import { quantile, round } from "./stats.ts";

export interface AssistantOptions {
  /** Questions asked one at a time, each once the previous answer is whole. */
  readonly alone: number;
  /** Then questions sent evenly over `spreadSeconds`, earlier answers still streaming. */
  readonly questions: number;
  /** The window the questions are sent over, evenly. */
  readonly spreadSeconds: number;
  /** Start-up's ceiling. */
  readonly maxStartSeconds: number;
  /** The answers' ceiling, from the last question. */
  readonly maxSeconds: number;
}

export type Phase = "alone" | "overlapping";

export interface AnswerFigures {
  readonly question: number;
  readonly phase: Phase;
  /** The question's ack: its send → its 200, ms. */
  readonly ackMs: number;
  /** Its 200 → the answer's chat.startStream at the stand-in (the first text the user sees), ms; null: none came. */
  readonly firstTextMs: number | null;
  /** The fake model's own time to first token (its call's start → its first content chunk), ms. */
  readonly modelFirstTokenMs: number | null;
  /** firstTextMs ÷ modelFirstTokenMs. */
  readonly ratio: number | null;
  readonly modelCalls: number;
  readonly slackCalls: Readonly<Record<string, number>>;
  /** One message in its thread, not streaming, stopped by the app, its text the model's. */
  readonly complete: boolean;
}

/** p50, p99 (nearest rank) and max of a figure over the answers that have it. */
export interface Spread {
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

/** A phase's figures over its answers. */
export interface PhaseFigures {
  readonly answers: number;
  readonly ratio: Spread | null;
  readonly firstTextMs: Spread | null;
  readonly modelFirstTokenMs: Spread | null;
  readonly ackMs: Spread | null;
}

export interface AssistantResult {
  readonly config: AssistantOptions;
  readonly answers: readonly AnswerFigures[];
  readonly phases: Readonly<Record<Phase, PhaseFigures>>;
  /** Per answer, averaged over the answers: model calls, and Slack calls by method. */
  readonly perAnswer: { readonly modelCalls: number; readonly slackCalls: Readonly<Record<string, number>> };
  /** Answers that ended as one complete message. */
  readonly complete: number;
  /** Calls to one stream that overlapped (the stand-in reports them; none expected). */
  readonly overlaps: number;
  readonly seconds: number;
}

const question = (i: number) => `bench question ${i}: what does one answer cost?`;

export async function benchAssistant(options: AssistantOptions, progress: (line: string) => void): Promise<AssistantResult> {
  const started = performance.now();
  const port = await freePort();
  // npm start with its own stand-in and its fake model: MODEL_URL and the Slack settings set empty, so nothing in the
  // bench's environment or the root .dev.vars points them elsewhere.
  const launched = await launchNpmStart({ port }, null, {
    ACKBOX_APP: BENCH_APP,
    MODEL_URL: "",
    MODEL_API_KEY: "",
    MODEL_NAME: "",
    SLACK_CLIENT_ID: "",
  });
  const unregister = onInterrupt(() => launched.stop());
  try {
    await waitUntilUp(`${launched.base}/healthz`, options.maxStartSeconds * 1000, launched);
    const info = launched.dir ? readRunInfo(launched.dir) : undefined;
    const standinUrl = info?.standinUrl;
    if (!standinUrl) throw new Error(`npm start published no stand-in in ${launched.dir}/run.json: ${launched.recent()}`);
    if (!info?.modelKeyFile) throw new Error("npm start's assistant does not ask its stand-in's model (run.json names no model key)");
    const before = (await fetchStandinCalls(standinUrl, Number.MAX_SAFE_INTEGER)).total;

    const run = Date.now().toString(36).toUpperCase();
    type Sent = { i: number; phase: Phase; channel: string; threadTs: string; ackAt: number; ackMs: number; status: number };
    const sent: Sent[] = [];
    const threads = new Map<number, Awaited<ReturnType<typeof fetchStandinThread>>>();
    const ask = async (i: number, phase: Phase): Promise<Sent> => {
      const channel = `D0BENCH${run}${i}`;
      const { thread_ts: threadTs } = await openStandinAssistantThread(standinUrl, channel, `U0BENCH${i}`);
      // A second behind the clock, as a question Slack stamped before it sent the event (cli/local/demo-assistant.ts).
      const ts = `${Math.floor(Date.now() / 1000) - 1}.9${String(i).padStart(5, "0")}`;
      const event = assistantQuestion({ channel, threadTs, ts, text: question(i), user: `U0BENCH${i}` });
      await tellStandinMessage(standinUrl, channel, event);
      const posted = await postSigned(launched.base, BENCH_SIGNING_SECRET, eventCallback(event, `Ev0BENCHASK${run}${i}`));
      if (posted.status !== 200) throw new Error(`question ${i} was answered ${posted.status}: ${posted.body.slice(0, 200)}`);
      const one = { i, phase, channel, threadTs, ackAt: posted.sentAt + posted.ms, ackMs: Math.round(posted.ms), status: posted.status };
      sent.push(one);
      return one;
    };
    /** Until every answer of `these` is whole (one message or more in its thread, none streaming), or the ceiling. */
    const finish = async (these: readonly Sent[]) => {
      const deadline = Date.now() + options.maxSeconds * 1000;
      for (;;) {
        for (const s of these) threads.set(s.i, await fetchStandinThread(standinUrl, s.channel, s.threadTs));
        const done = these.filter((s) => {
          const replies = replyMessages(threads.get(s.i));
          return replies.length > 0 && replies.every((m) => !m.streaming);
        }).length;
        if (done === these.length || Date.now() > deadline) return;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    };

    progress(`assistant: ${options.alone} question(s) one at a time, each in a thread of its own`);
    for (let i = 0; i < options.alone; i++) await finish([await ask(i, "alone")]);
    progress(`assistant: ${options.questions} questions over ${options.spreadSeconds} s, earlier answers still streaming`);
    const windowStart = performance.now();
    const asks: Promise<Sent>[] = [];
    for (let k = 0; k < options.questions; k++) {
      const wait = windowStart + (k * options.spreadSeconds * 1000) / options.questions - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      // Not awaited in turn: a slow ack must not delay the next question's send.
      asks.push(ask(options.alone + k, "overlapping"));
    }
    await finish(await Promise.all(asks));
    // The last model call is recorded when it ends, a moment after its last chunk: read the calls once that is past.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const calls = (await fetchStandinCalls(standinUrl, before)).calls;

    const answers = sent
      .sort((a, b) => a.i - b.i)
      .map((s): AnswerFigures => {
        const mine = calls.filter((c) => ((c.params.channel ?? c.params.channel_id) === s.channel && c.kind === "api") || asked(c, s.i));
        const model = mine.filter((c) => c.method === "model.chat.completions");
        const slackCalls: Record<string, number> = {};
        for (const c of mine) if (c.kind === "api") slackCalls[c.method] = (slackCalls[c.method] ?? 0) + 1;
        const start = mine.find((c) => c.method === "chat.startStream");
        const firstTextMs = start ? Math.round(Date.parse(start.at) - s.ackAt) : null;
        const modelFirstTokenMs = model[0]?.model?.firstTokenMs ?? null;
        const replies = replyMessages(threads.get(s.i));
        const [reply] = replies;
        return {
          question: s.i,
          phase: s.phase,
          ackMs: s.ackMs,
          firstTextMs,
          modelFirstTokenMs,
          ratio: firstTextMs !== null && modelFirstTokenMs ? round(firstTextMs / modelFirstTokenMs, 2) : null,
          modelCalls: model.length,
          slackCalls,
          complete:
            replies.length === 1 &&
            reply !== undefined &&
            !reply.streaming &&
            !reply.leftStreaming &&
            reply.ended === "stopStream" &&
            reply.text === expectedAnswer(question(s.i)),
        };
      });
    const methods = [...new Set(answers.flatMap((a) => Object.keys(a.slackCalls)))].sort();
    const mean = (values: readonly number[]) => round(values.reduce((a, b) => a + b, 0) / Math.max(1, values.length), 1);
    return {
      config: options,
      answers,
      phases: { alone: phaseFigures(answers, "alone"), overlapping: phaseFigures(answers, "overlapping") },
      perAnswer: {
        modelCalls: mean(answers.map((a) => a.modelCalls)),
        slackCalls: Object.fromEntries(methods.map((m) => [m, mean(answers.map((a) => a.slackCalls[m] ?? 0))])),
      },
      complete: answers.filter((a) => a.complete).length,
      overlaps: [...threads.values()].reduce((n, t) => n + t.overlaps.length, 0),
      seconds: round((performance.now() - started) / 1000, 0),
    };
  } finally {
    unregister();
    await launched.stop();
  }
}

/** The figures of one phase's answers. */
export function phaseFigures(answers: readonly AnswerFigures[], phase: Phase): PhaseFigures {
  const mine = answers.filter((a) => a.phase === phase);
  return {
    answers: mine.length,
    ratio: spread(mine.map((a) => a.ratio)),
    firstTextMs: spread(mine.map((a) => a.firstTextMs)),
    modelFirstTokenMs: spread(mine.map((a) => a.modelFirstTokenMs)),
    ackMs: spread(mine.map((a) => a.ackMs)),
  };
}

/** The app's replies in a thread (its root, the thread Slack opened, left out). */
function replyMessages(read: Awaited<ReturnType<typeof fetchStandinThread>> | undefined) {
  return read?.thread.messages.filter((m) => m.from === "app" && m.thread_ts !== undefined) ?? [];
}

/** A model call asked question i (its last message, the user's). */
function asked(c: StandinCall, i: number): boolean {
  if (c.method !== "model.chat.completions") return false;
  const messages = (c.json as { messages?: { role?: string; content?: unknown }[] } | undefined)?.messages ?? [];
  return messages.at(-1)?.content === question(i);
}

export function spread(values: readonly (number | null)[]): Spread | null {
  const known = values.filter((v): v is number => v !== null && Number.isFinite(v));
  if (known.length === 0) return null;
  const digits = known.every(Number.isInteger) ? 0 : 2;
  return { p50: round(quantile(known, 0.5), digits), p99: round(quantile(known, 0.99), digits), max: round(Math.max(...known), digits) };
}
