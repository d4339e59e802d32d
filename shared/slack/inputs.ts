/**
 * The three Slack surfaces that share one Request URL, parsed from an already
 * authenticated body into one of a few shapes, each carrying the id its
 * receipt is keyed by.
 *
 * Operation ids (slash commands and interactivity carry no event_id):
 * - a slash command:  "command:<team>:<trigger_id>". trigger_id is minted per
 *   invocation, so a redelivery of the same request is recognised while the
 *   same command typed twice is two operations. (The text cannot be the key:
 *   "/deploy api" twice is two deploys.)
 * - an interaction:   "interaction:<team>:<trigger_id>", for the same reason;
 *   a button clicked twice is two clicks.
 * - view_closed, which has no trigger_id: "interaction:<team>:view_closed:
 *   <view.id>:<view.hash>". A view is closed once per revision (hash).
 * - block_suggestion (an options request), which has no trigger_id either:
 *   "interaction:<team>:block_suggestion:<user>:<action_id>:<value>". It is
 *   answered inline and usually records nothing (no receipt at all); if its
 *   handler does return intents, the same user typing the same text into the
 *   same menu again within the receipts' retention is one operation.
 */

export type JsonObject = { readonly [key: string]: unknown };

export interface SlackEvent extends JsonObject {
  readonly type: string;
  readonly subtype?: string;
  readonly channel?: string;
  readonly user?: string;
  readonly bot_id?: string;
  readonly ts?: string;
  readonly thread_ts?: string;
  readonly text?: string;
}

export interface EventInput {
  readonly surface: "event";
  readonly id: string;
  readonly teamId: string | undefined;
  /** The Enterprise Grid org, if any: what an org-wide installation is found by (shared/installations/). */
  readonly enterpriseId?: string | undefined;
  /** authorizations[0].is_enterprise_install: the event reached an org-wide install (an uninstall removes 'E:<org>'; the org is its shard's key). */
  readonly isEnterpriseInstall?: boolean;
  /** The envelope's event_time (epoch seconds): when Slack says the event happened. */
  readonly eventTime?: number | undefined;
  readonly event: SlackEvent;
}

export interface SlashCommand {
  readonly command: string;
  readonly text: string;
  readonly teamId: string;
  readonly channelId: string;
  readonly userId: string;
  readonly responseUrl: string;
  readonly triggerId: string;
}

export interface CommandInput {
  readonly surface: "command";
  readonly id: string;
  readonly teamId: string;
  readonly enterpriseId?: string | undefined;
  /** The form's is_enterprise_install ("true"/"false"): an org-wide install, whose rows live on the org's shard. */
  readonly isEnterpriseInstall?: boolean;
  readonly command: SlashCommand;
}

export interface InteractionInput {
  readonly surface: "interaction";
  readonly id: string;
  readonly teamId: string | undefined;
  readonly enterpriseId?: string | undefined;
  /** The payload's is_enterprise_install: an org-wide install, whose rows live on the org's shard. */
  readonly isEnterpriseInstall?: boolean;
  /** block_actions, view_submission, view_closed, shortcut, message_action, block_suggestion. */
  readonly type: string;
  readonly payload: JsonObject;
}

/** Inputs that may be recorded: each has the id its receipt is keyed by. */
export type RecordableInput = EventInput | CommandInput | InteractionInput;

export type SlackInput =
  | { readonly surface: "url_verification"; readonly challenge: string }
  /** Authenticated, well formed, and of a type the pipeline does not handle (app_rate_limited, a new interactivity type, …). */
  | { readonly surface: "unhandled"; readonly type: string }
  | RecordableInput;

export type ParseResult = { readonly ok: true; readonly input: SlackInput } | { readonly ok: false; readonly reason: string };

/**
 * Slack's ids are short ([A-Z0-9.] and a few more, well under 100 characters).
 * A longer one is not a Slack shape; refusing it keeps a hostile id out of the
 * receipts' primary key and out of D1's 100 KB statement limit.
 */
const MAX_ID_LENGTH = 255;

export const INTERACTION_TYPES: ReadonlySet<string> = new Set([
  "block_actions",
  "view_submission",
  "view_closed",
  "shortcut",
  "message_action",
  "block_suggestion",
]);

/** Parses an authenticated body by its content type. Never throws. */
export function parseSlackBody(contentType: string | null, raw: string): ParseResult {
  const mediaType = (contentType ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
  if (mediaType === "application/json") return parseJsonBody(raw);
  if (mediaType === "application/x-www-form-urlencoded") return parseFormBody(raw);
  return fail(`unsupported content type ${JSON.stringify(contentType ?? "")}`);
}

function parseJsonBody(raw: string): ParseResult {
  const body = parseJsonObject(raw);
  if (!body) return fail("body is not a JSON object");
  const type = body.type;
  if (typeof type !== "string" || type === "") return fail("JSON body has no type");
  if (type === "url_verification") {
    const challenge = body.challenge;
    if (typeof challenge !== "string" || challenge === "") return fail("url_verification without a challenge");
    return ok({ surface: "url_verification", challenge });
  }
  if (type === "event_callback") {
    const id = body.event_id;
    if (typeof id !== "string" || id === "") return fail("event_callback without an event_id");
    if (id.length > MAX_ID_LENGTH) return fail(`event_id longer than ${MAX_ID_LENGTH} characters`);
    const event = body.event;
    if (!isObject(event) || typeof event.type !== "string" || event.type === "") return fail("event_callback without an event type");
    // The installation the event was delivered for is authorizations[0] (Slack: "the installation of your app
    // that the event is visible to"); the envelope's team_id is the workspace the event happened in, which in a
    // channel shared with another organisation is not always the installing one. authorizations[0].team_id is
    // null for an org-wide install: then the envelope's team_id (as Bolt's buildSource does).
    const authorization = Array.isArray(body.authorizations) ? body.authorizations.find(isObject) : undefined;
    const teamId = present(authorization?.team_id) ?? present(body.team_id);
    const enterpriseId = authorization ? present(authorization.enterprise_id) : present(body.enterprise_id);
    const eventTime = typeof body.event_time === "number" && Number.isFinite(body.event_time) ? body.event_time : undefined;
    return ok({
      surface: "event",
      id,
      teamId,
      enterpriseId,
      // An envelope without authorizations (an older shape, a test) carries the flag at the top level.
      isEnterpriseInstall: (authorization ? authorization.is_enterprise_install : body.is_enterprise_install) === true,
      eventTime,
      event: event as SlackEvent,
    });
  }
  return ok({ surface: "unhandled", type });
}

function parseFormBody(raw: string): ParseResult {
  let form: URLSearchParams;
  try {
    form = new URLSearchParams(raw);
  } catch {
    return fail("form body does not parse");
  }
  if (form.has("payload")) return parseInteraction(form.get("payload") ?? "");
  if (form.has("command")) return parseCommand(form);
  return fail("form body has neither a command nor a payload");
}

function parseCommand(form: URLSearchParams): ParseResult {
  const field = (name: string): string => form.get(name) ?? "";
  const command = field("command");
  if (!command.startsWith("/")) return fail("slash command name must start with /");
  const required = ["team_id", "channel_id", "user_id", "response_url", "trigger_id"] as const;
  const missing = required.filter((name) => field(name) === "");
  if (missing.length > 0) return fail(`slash command without ${missing.join(", ")}`);
  const tooLong = (["team_id", "trigger_id"] as const).filter((name) => field(name).length > MAX_ID_LENGTH);
  if (tooLong.length > 0) return fail(`slash command ${tooLong.join(", ")} longer than ${MAX_ID_LENGTH} characters`);
  const teamId = field("team_id");
  return ok({
    surface: "command",
    id: `command:${teamId}:${field("trigger_id")}`,
    teamId,
    enterpriseId: field("enterprise_id") || undefined,
    isEnterpriseInstall: field("is_enterprise_install") === "true",
    command: {
      command,
      text: field("text"),
      teamId,
      channelId: field("channel_id"),
      userId: field("user_id"),
      responseUrl: field("response_url"),
      triggerId: field("trigger_id"),
    },
  });
}

function parseInteraction(rawPayload: string): ParseResult {
  const payload = parseJsonObject(rawPayload);
  if (!payload) return fail("interactivity payload is not a JSON object");
  const type = payload.type;
  if (typeof type !== "string" || type === "") return fail("interactivity payload has no type");
  if (!INTERACTION_TYPES.has(type)) return ok({ surface: "unhandled", type });
  const team = isObject(payload.team) ? present(payload.team.id) : undefined;
  // The id keeps the receipt key it always had; the team the rows are performed for is the installing one.
  const teamPart = team ?? present(payload.team_id) ?? "-";
  const installingTeam = installingTeamOf(payload, team);
  // The payload's org is the visible team's: for a view installed in another workspace it says nothing about the
  // installing one's org (Slack sends none for it), so no org-wide install is looked for on its strength.
  const enterpriseId =
    installingTeam !== team && team !== undefined
      ? undefined
      : ((isObject(payload.enterprise) ? present(payload.enterprise.id) : undefined) ??
        (isObject(payload.team) ? present(payload.team.enterprise_id) : undefined) ??
        present(payload.enterprise_id));
  const isEnterpriseInstall = payload.is_enterprise_install === true;
  const triggerId = present(payload.trigger_id);
  if (teamPart.length > MAX_ID_LENGTH || (triggerId?.length ?? 0) > MAX_ID_LENGTH) {
    return fail(`${type} payload has an id longer than ${MAX_ID_LENGTH} characters`);
  }
  if (triggerId)
    return ok({
      surface: "interaction",
      id: `interaction:${teamPart}:${triggerId}`,
      teamId: installingTeam,
      enterpriseId,
      isEnterpriseInstall,
      type,
      payload,
    });
  const view = isObject(payload.view) ? payload.view : undefined;
  const viewId = view ? present(view.id) : undefined;
  const viewHash = view ? present(view.hash) : undefined;
  if (type === "view_closed" && viewId && viewHash && viewId.length + viewHash.length <= MAX_ID_LENGTH) {
    return ok({
      surface: "interaction",
      id: `interaction:${teamPart}:view_closed:${viewId}:${viewHash}`,
      teamId: installingTeam,
      enterpriseId,
      isEnterpriseInstall,
      type,
      payload,
    });
  }
  if (type === "block_suggestion") {
    const user = isObject(payload.user) ? present(payload.user.id) : undefined;
    const id = `interaction:${teamPart}:block_suggestion:${user ?? "-"}:${present(payload.action_id) ?? "-"}:${typeof payload.value === "string" ? payload.value : ""}`;
    if (id.length <= MAX_ID_LENGTH * 2)
      return ok({ surface: "interaction", id, teamId: installingTeam, enterpriseId, isEnterpriseInstall, type, payload });
    return fail(`${type} payload's action_id and value are longer than ${MAX_ID_LENGTH * 2} characters`);
  }
  return fail(`${type} payload has no trigger_id to key it by`);
}

/**
 * The workspace an interaction's rows are performed for, as Slack documents it
 * (and Bolt's buildSource reads it): a view opened in another workspace of a
 * Slack Connect channel carries the installing one in view.app_installed_team_id;
 * otherwise team.id, which is null for an org-wide install, so then the
 * user's team_id.
 */
function installingTeamOf(payload: JsonObject, team: string | undefined): string | undefined {
  const view = isObject(payload.view) ? payload.view : undefined;
  const user = isObject(payload.user) ? payload.user : undefined;
  return present(view?.app_installed_team_id) ?? team ?? present(user?.team_id);
}

function parseJsonObject(raw: string): JsonObject | undefined {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return undefined;
  }
  return isObject(value) ? value : undefined;
}

export function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * THE ONE READING of a field of Slack's: a non-empty string, else absent. Slack's own SDK sample payloads carry ""
 * for fields that are not there (bot_id: "", channel_type: "", subtype: ""), so a field sent as "" reads exactly
 * as one not sent, in every matcher (shared/app/app.ts), fact (shared/slack/facts.ts) and parse here
 * (test/unit/empty-fields.test.ts holds each field to it).
 */
export function present(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}

const ok = (input: SlackInput): ParseResult => ({ ok: true, input });
const fail = (reason: string): ParseResult => ({ ok: false, reason });
