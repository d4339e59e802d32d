/**
 * The demo's assistant (issue 39): a conversation in an assistant thread,
 * answered by the stand-in's fake model, and checked exactly — at the
 * stand-in's Web API (every call intended) and in the thread as its Slack
 * holds it (the messages, their text, whether they still stream).
 *
 *   assistant thread   a user opens the pane (assistant_thread_started →
 *                      suggested prompts), asks, and asks again while the
 *                      first answer streams: two answers, in order, the
 *                      second asked with the first in its history; each one
 *                      message, streamed, complete, no call to a stream
 *                      overlapping another
 *   assistant stop     the user presses stop while the answer streams
 *                      (the stand-in stops it and hands back the
 *                      agent_session_stopped Slack sends): the answer ends
 *                      where it stood, its row done, not dead, not retried
 *   assistant killed   (npm run demo -- --kill, a step of its own) a run of
 *                      its own beside npm start, on the same stand-in, is
 *                      SIGKILLed while the answer streams and started again
 *                      on its state: the same message is finished, one
 *                      message, complete, its row done (the run is stopped
 *                      only then: the status line is cleared after the
 *                      message's last call)
 *
 * The texts are checked to the character: the stand-in's model answers with
 * a text that quotes the question and counts the history it was asked with
 * (slack-standin.ts, standinAnswer), so the demo knows each answer exactly.
 * Against a MODEL_URL of your own the answers are the model's, and these
 * scenarios are skipped (demo.ts).
 *
 * An answer's calls are left out of the demo's "request sent → effect"
 * figure (they follow the model, and a turn's wait, not the request); the
 * suggested prompts are an effect like any other and are in it.
 *
 * A question's ts is a second behind the clock: Slack stamps a message before
 * it delivers its event, so every ts the stand-in gives the answer is later
 * (what the answer's recovery of a lost start reads the thread by).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FakeMessage, FakeThread, Overlap } from "../../shared/app/fake-slack-streams.ts";
import { needs } from "./demo-apps.ts";
import type { DemoScenario, IntendedCall, ScenarioContext } from "./scenario.ts";
import { LOCAL_BOT_TOKEN, LOCAL_MODEL_NAME, standinModelUrl } from "./settings.ts";
import { assistantQuestion, assistantThreadStarted, eventCallback, type Posted, postSigned, type Team } from "./slack-payloads.ts";
import {
  fetchStandinCalls,
  fetchStandinThread,
  openStandinAssistantThread,
  type StandinCall,
  standinAnswer,
  stopStandinStream,
  tellStandinMessage,
} from "./slack-standin.ts";

export interface AssistantDeps {
  /** The ingress of the run under demonstration. */
  readonly url: string;
  readonly standinUrl: string;
  /** The workspace the events come from (its token must carry the calls in a distributed run). */
  readonly team: Team;
  /** The run's ADMIN_TOKEN: with it the stopped answer's row is read back (done, not dead). */
  readonly adminToken?: string;
  /** How long each wait may take. */
  readonly timeoutMs: number;
}

/** The user who asks, and the questions: fixed, so the demo's table and its exact texts are the same every run. */
const USER = "U0DEMOUSER";
export const QUESTIONS = {
  first: "What does ackbox promise about an assistant's answer?",
  second: "And if the process dies while it streams?",
  stopped: "Tell me everything about durable answers, at length.",
  killed: "What happens to this answer if the run is killed now?",
} as const;

/** The most appends an answer of the stand-in's model can take (its 40 chunks, one append each at most). */
const APPENDS_AT_MOST = 40;

/** The stand-in model's answer to `question` asked after `history` (questions and answers, in order). */
export function expectedAnswer(question: string, history: readonly string[] = []): string {
  return standinAnswer([
    { role: "system", content: "" },
    ...history.map((content, i) => ({ role: i % 2 === 0 ? "user" : "assistant", content })),
    { role: "user", content: question },
  ]);
}

/** The two scenarios against the running pipeline: a conversation, and a stop. */
export function assistantScenarios(deps: AssistantDeps): DemoScenario[] {
  return [conversationScenario(deps), stopScenario(deps)];
}

function conversationScenario(deps: AssistantDeps): DemoScenario {
  return {
    name: "assistant thread",
    needs: [needs.assistantPrompts, needs.assistantAnswer],
    note: "prompts; 2 questions, the 2nd while the 1st streams → 2 answers in order, each 1 message, complete",
    async send(ctx) {
      const before = await seqNow(deps.standinUrl);
      const channel = dmOf(ctx);
      const { thread_ts: threadTs } = await openStandinAssistantThread(deps.standinUrl, channel, USER);
      const ids = [ctx.eventId("A", 0), ctx.eventId("A", 1), ctx.eventId("A", 2)] as const;
      const posted: Posted[] = [];
      const problems: string[] = [];
      posted.push(
        await ctx.post(eventCallback(assistantThreadStarted({ channel, threadTs, user: USER, team: deps.team.teamId }), ids[0], deps.team)),
      );
      const ts = questionTs();
      posted.push(await ask(ctx, deps, { channel, threadTs, ts: ts(), text: QUESTIONS.first, id: ids[1] }));
      // The second question while the first answer streams: it must wait its turn, and be asked with that answer.
      const streaming = await waitForThread(deps, channel, threadTs, (t) => replies(t).some((m) => m.streaming));
      if (!streaming) problems.push(`the first answer did not start streaming within ${deps.timeoutMs / 1000} s`);
      posted.push(await ask(ctx, deps, { channel, threadTs, ts: ts(), text: QUESTIONS.second, id: ids[2] }));
      ctx.say("1 assistant_thread_started, 2 questions in its thread (the 2nd while the 1st answer streams)", posted);

      const done = await waitForThread(deps, channel, threadTs, (t) => replies(t).length >= 2 && replies(t).every((m) => !m.streaming));
      const { thread, overlaps } = done ?? (await fetchStandinThread(deps.standinUrl, channel, threadTs));
      const calls = (await fetchStandinCalls(deps.standinUrl, before)).calls;
      const answers = [expectedAnswer(QUESTIONS.first), ""];
      answers[1] = expectedAnswer(QUESTIONS.second, [QUESTIONS.first, answers[0] as string]);
      const [first, second] = replies(thread);
      problems.push(...promptProblems(thread), ...overlapProblems(overlaps));
      problems.push(...messageProblems(replies(thread), answers, "one per question"));
      if (first && second) {
        const stopped = calls.find((c) => c.method === "chat.stopStream" && c.params.ts === first.ts && ok(c));
        const started = calls.find((c) => c.method === "chat.startStream" && tsOf(c) === second.ts);
        if (micros(second.ts) <= micros(first.ts) || (stopped && started && started.seq < stopped.seq))
          problems.push(
            `the 2nd answer (${second.ts}) began before the 1st (${first.ts}) was finished: one turn at a time per thread, in order`,
          );
      }
      const intended: IntendedCall[] = [
        {
          label: `suggested prompts in thread ${threadTs}`,
          count: 1,
          matches: (c) => c.method === "assistant.threads.setSuggestedPrompts" && inThread(c, channel, threadTs),
        },
        {
          label: `the status line set in thread ${threadTs} while the model thinks, once per question`,
          count: 2,
          timed: false,
          matches: (c) => c.method === "assistant.threads.setStatus" && inThread(c, channel, threadTs) && c.params.status !== "",
        },
        ...answerCalls({ channel, threadTs, message: first, question: QUESTIONS.first, history: [], n: 1 }),
        ...answerCalls({
          channel,
          threadTs,
          message: second,
          question: QUESTIONS.second,
          history: [QUESTIONS.first, answers[0] as string],
          n: 2,
        }),
      ];
      return { posted, problems: [...problems, ...ctx.statusProblems(posted)], ids: [...ids], intended };
    },
  };
}

function stopScenario(deps: AssistantDeps): DemoScenario {
  return {
    name: "assistant stop",
    needs: [needs.assistantAnswer],
    note: "stop pressed mid-answer → agent_session_stopped → the answer ends where it stood, done",
    async send(ctx) {
      const before = await seqNow(deps.standinUrl);
      const channel = dmOf(ctx);
      const { thread_ts: threadTs } = await openStandinAssistantThread(deps.standinUrl, channel, USER);
      const ids = [ctx.eventId("P", 0), ctx.eventId("P", 1)] as const;
      const problems: string[] = [];
      const posted = [await ask(ctx, deps, { channel, threadTs, ts: questionTs()(), text: QUESTIONS.stopped, id: ids[0] })];
      // Stopped once some of it stands: the stream started and took an append.
      const midway = await waitForThread(deps, channel, threadTs, (t) => replies(t).some((m) => m.streaming && m.counts.appended > 0));
      const message = midway ? replies(midway.thread)[0] : undefined;
      if (!message) problems.push(`the answer did not stream within ${deps.timeoutMs / 1000} s: nothing to stop`);
      else {
        const event = await stopStandinStream(deps.standinUrl, channel, message.ts);
        if (!event.streaming_message_ts.includes(message.ts))
          problems.push(`the answer ${message.ts} had ended before the stop: the machine was too slow to stop it mid-stream`);
        posted.push(await ctx.post(eventCallback({ ...event }, ids[1], deps.team)));
      }
      ctx.say("1 question, then the stop button while its answer streams (agent_session_stopped)", posted);

      // Settled: the model's call has ended (aborted with the attempt, or whole), and the row is finished.
      const ended = await waitFor(deps.timeoutMs, async () => {
        const calls = (await fetchStandinCalls(deps.standinUrl, before)).calls;
        return calls.some((c) => modelAsked(c, QUESTIONS.stopped)) ? true : undefined;
      });
      if (!ended) problems.push(`the model's call for the stopped answer did not end within ${deps.timeoutMs / 1000} s`);
      if (deps.adminToken) {
        const token = deps.adminToken;
        const rows = await waitFor(deps.timeoutMs, async () => {
          const found = await rowsOf(deps.url, token, ids[0]);
          return found?.every((r) => r.status === "done" || r.status === "dead") ? found : undefined;
        });
        const statuses = (rows ?? (await rowsOf(deps.url, token, ids[0])) ?? []).map((r) => r.status);
        if (JSON.stringify(statuses) !== JSON.stringify(["done"]))
          problems.push(`the stopped answer's row is ${JSON.stringify(statuses)}, want ["done"] (not dead, not retried)`);
      }
      const { thread, overlaps } = await fetchStandinThread(deps.standinUrl, channel, threadTs);
      const whole = expectedAnswer(QUESTIONS.stopped);
      const answer = replies(thread);
      if (answer.length !== 1) problems.push(`${answer.length} answer messages in the thread, want 1`);
      const [m] = answer;
      if (m) {
        if (m.streaming || m.leftStreaming || m.ended !== "stopped_by_user")
          problems.push(`the stopped answer ${m.ts} is ${describe(m)}, want ended by the user's stop`);
        if (m.counts.updated > 0 || m.repaired) problems.push(`the stopped answer ${m.ts} was updated: it must end where it stood`);
        if (m.text === "" || m.text.length >= whole.length || !whole.startsWith(m.text))
          problems.push(`the stopped answer's text is not the start of the model's answer: ${JSON.stringify(m.text.slice(0, 80))}`);
      }
      problems.push(...overlapProblems(overlaps));
      const ts = m?.ts;
      const intended: IntendedCall[] = [
        {
          label: `the status line set in thread ${threadTs} while the model thinks`,
          count: 1,
          timed: false,
          matches: (c) => c.method === "assistant.threads.setStatus" && inThread(c, channel, threadTs) && c.params.status !== "",
        },
        {
          label: `the status line cleared when the answer stopped (the stop moves the session out of its work)`,
          count: 1,
          timed: false,
          matches: (c) => c.method === "assistant.threads.setStatus" && inThread(c, channel, threadTs) && c.params.status === "",
        },
        {
          label: `the model asked ${JSON.stringify(QUESTIONS.stopped)} once (its call ended by the stop, or whole)`,
          count: 1,
          timed: false,
          matches: (c) => modelAsked(c, QUESTIONS.stopped) && c.model?.authorized === true,
        },
        {
          label: "the stopped answer: one chat.startStream",
          count: 1,
          timed: false,
          matches: (c) => c.method === "chat.startStream" && inThread(c, channel, threadTs) && ts !== undefined && tsOf(c) === ts,
        },
        {
          label: "the stopped answer's appends (the last may be refused: the stream was stopped)",
          count: 0,
          upTo: APPENDS_AT_MOST,
          matches: (c) => c.method === "chat.appendStream" && c.params.channel === channel && ts !== undefined && c.params.ts === ts,
        },
        {
          label: "the stopped answer's own chat.stopStream, if any (Slack answers that the stream is over)",
          count: 0,
          upTo: 1,
          matches: (c) => c.method === "chat.stopStream" && c.params.channel === channel && ts !== undefined && c.params.ts === ts,
        },
        {
          label: "no chat.update of the stopped answer: it ends where it stood",
          count: 0,
          matches: (c) => c.method === "chat.update" && c.params.channel === channel,
        },
      ];
      return { posted, problems: [...problems, ...ctx.statusProblems(posted)], ids: [...ids], intended };
    },
  };
}

export interface KillDeps extends AssistantDeps {
  /** The stand-in model's key (npm start's run folder: model-api-key), for the run of its own to ask the same model. */
  readonly modelKey: string;
  /** The signing secret of the run of its own (the demo's). */
  readonly secret: string;
  /** The app module it runs (default: as npm start chooses it, ACKBOX_APP or app/index.ts). */
  readonly app?: string;
  readonly progress?: (line: string) => void;
}

/**
 * `npm run demo -- --kill`: npm start cannot be killed and restarted from another terminal, so the demo starts a
 * run of its own (cli/local/pipeline.ts, what npm start runs: the same app, a fresh state folder, a free port), its
 * Slack and model npm start's stand-in — so its calls are checked exactly with everything else — and a 10 s lease
 * (the production lease is 5 minutes: a crashed answer is taken up again when its lease has run out).
 */
export function killScenario(deps: KillDeps): DemoScenario {
  return {
    name: "assistant killed",
    needs: [needs.assistantAnswer],
    note: "a run SIGKILLed mid-answer, started again → the same message finished: 1 message, complete",
    async send(ctx) {
      const { startPipeline } = await import("./pipeline.ts"); // wrangler's modules: only for this step
      const say = deps.progress ?? (() => {});
      const work = mkdtempSync(join(tmpdir(), "ackbox-demo-kill-"));
      const channel = dmOf(ctx);
      const id = ctx.eventId("K", 0);
      const problems: string[] = [];
      const posted: Posted[] = [];
      const start = () =>
        startPipeline({
          ...(deps.app ? { app: deps.app } : {}),
          port: 0,
          dir: join(work, "run"),
          persistTo: join(work, "state"),
          cronIntervalMs: 1000,
          env: {
            ...process.env,
            SLACK_SIGNING_SECRET: deps.secret,
            SLACK_API_URL: `${deps.standinUrl}/api/`,
            SLACK_BOT_TOKEN: LOCAL_BOT_TOKEN,
            SLACK_CLIENT_ID: "",
            MODEL_URL: standinModelUrl(`${deps.standinUrl}/api/`),
            MODEL_API_KEY: deps.modelKey,
            MODEL_NAME: LOCAL_MODEL_NAME,
            SHARD_COUNT: "1",
            // A crashed attempt's row is claimed again once its lease has run out: 10 s, not production's 5 minutes.
            LEASE_SECONDS: "10",
            EFFECT_TIMEOUT_SECONDS: "5",
          },
        });
      let run: Awaited<ReturnType<typeof startPipeline>> | undefined;
      let message: FakeMessage | undefined;
      const before = await seqNow(deps.standinUrl);
      let threadTs = "";
      try {
        say("assistant killed: starting a run of its own (fresh local D1, the stand-in of npm start)…");
        run = await start();
        threadTs = (await openStandinAssistantThread(deps.standinUrl, channel, USER)).thread_ts;
        const question = assistantQuestion({ channel, threadTs, ts: questionTs()(), text: QUESTIONS.killed, team: deps.team.teamId });
        await tellStandinMessage(deps.standinUrl, channel, question);
        posted.push(await postSigned(run.url, deps.secret, eventCallback(question, id, deps.team)));
        const midway = await waitForThread(deps, channel, threadTs, (t) => replies(t).some((m) => m.streaming && m.counts.appended > 0));
        message = midway ? replies(midway.thread)[0] : undefined;
        if (!message) problems.push(`the answer did not stream within ${deps.timeoutMs / 1000} s: nothing to kill`);
        else {
          await run.kill();
          say(`assistant killed: SIGKILL to every process of that run while ${message.ts} streamed; starting it again…`);
          run = await start();
          const finished = await waitForThread(
            deps,
            channel,
            threadTs,
            (t) => replies(t).length > 0 && replies(t).every((m) => !m.streaming),
            60_000,
          );
          if (!finished) problems.push("the killed answer was not finished within 60 s of the restart");
          else {
            say(`assistant killed: the answer was finished after the restart (${describe(replies(finished.thread)[0])})`);
            // The message stops streaming at the attempt's chat.stopStream; its chat.update, its turn's last write and
            // the status line's clearing come after, and the row is done once they are made. Stopping the run before
            // that would cut them off and count the calls of an answer that was not over.
            const { url } = run;
            const token = run.settings.values.ADMIN_TOKEN;
            if (!token) problems.push("the run of its own has no ADMIN_TOKEN: the killed answer's row could not be read");
            else {
              const rows = await waitFor(deps.timeoutMs, async () => {
                const found = await rowsOf(url, token, id);
                return found?.every((r) => r.status === "done" || r.status === "dead") ? found : undefined;
              });
              const statuses = (rows ?? (await rowsOf(url, token, id)) ?? []).map((r) => r.status);
              if (JSON.stringify(statuses) !== JSON.stringify(["done"]))
                problems.push(`the killed answer's row is ${JSON.stringify(statuses)} after the restart, want ["done"]`);
            }
          }
        }
      } catch (error) {
        problems.push(`the run of its own: ${error instanceof Error ? error.message : String(error)}`);
      } finally {
        await run?.stop().catch(() => {});
        rmSync(work, { recursive: true, force: true });
      }
      ctx.say("1 question to a run of its own, SIGKILLed while the answer streamed, then started again", posted);

      const calls = (await fetchStandinCalls(deps.standinUrl, before)).calls;
      const asked = calls.filter((c) => modelAsked(c, QUESTIONS.killed)).map((c) => c.model?.outcome ?? "?");
      if (message && asked[0] !== "aborted")
        problems.push(
          `the model's first call ended ${asked[0] ?? "nowhere"}, not cut by the kill: the kill came after the answer was whole`,
        );
      if (threadTs !== "") {
        const { thread, overlaps } = await fetchStandinThread(deps.standinUrl, channel, threadTs);
        problems.push(...messageProblems(replies(thread), [expectedAnswer(QUESTIONS.killed)], "the same message finished"));
        problems.push(...overlapProblems(overlaps));
      }
      const ts = message?.ts;
      const here = (c: StandinCall) => c.params.channel === channel && ts !== undefined && c.params.ts === ts;
      const intended: IntendedCall[] = [
        {
          label: "the status line set by each attempt (the killed one, and the one after the restart)",
          count: 2,
          timed: false,
          matches: (c) => c.method === "assistant.threads.setStatus" && inThread(c, channel, threadTs) && c.params.status !== "",
        },
        {
          label: "the status line cleared at the end (the message was there before it was set again)",
          count: 1,
          timed: false,
          matches: (c) => c.method === "assistant.threads.setStatus" && inThread(c, channel, threadTs) && c.params.status === "",
        },
        {
          label: `the model asked twice: cut by the kill, and again (no answer of it was recorded)`,
          count: 2,
          timed: false,
          matches: (c) => modelAsked(c, QUESTIONS.killed) && c.model?.authorized === true,
        },
        {
          label: "one chat.startStream: the restart finishes the same message",
          count: 1,
          timed: false,
          matches: (c) => c.method === "chat.startStream" && inThread(c, channel, threadTs) && ts !== undefined && tsOf(c) === ts,
        },
        {
          label: "its appends before the kill",
          count: 0,
          upTo: APPENDS_AT_MOST,
          matches: (c) => c.method === "chat.appendStream" && here(c),
        },
        {
          label: "its stream stopped after the restart",
          count: 1,
          timed: false,
          matches: (c) => c.method === "chat.stopStream" && here(c) && ok(c),
        },
        { label: "then made whole by chat.update", count: 1, timed: false, matches: (c) => c.method === "chat.update" && here(c) && ok(c) },
      ];
      return { posted, problems: [...problems, ...ctx.statusProblems(posted)], ids: [id], intended };
    },
  };
}

/** The calls of one complete answer (`n`: 1st, 2nd, …) to `question`, in the message the thread shows for it. */
function answerCalls(a: {
  channel: string;
  threadTs: string;
  message: FakeMessage | undefined;
  question: string;
  history: readonly string[];
  n: number;
}): IntendedCall[] {
  const ts = a.message?.ts;
  const here = (c: StandinCall) => c.params.channel === a.channel && ts !== undefined && c.params.ts === ts && ok(c);
  return [
    {
      label: `answer ${a.n}: the model asked ${JSON.stringify(a.question)} once${a.history.length > 0 ? ", with the thread's earlier question and answer" : ""}`,
      count: 1,
      timed: false,
      matches: (c) =>
        modelAsked(c, a.question) &&
        c.model?.authorized === true &&
        c.model.outcome === "stop" &&
        c.idempotencyKey !== undefined &&
        JSON.stringify(historyOf(c)) === JSON.stringify(a.history),
    },
    {
      label: `answer ${a.n}: one chat.startStream in thread ${a.threadTs}`,
      count: 1,
      timed: false,
      matches: (c) => c.method === "chat.startStream" && inThread(c, a.channel, a.threadTs) && ts !== undefined && tsOf(c) === ts,
    },
    { label: `answer ${a.n}: its appends`, count: 0, upTo: APPENDS_AT_MOST, matches: (c) => c.method === "chat.appendStream" && here(c) },
    { label: `answer ${a.n}: one chat.stopStream`, count: 1, timed: false, matches: (c) => c.method === "chat.stopStream" && here(c) },
  ];
}

/** Each message answers its question once, complete, no longer streaming: `want` its texts, in order. */
function messageProblems(messages: readonly FakeMessage[], want: readonly string[], what: string): string[] {
  const problems: string[] = [];
  if (messages.length !== want.length) problems.push(`${messages.length} answer message(s) in the thread, want ${want.length} (${what})`);
  for (const [i, m] of messages.entries()) {
    if (m.streaming || m.leftStreaming || m.ended === undefined || m.ended === "stopped_by_user" || m.ended === "expired")
      problems.push(`answer ${i + 1} (${m.ts}) is ${describe(m)}, want stopped by the app, complete`);
    const text = want[i];
    if (text !== undefined && m.text !== text)
      problems.push(
        `answer ${i + 1} (${m.ts}) reads ${JSON.stringify(m.text.slice(0, 60))}… (${m.text.length} chars), want the model's ${JSON.stringify(text.slice(0, 60))}… (${text.length} chars)`,
      );
  }
  return problems;
}

function promptProblems(thread: FakeThread): string[] {
  const prompts = thread.suggestedPrompts?.prompts ?? [];
  return prompts.length >= 1 && prompts.length <= 4 ? [] : [`the thread has ${prompts.length} suggested prompts, want 1 to 4`];
}

function overlapProblems(overlaps: readonly Overlap[]): string[] {
  return overlaps.map((o) => `calls to one stream overlapped: ${o.second} began while ${o.first} was in flight (${o.key})`);
}

function describe(m: FakeMessage | undefined): string {
  if (!m) return "missing";
  return `${m.streaming ? "still streaming" : `ended by ${m.ended ?? "nothing (posted)"}`}${m.leftStreaming ? ", left streaming" : ""}, ${m.counts.started} start, ${m.counts.appended} appends, ${m.counts.stopped} stop, ${m.counts.updated} update`;
}

/** The app's replies in the thread (its root, the assistant thread Slack opened, left out), oldest first. */
function replies(thread: FakeThread): FakeMessage[] {
  return thread.messages.filter((m) => m.from === "app" && m.thread_ts !== undefined);
}

/** Signs and sends one question, telling the stand-in first (Slack has the message before it sends the event). */
async function ask(
  ctx: ScenarioContext,
  deps: AssistantDeps,
  q: { channel: string; threadTs: string; ts: string; text: string; id: string },
): Promise<Posted> {
  const question = assistantQuestion({ channel: q.channel, threadTs: q.threadTs, ts: q.ts, text: q.text, team: deps.team.teamId });
  await tellStandinMessage(deps.standinUrl, q.channel, question);
  return ctx.post(eventCallback(question, q.id, deps.team));
}

/** The user's DM with the app, one per demo run (a thread per scenario in it). */
const dmOf = (ctx: ScenarioContext) => `D0AST${ctx.run}`;

/** Fresh question ts, a second behind the clock (see the module's comment), in order. */
function questionTs(): () => string {
  let n = 0;
  return () => `${Math.floor(Date.now() / 1000) - 1}.9${String(++n).padStart(5, "0")}`;
}

/** A Slack ts as a number of microseconds, exactly. */
const micros = (ts: string): bigint => {
  const [seconds = "0", fraction = ""] = ts.split(".");
  return BigInt(seconds) * 1_000_000n + BigInt(fraction.padEnd(6, "0").slice(0, 6) || "0");
};
const ok = (c: StandinCall) => (c.answer.body as { ok?: boolean } | undefined)?.ok === true;
const tsOf = (c: StandinCall) => (c.answer.body as { ts?: unknown } | undefined)?.ts;
const inThread = (c: StandinCall, channel: string, threadTs: string) =>
  (c.params.channel ?? c.params.channel_id) === channel && c.params.thread_ts === threadTs;

type Message = { role?: unknown; content?: unknown };
const messagesOf = (c: StandinCall): Message[] => {
  const messages = (c.json as { messages?: unknown } | undefined)?.messages;
  return Array.isArray(messages) ? (messages as Message[]) : [];
};
/** A model call whose question (its last message, the user's) is `question`. */
const modelAsked = (c: StandinCall, question: string) =>
  c.method === "model.chat.completions" && messagesOf(c).at(-1)?.content === question && messagesOf(c).at(-1)?.role === "user";
/** The thread's earlier questions and answers a model call was asked with. */
const historyOf = (c: StandinCall) =>
  messagesOf(c)
    .slice(0, -1)
    .filter((m) => m.role === "user" || m.role === "assistant")
    .map((m) => m.content);

/** The stand-in's call count now: what a scenario reads its own calls after. */
async function seqNow(standinUrl: string): Promise<number> {
  return (await fetchStandinCalls(standinUrl, Number.MAX_SAFE_INTEGER)).total;
}

/** The thread once `done` holds (polled), or undefined after `timeoutMs` (default the demo's). */
async function waitForThread(
  deps: AssistantDeps,
  channel: string,
  threadTs: string,
  done: (thread: FakeThread) => boolean,
  timeoutMs = deps.timeoutMs,
): Promise<{ thread: FakeThread; overlaps: readonly Overlap[] } | undefined> {
  return waitFor(timeoutMs, async () => {
    const read = await fetchStandinThread(deps.standinUrl, channel, threadTs);
    return done(read.thread) ? read : undefined;
  });
}

async function waitFor<T>(timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await probe();
    if (found !== undefined || Date.now() > deadline) return found;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The rows of an event at the run at `url` (its operator API), or undefined when it does not answer. */
async function rowsOf(url: string, adminToken: string, eventId: string): Promise<{ status: string }[] | undefined> {
  const response = await fetch(`${url}/admin/events/${encodeURIComponent(eventId)}`, {
    headers: { authorization: `Bearer ${adminToken}` },
    signal: AbortSignal.timeout(5000),
  }).catch(() => undefined);
  if (response?.status !== 200) {
    await response?.body?.cancel();
    return undefined;
  }
  return ((await response.json()) as { rows?: { status: string }[] }).rows;
}
