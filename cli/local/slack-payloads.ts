/**
 * Realistic Slack requests for the local tools (demo, deploy check, tests,
 * load tools): the bodies Slack sends for each surface, signed the way Slack
 * signs them, posted to an ingress over HTTP.
 *
 * The signature is computed here with node:crypto, independently of the
 * Worker's own code (shared/slack/signature.ts): a mistake there cannot
 * cancel itself out in the demo.
 */
import { createHmac } from "node:crypto";

/** Slack's v0 signature: HMAC-SHA256 of "v0:<timestamp>:<body>" with the signing secret. */
export function slackSignature(secret: string, timestamp: number, body: string): string {
  return `v0=${createHmac("sha256", secret).update(`v0:${timestamp}:${body}`).digest("hex")}`;
}

export const JSON_TYPE = "application/json";
export const FORM_TYPE = "application/x-www-form-urlencoded";

export interface SlackRequest {
  readonly body: string;
  readonly contentType: string;
  /** Extra headers, e.g. Slack's retry headers. */
  readonly headers?: Readonly<Record<string, string>>;
}

export interface Posted {
  /** When the request was sent (Date.now(), ms): what an effect's latency is measured from. */
  readonly sentAt: number;
  readonly status: number;
  readonly body: string;
  readonly ms: number;
  readonly headers: Headers;
}

/** Signs and posts one request to `<ingress>/slack/events`. */
export async function postSigned(
  ingressUrl: string,
  secret: string,
  request: SlackRequest,
  options: { timestamp?: number; timeoutMs?: number } = {},
): Promise<Posted> {
  const timestamp = options.timestamp ?? Math.floor(Date.now() / 1000);
  const sentAt = Date.now();
  const started = performance.now();
  const response = await fetch(`${ingressUrl.replace(/\/+$/, "")}/slack/events`, {
    method: "POST",
    headers: {
      "content-type": request.contentType,
      "x-slack-request-timestamp": String(timestamp),
      "x-slack-signature": slackSignature(secret, timestamp, request.body),
      ...request.headers,
    },
    body: request.body,
    signal: AbortSignal.timeout(options.timeoutMs ?? 10_000),
  });
  const body = await response.text();
  return { sentAt, status: response.status, body, ms: Math.round((performance.now() - started) * 10) / 10, headers: response.headers };
}

export interface Team {
  readonly teamId: string;
  readonly appId: string;
}

export const DEMO_TEAM: Team = { teamId: "T0DEMO", appId: "A0ACKBOX" };

/** An Events API envelope around one event. */
export function eventCallback(event: Record<string, unknown>, eventId: string, team: Team = DEMO_TEAM): SlackRequest {
  const now = Math.floor(Date.now() / 1000);
  const body = {
    token: "legacy-verification-token",
    team_id: team.teamId,
    api_app_id: team.appId,
    type: "event_callback",
    event_id: eventId,
    event_time: now,
    event_context: `4-${eventId}`,
    authorizations: [{ enterprise_id: null, team_id: team.teamId, user_id: "U0ACKBOXBOT", is_bot: true, is_enterprise_install: false }],
    is_ext_shared_channel: false,
    event: { event_ts: event.ts, ...event },
  };
  return { body: JSON.stringify(body), contentType: JSON_TYPE };
}

/** The same request as Slack's retry of it: same body, with X-Slack-Retry-Num / -Reason. */
export function asSlackRetry(request: SlackRequest, retryNum: number, reason = "http_timeout"): SlackRequest {
  return { ...request, headers: { ...request.headers, "x-slack-retry-num": String(retryNum), "x-slack-retry-reason": reason } };
}

export const appMention = (f: { channel: string; ts: string; user?: string; text?: string; team?: string }) => ({
  type: "app_mention",
  user: f.user ?? "U0DEMOUSER",
  text: f.text ?? "<@U0ACKBOXBOT> hello from the demo",
  ts: f.ts,
  channel: f.channel,
  team: f.team ?? DEMO_TEAM.teamId,
  blocks: [],
});

export const channelMessage = (f: { channel: string; ts: string; user?: string; text?: string; team?: string }) => ({
  type: "message",
  channel_type: "channel",
  user: f.user ?? "U0DEMOUSER",
  text: f.text ?? "a message in a watched channel",
  ts: f.ts,
  channel: f.channel,
  team: f.team ?? DEMO_TEAM.teamId,
});

/** A bot's message: the reference app must ignore it (or it would answer itself forever). */
export const botMessage = (f: { channel: string; ts: string }) => ({
  type: "message",
  subtype: "bot_message",
  bot_id: "B0OTHERBOT",
  username: "another bot",
  text: "beep: a bot's message",
  ts: f.ts,
  channel: f.channel,
});

export function slashCommand(f: {
  command?: string;
  text?: string;
  channel: string;
  responseUrl: string;
  triggerId: string;
  team?: Team;
}): SlackRequest {
  const team = f.team ?? DEMO_TEAM;
  const form = new URLSearchParams({
    token: "legacy-verification-token",
    team_id: team.teamId,
    team_domain: "ackbox-demo",
    channel_id: f.channel,
    channel_name: "demo",
    user_id: "U0DEMOUSER",
    user_name: "demo",
    command: f.command ?? "/ackbox",
    text: f.text ?? "status",
    api_app_id: team.appId,
    is_enterprise_install: "false",
    response_url: f.responseUrl,
    trigger_id: f.triggerId,
  });
  return { body: form.toString(), contentType: FORM_TYPE };
}

/** A click on a button in a message the app posted: interactivity, `payload=` holding JSON. */
export function buttonClick(f: {
  channel: string;
  messageTs: string;
  triggerId: string;
  responseUrl: string;
  actionId?: string;
  /** The button's value (default "yes"). */
  value?: string;
  team?: Team;
  /** A click on a message a custom step posted: its function_data and its workflow token come with it. */
  step?: { executionId: string; callbackId: string; token: string; inputs?: Record<string, unknown> };
}): SlackRequest {
  const team = f.team ?? DEMO_TEAM;
  const payload = {
    ...(f.step
      ? {
          function_data: { execution_id: f.step.executionId, function: { callback_id: f.step.callbackId }, inputs: f.step.inputs ?? {} },
          bot_access_token: f.step.token,
        }
      : {}),
    type: "block_actions",
    user: { id: "U0DEMOUSER", username: "demo", name: "demo", team_id: team.teamId },
    api_app_id: team.appId,
    token: "legacy-verification-token",
    container: { type: "message", message_ts: f.messageTs, channel_id: f.channel, is_ephemeral: false },
    trigger_id: f.triggerId,
    team: { id: team.teamId, domain: "ackbox-demo" },
    channel: { id: f.channel, name: "demo" },
    message: { type: "message", user: "U0ACKBOXBOT", ts: f.messageTs, text: "Deploy?", bot_id: "B0ACKBOX" },
    response_url: f.responseUrl,
    actions: [
      {
        action_id: f.actionId ?? "approve",
        block_id: "decision",
        text: { type: "plain_text", text: "Approve" },
        value: f.value ?? "yes",
        type: "button",
        action_ts: `${Math.floor(Date.now() / 1000)}.000000`,
      },
    ],
  };
  return { body: new URLSearchParams({ payload: JSON.stringify(payload) }).toString(), contentType: FORM_TYPE };
}

/** A custom step run by a workflow (function_executed, an Events API event): its inputs, ids and workflow token. */
export const functionExecuted = (f: {
  callbackId: string;
  executionId: string;
  token: string;
  inputs?: Record<string, unknown>;
  workflowExecutionId?: string;
}) => ({
  type: "function_executed",
  function: {
    id: `Fn0${f.callbackId.toUpperCase().replace(/[^A-Z0-9]/g, "")}`,
    callback_id: f.callbackId,
    title: f.callbackId,
    type: "app",
    input_parameters: [],
    output_parameters: [],
    app_id: DEMO_TEAM.appId,
    date_created: 1_764_500_000,
    date_updated: 1_764_500_000,
    date_deleted: 0,
  },
  inputs: f.inputs ?? {},
  function_execution_id: f.executionId,
  workflow_execution_id: f.workflowExecutionId ?? `Wx0${f.executionId.slice(2)}`,
  event_ts: `${Math.floor(Date.now() / 1000)}.000100`,
  bot_access_token: f.token,
});

/** The app's Home tab opened (Events API): the example app publishes it. */
export const appHomeOpened = (f: { user: string; channel: string }) => ({
  type: "app_home_opened",
  user: f.user,
  channel: f.channel,
  tab: "home",
  event_ts: `${Math.floor(Date.now() / 1000)}.000100`,
});

/** An external select's options request (block_suggestion): answered inline, nothing recorded. */
export function blockSuggestion(f: { actionId: string; value: string; user?: string }): SlackRequest {
  const payload = {
    type: "block_suggestion",
    user: { id: f.user ?? "U0DEMOUSER", username: "demo", team_id: DEMO_TEAM.teamId },
    container: { type: "view", view_id: "V0DEMOHOME" },
    api_app_id: DEMO_TEAM.appId,
    token: "legacy-verification-token",
    action_id: f.actionId,
    block_id: "topic",
    value: f.value,
    team: { id: DEMO_TEAM.teamId, domain: "ackbox-demo" },
  };
  return { body: new URLSearchParams({ payload: JSON.stringify(payload) }).toString(), contentType: FORM_TYPE };
}

/**
 * A user opens the app's assistant pane (assistant_thread_started): the thread is in the app's DM with the user
 * (`channel`, D…), and `context` says what the user is looking at.
 */
export const assistantThreadStarted = (f: { channel: string; threadTs: string; user?: string; team?: string; lookingAt?: string }) => ({
  type: "assistant_thread_started",
  assistant_thread: {
    user_id: f.user ?? "U0DEMOUSER",
    context: { channel_id: f.lookingAt ?? "C0DEMO", team_id: f.team ?? DEMO_TEAM.teamId, enterprise_id: null },
    channel_id: f.channel,
    thread_ts: f.threadTs,
  },
  event_ts: `${Math.floor(Date.now() / 1000)}.000200`,
});

/** A user's question in an assistant thread: a message in the app's DM (channel_type im), in the thread. */
export const assistantQuestion = (f: { channel: string; threadTs: string; ts: string; text: string; user?: string; team?: string }) => ({
  type: "message",
  user: f.user ?? "U0DEMOUSER",
  text: f.text,
  ts: f.ts,
  thread_ts: f.threadTs,
  parent_user_id: "U0ACKBOXBOT", // the thread's root is the app's (Slack opens it in the app's DM)
  channel: f.channel,
  channel_type: "im",
  team: f.team ?? DEMO_TEAM.teamId,
});
