/**
 * THE ACK PATH: POST /slack/events, from raw request to Slack's answer.
 *
 * Slack waits three seconds. Everything before the answer is local work:
 * header checks, reading the body (bounded), the HMAC, parsing, routing, and
 * one D1 batch that records the receipt and the outbox rows together (and, at
 * a workspace's first sight in this isolate, where it lives: shared/shards/placement.ts). No
 * Slack call, no queue round trip before the answer: delivery starts with
 * it, in waitUntil — the first attempt at the ack for inline effects
 * (shared/delivery/first-attempt.ts), issued in the answer's own turn, the
 * enqueue for the rest — because the rows are already durable and the sweep
 * will send them if that never happens.
 *
 * The status codes, in the order the checks run (SPEC §1):
 *   401  headers missing or garbled, timestamp more than 300 s away either way
 *   413  body over MAX_BODY_BYTES (before it is hashed: an unauthenticated
 *        sender cannot make us read or hash megabytes)
 *   401  signature mismatch (current and previous secret both tried)
 *   400  authenticated, but not a Slack shape
 *   200  url_verification: {"challenge"}
 *   200  ignored (no handler matched, an unhandled type) or a duplicate: nothing new written
 *   200  answered: a handler returned no intents (an options list, a reply): nothing written
 *   200  accepted: receipt + outbox rows (and cancels) committed; body = the app's reply, if any
 *   500  refused: the app's handler threw, or its intents cannot be recorded
 *        (an unregistered effect, args that are not JSON or too large, a
 *        duplicate key): nothing written, the log names the handler
 *   500  the durable write failed or overran ACK_BUDGET_MS: only Slack's
 *        retry can still save the event. The batch may yet commit; it is
 *        idempotent, so the retry then finds a duplicate and acks. Commands
 *        and interactions are never retried by Slack: rows of theirs that
 *        commit after the 500 are cancelled instead (after.ts).
 *
 * The request runs straight down, one call per step: verify → parse → route
 * → write (write.ts) → answer → after (after.ts, the one place where work
 * outlives the request). What the ingress saw of the team — a signed request,
 * or one refused by its signature — is noted beside it for the delivery gaps
 * (shared/ops/activity.ts): at most once a minute per team, written a turn
 * after the answer, never in its batch.
 */
import type { Routing, SlackApp } from "../../shared/app/app.ts";
import type { AppSettings } from "../../shared/app/settings.ts";
import type { FirstAttempt } from "../../shared/delivery/first-attempt.ts";
import { tokenKeysOf } from "../../shared/effects/context.ts";
import { withInstallationLifecycle } from "../../shared/installations/lifecycle.ts";
import { describeError, type Fields, type Log } from "../../shared/log.ts";
import { type ActivityKind, type ActivityMeter, type Seen, teamOfUnverified } from "../../shared/ops/activity.ts";
import type { OutboxQueue } from "../../shared/outbox/enqueue.ts";
import type { Settings } from "../../shared/settings.ts";
import type { RoutingInput } from "../../shared/shards/route.ts";
import { parseSlackBody, type RecordableInput } from "../../shared/slack/inputs.ts";
import { readBodyWithLimit } from "../../shared/slack/read-body.ts";
import { checkSignatureHeaders, verifySignature } from "../../shared/slack/signature.ts";
import { stepOf } from "../../shared/steps/execution.ts";
import { type SealedExecution, sealExecution } from "../../shared/steps/tokens.ts";
import { afterAnswer } from "./after.ts";
import { type ShardDeps, writeDurably } from "./write.ts";

export type { ShardDeps } from "./write.ts";

export interface AckDeps {
  readonly db: D1Database;
  readonly queue: OutboxQueue;
  readonly settings: Pick<Settings, "signingSecrets" | "maxBodyBytes" | "ackBudgetMs" | "sweepGraceMs" | "oauth"> &
    Partial<Pick<Settings, "queueDelayMaxMs" | "tokenKey">>;
  /** The app's own settings (shared/app/settings.ts), parsed from the same env; handlers get their public part. */
  readonly appSettings: AppSettings;
  readonly log: Log;
  readonly waitUntil: (work: Promise<unknown>) => void;
  /** views.open for a routing that asks for a modal; best effort, inside the budget. */
  readonly openView?: (
    triggerId: string,
    view: unknown,
    timeoutMs: number,
    /** Whose token opens it, in a distributed app (the team's installation). */
    team: {
      readonly teamId: string | undefined;
      readonly enterpriseId: string | undefined;
      readonly isEnterpriseInstall?: boolean | undefined;
    },
  ) => Promise<void>;
  /** The app: what an input means (app/index.ts in the Worker; a test app in the engine's tests). */
  readonly app: SlackApp;
  /**
   * The first attempt at the ack (shared/delivery/first-attempt.ts): the
   * durable write claims the inline rows for the ingress, which performs
   * them after the answer, in waitUntil. Without it the rows are only
   * enqueued, for the consumer.
   */
  readonly firstAttempt?: FirstAttempt;
  /**
   * The shard an input's workspace lives on (shared/shards/placement.ts): its
   * D1, the queue that names it, and the first attempt bound to both. A round
   * trip to shard 0 at the workspace's first sight in this isolate (none when
   * its home is shard 0: the placement rides in the batch), nothing after.
   * Absent: one shard, `db`/`queue`/`firstAttempt`.
   */
  readonly shardOf?: (input: RoutingInput, now: number) => Promise<ShardDeps>;
  /**
   * What the ingress saw of each team, for the delivery gaps (shared/ops/activity.ts): the isolate's meter says
   * whether a write is due, `write` makes it (on shard 0). Absent: nothing is noted.
   */
  readonly activity?: { readonly meter: ActivityMeter; readonly write: (kind: ActivityKind, who: Seen, now: number) => Promise<void> };
}

export type Verdict =
  | "unauthorized"
  | "too_large"
  | "bad_request"
  | "url_verification"
  | "ignored"
  | "answered"
  | "refused"
  | "duplicate"
  | "accepted"
  | "not_recorded";

export async function handleSlackRequest(request: Request, deps: AckDeps, now: number): Promise<Response> {
  const started = performance.now();
  const answer = answerer(request, deps.log, started);

  const verified = await verifyRequest(request, deps.settings, now);
  if (!verified.ok) {
    if (verified.unsigned !== undefined) {
      const teamId = teamOfUnverified(request.headers.get("content-type"), verified.unsigned);
      noteActivity(deps, "refused", teamId === undefined ? undefined : { teamId }, now);
    }
    return answer(verified.status, verified.verdict, { reason: verified.reason });
  }

  const parsed = parseSlackBody(request.headers.get("content-type"), verified.body);
  if (!parsed.ok) return answer(400, "bad_request", { reason: parsed.reason });
  const input = parsed.input;
  if (input.surface === "url_verification") return answer(200, "url_verification", {}, { challenge: input.challenge });
  if (input.surface === "unhandled") return answer(200, "ignored", { reason: `unhandled type ${input.type}` });
  noteActivity(deps, "seen", input.teamId === undefined ? undefined : { teamId: input.teamId, enterpriseId: orgWide(input) }, now);

  const routing = routeInput(input, deps, now);
  const about = { surface: input.surface, id: input.id };
  if (routing.action === "ignore") return answer(200, "ignored", { ...about, reason: routing.reason });
  // Slack retries a 500 (Events API) or shows the user an error: either way nothing is half-recorded.
  if (routing.action === "refuse") return answer(500, "refused", { ...about, reason: routing.reason });
  const cancels = routing.cancels ?? [];
  const records = routing.records ?? [];
  if (routing.effects.length === 0 && cancels.length === 0 && records.length === 0) {
    // Answered inline (an options list, a reply), nothing to perform later: no receipt, no rows.
    await openViewWithin(routing, deps, started, about, input);
    return answer(200, "answered", { ...about, handler: routing.handler }, routing.reply);
  }

  // A custom step's input: its rows belong to the execution, and its workflow token is kept, sealed, with them.
  const step = stepOf(input, now);
  let sealed: SealedExecution | undefined;
  if (step?.token !== undefined && input.teamId) {
    const keys = tokenKeysOf(deps.settings);
    if (!keys) {
      return answer(500, "refused", {
        ...about,
        handler: routing.handler,
        reason: `custom step ${step.callbackId || "(unknown)"}: its workflow token can only be kept encrypted, and TOKEN_ENCRYPTION_KEY is not set (openssl rand -hex 32)`,
      });
    }
    try {
      sealed = await sealExecution(await keys(), { ...step, token: step.token }, input.teamId);
    } catch (error) {
      return answer(500, "not_recorded", { ...about, reason: `the workflow token could not be sealed: ${describeError(error)}` });
    }
  }
  const execution = step ? { executionId: step.executionId, ...(sealed ? { sealed } : {}) } : undefined;
  const written = await writeDurably(
    input,
    routing.effects,
    request.headers.get("x-slack-retry-num"),
    deps,
    now,
    cancels,
    execution,
    records,
  );

  let response: Response;
  if (written.verdict === "accepted") {
    await openViewWithin(routing, deps, started, about, input);
    response = answer(200, "accepted", { ...about, handler: routing.handler, ...written.fields }, routing.reply);
  } else if (written.verdict === "duplicate") {
    response = answer(200, "duplicate", { ...about, ...written.fields });
  } else {
    // Do not ack: a 200 now would be a promise nobody has written down.
    response = answer(500, "not_recorded", { ...about, ...written.fields });
  }

  const after = afterAnswer(written, input, deps.log, now);
  if (after) deps.waitUntil(after);
  return response;
}

/** The answer and the ack's one log line about it. */
function answerer(request: Request, log: Log, started: number) {
  const retryNum = request.headers.get("x-slack-retry-num");
  const retryReason = request.headers.get("x-slack-retry-reason");
  return (status: number, verdict: Verdict, fields: Fields, json?: unknown): Response => {
    log(status >= 500 ? "error" : status >= 400 ? "warn" : "info", "slack request", {
      verdict,
      status,
      ...fields,
      retry_num: retryNum,
      retry_reason: retryReason,
      ms: Math.round((performance.now() - started) * 10) / 10,
    });
    return json === undefined ? new Response(null, { status }) : Response.json(json, { status });
  };
}

type Verified =
  | { ok: true; body: string }
  /** unsigned: the body of a request whose signature did not match (read, never trusted), for the gaps' measure. */
  | { ok: false; status: 401 | 413; verdict: Verdict; reason: string; unsigned?: string };

/** Headers, then the body (bounded, before it is hashed), then the signature. */
async function verifyRequest(request: Request, settings: AckDeps["settings"], now: number): Promise<Verified> {
  const headers = checkSignatureHeaders(request.headers, now);
  if (!headers.ok) return { ok: false, status: 401, verdict: "unauthorized", reason: headers.reason };
  const body = await readBodyWithLimit(request, settings.maxBodyBytes);
  if (!body.ok) return { ok: false, status: 413, verdict: "too_large", reason: body.reason };
  const signed = await verifySignature(headers.value, body.bytes, settings.signingSecrets);
  if (!signed.ok) {
    return { ok: false, status: 401, verdict: "unauthorized", reason: signed.reason, unsigned: new TextDecoder().decode(body.bytes) };
  }
  return { ok: true, body: new TextDecoder().decode(body.bytes) };
}

/** Notes what the ingress saw of a team, a turn after the answer (waitUntil), when the isolate's meter says it is due. */
function noteActivity(deps: AckDeps, kind: ActivityKind, who: Seen | undefined, now: number): void {
  const activity = deps.activity;
  if (!activity || who === undefined || !activity.meter.due(kind, who.teamId, now)) return;
  deps.waitUntil(new Promise((resolve) => setTimeout(resolve, 0)).then(() => activity.write(kind, who, now)));
}

/** The org of the org-wide install a request reached, if that is what serves it (a backfill of the team names it). */
function orgWide(input: RecordableInput): string | undefined {
  return input.isEnterpriseInstall ? input.enterpriseId : undefined;
}

/** The app's routing, with a distributed app's uninstalls and revocations (no D1 read: a pure function of the event). */
function routeInput(input: RecordableInput, deps: AckDeps, now: number): Routing {
  const routing = deps.app.route(input, { now, settings: deps.appSettings });
  return withInstallationLifecycle(routing, input, deps.settings.oauth !== undefined, now);
}

/**
 * A trigger_id lives 3 s, so a modal cannot wait for the outbox: open it
 * inline, in what is left of the budget, and never let it change the answer.
 */
async function openViewWithin(
  routing: { readonly openView?: { readonly triggerId: string; readonly view: unknown } },
  deps: AckDeps,
  started: number,
  about: Fields,
  input: RecordableInput,
): Promise<void> {
  if (!routing.openView || !deps.openView) return;
  const left = Math.max(0, deps.settings.ackBudgetMs - (performance.now() - started));
  try {
    await deps.openView(routing.openView.triggerId, routing.openView.view, left, {
      teamId: input.teamId,
      enterpriseId: input.enterpriseId,
      isEnterpriseInstall: input.isEnterpriseInstall,
    });
  } catch (error) {
    deps.log("warn", "views.open failed (best effort)", { ...about, error: describeError(error) });
  }
}
