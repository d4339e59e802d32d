/**
 * The demo: realistic, correctly signed Slack traffic against a local run,
 * then a check of what came out the other end (the stand-in's record).
 *
 * Each scenario says what the pipeline must do with it, and the demo checks
 * exactly that: an effect per mention and per watched-channel message, none
 * for a bot's message, one for N concurrent deliveries of one event_id, none
 * new for Slack's retry of a delivered event, a response_url post for the
 * slash command (after its immediate ephemeral reply), a chat.update for the
 * button click, and a 401 for a forged request. Then the example app
 * (app/example.ts): /ask's chain (placeholder, answer service with an
 * Idempotency-Key, chat.update of the placeholder), the Home tab published,
 * and a menu's options answered inline with nothing written.
 */

import {
  appHomeOpened,
  appMention,
  asSlackRetry,
  blockSuggestion,
  botMessage,
  buttonClick,
  channelMessage,
  eventCallback,
  type Posted,
  postSigned,
  type SlackRequest,
  slashCommand,
} from "./slack-payloads.ts";
import { fetchStandinCalls, type StandinCall } from "./slack-standin.ts";

export interface DemoOptions {
  /** The ingress, e.g. http://127.0.0.1:8787. */
  readonly url: string;
  readonly secret: string;
  /** The stand-in (http://127.0.0.1:<port>); without one, effects cannot be checked. */
  readonly standinUrl?: string;
  /** The channel the events happen in (must be watched if WATCHED_CHANNELS is set). */
  readonly channel?: string;
  readonly mentions?: number;
  readonly messages?: number;
  /** Concurrent deliveries of one event_id. */
  readonly duplicates?: number;
  /** How long to wait for the effects (default 30 s). */
  readonly timeoutMs?: number;
  readonly progress?: (line: string) => void;
}

/** One expectation about the stand-in's record. */
interface Expectation {
  readonly label: string;
  readonly matches: (call: StandinCall) => boolean;
  /** Exactly this many matching calls (0: must never happen). */
  readonly count: number;
}

export interface ScenarioResult {
  readonly name: string;
  readonly sent: number;
  readonly acked: number;
  /** Statuses other than 200, or the wrong immediate reply. */
  readonly problems: readonly string[];
  readonly expectedEffects: number;
  readonly receivedEffects: number | null;
  readonly note: string;
  readonly ok: boolean;
}

export interface DemoResult {
  readonly ok: boolean;
  readonly url: string;
  readonly standinUrl: string | null;
  readonly elapsedMs: number;
  readonly sent: number;
  readonly acked: number;
  readonly rejected: number;
  /** Deliveries that were answered 200 and, as they should, produced no second effect. */
  readonly deduplicated: number | null;
  /** Deliveries answered 200 that the app ignored and that produced no effect. */
  readonly ignored: number | null;
  readonly effects: { readonly expected: number; readonly received: number | null; readonly byMethod: Readonly<Record<string, number>> };
  /** Median and slowest time from a scenario's last ack to its effects arriving at the stand-in. */
  readonly effectLatencyMs: { readonly p50: number; readonly max: number } | null;
  readonly scenarios: readonly ScenarioResult[];
}

const LIMIT = 200;

export async function runDemo(options: DemoOptions): Promise<DemoResult> {
  const started = performance.now();
  const progress = options.progress ?? (() => {});
  const mentions = bounded("mentions", options.mentions ?? 3);
  const messages = bounded("messages", options.messages ?? 3);
  const duplicates = bounded("duplicates", options.duplicates ?? 5, 2);
  const channel = options.channel ?? "C0DEMO";
  const standinUrl = options.standinUrl;

  // Ids unique to this run, so the checks count only what this run caused.
  const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1296).toString(36)}`.toUpperCase();
  const second = Math.floor(Date.now() / 1000);
  const salt = Math.floor(Math.random() * 900) + 100;
  let n = 0;
  const nextTs = () => `${second}.${salt}${String(++n).padStart(3, "0")}`;
  const eventId = (kind: string, i: number) => `Ev0DEMO${run}${kind}${i}`;
  const responseBase = standinUrl ?? "https://hooks.slack.com";
  const since = standinUrl ? (await fetchStandinCalls(standinUrl, Number.MAX_SAFE_INTEGER)).total : 0;

  const post = (request: SlackRequest) => postSigned(options.url, options.secret, request);
  const scenarios: Array<{ name: string; posted: Posted[]; problems: string[]; expect: Expectation[]; note: string; ackedAt?: number }> =
    [];
  const statusProblems = (posted: Posted[], want = 200) =>
    posted.filter((p) => p.status !== want).map((p) => `answered ${p.status} (want ${want}): ${p.body.slice(0, 120)}`);
  const say = (name: string, posted: Posted[]) => {
    const statuses = countBy(posted.map((p) => String(p.status)));
    const avg = posted.reduce((sum, p) => sum + p.ms, 0) / Math.max(1, posted.length);
    progress(
      `sent ${name}: ${Object.entries(statuses)
        .map(([status, count]) => `${count}×${status}`)
        .join(", ")} (${avg.toFixed(0)} ms avg)`,
    );
  };

  // 1. App mentions: each answered in its thread.
  {
    const tss = Array.from({ length: mentions }, nextTs);
    const posted = await Promise.all(tss.map((ts, i) => post(eventCallback(appMention({ channel, ts }), eventId("M", i)))));
    say(`${mentions} app mention(s)`, posted);
    if (posted.length > 0 && posted.every((p) => p.status === 401)) {
      throw new Error(
        "the ingress refused the demo's signatures (401): run the demo with the same SLACK_SIGNING_SECRET as npm start (environment or root .dev.vars)",
      );
    }
    scenarios.push({
      ackedAt: Date.now(),
      name: "app mentions",
      posted,
      problems: statusProblems(posted),
      expect: tss.map((ts) => ({
        label: `reply in thread ${ts}`,
        count: 1,
        matches: (c) => c.method === "chat.postMessage" && c.params.thread_ts === ts,
      })),
      note: "each → chat.postMessage in its thread",
    });
  }

  // 2. Messages in a watched channel: each gets :eyes:.
  {
    const tss = Array.from({ length: messages }, nextTs);
    const posted = await Promise.all(tss.map((ts, i) => post(eventCallback(channelMessage({ channel, ts }), eventId("C", i)))));
    say(`${messages} channel message(s)`, posted);
    scenarios.push({
      ackedAt: Date.now(),
      name: "channel messages",
      posted,
      problems: statusProblems(posted),
      expect: tss.map((ts) => ({
        label: `:eyes: on ${ts}`,
        count: 1,
        matches: (c) => c.method === "reactions.add" && c.params.timestamp === ts,
      })),
      note: "each → reactions.add :eyes:",
    });
  }

  // 3. A bot's message: 200, nothing written, no effect.
  {
    const ts = nextTs();
    const posted = [await post(eventCallback(botMessage({ channel, ts }), eventId("B", 0)))];
    say("1 bot message", posted);
    scenarios.push({
      ackedAt: Date.now(),
      name: "bot message",
      posted,
      problems: statusProblems(posted),
      expect: [{ label: `nothing for the bot's ${ts}`, count: 0, matches: (c) => c.params.timestamp === ts || c.params.thread_ts === ts }],
      note: "ignored: acked, nothing written, no effect",
    });
  }

  // 4. N concurrent deliveries of one event_id: one receipt, one effect.
  {
    const ts = nextTs();
    const request = eventCallback(appMention({ channel, ts, text: "<@U0ACKBOXBOT> delivered many times at once" }), eventId("D", 0));
    const posted = await Promise.all(Array.from({ length: duplicates }, () => post(request)));
    say(`${duplicates} concurrent deliveries of one event_id`, posted);
    scenarios.push({
      ackedAt: Date.now(),
      name: "concurrent duplicates",
      posted,
      problems: statusProblems(posted),
      expect: [
        {
          label: `exactly one reply in thread ${ts}`,
          count: 1,
          matches: (c) => c.method === "chat.postMessage" && c.params.thread_ts === ts,
        },
      ],
      note: `${duplicates} deliveries → 1 effect`,
    });
  }

  // 5. Slack's retry of an event already acked: acked again, nothing new.
  {
    const ts = nextTs();
    const request = eventCallback(appMention({ channel, ts, text: "<@U0ACKBOXBOT> Slack will retry this one" }), eventId("R", 0));
    const first = await post(request);
    const retry = await post(asSlackRetry(request, 1, "http_timeout"));
    const posted = [first, retry];
    say("1 event + Slack's retry #1 (http_timeout)", posted);
    scenarios.push({
      ackedAt: Date.now(),
      name: "Slack retry",
      posted,
      problems: statusProblems(posted),
      expect: [
        {
          label: `exactly one reply in thread ${ts}`,
          count: 1,
          matches: (c) => c.method === "chat.postMessage" && c.params.thread_ts === ts,
        },
      ],
      note: "X-Slack-Retry-Num: 1 → deduplicated by event_id",
    });
  }

  // 6. A slash command: an immediate ephemeral reply, then a POST to its response_url.
  {
    const path = `commands/${"T0DEMO"}/${run}/1`;
    const responseUrl = `${responseBase}/${path}`;
    const posted = [await post(slashCommand({ channel, text: `demo ${run}`, responseUrl, triggerId: `${run}.1.trigger` }))];
    say("1 slash command /ackbox", posted);
    const problems = statusProblems(posted);
    const reply = parseJson(posted[0]?.body ?? "") as { response_type?: string; text?: string } | undefined;
    if (posted[0]?.status === 200 && reply?.response_type !== "ephemeral")
      problems.push(`immediate reply is not ephemeral: ${posted[0]?.body.slice(0, 120)}`);
    scenarios.push({
      ackedAt: Date.now(),
      name: "slash command",
      posted,
      problems,
      expect: [{ label: `response_url ${path}`, count: 1, matches: (c) => c.method === "response_url" && c.path === `/${path}` }],
      note: `immediate reply ${JSON.stringify(reply?.text ?? "")}, then → response_url`,
    });
  }

  // 7. A button click on a message: chat.update of that message.
  {
    const ts = nextTs();
    const posted = [
      await post(
        buttonClick({ channel, messageTs: ts, triggerId: `${run}.2.trigger`, responseUrl: `${responseBase}/actions/T0DEMO/${run}/2` }),
      ),
    ];
    say("1 button click (block_actions)", posted);
    scenarios.push({
      ackedAt: Date.now(),
      name: "button click",
      posted,
      problems: statusProblems(posted),
      expect: [{ label: `chat.update of ${ts}`, count: 1, matches: (c) => c.method === "chat.update" && c.params.ts === ts }],
      note: "→ chat.update of the clicked message",
    });
  }

  // 8. The example app's /ask: placeholder → answer service → the placeholder updated, one chain of follow-ups.
  {
    const question = `why ${run}?`;
    const posted = [
      await post(
        slashCommand({
          command: "/ask",
          channel,
          text: question,
          responseUrl: `${responseBase}/commands/T0DEMO/${run}/3`,
          triggerId: `${run}.3.trigger`,
        }),
      ),
    ];
    say("1 slash command /ask (the example app)", posted);
    scenarios.push({
      ackedAt: Date.now(),
      name: "example /ask chain",
      posted,
      problems: statusProblems(posted),
      expect: [
        {
          label: "placeholder posted (with blocks)",
          count: 1,
          matches: (c) =>
            c.method === "chat.postMessage" && c.params.text === `Thinking about: ${question}` && c.params.blocks !== undefined,
        },
        {
          label: "answer service asked with an Idempotency-Key",
          count: 1,
          matches: (c) =>
            c.method === "example.answer" && (c.json as { question?: string })?.question === question && c.idempotencyKey !== undefined,
        },
        {
          label: "placeholder updated with the answer",
          count: 1,
          matches: (c) => c.method === "chat.update" && c.params.text?.includes(JSON.stringify(question)) === true,
        },
      ],
      note: "→ chat.postMessage, answer service, chat.update",
    });
  }

  // 9. The example app's Home tab: views.publish for the user who opened it.
  {
    const user = `U0HOME${run}`;
    const posted = [await post(eventCallback(appHomeOpened({ user, channel: "D0DEMO" }), eventId("H", 0)))];
    say("1 app_home_opened (the example app)", posted);
    scenarios.push({
      ackedAt: Date.now(),
      name: "example home tab",
      posted,
      problems: statusProblems(posted),
      expect: [{ label: `views.publish for ${user}`, count: 1, matches: (c) => c.method === "views.publish" && c.params.user_id === user }],
      note: "→ views.publish",
    });
  }

  // 10. The example app's topic menu: its options in the ack body, nothing written, no effect.
  {
    const posted = [await post(blockSuggestion({ actionId: "ask_topic", value: "de", user: `U0MENU${run}` }))];
    say("1 block_suggestion (the example app's menu)", posted);
    const problems = statusProblems(posted);
    const answer = parseJson(posted[0]?.body ?? "") as { options?: { value?: string }[] } | undefined;
    if (posted[0]?.status === 200 && JSON.stringify(answer?.options?.map((o) => o.value)) !== JSON.stringify(["deploys"]))
      problems.push(`options answer is not ["deploys"]: ${posted[0]?.body.slice(0, 120)}`);
    scenarios.push({
      ackedAt: Date.now(),
      name: "example options",
      posted,
      problems,
      expect: [{ label: `nothing recorded for the menu`, count: 0, matches: (c) => c.params.user_id === `U0MENU${run}` }],
      note: "options answered inline, nothing written",
    });
  }

  // 11. A forged request: rejected before anything is read into the database.
  {
    const ts = nextTs();
    const posted = [
      await postSigned(options.url, `${options.secret}-but-wrong`, eventCallback(appMention({ channel, ts }), eventId("F", 0))),
    ];
    say("1 forged request (wrong signing secret)", posted);
    scenarios.push({
      ackedAt: Date.now(),
      name: "forged request",
      posted,
      problems: statusProblems(posted, 401),
      expect: [{ label: `nothing for the forged ${ts}`, count: 0, matches: (c) => c.params.thread_ts === ts }],
      note: "401, nothing written",
    });
  }

  const expectations = scenarios.flatMap((s) => s.expect);
  const expected = expectations.reduce((sum, e) => sum + e.count, 0);
  let calls: StandinCall[] = [];
  if (standinUrl) {
    // Wait for every expected effect, then a little longer: a second effect for a duplicate would show up then.
    const deadline = Date.now() + (options.timeoutMs ?? 30_000);
    let lastReport = -1;
    for (;;) {
      calls = (await fetchStandinCalls(standinUrl, since)).calls.slice();
      const got = expectations.filter((e) => e.count > 0 && calls.some(e.matches));
      const received = got.length;
      const wanted = expectations.filter((e) => e.count > 0).length;
      if (received !== lastReport) {
        progress(`effects received by the stand-in: ${received}/${wanted}`);
        lastReport = received;
      }
      if (received >= wanted || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    await new Promise((r) => setTimeout(r, 1500));
    calls = (await fetchStandinCalls(standinUrl, since)).calls.slice();
  } else {
    progress("no local Slack stand-in known (pass --standin, or run npm start without SLACK_BOT_TOKEN/SLACK_API_URL): effects not checked");
  }

  const results: ScenarioResult[] = scenarios.map((s) => {
    const acked = s.posted.filter((p) => p.status === 200).length;
    const expectedEffects = s.expect.reduce((sum, e) => sum + e.count, 0);
    const receivedEffects = standinUrl ? s.expect.reduce((sum, e) => sum + calls.filter(e.matches).length, 0) : null;
    const effectProblems = standinUrl
      ? s.expect.flatMap((e) => {
          const got = calls.filter(e.matches).length;
          return got === e.count ? [] : [`${e.label}: ${got} effect(s), want ${e.count}`];
        })
      : [];
    const problems = [...s.problems, ...effectProblems];
    return {
      name: s.name,
      sent: s.posted.length,
      acked,
      problems,
      expectedEffects,
      receivedEffects,
      note: s.note,
      ok: problems.length === 0,
    };
  });

  const byName = (name: string) => results.find((r) => r.name === name);
  const dedupe = [byName("concurrent duplicates"), byName("Slack retry")];
  // From a scenario's last ack to each of its effects arriving at the stand-in (same clock: one machine).
  const latencies = scenarios
    .flatMap((s) =>
      s.expect.flatMap((e) => {
        const first = e.count > 0 ? calls.find(e.matches) : undefined;
        return first && s.ackedAt !== undefined ? [Date.parse(first.at) - s.ackedAt] : [];
      }),
    )
    .sort((a, b) => a - b);
  const mine = standinUrl ? calls.filter((c) => expectations.some((e) => e.matches(c))) : [];
  return {
    ok: results.every((r) => r.ok),
    url: options.url,
    standinUrl: standinUrl ?? null,
    elapsedMs: Math.round(performance.now() - started),
    sent: results.reduce((sum, r) => sum + r.sent, 0),
    acked: results.reduce((sum, r) => sum + r.acked, 0),
    rejected: results.reduce((sum, r) => sum + (r.sent - r.acked), 0),
    deduplicated: standinUrl ? dedupe.reduce((sum, r) => sum + (r?.ok ? r.acked - (r.receivedEffects ?? 0) : 0), 0) : null,
    ignored: standinUrl ? (byName("bot message")?.ok ? (byName("bot message")?.acked ?? 0) : 0) : null,
    effects: { expected, received: standinUrl ? mine.length : null, byMethod: countBy(mine.map((c) => c.method)) },
    effectLatencyMs:
      latencies.length > 0
        ? { p50: Math.round(latencies[Math.floor((latencies.length - 1) / 2)] ?? 0), max: Math.round(latencies.at(-1) ?? 0) }
        : null,
    scenarios: results,
  };
}

/** The summary as a table for the terminal. */
export function formatDemoResult(result: DemoResult): string[] {
  const lines: string[] = [];
  const pad = (s: string | number, n: number) => String(s).padEnd(n);
  lines.push("");
  lines.push(`${pad("scenario", 24)}${pad("sent", 6)}${pad("acked", 7)}${pad("effects", 10)}what the pipeline must do`);
  for (const s of result.scenarios) {
    const effects = s.receivedEffects === null ? `? / ${s.expectedEffects}` : `${s.receivedEffects} / ${s.expectedEffects}`;
    lines.push(`${s.ok ? "✓" : "✗"} ${pad(s.name, 22)}${pad(s.sent, 6)}${pad(s.acked, 7)}${pad(effects, 10)}${s.note}`);
    for (const problem of s.problems) lines.push(`    ✗ ${problem}`);
  }
  lines.push("");
  const parts = [`sent ${result.sent}`, `acked ${result.acked}`, `rejected ${result.rejected}`];
  if (result.deduplicated !== null) parts.push(`deduplicated ${result.deduplicated}`);
  if (result.ignored !== null) parts.push(`ignored ${result.ignored}`);
  parts.push(
    result.effects.received === null
      ? "effects not checked (no stand-in)"
      : `effects received ${result.effects.received}/${result.effects.expected} (${Object.entries(result.effects.byMethod)
          .map(([m, c]) => `${c} ${m}`)
          .join(", ")})`,
  );
  lines.push(parts.join(" · "));
  if (result.effectLatencyMs) {
    lines.push(`ack → effect at the stand-in: ${result.effectLatencyMs.p50} ms median, ${result.effectLatencyMs.max} ms slowest`);
  }
  lines.push(result.ok ? "✓ every effect delivered as intended" : "✗ the pipeline did not do what it should: see above");
  return lines;
}

function bounded(name: string, value: number, min = 0): number {
  if (!Number.isInteger(value) || value < min || value > LIMIT)
    throw new Error(`--${name} must be a whole number from ${min} to ${LIMIT}, got ${value}`);
  return value;
}

function countBy(items: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) counts[item] = (counts[item] ?? 0) + 1;
  return counts;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
