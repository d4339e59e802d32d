/**
 * Which of the demo's scenarios the running app can answer. The demo knows
 * the traffic of the apps it ships with (the reference app, the /ask
 * example); the app that runs is whatever app/index.ts composes. Before it
 * sends a scenario, the demo asks the app itself — app.route, pure, in this
 * process, on a request shaped like the scenario's — whether it answers that
 * request as the scenario's intended calls expect. A scenario it does not is
 * skipped, and the demo says which and why; one that needs no app (a forged
 * request, an install) always runs. An app adds scenarios of its own in
 * app/demo.ts (`export const scenarios: DemoScenario[]`).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { Routing, SlackApp } from "../../shared/app/app.ts";
import { NO_APP_SETTINGS, parseAppSettings } from "../../shared/app/settings.ts";
import { ANSWER_EFFECT } from "../../shared/assistant/thread.ts";
import { parseSlackBody } from "../../shared/slack/inputs.ts";
import type { DemoScenario, Need } from "./scenario.ts";
import {
  appHomeOpened,
  appMention,
  assistantQuestion,
  assistantThreadStarted,
  blockSuggestion,
  botMessage,
  buttonClick,
  channelMessage,
  eventCallback,
  functionExecuted,
  type SlackRequest,
  slashCommand,
} from "./slack-payloads.ts";

type Recorded = Extract<Routing, { action: "record" }>;

/** What the app does with `request` (pure: app.route, in this process); undefined when it records nothing. */
export function recorded(app: SlackApp, request: SlackRequest): Recorded | undefined {
  const parsed = parseSlackBody(request.contentType, request.body);
  if (!parsed.ok || parsed.input.surface === "url_verification" || parsed.input.surface === "unhandled") {
    throw new Error(`the demo's probe is not a recordable request: ${parsed.ok ? parsed.input.surface : parsed.reason}`);
  }
  // The settings a handler sees in the local run: the environment's, every channel watched, the example's
  // answer service and the assistant's model set (the local run points both at the stand-in when they are unset).
  // Unusable ones: the defaults' absence.
  const probe = parseAppSettings(app.declaredSettings, {
    ...process.env,
    WATCHED_CHANNELS: "",
    EXAMPLE_ANSWER_URL: "http://127.0.0.1/answer",
    MODEL_URL: "http://127.0.0.1/model/v1",
  });
  const routing = app.route(parsed.input, { now: Date.now(), settings: probe.ok ? probe.settings : NO_APP_SETTINGS });
  return routing.action === "record" ? routing : undefined;
}

/** A need: the app answers `request` as `want` says, or it "does not <what>". */
function need(request: SlackRequest, what: string, want: (routing: Recorded | undefined) => boolean): Need {
  return (app) => (want(recorded(app, request)) ? undefined : `the app does not ${what}`);
}

const CHANNEL = "C0PROBE";
const DM = "D0PROBE";
const TS = "1764504000.000001";
const TS_LATER = "1764504000.000002";
const hasEffect = (r: Recorded | undefined, effect: string, fields: Record<string, unknown> = {}) =>
  r?.effects.some(
    (e) => e.effect === effect && Object.entries(fields).every(([k, v]) => (e.payload as Record<string, unknown>)[k] === v),
  ) === true;

/** What the built-in scenarios need of the app, by what they drive. */
export const needs = {
  mentionReply: need(
    eventCallback(appMention({ channel: CHANNEL, ts: TS }), "Ev0PROBE"),
    "reply in the thread of an app_mention (chat.postMessage)",
    (r) => hasEffect(r, "chat.postMessage", { thread_ts: TS }),
  ),
  messageEyes: need(
    eventCallback(channelMessage({ channel: CHANNEL, ts: TS }), "Ev0PROBE"),
    "react :eyes: to a channel message (reactions.add)",
    (r) => hasEffect(r, "reactions.add", { timestamp: TS, name: "eyes" }),
  ),
  botIgnored: need(
    eventCallback(botMessage({ channel: CHANNEL, ts: TS }), "Ev0PROBE"),
    "ignore a bot's message (it records an effect for it)",
    (r) => (r?.effects.length ?? 0) === 0,
  ),
  commandResponseUrl: need(
    slashCommand({ channel: CHANNEL, responseUrl: "https://hooks.slack.com/commands/T/1/x", triggerId: "1.probe" }),
    "answer /ackbox ephemerally, then through its response_url",
    (r) => r?.reply?.response_type === "ephemeral" && hasEffect(r, "response_url"),
  ),
  buttonUpdate: need(
    buttonClick({ channel: CHANNEL, messageTs: TS, triggerId: "2.probe", responseUrl: "https://hooks.slack.com/actions/T/1/x" }),
    "update the message of a clicked button (chat.update)",
    (r) => hasEffect(r, "chat.update", { ts: TS }),
  ),
  askChain: need(
    slashCommand({ command: "/ask", text: "why?", channel: CHANNEL, responseUrl: "https://hooks.slack.com/c/T/1/x", triggerId: "3.probe" }),
    "answer /ask with the example's chain (ask-placeholder)",
    (r) => hasEffect(r, "ask-placeholder"),
  ),
  homeTab: need(
    eventCallback(appHomeOpened({ user: "U0PROBE", channel: "D0PROBE" }), "Ev0PROBE"),
    "publish the Home tab when it is opened (views.publish)",
    (r) => hasEffect(r, "views.publish"),
  ),
  echoStep: need(
    eventCallback(
      functionExecuted({ callbackId: "ackbox_echo", executionId: "Fx0PROBE", token: "xwfp-probe", inputs: { text: "hi" } }),
      "Ev0PROBE",
    ),
    "complete the custom step ackbox_echo in its own step (functions.completeSuccess)",
    (r) => hasEffect(r, "functions.completeSuccess", { function_execution_id: "Fx0PROBE" }),
  ),
  approvalStep: need(
    eventCallback(
      functionExecuted({
        callbackId: "ackbox_approval",
        executionId: "Fx0PROBE",
        token: "xwfp-probe",
        inputs: { approver: "U0PROBE", request: "x" },
      }),
      "Ev0PROBE",
    ),
    "ask for approval in the custom step ackbox_approval and wait (the approval example)",
    (r) => hasEffect(r, "chat.postMessage", { channel: "U0PROBE" }) && !hasEffect(r, "functions.completeSuccess"),
  ),
  assistantPrompts: need(
    eventCallback(assistantThreadStarted({ channel: DM, threadTs: TS }), "Ev0PROBE"),
    "offer suggested prompts when an assistant thread starts (assistant.threads.setSuggestedPrompts)",
    (r) => hasEffect(r, "assistant.threads.setSuggestedPrompts", { channel_id: DM, thread_ts: TS }),
  ),
  assistantAnswer: need(
    eventCallback(assistantQuestion({ channel: DM, threadTs: TS, ts: TS_LATER, text: "probe?" }), "Ev0PROBE"),
    "answer a question in an assistant thread with the model (thread.answer())",
    (r) => hasEffect(r, ANSWER_EFFECT, { channel: DM, thread_ts: TS, message_ts: TS_LATER }),
  ),
  topicOptions: need(
    blockSuggestion({ actionId: "ask_topic", value: "de" }),
    "answer the example's topic menu inline",
    (r) => Array.isArray(r?.reply?.options) && r?.effects.length === 0,
  ),
} satisfies Record<string, Need>;

/** The first reason any of `wanted` gives, or undefined when the app answers them all. */
export function skipReason(app: SlackApp, wanted: readonly Need[]): string | undefined {
  for (const want of wanted) {
    const reason = want(app);
    if (reason !== undefined) return reason;
  }
  return undefined;
}

/** The app's own scenarios: `scenarios` exported by <appDir>/demo.ts, or none when there is no such file. */
export async function appScenarios(appDir: string): Promise<readonly DemoScenario[]> {
  const path = join(appDir, "demo.ts");
  if (!existsSync(path)) return [];
  const { scenarios } = (await import(pathToFileURL(path).href)) as { scenarios?: unknown };
  const valid = (s: unknown) =>
    typeof s === "object" && s !== null && typeof (s as DemoScenario).name === "string" && typeof (s as DemoScenario).send === "function";
  if (!Array.isArray(scenarios) || !scenarios.every(valid)) {
    throw new Error(`${path} must export scenarios: an array of DemoScenario ({ name, note, send }, cli/local/scenario.ts)`);
  }
  return scenarios as DemoScenario[];
}
