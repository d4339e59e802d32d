/**
 * Slack-shaped, correctly signed requests for the ingress: the bodies Slack
 * sends for each surface, signed the way Slack signs them.
 */
import { signatureFor } from "../../shared/slack/signature.ts";
import { TEST_SIGNING_SECRET } from "./settings.ts";

/**
 * A fixed "now" for tests that pass the clock (2036-11-30T12:00:00Z): years AHEAD of the wall clock, on purpose.
 * The test Worker's own queue consumer reads the wall clock; to it, every row written at fixture time is not yet
 * due and every lease taken at fixture time unexpired, so a message that reaches it by mistake (a real send from a
 * test that should have recorded it) can never claim a fixture row. test/consumer/stray-deliveries.test.ts holds
 * it to that, and fails once the wall clock catches up.
 */
export const NOW = Date.UTC(2036, 10, 30, 12, 0, 0);

export const INGRESS_URL = "https://ackbox.test/slack/events";

export interface SignOptions {
  readonly now?: number;
  readonly secret?: string;
  readonly timestamp?: number;
  readonly headers?: Record<string, string>;
}

export async function signed(body: string, contentType: string, options: SignOptions = {}): Promise<Request> {
  const timestamp = options.timestamp ?? Math.floor((options.now ?? NOW) / 1000);
  const signature = await signatureFor(options.secret ?? TEST_SIGNING_SECRET, timestamp, body);
  return new Request(INGRESS_URL, {
    method: "POST",
    headers: {
      "content-type": contentType,
      "x-slack-request-timestamp": String(timestamp),
      "x-slack-signature": signature,
      ...options.headers,
    },
    body,
  });
}

let counter = 0;
export const uniqueId = (prefix: string): string => `${prefix}${Date.now().toString(36)}${(counter++).toString(36)}`.toUpperCase();

export function eventEnvelope(event: Record<string, unknown>, eventId = uniqueId("Ev"), teamId = "T0TEAM"): Record<string, unknown> {
  return {
    token: "legacy-verification-token",
    team_id: teamId,
    api_app_id: "A0APP",
    type: "event_callback",
    event_id: eventId,
    event_time: Math.floor(NOW / 1000),
    event: { event_ts: "1764504000.000100", ...event },
  };
}

let tsCounter = 0;
/**
 * A message ts no other call returns (in this file's run): every Slack message has its own, and an
 * input's rows are keyed by its message (shared/slack/facts.ts), so two test messages must not share one.
 */
export const uniqueTs = (): string => `1764504000.${String(100_000 + (tsCounter++ % 900_000)).padStart(6, "0")}`;

export const mention = (over: Record<string, unknown> = {}) => ({
  type: "app_mention",
  user: "U0HUMAN",
  text: "<@U0BOT> hello",
  ts: uniqueTs(),
  channel: "C0WATCHED",
  ...over,
});

export const channelMessage = (over: Record<string, unknown> = {}) => ({
  type: "message",
  channel_type: "channel",
  user: "U0HUMAN",
  text: "hello team",
  ts: uniqueTs(),
  channel: "C0WATCHED",
  ...over,
});

export function eventRequest(
  event: Record<string, unknown>,
  options: SignOptions & { eventId?: string; retryNum?: number; retryReason?: string } = {},
): Promise<Request> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.retryNum !== undefined) headers["x-slack-retry-num"] = String(options.retryNum);
  if (options.retryReason !== undefined) headers["x-slack-retry-reason"] = options.retryReason;
  return signed(JSON.stringify(eventEnvelope(event, options.eventId)), "application/json", { ...options, headers });
}

export function commandForm(over: Record<string, string> = {}): string {
  return new URLSearchParams({
    token: "legacy-verification-token",
    team_id: "T0TEAM",
    team_domain: "example",
    channel_id: "C0WATCHED",
    channel_name: "general",
    user_id: "U0HUMAN",
    user_name: "ada",
    command: "/ackbox",
    text: "status",
    api_app_id: "A0APP",
    response_url: "https://hooks.slack.com/commands/T0TEAM/1234/abcd",
    trigger_id: uniqueId("13345224609.738474920.8088930838d88f008e0"),
    ...over,
  }).toString();
}

export function interactionForm(payload: Record<string, unknown>): string {
  return new URLSearchParams({ payload: JSON.stringify(payload) }).toString();
}

export function blockActions(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    type: "block_actions",
    team: { id: "T0TEAM", domain: "example" },
    user: { id: "U0HUMAN" },
    api_app_id: "A0APP",
    trigger_id: uniqueId("trg."),
    container: { type: "message", message_ts: "1764504000.000300", channel_id: "C0WATCHED", is_ephemeral: false },
    channel: { id: "C0WATCHED" },
    message: { ts: "1764504000.000300", text: "Deploy?" },
    response_url: "https://hooks.slack.com/actions/T0TEAM/1/xyz",
    actions: [{ action_id: "approve", block_id: "b1", type: "button", value: "yes", action_ts: "1764504001.000000" }],
    ...over,
  };
}

export const FORM = "application/x-www-form-urlencoded";
export const JSON_TYPE = "application/json";
