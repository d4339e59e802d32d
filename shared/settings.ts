/**
 * Every setting of the engine (both Workers): its name, its default, what it
 * means and how it is checked. An app's own settings are declared by the app
 * (shared/app/settings.ts) and parsed beside these. Vars and secrets arrive as strings (wrangler [vars], secrets,
 * .dev.vars); this module is the only place that reads them, so a typo in a
 * deploy is one clear error rather than a NaN deep in a lease computation.
 *
 * The defaults here are the defaults: the [vars] in the two wrangler files
 * repeat them so a deploy shows what it runs with, and
 * test/node/wrangler-config.test.ts fails if the two ever disagree.
 */

import { adminTokenWeakness } from "./admin-token.ts";
import { MAX_QUEUE_DELAY_SECONDS } from "./delivery/decide.ts";
import { isTokenKeyText } from "./installations/crypto.ts";

export interface Settings {
  /** Signature keys, current first. Empty when SLACK_SIGNING_SECRET is unset. */
  readonly signingSecrets: readonly string[];
  readonly slackBotToken: string | undefined;
  readonly slackApiUrl: string;
  /**
   * Distributed-app mode (OAuth installs, a token per workspace): set when
   * SLACK_CLIENT_ID is; undefined is single-workspace mode with SLACK_BOT_TOKEN.
   */
  readonly oauth: OAuthSettings | undefined;
  /**
   * TOKEN_ENCRYPTION_KEY (and its previous value) when set, whatever the mode: what installations' tokens and custom
   * steps' workflow tokens (shared/steps/tokens.ts) are sealed with. Undefined: unset.
   */
  readonly tokenKey: { readonly current: string; readonly previous: string | undefined } | undefined;
  readonly adminToken: string | undefined;
  /** Hosts a response_url may point at; `*` allows any. */
  readonly responseUrlHosts: readonly string[];
  readonly alertChannel: string | undefined;
  readonly deadLetterQueue: string;
  readonly maxBodyBytes: number;
  readonly ackBudgetMs: number;
  /** The first attempt at the ack (shared/delivery/first-attempt.ts); off leaves every row to the queue. */
  readonly firstAttempt: boolean;
  readonly leaseMs: number;
  readonly effectTimeoutMs: number;
  readonly maxAttempts: number;
  readonly backoffBaseMs: number;
  readonly backoffCapMs: number;
  readonly rateLimitMaxWaitMs: number;
  readonly paceAhead: boolean;
  readonly sweepGraceMs: number;
  /** The longest a timer's queue message is delayed (QUEUE_DELAY_MAX_SECONDS); a later timer is the sweep's to send. */
  readonly queueDelayMaxMs: number;
  readonly sweepBatchSize: number;
  readonly sweepMaxSteps: number;
  readonly pruneBatchSize: number;
  readonly receiptRetentionMs: number;
  readonly doneRetentionMs: number;
  readonly deadRetentionMs: number;
  readonly alertOldestPendingMs: number;
  readonly alertFailureRate: number;
  readonly alertWindowMs: number;
  readonly alertDeadRows: number;
  readonly alertMinAttempts: number;
  readonly replayMaxPerCall: number;
  readonly replayBatchSize: number;
  readonly replayStepDelayMs: number;
  readonly sampleRetentionMs: number;
  /** D1 databases the workspaces are split over: shard 0 is binding DB, shard i binding DB_i (shared/shards/). */
  readonly shardCount: number;
}

export interface OAuthSettings {
  readonly clientId: string;
  readonly clientSecret: string;
  /** Bot scopes the install asks for; empty means the scopes the app's manifest derives (shared/app/manifest.ts). */
  readonly scopes: readonly string[];
  readonly redirectUrl: string;
  /** TOKEN_ENCRYPTION_KEY, then TOKEN_ENCRYPTION_KEY_PREVIOUS if set: 64 hex digits each. */
  readonly tokenKey: string;
  readonly previousTokenKey: string | undefined;
}

type Raw = Readonly<Record<string, unknown>>;

interface Spec {
  readonly name: string;
  readonly default: string;
  readonly secret?: true;
  readonly doc: string;
}

const SECOND = 1000;

/** Rows one sweep tick may take: each is one D1 statement, under D1's 1 000 per invocation with room for the rest. */
export const MAX_SWEEP_ROWS_PER_TICK = 800;
/** D1 statements one replay call may spend on its rows and steps, leaving room for its selection and enqueue bookkeeping. */
export const MAX_REPLAY_STATEMENTS_PER_CALL = 900;
const HOUR = 3600 * SECOND;
/** Most shards: each cron tick walks every one, and D1 allows 1 000 queries per invocation (docs/scaling.md). */
export const MAX_SHARDS = 16;

/**
 * The answer to an older ackbox's shard-add window left open (SHARD_COUNT_PREVIOUS set): every Worker refuses to
 * start on it, as on any bad setting (CHANGELOG, "Upgrading"; docs/scaling.md, "Upgrading from an older ackbox").
 */
export const SHARD_COUNT_PREVIOUS_REFUSED =
  "SHARD_COUNT_PREVIOUS is set: an older ackbox's shard add is still open, and this version has no such window (a workspace never moves). Finish that move with the version that started it — wait the 48 hours, then empty SHARD_COUNT_PREVIOUS in both wrangler files and deploy — then upgrade";
/**
 * Slack re-sends events for up to 24 h (Delayed Events). A floor of exactly
 * 24 h leaves no margin for a late retry, clock skew or a prune that runs
 * early in its tick: twice that window.
 */
export const MIN_RECEIPT_RETENTION_HOURS = 48;
const DAY = 24 * HOUR;

/** The documented settings, in the order the README's table lists them. */
export const SETTINGS: readonly Spec[] = [
  { name: "SLACK_SIGNING_SECRET", default: "", secret: true, doc: "Required by the ingress: the key of Slack's request signatures." },
  {
    name: "SLACK_SIGNING_SECRET_PREVIOUS",
    default: "",
    secret: true,
    doc: "Optional: the previous signing secret, also accepted during Slack's 24 h rotation window.",
  },
  { name: "SLACK_BOT_TOKEN", default: "", secret: true, doc: "Bot token (xoxb-…) for Web API calls, used by the consumer." },
  { name: "SLACK_API_URL", default: "https://slack.com/api/", doc: "Web API base URL; point it at a fake or the local stand-in." },
  {
    name: "SLACK_CLIENT_ID",
    default: "",
    doc: "The Slack app's client id; set (with SLACK_CLIENT_SECRET, SLACK_REDIRECT_URL and TOKEN_ENCRYPTION_KEY), the ingress serves /slack/install and each workspace gets its own token; empty = single-workspace mode with SLACK_BOT_TOKEN.",
  },
  { name: "SLACK_CLIENT_SECRET", default: "", secret: true, doc: "The Slack app's client secret, sent to oauth.v2.access only." },
  {
    name: "SLACK_SCOPES",
    default: "",
    doc: "Comma-separated bot scopes an install asks for; empty = the scopes the app's manifest derives (shared/app/manifest.ts).",
  },
  {
    name: "SLACK_REDIRECT_URL",
    default: "",
    doc: "The install's redirect URL, https://<your ingress>/slack/oauth_redirect, as listed in the Slack app's OAuth settings.",
  },
  {
    name: "TOKEN_ENCRYPTION_KEY",
    default: "",
    secret: true,
    doc: "Key (64 hex digits: `openssl rand -hex 32`) that installations' tokens and custom steps' workflow tokens are encrypted with at rest (AES-GCM); required with SLACK_CLIENT_ID, and for an app with custom steps (app.function).",
  },
  {
    name: "TOKEN_ENCRYPTION_KEY_PREVIOUS",
    default: "",
    secret: true,
    doc: "Optional: the previous TOKEN_ENCRYPTION_KEY, still accepted for reading while a rotation re-encrypts the rows.",
  },
  {
    name: "ADMIN_TOKEN",
    default: "",
    secret: true,
    doc: "Bearer token of the operator API (≥ 32 characters, varied: `openssl rand -hex 32`; `npm run setup` makes one); unset turns /admin off (404). The local run generates one.",
  },
  {
    name: "RESPONSE_URL_HOSTS",
    default: "hooks.slack.com",
    doc: "Comma-separated hosts a slash command's response_url may point at (`*` = any), over https on port 443 only, redirects not followed (plain http and other ports only for loopback: the local run adds 127.0.0.1 and localhost).",
  },
  { name: "ALERT_CHANNEL", default: "", doc: "Channel id that backlog alerts are posted to; empty = alerts only logged." },
  { name: "DEAD_LETTER_QUEUE", default: "ackbox-outbox-dlq", doc: "Name of the outbox queue's dead-letter queue." },
  { name: "MAX_BODY_BYTES", default: "524288", doc: "Largest request body the ingress reads (413 above it)." },
  { name: "ACK_BUDGET_MS", default: "2000", doc: "Pre-ack budget for the durable write; over it the ingress answers 500." },
  {
    name: "FIRST_ATTEMPT",
    default: "on",
    doc: "on: the ingress performs a request's inline effects (Slack methods, by default) itself right after the ack, the sweep as backup. off: every effect waits for the consumer.",
  },
  {
    name: "LEASE_SECONDS",
    default: "300",
    doc: "How long a claim holds a row before the sweeper may hand it to another worker (a crashed batch waits this long).",
  },
  { name: "EFFECT_TIMEOUT_SECONDS", default: "10", doc: "Timeout of one Slack call; at most half the lease." },
  { name: "MAX_ATTEMPTS", default: "8", doc: "Attempts before a row that keeps failing is parked as dead." },
  { name: "BACKOFF_BASE_SECONDS", default: "2", doc: "First retry delay; doubles per attempt, with jitter." },
  {
    name: "BACKOFF_CAP_SECONDS",
    default: "900",
    doc: "Longest retry delay, Slack's Retry-After included (a longer one is capped and logged).",
  },
  {
    name: "RATE_LIMIT_MAX_WAIT_HOURS",
    default: "6",
    doc: "How long a row may keep being rate limited (HTTP 429, which spends no attempt) after its first 429 before it is parked.",
  },
  {
    name: "PACE_AHEAD",
    default: "off",
    doc: "on: a batch's second row for one channel waits for a release slot, shared through D1, before Slack answers 429 (fewer 429s; caps a channel at 1/s even where Slack allows more). off: pace a key only once Slack has answered 429 for it.",
  },
  { name: "SWEEP_GRACE_SECONDS", default: "60", doc: "How long a pending row's queue message may be late before the sweeper re-sends it." },
  {
    name: "QUEUE_DELAY_MAX_SECONDS",
    default: "43200",
    doc: "The longest delay a timer's queue message is sent with: Cloudflare Queues' limit (12 h). A timer further ahead gets no message; the sweep sends it at its time. Lower it only to try that path locally.",
  },
  { name: "SWEEP_BATCH_SIZE", default: "200", doc: "Rows the sweeper re-enqueues per step." },
  {
    name: "SWEEP_MAX_STEPS",
    default: "4",
    doc: "Steps per cron tick; SWEEP_BATCH_SIZE × SWEEP_MAX_STEPS ≤ 800 (one D1 statement per row).",
  },
  { name: "PRUNE_BATCH_SIZE", default: "1000", doc: "Rows each prune step deletes per tick." },
  {
    name: "RECEIPT_RETENTION_HOURS",
    default: "72",
    doc: "How long receipts are kept for dedupe (≥ 48: twice Slack's 24 h of delayed events).",
  },
  { name: "DONE_RETENTION_HOURS", default: "168", doc: "How long done rows are kept (≥ the receipt retention)." },
  { name: "DEAD_RETENTION_DAYS", default: "30", doc: "How long dead rows are kept for replay." },
  {
    name: "ALERT_OLDEST_PENDING_SECONDS",
    default: "600",
    doc: "Alert when the oldest pending row has been owed longer than this (a timer counts from its time, not its creation).",
  },
  { name: "ALERT_FAILURE_RATE", default: "0.5", doc: "Alert when this share of recent attempts failed (0–1)." },
  {
    name: "ALERT_WINDOW_SECONDS",
    default: "900",
    doc: "Alert window: at most one alert per window, and the window failure rate is measured over.",
  },
  { name: "ALERT_DEAD_ROWS", default: "1", doc: "Alert when at least this many rows were parked dead within the alert window." },
  {
    name: "ALERT_MIN_ATTEMPTS",
    default: "10",
    doc: "Attempts (failed + done) a window needs before its failure rate can alert, so one failure of one is not 100 %.",
  },
  { name: "REPLAY_MAX_PER_CALL", default: "500", doc: "Most dead rows one replay call re-enqueues." },
  { name: "REPLAY_BATCH_SIZE", default: "100", doc: "Rows re-enqueued per step of a replay (its throttle)." },
  {
    name: "REPLAY_STEP_DELAY_SECONDS",
    default: "5",
    doc: "Queue delay added per replay step: step n's messages are delivered n × this later, a ramp rather than a burst.",
  },
  { name: "SAMPLE_RETENTION_HOURS", default: "48", doc: "How long the sweeper's backlog samples (the dashboard's history) are kept." },
  {
    name: "SHARD_COUNT",
    default: "1",
    doc: "D1 databases the workspaces are split over (docs/scaling.md): shard 0 is the DB binding, shard i the DB_i binding; each workspace lives on one, chosen at its first sight and never changed. 1 = one database. Raising it (`npm run setup -- --shards N`, then a deploy) moves no workspace: new ones start landing on the new shard.",
  },
];

export type SettingsResult = { ok: true; settings: Settings } | { ok: false; errors: string[] };

/**
 * Reads and checks every setting. Returns all problems at once, as values:
 * the Worker entries decide what a bad configuration means for them.
 */
export function parseSettings(raw: Raw): SettingsResult {
  const errors: string[] = [];
  const str = (name: string): string => {
    const value = raw[name];
    if (value === undefined || value === null) return defaultOf(name);
    if (typeof value !== "string") {
      errors.push(`${name} must be a string`);
      return defaultOf(name);
    }
    return value.trim();
  };
  const optional = (name: string): string | undefined => str(name) || undefined;
  const int = (name: string, min: number, max: number): number => {
    const text = str(name);
    const value = Number(text);
    if (!/^\d+$/.test(text) || !Number.isSafeInteger(value) || value < min || value > max) {
      errors.push(`${name} must be a whole number from ${min} to ${max}, got ${JSON.stringify(text)}`);
      return Number(defaultOf(name));
    }
    return value;
  };
  const ratio = (name: string): number => {
    const text = str(name);
    const value = Number(text);
    if (text === "" || !Number.isFinite(value) || value < 0 || value > 1) {
      errors.push(`${name} must be a number from 0 to 1, got ${JSON.stringify(text)}`);
      return Number(defaultOf(name));
    }
    return value;
  };
  const onOff = (name: string): boolean => {
    const text = str(name);
    if (text !== "on" && text !== "off") errors.push(`${name} must be on or off, got ${JSON.stringify(text)}`);
    return text === "on";
  };
  const list = (name: string): string[] =>
    str(name)
      .split(",")
      .map((item) => item.trim())
      .filter((item) => item !== "");

  const slackApiUrl = str("SLACK_API_URL");
  if (!/^https?:\/\/[^/]+/.test(slackApiUrl)) errors.push(`SLACK_API_URL must be an http(s) URL, got ${JSON.stringify(slackApiUrl)}`);

  const clientId = str("SLACK_CLIENT_ID");
  let oauth: OAuthSettings | undefined;
  if (clientId !== "") {
    const need = (name: string): string => {
      const value = str(name);
      if (value === "") errors.push(`${name} is required when SLACK_CLIENT_ID is set`);
      return value;
    };
    oauth = {
      clientId,
      clientSecret: need("SLACK_CLIENT_SECRET"),
      scopes: list("SLACK_SCOPES"),
      redirectUrl: need("SLACK_REDIRECT_URL"),
      tokenKey: need("TOKEN_ENCRYPTION_KEY"),
      previousTokenKey: optional("TOKEN_ENCRYPTION_KEY_PREVIOUS"),
    };
    if (oauth.redirectUrl !== "" && !/^https?:\/\/[^/]+(\/.*)?\/slack\/oauth_redirect$/.test(oauth.redirectUrl))
      errors.push(`SLACK_REDIRECT_URL must be an http(s) URL ending in /slack/oauth_redirect, got ${JSON.stringify(oauth.redirectUrl)}`);
  }
  for (const name of ["TOKEN_ENCRYPTION_KEY", "TOKEN_ENCRYPTION_KEY_PREVIOUS"]) {
    const value = str(name);
    // The value itself is a secret: the error names the rule, never the value.
    if (value !== "" && !isTokenKeyText(value)) errors.push(`${name} must be 64 hex digits (openssl rand -hex 32)`);
  }

  const tokenKey = optional("TOKEN_ENCRYPTION_KEY");
  const settings: Settings = {
    signingSecrets: [str("SLACK_SIGNING_SECRET"), str("SLACK_SIGNING_SECRET_PREVIOUS")].filter((s) => s !== ""),
    slackBotToken: optional("SLACK_BOT_TOKEN"),
    slackApiUrl: slackApiUrl.endsWith("/") ? slackApiUrl : `${slackApiUrl}/`,
    oauth,
    tokenKey: tokenKey === undefined ? undefined : { current: tokenKey, previous: optional("TOKEN_ENCRYPTION_KEY_PREVIOUS") },
    adminToken: optional("ADMIN_TOKEN"),
    responseUrlHosts: list("RESPONSE_URL_HOSTS").map((host) => host.toLowerCase()),
    alertChannel: optional("ALERT_CHANNEL"),
    deadLetterQueue: str("DEAD_LETTER_QUEUE"),
    maxBodyBytes: int("MAX_BODY_BYTES", 1024, 16 * 1024 * 1024),
    ackBudgetMs: int("ACK_BUDGET_MS", 100, 2900),
    firstAttempt: onOff("FIRST_ATTEMPT"),
    leaseMs: int("LEASE_SECONDS", 5, 3600) * SECOND,
    effectTimeoutMs: int("EFFECT_TIMEOUT_SECONDS", 1, 600) * SECOND,
    maxAttempts: int("MAX_ATTEMPTS", 1, 100),
    backoffBaseMs: int("BACKOFF_BASE_SECONDS", 1, 3600) * SECOND,
    backoffCapMs: int("BACKOFF_CAP_SECONDS", 1, 43_200) * SECOND,
    rateLimitMaxWaitMs: int("RATE_LIMIT_MAX_WAIT_HOURS", 1, 24 * 7) * HOUR,
    paceAhead: onOff("PACE_AHEAD"),
    sweepGraceMs: int("SWEEP_GRACE_SECONDS", 5, 3600) * SECOND,
    queueDelayMaxMs: int("QUEUE_DELAY_MAX_SECONDS", 1, MAX_QUEUE_DELAY_SECONDS) * SECOND,
    sweepBatchSize: int("SWEEP_BATCH_SIZE", 1, 800),
    sweepMaxSteps: int("SWEEP_MAX_STEPS", 1, 50),
    pruneBatchSize: int("PRUNE_BATCH_SIZE", 1, 5000),
    receiptRetentionMs: int("RECEIPT_RETENTION_HOURS", MIN_RECEIPT_RETENTION_HOURS, 24 * 365) * HOUR,
    doneRetentionMs: int("DONE_RETENTION_HOURS", 1, 24 * 365) * HOUR,
    deadRetentionMs: int("DEAD_RETENTION_DAYS", 1, 3650) * DAY,
    alertOldestPendingMs: int("ALERT_OLDEST_PENDING_SECONDS", 10, 7 * 24 * 3600) * SECOND,
    alertFailureRate: ratio("ALERT_FAILURE_RATE"),
    alertWindowMs: int("ALERT_WINDOW_SECONDS", 60, 24 * 3600) * SECOND,
    alertDeadRows: int("ALERT_DEAD_ROWS", 1, 1_000_000),
    alertMinAttempts: int("ALERT_MIN_ATTEMPTS", 1, 1_000_000),
    replayMaxPerCall: int("REPLAY_MAX_PER_CALL", 1, 10_000),
    replayBatchSize: int("REPLAY_BATCH_SIZE", 1, 100),
    replayStepDelayMs: int("REPLAY_STEP_DELAY_SECONDS", 0, 300) * SECOND,
    sampleRetentionMs: int("SAMPLE_RETENTION_HOURS", 1, 24 * 90) * HOUR,
    shardCount: int("SHARD_COUNT", 1, MAX_SHARDS),
  };

  // A weak token is refused, not warned about: it unlocks replay and every stored payload.
  const weakness = settings.adminToken === undefined ? undefined : adminTokenWeakness(settings.adminToken);
  if (weakness !== undefined) errors.push(weakness);

  // Relations between settings: each one guards an invariant, not a taste.
  if (settings.effectTimeoutMs * 2 > settings.leaseMs) {
    errors.push("EFFECT_TIMEOUT_SECONDS must be at most half of LEASE_SECONDS, so an attempt ends well inside its lease");
  }
  if (settings.doneRetentionMs < settings.receiptRetentionMs) {
    // A redelivery is absorbed by the receipt and, behind it, by the outbox
    // row's unique key; pruning the row first would let that key be reused.
    errors.push("DONE_RETENTION_HOURS must be at least RECEIPT_RETENTION_HOURS");
  }
  if (settings.sweepBatchSize * settings.sweepMaxSteps > MAX_SWEEP_ROWS_PER_TICK) {
    // One statement per row taken (shared/outbox/sweep.ts), and D1 allows 1 000 queries per invocation.
    errors.push(`SWEEP_BATCH_SIZE × SWEEP_MAX_STEPS must be at most ${MAX_SWEEP_ROWS_PER_TICK} (D1 allows 1 000 queries per invocation)`);
  }
  // One statement per row replayed and one marker per step and shard it touches (shared/ops/replay.ts): a step's rows
  // may sit on every shard, so a step costs up to SHARD_COUNT markers, never more than its rows. Under D1's 1 000.
  const replaySteps = Math.ceil(settings.replayMaxPerCall / settings.replayBatchSize);
  const replayMarkers = Math.min(settings.replayMaxPerCall, replaySteps * settings.shardCount);
  if (settings.replayMaxPerCall + replayMarkers > MAX_REPLAY_STATEMENTS_PER_CALL) {
    errors.push(
      `REPLAY_MAX_PER_CALL + ⌈REPLAY_MAX_PER_CALL ÷ REPLAY_BATCH_SIZE⌉ × SHARD_COUNT (the steps' markers, at most one per row) must be at most ${MAX_REPLAY_STATEMENTS_PER_CALL} (one D1 statement per row and one per step and shard; D1 allows 1 000 queries per invocation)`,
    );
  }
  const windowLeftOpen = raw.SHARD_COUNT_PREVIOUS;
  if (windowLeftOpen !== undefined && windowLeftOpen !== null && String(windowLeftOpen).trim() !== "") {
    // An older ackbox's shard-add window, still open: its moved teams' receipts are on their previous shard, and
    // this version reads no previous shard. Finished by the version that opened it, the upgrade is safe.
    errors.push(SHARD_COUNT_PREVIOUS_REFUSED);
  }
  if (settings.backoffCapMs < settings.backoffBaseMs) {
    errors.push("BACKOFF_CAP_SECONDS must be at least BACKOFF_BASE_SECONDS");
  }
  return errors.length === 0 ? { ok: true, settings } : { ok: false, errors };
}

function defaultOf(name: string): string {
  const spec = SETTINGS.find((s) => s.name === name);
  if (!spec) throw new Error(`unknown setting ${name}`);
  return spec.default;
}

const parsed = new WeakMap<object, SettingsResult>();

/** parseSettings, once per `env` object (one per isolate in practice). */
export function settingsOf(env: object): SettingsResult {
  let result = parsed.get(env);
  if (!result) {
    result = parseSettings(env as Raw);
    parsed.set(env, result);
  }
  return result;
}
