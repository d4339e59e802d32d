/**
 * THE ACK PATH: POST /slack/events, from raw request to Slack's answer.
 *
 * Slack waits three seconds. Everything before the answer is local work:
 * header checks, reading the body (bounded), the HMAC, parsing, routing, and
 * one D1 batch that records the receipt and the outbox rows together. No
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
 *   200  accepted: receipt + outbox rows committed; body = the app's reply, if any
 *   500  refused: the app's handler threw, or its intents cannot be recorded
 *        (an unregistered effect, args that are not JSON or too large, a
 *        duplicate key): nothing written, the log names the handler
 *   500  the durable write failed or overran ACK_BUDGET_MS: only Slack's
 *        retry can still save the event. The batch may yet commit; it is
 *        idempotent, so the retry then finds a duplicate and acks. Commands
 *        and interactions are never retried by Slack: rows of theirs that
 *        commit after the 500 are cancelled instead (see below).
 */
import { type AppSettings, appSettingsOf, type SlackApp } from "../../shared/app/app.ts";
import type { FirstAttempt, NotPlanned, PlannedClaim } from "../../shared/delivery/first-attempt.ts";
import type { GateReading } from "../../shared/delivery/inline-gate.ts";
import { withInstallationLifecycle } from "../../shared/installations/lifecycle.ts";
import { describeError, type Fields, type Log } from "../../shared/log.ts";
import { cancelUnattemptedRows } from "../../shared/outbox/cancel.ts";
import { enqueueRows, type OutboxQueue } from "../../shared/outbox/enqueue.ts";
import type { ClaimedRow } from "../../shared/outbox/model.ts";
import { type ReceiptInput, type RecordVerdict, recordIntent } from "../../shared/outbox/record.ts";
import type { Settings } from "../../shared/settings.ts";
import type { RoutingInput } from "../../shared/shards/route.ts";
import { recordedOn } from "../../shared/shards/transition.ts";
import { factOf } from "../../shared/slack/facts.ts";
import { parseSlackBody, type RecordableInput } from "../../shared/slack/inputs.ts";
import { readBodyWithLimit } from "../../shared/slack/read-body.ts";
import { checkSignatureHeaders, verifySignature } from "../../shared/slack/signature.ts";
import { withTimeout } from "../../shared/timeout.ts";

export interface AckDeps {
  readonly db: D1Database;
  readonly queue: OutboxQueue;
  readonly settings: Pick<Settings, "signingSecrets" | "maxBodyBytes" | "ackBudgetMs" | "sweepGraceMs" | "oauth"> & AppSettings;
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
   * This isolate's ack load, as the first attempt's gate reads it
   * (shared/delivery/inline-gate.ts): told when each request starts and
   * ends, and how long it took up to the end of its durable write, if it
   * made one. Absent without a first attempt.
   */
  readonly gate?: AckLoad;
  /**
   * The first attempt at the ack (shared/delivery/first-attempt.ts): the
   * durable write claims the inline rows for the ingress, which performs
   * them after the answer, in waitUntil. Without it the rows are only
   * enqueued, for the consumer.
   */
  readonly firstAttempt?: FirstAttempt;
  /**
   * The shard an input's team lives on (shared/shards/route.ts): its D1, the
   * queue that names it, and the first attempt bound to both. A pure function
   * of the input — no D1 round trip. Absent: one shard, `db`/`queue`/`firstAttempt`.
   */
  readonly shardOf?: (input: RoutingInput) => ShardDeps;
}

/** What the ack tells the first attempt's gate (InlineGate). */
export interface AckLoad {
  /** A request began; the token ends it. */
  ackStarted(now: number): number;
  /** It ended at `now`; `timedMs`: its time up to its durable write's end, undefined if it made none. */
  ackEnded(token: number, now: number, timedMs: number | undefined): void;
}

/** What the ack writes to and delivers with, for one shard. */
export interface ShardDeps {
  readonly index: number;
  readonly db: D1Database;
  readonly queue: OutboxQueue;
  readonly firstAttempt?: FirstAttempt | undefined;
  /**
   * Set only while a shard is added, for an input whose team moved: the shard
   * it lived on before (shared/shards/transition.ts). A receipt there makes
   * this delivery a duplicate; nothing is written on either shard.
   */
  readonly previous?: { readonly index: number; readonly db: D1Database } | undefined;
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
  const gate = deps.gate;
  if (!gate) return acknowledge(request, deps, now, () => {});
  // Counted for the first attempt's gate from the request's start to its answer, any request; timed only if it
  // made the durable write, and only up to the write's end (what comes after, a modal's views.open, is Slack's time).
  const started = performance.now();
  const token = gate.ackStarted(now);
  let timedMs: number | undefined;
  try {
    return await acknowledge(request, deps, now, () => {
      timedMs = performance.now() - started;
    });
  } finally {
    gate.ackEnded(token, now + (performance.now() - started), timedMs);
  }
}

/** The ack itself; `written` is called once its durable write has settled (the gate times only such acks). */
async function acknowledge(request: Request, baseDeps: AckDeps, now: number, written: () => void): Promise<Response> {
  const started = performance.now();
  let deps = baseDeps;
  const retryNum = request.headers.get("x-slack-retry-num");
  const retryReason = request.headers.get("x-slack-retry-reason");
  const answer = (status: number, verdict: Verdict, fields: Fields, body?: BodyInit | null, json = false): Response => {
    const level = status >= 500 ? "error" : status >= 400 ? "warn" : "info";
    deps.log(level, "slack request", {
      verdict,
      status,
      ...fields,
      retry_num: retryNum,
      retry_reason: retryReason,
      ms: Math.round((performance.now() - started) * 10) / 10,
    });
    return new Response(body ?? null, { status, headers: json ? { "content-type": "application/json" } : {} });
  };

  const headers = checkSignatureHeaders(request.headers, now);
  if (!headers.ok) return answer(401, "unauthorized", { reason: headers.reason });

  const body = await readBodyWithLimit(request, deps.settings.maxBodyBytes);
  if (!body.ok) return answer(413, "too_large", { reason: body.reason });

  const signed = await verifySignature(headers.value, body.bytes, deps.settings.signingSecrets);
  if (!signed.ok) return answer(401, "unauthorized", { reason: signed.reason });

  const parsed = parseSlackBody(request.headers.get("content-type"), new TextDecoder().decode(body.bytes));
  if (!parsed.ok) return answer(400, "bad_request", { reason: parsed.reason });
  const input = parsed.input;

  if (input.surface === "url_verification") {
    return answer(200, "url_verification", {}, JSON.stringify({ challenge: input.challenge }), true);
  }
  if (input.surface === "unhandled") return answer(200, "ignored", { reason: `unhandled type ${input.type}` });

  // A distributed app also records uninstalls and revocations (no D1 read: a pure function of the event).
  const routing = withInstallationLifecycle(
    deps.app.route(input, { now, settings: appSettingsOf(deps.settings) }),
    input,
    deps.settings.oauth !== undefined,
    now,
  );
  const about = { surface: input.surface, id: input.id };
  if (routing.action === "ignore") return answer(200, "ignored", { ...about, reason: routing.reason });
  // Slack retries a 500 (Events API) or shows the user an error: either way nothing is half-recorded.
  if (routing.action === "refuse") return answer(500, "refused", { ...about, reason: routing.reason });
  if (routing.effects.length === 0) {
    // Answered inline (an options list, a reply), nothing to perform later: no receipt, no rows.
    await openViewWithin(routing, deps, started, about, input);
    const reply = routing.reply ? JSON.stringify(routing.reply) : null;
    return answer(200, "answered", { ...about, handler: routing.handler }, reply, reply !== null);
  }

  const receipt: ReceiptInput = {
    id: input.id,
    kind: input.surface,
    type: receiptType(input),
    teamId: input.teamId,
    enterpriseId: input.enterpriseId,
    retryNum: retryNum !== null && /^\d+$/.test(retryNum) ? Number(retryNum) : undefined,
    ...factOf(input),
  };

  // The receipt and its rows go to the team's shard, in the one batch the ack always made.
  const shard = deps.shardOf?.(input);
  if (shard) deps = { ...deps, db: shard.db, queue: shard.queue, firstAttempt: shard.firstAttempt };
  // The durable write's budget; a read on the previous shard spends from it, so the ack's total stays ACK_BUDGET_MS.
  let writeBudgetMs = deps.settings.ackBudgetMs;
  if (shard?.previous) {
    // A moved team, while a shard is added: a retry of an input first recorded on its previous shard is found
    // there (rows recorded there drain there). A failed read writes nothing: 500, and Slack's retry reads again.
    const previousShard = shard.previous.index;
    const readStarted = performance.now();
    try {
      const seen = await withTimeout(
        recordedOn(shard.previous.db, input.id),
        deps.settings.ackBudgetMs / 2,
        "the previous shard's receipt read",
      );
      if (seen) return answer(200, "duplicate", { ...about, shard: shard.index, previous_shard: previousShard });
    } catch (error) {
      return answer(500, "not_recorded", { ...about, shard: shard.index, previous_shard: previousShard, reason: describeError(error) });
    }
    writeBudgetMs = Math.max(1, writeBudgetMs - (performance.now() - readStarted));
  }
  // The gate is asked as of now, not the request's start: the time it waited for its turn is part of the slowdown.
  const plan = deps.firstAttempt?.plan(routing.effects, now + (performance.now() - started));
  const planned = plan && "claim" in plan ? plan : undefined;
  const recording = recordIntent(deps.db, receipt, routing.effects, now, deps.settings.sweepGraceMs, undefined, planned?.claim);
  let verdict: RecordVerdict;
  try {
    verdict = await withTimeout(recording, writeBudgetMs, "the durable write");
    written();
  } catch (error) {
    written();
    // Do not ack: a 200 now would be a promise nobody has written down.
    // If the batch still commits after this 500, what happens depends on the
    // surface, one outcome each:
    // - an event: Slack retries it, so deliver the late rows now as if
    //   accepted (the retry finds a duplicate); if the batch never commits,
    //   the retry records it;
    // - a command or an interaction: Slack never retries, and the user saw an
    //   error and may run it again; cancel the late rows before anyone
    //   performs them (shared/outbox/cancel.ts), so one run never becomes two
    //   — those the write claimed for this ingress included (its token).
    deps.waitUntil(
      recording.then(
        async (late) => {
          if (!late.firstDelivery) return planned?.release();
          if (input.surface === "event") {
            const how = deps.firstAttempt ? "delivering (the first attempt)" : "enqueued";
            deps.log("warn", `durable write committed after its 500; ${how}`, { ...about, outbox_ids: late.outboxIds });
            return deliverAfter(deps, late.claimed, late.outboxIds, now, planned?.release);
          }
          planned?.release();
          const cancelled = await cancelUnattemptedRows(deps.db, late.outboxIds, now, planned?.claim.token).catch((error) => {
            // Still pending: the sweep performs them after SWEEP_GRACE_SECONDS. Say so, with the ids an operator needs.
            deps.log("error", "durable write committed after its 500; could not cancel: the sweep will perform these rows", {
              ...about,
              outbox_ids: late.outboxIds,
              error: describeError(error),
            });
            return undefined;
          });
          if (cancelled === undefined) return;
          deps.log("warn", "durable write committed after its 500; cancelled (Slack does not retry this surface)", {
            ...about,
            outbox_ids: late.outboxIds,
            cancelled,
          });
        },
        () => planned?.release(),
      ),
    );
    return answer(500, "not_recorded", { ...about, shard: shard?.index, reason: describeError(error) });
  }

  if (!verdict.firstDelivery) {
    planned?.release();
    return answer(200, "duplicate", { ...about, shard: shard?.index });
  }

  // Durable from here on. Delivery starts after the answer (the first
  // attempt, or the enqueue for the consumer); the sweep is the guarantee.
  const ids = verdict.outboxIds;
  deps.waitUntil(deliverAfter(deps, verdict.claimed, ids, now, planned?.release));

  await openViewWithin(routing, deps, started, about, input);

  const reply = routing.reply ? JSON.stringify(routing.reply) : null;
  const firstAttempt = firstAttemptVerdict(plan, verdict.claimed.length);
  const load = plan && "load" in plan && plan.load ? { gate: gateFields(plan.load) } : {};
  return answer(
    200,
    "accepted",
    {
      ...about,
      handler: routing.handler,
      shard: shard?.index,
      outbox_ids: ids,
      first_attempt: firstAttempt,
      ...load,
      // A copy of a fact already recorded (the same message under another event_id): its rows were there.
      ...(verdict.repeated > 0 ? { repeated: verdict.repeated, fact: receipt.fact } : {}),
    },
    reply,
    reply !== null,
  );
}

/**
 * What became of a request's rows on the first attempt, for the ack's log
 * line: "inline" (the write claimed every planned row), "not_claimable" (the
 * write's claim left some pending: a rate key cooling after a 429), the
 * gate's reason for shedding them to the queue, "no_inline_effect", or "off"
 * (no first attempt: FIRST_ATTEMPT=off, or no token to call Slack with).
 */
function firstAttemptVerdict(plan: PlannedClaim | NotPlanned | undefined, claimed: number): string {
  if (plan === undefined) return "off";
  if ("queued" in plan) return plan.queued;
  return claimed === plan.claim.indexes.length ? "inline" : "not_claimable";
}

/** What the first attempt's gate read when it shed for saturation, for the ack's log line. */
function gateFields(load: GateReading): Fields {
  return { acks: load.acks, recent_ms: load.recentMs, usual_ms: load.usualMs, slow_ms: load.slowMs };
}

/**
 * Delivery of recorded rows, once they are durable. The first attempt
 * performs the rows the write claimed and enqueues the rest; without it,
 * every row is enqueued for the consumer.
 *
 * Claimed rows start in the same turn as the answer (a microtask, not a
 * macrotask): the Slack call is issued beside the Response, before the
 * isolate takes up the next request's work. A macrotask later, it queued
 * behind every request of a burst (measured in the latency section, ten
 * requests at once each second: ack→effect p50 6.8 → 0.8 ms, p99 49.5 → 7.2
 * ms); issuing it costs the ack only the synchronous steps up to the fetch. With nothing claimed, the queue sends wait a macrotask, as
 * before, so they never compete with the ack.
 */
function deliverAfter(
  deps: AckDeps,
  claimed: readonly ClaimedRow[],
  ids: readonly number[],
  now: number,
  release: (() => void) | undefined,
): Promise<unknown> {
  const firstAttempt = deps.firstAttempt;
  if (!firstAttempt) return enqueueRows(deps.queue, deps.db, ids, now, deps.log);
  const turn = claimed.length > 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, 0));
  return turn.then(() => firstAttempt.deliver(claimed, ids, now, release)).finally(() => release?.());
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

function receiptType(input: RecordableInput): string {
  switch (input.surface) {
    case "event":
      return input.event.type;
    case "command":
      return input.command.command;
    case "interaction":
      return input.type;
  }
}
