/**
 * The demo: realistic, correctly signed Slack traffic against a local run,
 * then a check of what came out the other end (the stand-in's record).
 *
 * Each scenario says what it sends, what the ingress must answer, and which
 * calls it intends at the stand-in (`IntendedCall`s). The verdict is exact:
 * every call the stand-in received during the demo is matched to one
 * intended call (matchCalls, below); a call nobody intended, a second call
 * where one was intended, or an intended call that never came fails the demo
 * with a line that says which. A new app's traffic is one more entry in
 * `scenarios` with its own intended calls; the matcher does not change.
 *
 * The last scenario is a labelled failure: a mention in the channel the
 * stand-in answers `channel_not_found` for (MISSING_CHANNEL), parked dead,
 * so every command of docs/operating.md has a dead row to work on. The demo
 * prints the ids it sent, and the runbook's commands with them filled in.
 *
 * The example app (examples/ask/app.ts) has three scenarios of its own: /ask's
 * chain (placeholder, answer service with an Idempotency-Key, chat.update of
 * the placeholder), the Home tab published, and a menu's options answered
 * inline with nothing written.
 *
 * An app with an assistant gets two more (demo-assistant.ts): a conversation
 * and a stop, their answers checked to the character against the stand-in's
 * fake model; `--kill` runs instead the third, a run of the demo's own killed
 * mid-answer and restarted. An answer's appends are as many as the model's
 * timing makes them: an `upTo` intention takes them, uncounted, and the
 * scenario checks the message they built.
 */

import type { SlackApp } from "../../shared/app/app.ts";
import { needs, skipReason } from "./demo-apps.ts";
import { type AssistantDeps, assistantScenarios, killScenario } from "./demo-assistant.ts";
import { installScenario, isDistributed, requireTeamToken, rotationScenario, SECOND_TEAM, uninstallScenario } from "./demo-distributed.ts";
import { outageScenario } from "./demo-outage.ts";
import { stepScenarios } from "./demo-steps.ts";
import type { DemoScenario, IntendedCall, Need, ScenarioContext, ScenarioRun } from "./scenario.ts";
import {
  appHomeOpened,
  appMention,
  asSlackRetry,
  blockSuggestion,
  botMessage,
  buttonClick,
  channelMessage,
  DEMO_TEAM,
  eventCallback,
  postSigned,
  slashCommand,
} from "./slack-payloads.ts";
import { describeCall, fetchStandinCalls, MISSING_CHANNEL, STANDIN_TEAM, type StandinCall } from "./slack-standin.ts";

export type { DemoScenario, IntendedCall, ScenarioContext, ScenarioRun } from "./scenario.ts";

export interface DemoOptions {
  /** The ingress, e.g. http://127.0.0.1:8787. */
  readonly url: string;
  readonly secret: string;
  /** The stand-in (http://127.0.0.1:<port>); without one, effects cannot be checked. */
  readonly standinUrl?: string;
  /** The local run's ADMIN_TOKEN: with it the demo reads back the failure's dead row (its id, for the runbook). */
  readonly adminToken?: string;
  /** The channel the events happen in (must be watched if WATCHED_CHANNELS is set). */
  readonly channel?: string;
  readonly mentions?: number;
  readonly messages?: number;
  /** Concurrent deliveries of one event_id. */
  readonly duplicates?: number;
  /** How long to wait for the effects (default 30 s). */
  readonly timeoutMs?: number;
  readonly progress?: (line: string) => void;
  /** More scenarios after the built-in ones (an app's own traffic: app/demo.ts). */
  readonly extraScenarios?: readonly DemoScenario[];
  /**
   * The app the run serves (app/index.ts): a scenario whose `needs` it does
   * not answer is skipped, and the result says why. Without one, every
   * scenario is sent.
   */
  readonly app?: SlackApp;
  /** A distributed run: concurrent events for the team whose rotating token is due (default 6). */
  readonly rotationEvents?: number;
  /**
   * Whether the run's assistant asks the stand-in's fake model (npm start's default when MODEL_URL is unset; its
   * run.json says so): the assistant's scenarios check its answers to the character, so against a model of your
   * own they are skipped. Default true.
   */
  readonly standinModel?: boolean;
  /**
   * Instead of the scenarios above, the assistant killed mid-answer (demo-assistant.ts, killScenario): a run of the
   * demo's own, beside the running one, asking the stand-in's model with this key (npm start's run folder, model-api-key).
   */
  readonly kill?: { readonly modelKey: string | undefined; readonly app?: string };
}

export interface ScenarioResult {
  readonly name: string;
  readonly sent: number;
  readonly acked: number;
  /** Statuses other than 200, the wrong immediate reply, or effects other than intended. */
  readonly problems: readonly string[];
  readonly expectedEffects: number;
  readonly receivedEffects: number | null;
  readonly note: string;
  readonly ids: readonly string[];
  readonly ok: boolean;
}

export interface DemoResult {
  readonly ok: boolean;
  /** What the run is: a distributed run (SLACK_CLIENT_ID) adds the installs, a second team, a rotation and an uninstall. */
  readonly mode: "single-workspace" | "distributed";
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
  readonly effects: {
    readonly expected: number;
    readonly received: number | null;
    readonly byMethod: Readonly<Record<string, number>>;
    /** Calls the stand-in received that no scenario intended (each one fails the demo). */
    readonly unexpected: readonly string[];
  };
  /** Median and slowest time from the request that caused each effect being sent to the effect arriving at the stand-in. */
  readonly effectLatencyMs: { readonly p50: number; readonly max: number } | null;
  /** Scenarios not sent because the running app does not answer what they drive, and why. */
  readonly skipped: readonly { readonly name: string; readonly reason: string }[];
  /** The ids the runbook (docs/operating.md) works on, from this run. */
  readonly runbook: {
    readonly failedEvent: string;
    /** The failure's outbox row, once seen dead (needs the admin token); null when not read. */
    readonly failedRow: number | null;
    readonly doneEvent: string;
    readonly commandOperation: string;
    readonly interactionOperation: string;
  };
  readonly scenarios: readonly ScenarioResult[];
}

const LIMIT = 200;

/** The result of matching the stand-in's calls to the intended ones. */
export interface CallMatch {
  /** Calls assigned to each intended call, by index (more than `count` = extra; for an `upTo` one, more than `upTo`). */
  readonly got: readonly number[];
  /** One line per call nobody intended, or that hit a "must never happen". */
  readonly unexpected: readonly string[];
  /** The first call assigned to each counted intended call (for latency); none for an `upTo` one. */
  readonly first: readonly (StandinCall | undefined)[];
  /** Calls assigned to an `upTo` intention: intended, but not counted among the effects. */
  readonly uncounted: readonly StandinCall[];
}

/**
 * Every call to exactly one intended call: the first counted one with room
 * that matches, else the first `upTo` one with room; a call whose matches are
 * all full counts as an extra on the first (got > count, or > upTo); a call
 * that matches only a count-0 intention, or none, is unexpected. Pure: the
 * demo and its tests call it on a list of calls.
 */
export function matchCalls(intended: readonly IntendedCall[], calls: readonly StandinCall[]): CallMatch {
  const got = intended.map(() => 0);
  const first: (StandinCall | undefined)[] = intended.map(() => undefined);
  const unexpected: string[] = [];
  const uncounted: StandinCall[] = [];
  const room = (i: number) => (got[i] ?? 0) < (intended[i]?.count || intended[i]?.upTo || 0);
  for (const call of calls) {
    const counted = intended.flatMap((e, i) => (e.count > 0 && e.matches(call) ? [i] : []));
    const loose = intended.flatMap((e, i) => (e.count === 0 && (e.upTo ?? 0) > 0 && e.matches(call) ? [i] : []));
    const slot = counted.find(room) ?? loose.find(room) ?? counted[0] ?? loose[0];
    if (slot !== undefined) {
      got[slot] = (got[slot] ?? 0) + 1;
      if (intended[slot]?.count === 0) uncounted.push(call);
      else first[slot] ??= call;
      continue;
    }
    const forbidden = intended.find((e) => e.count === 0 && e.matches(call));
    unexpected.push(`${forbidden ? `${forbidden.label}, yet` : "nobody intended"}: #${call.seq} ${describeCall(call)}`);
  }
  return { got, unexpected, first, uncounted };
}

/** The built-in scenarios, in the order they are sent. */
export function builtinScenarios(counts: { mentions: number; messages: number; duplicates: number }): DemoScenario[] {
  return [
    {
      name: "app mentions",
      needs: [needs.mentionReply],
      note: "each → chat.postMessage in its thread",
      async send(ctx) {
        const tss = Array.from({ length: counts.mentions }, ctx.nextTs);
        const ids = tss.map((_, i) => ctx.eventId("M", i));
        const posted = await Promise.all(
          tss.map((ts, i) => ctx.post(eventCallback(appMention({ channel: ctx.channel, ts }), ids[i] ?? ""))),
        );
        ctx.say(`${counts.mentions} app mention(s)`, posted);
        if (posted.length > 0 && posted.every((p) => p.status === 401)) {
          throw new Error(
            "the ingress refused the demo's signatures (401): run the demo with the same SLACK_SIGNING_SECRET as npm start (environment or root .dev.vars)",
          );
        }
        return {
          posted,
          problems: ctx.statusProblems(posted),
          ids,
          intended: tss.map((ts) => ({
            label: `reply in thread ${ts}`,
            count: 1,
            matches: (c: StandinCall) => c.method === "chat.postMessage" && c.params.thread_ts === ts,
          })),
        };
      },
    },
    {
      name: "channel messages",
      needs: [needs.messageEyes],
      note: "each → reactions.add :eyes:",
      async send(ctx) {
        const tss = Array.from({ length: counts.messages }, ctx.nextTs);
        const ids = tss.map((_, i) => ctx.eventId("C", i));
        const posted = await Promise.all(
          tss.map((ts, i) => ctx.post(eventCallback(channelMessage({ channel: ctx.channel, ts }), ids[i] ?? ""))),
        );
        ctx.say(`${counts.messages} channel message(s)`, posted);
        return {
          posted,
          problems: ctx.statusProblems(posted),
          ids,
          intended: tss.map((ts) => ({
            label: `:eyes: on ${ts}`,
            count: 1,
            matches: (c: StandinCall) => c.method === "reactions.add" && c.params.timestamp === ts,
          })),
        };
      },
    },
    {
      name: "bot message",
      needs: [needs.botIgnored],
      note: "ignored: acked, nothing written, no effect",
      async send(ctx) {
        const ts = ctx.nextTs();
        const id = ctx.eventId("B", 0);
        const posted = [await ctx.post(eventCallback(botMessage({ channel: ctx.channel, ts }), id))];
        ctx.say("1 bot message", posted);
        return {
          posted,
          problems: ctx.statusProblems(posted),
          ids: [id],
          intended: [
            {
              label: `nothing for the bot's ${ts}`,
              count: 0,
              matches: (c: StandinCall) => c.params.timestamp === ts || c.params.thread_ts === ts || c.params.ts === ts,
            },
          ],
        };
      },
    },
    {
      name: "concurrent duplicates",
      needs: [needs.mentionReply],
      note: `${counts.duplicates} deliveries → 1 effect`,
      async send(ctx) {
        const ts = ctx.nextTs();
        const id = ctx.eventId("D", 0);
        const request = eventCallback(appMention({ channel: ctx.channel, ts, text: "<@U0ACKBOXBOT> delivered many times at once" }), id);
        const posted = await Promise.all(Array.from({ length: counts.duplicates }, () => ctx.post(request)));
        ctx.say(`${counts.duplicates} concurrent deliveries of one event_id`, posted);
        return {
          posted,
          problems: ctx.statusProblems(posted),
          ids: [id],
          intended: [
            {
              label: `exactly one reply in thread ${ts}`,
              count: 1,
              matches: (c: StandinCall) => c.method === "chat.postMessage" && c.params.thread_ts === ts,
            },
          ],
        };
      },
    },
    {
      name: "Slack retry",
      needs: [needs.mentionReply],
      note: "X-Slack-Retry-Num: 1 → deduplicated by event_id",
      async send(ctx) {
        const ts = ctx.nextTs();
        const id = ctx.eventId("R", 0);
        const request = eventCallback(appMention({ channel: ctx.channel, ts, text: "<@U0ACKBOXBOT> Slack will retry this one" }), id);
        const posted = [await ctx.post(request), await ctx.post(asSlackRetry(request, 1, "http_timeout"))];
        ctx.say("1 event + Slack's retry #1 (http_timeout)", posted);
        return {
          posted,
          problems: ctx.statusProblems(posted),
          ids: [id],
          intended: [
            {
              label: `exactly one reply in thread ${ts}`,
              count: 1,
              matches: (c: StandinCall) => c.method === "chat.postMessage" && c.params.thread_ts === ts,
            },
          ],
        };
      },
    },
    {
      name: "slash command",
      needs: [needs.commandResponseUrl],
      note: "→ response_url",
      async send(ctx) {
        const path = `commands/${DEMO_TEAM.teamId}/${ctx.run}/1`;
        const triggerId = `${ctx.run}.1.trigger`;
        const posted = [
          await ctx.post(
            slashCommand({ channel: ctx.channel, text: `demo ${ctx.run}`, responseUrl: `${ctx.responseBase}/${path}`, triggerId }),
          ),
        ];
        ctx.say("1 slash command /ackbox", posted);
        const problems = ctx.statusProblems(posted);
        const reply = parseJson(posted[0]?.body ?? "") as { response_type?: string; text?: string } | undefined;
        if (posted[0]?.status === 200 && reply?.response_type !== "ephemeral")
          problems.push(`immediate reply is not ephemeral: ${posted[0]?.body.slice(0, 120)}`);
        return {
          posted,
          problems,
          ids: [`command:${DEMO_TEAM.teamId}:${triggerId}`],
          intended: [
            { label: `response_url ${path}`, count: 1, matches: (c: StandinCall) => c.method === "response_url" && c.path === `/${path}` },
          ],
          note: `immediate reply ${JSON.stringify(reply?.text ?? "")}, then → response_url`,
        };
      },
    },
    {
      name: "button click",
      needs: [needs.buttonUpdate],
      note: "→ chat.update of the clicked message",
      async send(ctx) {
        const ts = ctx.nextTs();
        const triggerId = `${ctx.run}.2.trigger`;
        const posted = [
          await ctx.post(
            buttonClick({
              channel: ctx.channel,
              messageTs: ts,
              triggerId,
              responseUrl: `${ctx.responseBase}/actions/${DEMO_TEAM.teamId}/${ctx.run}/2`,
            }),
          ),
        ];
        ctx.say("1 button click (block_actions)", posted);
        return {
          posted,
          problems: ctx.statusProblems(posted),
          ids: [`interaction:${DEMO_TEAM.teamId}:${triggerId}`],
          intended: [
            { label: `chat.update of ${ts}`, count: 1, matches: (c: StandinCall) => c.method === "chat.update" && c.params.ts === ts },
          ],
        };
      },
    },
    {
      name: "example /ask chain",
      needs: [needs.askChain],
      note: "→ chat.postMessage, answer service, chat.update",
      async send(ctx) {
        // The example app (examples/ask/app.ts): placeholder → answer service → the placeholder updated, one chain of follow-ups.
        const question = `why ${ctx.run}?`;
        const triggerId = `${ctx.run}.3.trigger`;
        const posted = [
          await ctx.post(
            slashCommand({
              command: "/ask",
              channel: ctx.channel,
              text: question,
              responseUrl: `${ctx.responseBase}/commands/${DEMO_TEAM.teamId}/${ctx.run}/3`,
              triggerId,
            }),
          ),
        ];
        ctx.say("1 slash command /ask (the example app)", posted);
        return {
          posted,
          problems: ctx.statusProblems(posted),
          ids: [`command:${DEMO_TEAM.teamId}:${triggerId}`],
          intended: [
            {
              label: "placeholder posted (with blocks)",
              count: 1,
              matches: (c: StandinCall) =>
                c.method === "chat.postMessage" && c.params.text === `Thinking about: ${question}` && c.params.blocks !== undefined,
            },
            {
              label: "answer service asked with an Idempotency-Key",
              count: 1,
              matches: (c: StandinCall) =>
                c.method === "example.answer" && (c.json as { question?: string })?.question === question && c.idempotencyKey !== undefined,
            },
            {
              label: "placeholder updated with the answer",
              count: 1,
              matches: (c: StandinCall) => c.method === "chat.update" && c.params.text?.includes(JSON.stringify(question)) === true,
            },
          ],
        };
      },
    },
    {
      name: "example home tab",
      needs: [needs.homeTab],
      note: "→ views.publish",
      async send(ctx) {
        const user = `U0HOME${ctx.run}`;
        const id = ctx.eventId("H", 0);
        const posted = [await ctx.post(eventCallback(appHomeOpened({ user, channel: "D0DEMO" }), id))];
        ctx.say("1 app_home_opened (the example app)", posted);
        return {
          posted,
          problems: ctx.statusProblems(posted),
          ids: [id],
          intended: [
            {
              label: `views.publish for ${user}`,
              count: 1,
              matches: (c: StandinCall) => c.method === "views.publish" && c.params.user_id === user,
            },
          ],
        };
      },
    },
    {
      name: "example options",
      needs: [needs.topicOptions],
      note: "options answered inline, nothing written",
      async send(ctx) {
        const user = `U0MENU${ctx.run}`;
        const posted = [await ctx.post(blockSuggestion({ actionId: "ask_topic", value: "de", user }))];
        ctx.say("1 block_suggestion (the example app's menu)", posted);
        const problems = ctx.statusProblems(posted);
        const answer = parseJson(posted[0]?.body ?? "") as { options?: { value?: string }[] } | undefined;
        if (posted[0]?.status === 200 && JSON.stringify(answer?.options?.map((o) => o.value)) !== JSON.stringify(["deploys"]))
          problems.push(`options answer is not ["deploys"]: ${posted[0]?.body.slice(0, 120)}`);
        return {
          posted,
          problems,
          ids: [],
          intended: [{ label: "nothing recorded for the menu", count: 0, matches: (c: StandinCall) => c.params.user_id === user }],
        };
      },
    },
    {
      name: "forged request",
      note: "401, nothing written",
      async send(ctx) {
        const ts = ctx.nextTs();
        const id = ctx.eventId("X", 0);
        const posted = [await ctx.postWithSecret(`${ctx.secret}-but-wrong`, eventCallback(appMention({ channel: ctx.channel, ts }), id))];
        ctx.say("1 forged request (wrong signing secret)", posted);
        return {
          posted,
          problems: ctx.statusProblems(posted, 401),
          ids: [],
          intended: [{ label: `nothing for the forged ${ts}`, count: 0, matches: (c: StandinCall) => c.params.thread_ts === ts }],
        };
      },
    },
    {
      name: "labelled failure",
      needs: [needs.mentionReply],
      note: `mention in ${MISSING_CHANNEL} → channel_not_found → dead (for the runbook)`,
      failure: true,
      async send(ctx) {
        const ts = ctx.nextTs();
        const id = ctx.eventId("F", 0);
        const posted = [
          await ctx.post(
            eventCallback(appMention({ channel: MISSING_CHANNEL, ts, text: "<@U0ACKBOXBOT> in a channel the bot cannot reach" }), id),
          ),
        ];
        ctx.say(`1 app mention in ${MISSING_CHANNEL} (the stand-in answers channel_not_found: a dead row to practise on)`, posted);
        return {
          posted,
          problems: ctx.statusProblems(posted),
          ids: [id],
          intended: [
            {
              label: `one refused reply in ${MISSING_CHANNEL} thread ${ts} (channel_not_found, not retried)`,
              count: 1,
              matches: (c: StandinCall) =>
                c.method === "chat.postMessage" &&
                c.params.channel === MISSING_CHANNEL &&
                c.params.thread_ts === ts &&
                (c.answer.body as { error?: string } | undefined)?.error === "channel_not_found",
            },
          ],
        };
      },
    },
  ];
}

export async function runDemo(options: DemoOptions): Promise<DemoResult> {
  const started = performance.now();
  const progress = options.progress ?? (() => {});
  const mentions = bounded("mentions", options.mentions ?? 3);
  const messages = bounded("messages", options.messages ?? 3);
  const duplicates = bounded("duplicates", options.duplicates ?? 5, 2);
  const standinUrl = options.standinUrl;

  // Ids unique to this run, so a second demo is new traffic, not duplicates of the first.
  const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1296).toString(36)}`.toUpperCase();
  const second = Math.floor(Date.now() / 1000);
  const salt = Math.floor(Math.random() * 900) + 100;
  let n = 0;
  const since = standinUrl ? (await fetchStandinCalls(standinUrl, Number.MAX_SAFE_INTEGER)).total : 0;

  const ctx: ScenarioContext = {
    run,
    channel: options.channel ?? "C0DEMO",
    responseBase: standinUrl ?? "https://hooks.slack.com",
    secret: options.secret,
    post: (request) => postSigned(options.url, options.secret, request),
    postWithSecret: (secret, request) => postSigned(options.url, secret, request),
    nextTs: () => `${second}.${salt}${String(++n).padStart(3, "0")}`,
    eventId: (kind, i) => `Ev0DEMO${run}${kind}${i}`,
    statusProblems: (posted, want = 200) =>
      posted.filter((p) => p.status !== want).map((p) => `answered ${p.status} (want ${want}): ${p.body.slice(0, 120)}`),
    say: (name, posted) => {
      const statuses = countBy(posted.map((p) => String(p.status)));
      const avg = posted.reduce((sum, p) => sum + p.ms, 0) / Math.max(1, posted.length);
      progress(
        `sent ${name}: ${Object.entries(statuses)
          .map(([status, count]) => `${count}×${status}`)
          .join(", ")} (${avg.toFixed(0)} ms avg)`,
      );
    },
  };

  const builtins = builtinScenarios({ mentions, messages, duplicates });
  const distributed = await isDistributed(options.url);
  const assistantDeps = {
    url: options.url,
    team: DEMO_TEAM,
    timeoutMs: options.timeoutMs ?? 30_000,
    ...(options.adminToken ? { adminToken: options.adminToken } : {}),
  };
  // The assistant's answers are checked to the character: the stand-in's model's, not one of your own.
  const ownModel: Need = () =>
    options.standinModel === false
      ? "the run's assistant asks a model of your own (MODEL_URL): the demo checks answers against the stand-in's model (unset MODEL_URL)"
      : undefined;
  const assistantOf = (deps: AssistantDeps) => assistantScenarios(deps).map((s) => ({ ...s, needs: [...(s.needs ?? []), ownModel] }));
  let definitions: DemoScenario[];
  if (options.kill) {
    if (!standinUrl)
      throw new Error("--kill is demonstrated against the local stand-in only: run npm start without SLACK_BOT_TOKEN/SLACK_API_URL");
    if (!options.kill.modelKey)
      throw new Error(
        "--kill asks the stand-in's model with npm start's own key (model-api-key in its run folder): run npm start with no MODEL_URL, " +
          "and the demo with the same PORT and ACKBOX_LOCAL_DIR",
      );
    definitions = [
      killScenario({
        ...assistantDeps,
        standinUrl,
        modelKey: options.kill.modelKey,
        secret: options.secret,
        progress,
        ...(options.kill.app ? { app: options.kill.app } : {}),
      }),
    ];
  } else if (distributed) {
    if (!standinUrl)
      throw new Error("a distributed run (SLACK_CLIENT_ID set) is demonstrated against the local stand-in only: pass --standin");
    if (!options.adminToken)
      throw new Error(
        "a distributed run's demo reads the rows and installations back: it needs the run's ADMIN_TOKEN (ACKBOX_ADMIN_TOKEN)",
      );
    const deps = { url: options.url, standinUrl, adminToken: options.adminToken, timeoutMs: options.timeoutMs ?? 30_000 };
    progress(`a distributed run: installs into ${DEMO_TEAM.teamId} and ${SECOND_TEAM.teamId}, a token rotation and an uninstall`);
    definitions = [
      installScenario(deps),
      // Every built-in's Web API calls must carry the installed team's own token (the backfill's reads too).
      ...beforeTheFailure(builtins, outageScenario({ ...deps, team: DEMO_TEAM, distributed: true })).map((scenario) => ({
        ...scenario,
        send: async (c: ScenarioContext) => {
          const sentRun = await scenario.send(c);
          return { ...sentRun, intended: sentRun.intended.map((e) => requireTeamToken(e, DEMO_TEAM.teamId)) };
        },
      })),
      // A step's completion goes with its execution's workflow token, not the team's: not held to requireTeamToken.
      ...stepScenarios(standinUrl),
      ...assistantOf({ ...assistantDeps, standinUrl }).map((scenario) => ({
        ...scenario,
        send: async (c: ScenarioContext) => {
          const sentRun = await scenario.send(c);
          return { ...sentRun, intended: sentRun.intended.map((e) => requireTeamToken(e, DEMO_TEAM.teamId)) };
        },
      })),
      rotationScenario(deps, bounded("rotation-events", options.rotationEvents ?? 6, 2)),
      uninstallScenario(deps),
      ...(options.extraScenarios ?? []),
    ];
  } else {
    progress("a single-workspace run: installs, a second team, a rotation and an uninstall need npm start -- --distributed");
    // The stand-in's bot token (SLACK_BOT_TOKEN) is its own workspace's: the outage's messages are posted there.
    const outage =
      standinUrl && options.adminToken
        ? [
            outageScenario({
              url: options.url,
              standinUrl,
              adminToken: options.adminToken,
              team: { ...DEMO_TEAM, teamId: STANDIN_TEAM },
              distributed: false,
            }),
          ]
        : [];
    if (outage.length === 0) progress("no stand-in or no ADMIN_TOKEN: the outage and its backfill are left out");
    // The custom steps need the stand-in to play the workflow (an execution, its workflow token); the assistant, to
    // play Slack's side of its threads and streams.
    const steps = standinUrl ? stepScenarios(standinUrl) : [];
    if (steps.length === 0) progress("no stand-in: the custom steps are left out (the stand-in plays the workflow)");
    const assistant = standinUrl ? assistantOf({ ...assistantDeps, standinUrl }) : [];
    if (assistant.length === 0) progress("no stand-in: the assistant is left out (the stand-in plays its threads and its model)");
    definitions = [...beforeTheFailure(builtins, ...outage, ...steps, ...assistant), ...(options.extraScenarios ?? [])];
  }
  const skipped: { name: string; reason: string }[] = [];
  const sent: { scenario: DemoScenario; run: ScenarioRun }[] = [];
  for (const scenario of definitions) {
    const reason = options.app && scenario.needs ? skipReason(options.app, scenario.needs) : undefined;
    if (reason !== undefined) {
      skipped.push({ name: scenario.name, reason });
      progress(`skipped ${scenario.name}: ${reason}`);
      continue;
    }
    sent.push({ scenario, run: await scenario.send(ctx) });
  }

  const intended = sent.flatMap((s) => s.run.intended);
  const expected = intended.reduce((sum, e) => sum + e.count, 0);
  let calls: StandinCall[] = [];
  if (standinUrl) {
    // Wait for every intended call, then a little longer: a second call for a duplicate would show up then.
    const deadline = Date.now() + (options.timeoutMs ?? 30_000);
    let lastReport = -1;
    for (;;) {
      calls = (await fetchStandinCalls(standinUrl, since)).calls.slice();
      const { got } = matchCalls(intended, calls);
      const received = intended.reduce((sum, e, i) => sum + Math.min(e.count, got[i] ?? 0), 0);
      if (received !== lastReport) {
        progress(`effects received by the stand-in: ${received}/${expected}`);
        lastReport = received;
      }
      if (received >= expected || Date.now() > deadline) break;
      await sleep(250);
    }
    await sleep(1500);
    calls = (await fetchStandinCalls(standinUrl, since)).calls.slice();
  } else {
    progress("no local Slack stand-in known (pass --standin, or run npm start without SLACK_BOT_TOKEN/SLACK_API_URL): effects not checked");
  }
  const match = matchCalls(intended, calls);

  const failure = sent.find((s) => s.scenario.failure);
  const failedEvent = failure?.run.ids[0] ?? "";
  const failedRow =
    failedEvent && options.adminToken ? await deadRowOf(options.url, options.adminToken, failedEvent, options.timeoutMs) : null;

  let offset = 0;
  const results: ScenarioResult[] = sent.map((s) => {
    const mine = s.run.intended.map((e, i) => ({ e, got: match.got[offset + i] ?? 0 }));
    offset += s.run.intended.length;
    const acked = s.run.posted.filter((p) => p.status === 200).length;
    const effectProblems = standinUrl
      ? mine.flatMap(({ e, got }) =>
          e.count === 0
            ? got > (e.upTo ?? 0)
              ? [`${e.label}: ${got} call(s) at the stand-in, want at most ${e.upTo ?? 0}`]
              : []
            : got === e.count
              ? []
              : [`${e.label}: ${got} call(s) at the stand-in, want ${e.count}`],
        )
      : [];
    const rowProblems =
      s.scenario.failure && options.adminToken && failedRow === null ? [`${failedEvent}: its row was not parked dead in time`] : [];
    const problems = [...s.run.problems, ...effectProblems, ...rowProblems];
    return {
      name: s.scenario.name,
      sent: s.run.posted.length,
      acked,
      problems,
      expectedEffects: s.run.intended.reduce((sum, e) => sum + e.count, 0),
      receivedEffects: standinUrl ? mine.reduce((sum, m) => sum + (m.e.count > 0 ? m.got : 0), 0) : null,
      note: s.run.note ?? s.scenario.note,
      ids: s.run.ids,
      ok: problems.length === 0,
    };
  });

  const byName = (name: string) => results.find((r) => r.name === name);
  const dedupe = [byName("concurrent duplicates"), byName("Slack retry")];
  const latencies = effectLatencies(
    sent.map((s) => s.run),
    match.first.map((call, i) => (intended[i]?.timed === false ? undefined : call)),
  );
  const unexpected = standinUrl ? match.unexpected : [];
  // Calls intended in any number (an answer's appends) are checked by their scenario, not counted among the effects.
  const uncounted = new Set(match.uncounted);
  const received = standinUrl ? calls.length - unexpected.length - uncounted.size : null;
  const matched = calls.filter((c) => !uncounted.has(c) && intended.some((e) => e.count > 0 && e.matches(c)));
  const ids = (name: string) => byName(name)?.ids ?? [];
  return {
    ok: results.every((r) => r.ok) && unexpected.length === 0,
    mode: distributed ? "distributed" : "single-workspace",
    url: options.url,
    standinUrl: standinUrl ?? null,
    elapsedMs: Math.round(performance.now() - started),
    sent: results.reduce((sum, r) => sum + r.sent, 0),
    acked: results.reduce((sum, r) => sum + r.acked, 0),
    rejected: results.reduce((sum, r) => sum + (r.sent - r.acked), 0),
    deduplicated: standinUrl ? dedupe.reduce((sum, r) => sum + (r?.ok ? r.acked - (r.receivedEffects ?? 0) : 0), 0) : null,
    ignored: standinUrl ? (byName("bot message")?.ok ? (byName("bot message")?.acked ?? 0) : 0) : null,
    effects: { expected, received, byMethod: countBy(matched.map((c) => c.method)), unexpected },
    skipped,
    effectLatencyMs:
      latencies.length > 0
        ? { p50: Math.round(latencies[Math.floor((latencies.length - 1) / 2)] ?? 0), max: Math.round(latencies.at(-1) ?? 0) }
        : null,
    runbook: {
      failedEvent,
      failedRow,
      doneEvent: ids("app mentions")[0] ?? ids("Slack retry")[0] ?? "",
      commandOperation: ids("slash command")[0] ?? "",
      interactionOperation: ids("button click")[0] ?? "",
    },
    scenarios: results,
  };
}

/**
 * From the send of the request that caused each effect to its first call at
 * the stand-in (one machine, one clock), sorted. The request is the latest
 * of its scenario sent before the call arrived: a scenario's batch stamped
 * after its last ack would make an effect that arrives sooner (the first
 * attempt reaches Slack about when the answer reaches the sender) negative.
 */
export function effectLatencies(
  runs: readonly Pick<ScenarioRun, "posted" | "intended">[],
  first: readonly (Pick<StandinCall, "at"> | undefined)[],
): number[] {
  let offset = 0;
  return runs
    .flatMap((run) => {
      const sends = run.posted.map((p) => p.sentAt).sort((a, b) => a - b);
      const firsts = run.intended.map((_, i) => first[offset + i]);
      offset += run.intended.length;
      return firsts.flatMap((call) => {
        if (!call || sends.length === 0) return [];
        const at = Date.parse(call.at);
        const cause = sends.filter((sentAt) => sentAt <= at).at(-1) ?? sends[0] ?? at;
        return [at - cause];
      });
    })
    .sort((a, b) => a - b);
}

/** The scenarios with `more` inserted before the labelled failure, which stays last. */
function beforeTheFailure(scenarios: readonly DemoScenario[], ...more: DemoScenario[]): DemoScenario[] {
  return [...scenarios.filter((s) => !s.failure), ...more, ...scenarios.filter((s) => s.failure)];
}

/** The failure's outbox row id once the operator API shows it dead, or null (bounded wait). */
async function deadRowOf(url: string, token: string, eventId: string, timeoutMs = 30_000): Promise<number | null> {
  const deadline = Date.now() + Math.min(timeoutMs, 15_000);
  while (Date.now() < deadline) {
    const response = await fetch(`${url}/admin/events/${encodeURIComponent(eventId)}`, {
      headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(5000),
    }).catch(() => undefined);
    if (response?.status === 200) {
      const trail = (await response.json()) as { rows?: { id: number; status: string }[] };
      const dead = trail.rows?.find((r) => r.status === "dead");
      if (dead) return dead.id;
    } else await response?.body?.cancel();
    await sleep(250);
  }
  return null;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The summary as a table for the terminal, then the ids it sent and the runbook's commands with them. */
export function formatDemoResult(result: DemoResult, options: { readonly commandPrefix?: string } = {}): string[] {
  const lines: string[] = [];
  const pad = (s: string | number, n: number) => String(s).padEnd(n);
  lines.push("");
  lines.push(`${pad("scenario", 24)}${pad("sent", 6)}${pad("acked", 7)}${pad("effects", 10)}what the pipeline must do`);
  for (const s of result.scenarios) {
    const effects = s.receivedEffects === null ? `? / ${s.expectedEffects}` : `${s.receivedEffects} / ${s.expectedEffects}`;
    lines.push(`${s.ok ? "✓" : "✗"} ${pad(s.name, 22)}${pad(s.sent, 6)}${pad(s.acked, 7)}${pad(effects, 10)}${s.note}`);
    for (const problem of s.problems) lines.push(`    ✗ ${problem}`);
  }
  for (const call of result.effects.unexpected) lines.push(`✗ unexpected call at the stand-in (${call})`);
  lines.push("");
  const parts = [`sent ${result.sent}`, `acked ${result.acked}`, `rejected ${result.rejected}`];
  if (result.deduplicated !== null) parts.push(`deduplicated ${result.deduplicated}`);
  if (result.ignored !== null) parts.push(`ignored ${result.ignored}`);
  parts.push(
    result.effects.received === null
      ? "effects not checked (no stand-in)"
      : `calls at the stand-in ${result.effects.received}/${result.effects.expected} intended, ${result.effects.unexpected.length} unexpected${byMethod(result.effects.byMethod)}`,
  );
  lines.push(parts.join(" · "));
  if (result.effectLatencyMs) {
    lines.push(`request sent → effect at the stand-in: ${result.effectLatencyMs.p50} ms median, ${result.effectLatencyMs.max} ms slowest`);
  }
  for (const skip of result.skipped) lines.push(`– skipped ${skip.name}: ${skip.reason}`);
  const failureSent = result.scenarios.some((s) => s.name === "labelled failure");
  lines.push(
    result.ok
      ? `✓ every call at the stand-in was intended, and every intended call came${failureSent ? " (the failure included)" : ""}`
      : "✗ the pipeline did not do what it should: see above",
  );
  lines.push("", "ids this run sent (event ids, operation ids):");
  for (const s of result.scenarios) if (s.ids.length > 0) lines.push(`  ${pad(s.name, 22)}${s.ids.join(" ")}`);
  const r = result.runbook;
  const ackbox = `${options.commandPrefix ? `${options.commandPrefix} ` : ""}npx ackbox`;
  if (r.failedEvent) {
    lines.push("", "practise the runbook (docs/operating.md) on them:");
    lines.push(`  ${ackbox} dead list`);
    lines.push(`  ${ackbox} events show ${r.failedEvent}`);
    lines.push(`  ${ackbox} dead replay --error channel_not_found --dry-run`);
    if (r.failedRow !== null) lines.push(`  ${ackbox} dead replay --id ${r.failedRow} --dry-run`);
    if (r.doneEvent) lines.push(`  ${ackbox} events show ${r.doneEvent} --json`);
    if (r.commandOperation) lines.push(`  ${ackbox} events show ${r.commandOperation}`);
  }
  return lines;
}

/** " (8 reactions.add, 7 chat.postMessage, …)": most first, then by name, the same line every run; nothing when no call came. */
function byMethod(counts: Readonly<Record<string, number>>): string {
  const entries = Object.entries(counts).sort(([m1, c1], [m2, c2]) => c2 - c1 || m1.localeCompare(m2));
  return entries.length === 0 ? "" : ` (${entries.map(([m, c]) => `${c} ${m}`).join(", ")})`;
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
