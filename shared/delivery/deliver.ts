/**
 * The consumer's work for one batch of outbox queue messages:
 * claim → perform → fenced finish, per row.
 *
 * A message only names a row; the row's state decides. Rows that are done,
 * dead, validly leased by someone else or not yet due are not claimed and
 * their messages are acked: whatever owns the row will finish it, and the
 * sweep re-sends it if nothing does.
 *
 * Order matters: the effect is performed first and the completion written
 * after (post-then-ack). A crash between the two repeats the effect when the
 * lease expires (at-least-once); the other order could lose it silently.
 */
import pRetry from "p-retry";
import { type EffectContext, type EffectDefinition, isCompleted } from "../effects/effect.ts";
import { type ClaimLease, withLease } from "../effects/lease.ts";
import type { EffectFetch } from "../effects/outbound.ts";
import type { EffectRegistry } from "../effects/registry.ts";
import type { SlackForRow } from "../installations/resolve.ts";
import { describeError, type Log } from "../log.ts";
import { cancelsText } from "../outbox/cancel-named.ts";
import { claimOrTakeSlot } from "../outbox/claim.ts";
import { giveBackBusy, giveBackIfHeldBack } from "../outbox/cooldown.ts";
import { enqueueRecorded, type OutboxQueue } from "../outbox/enqueue.ts";
import { type Finish, FollowUpKeyTaken, finishClaim, renewClaim } from "../outbox/fence.ts";
import { type CancelResult, type ClaimedRow, MAX_FOLLOW_UP_DEPTH, type RecordedRow, timeProblem } from "../outbox/model.ts";
import type { Settings } from "../settings.ts";
import { isObject } from "../slack/inputs.ts";
import { type Decision, decideOnFailure, mayHavePerformed, queueDelaySeconds, type RetryPolicy } from "./decide.ts";
import { fatal, toFailure, transient } from "./failure.ts";
import type { LanePool } from "./lanes.ts";
import { BatchPacer, paceMsOf } from "./pacing.ts";
import type { QueryBudget } from "./query-budget.ts";

export interface DeliveryDeps {
  readonly db: D1Database;
  /** Follow-ups an effect asks for are sent here once recorded (the sweep covers a failed send). */
  readonly queue: OutboxQueue;
  readonly effects: EffectRegistry;
  readonly context: EffectContext;
  readonly settings: Pick<
    Settings,
    "leaseMs" | "maxAttempts" | "backoffBaseMs" | "backoffCapMs" | "rateLimitMaxWaitMs" | "paceAhead" | "sweepGraceMs"
  > &
    Partial<Pick<Settings, "queueDelayMaxMs">>;
  readonly log: Log;
  /** The clock: read at the claim and again at each finish, since an effect takes time. */
  readonly clock: () => number;
  readonly random: () => number;
  readonly newToken: () => string;
  /** Waits (in-batch pacing); tests and the benchmark move a manual clock instead. */
  readonly sleep: (ms: number) => Promise<void>;
  /** D1 statements this invocation has sent; no new claim past its stop (query-budget.ts). */
  readonly budget?: QueryBudget;
  /** The invocation's lanes when it runs several batches at once (lanes.ts); absent: this batch has its own six. */
  readonly lanes?: LanePool;
  /**
   * The Slack client a row is performed with, resolved when it is performed —
   * never earlier, so a re-installed or refreshed token is the one used: a
   * distributed app's team installation (shared/installations/resolve.ts, one
   * D1 read), or SLACK_BOT_TOKEN known by its fingerprint
   * (shared/installations/single-workspace.ts, no read). A missing or refused
   * token makes the row wait, no attempt spent. Unset: `context.slack` as is.
   */
  readonly slackFor?: (row: ClaimedRow) => Promise<SlackForRow>;
  /**
   * The invocation's bounds on long effects (an assistant's answer): at most LONG_AT_ONCE at a time, each ended by
   * `endsAt` (clock ms: a consumer invocation lives 15 minutes). A long row claimed past either is given back,
   * its attempt unspent, for another invocation. Absent: no bound (the engine's own tests).
   */
  readonly long?: LongBounds;
}

/**
 * Long attempts in an invocation at once, at most: each holds one of its six lanes for minutes (two stay for the
 * batch's other rows) and reserves the D1 statements it declares (`long.queries`) from the invocation's budget
 * while it runs (query-budget.ts).
 */
export const LONG_AT_ONCE = 4;
/** A long attempt is not started with less than this left of its invocation. */
export const LONG_MIN_MS = 60_000;
/** A long row given back (LongBounds) comes back this much later: not at once, to an invocation as busy. */
export const LONG_RETRY_MS = 5_000;

/**
 * The bounds one invocation puts on its long attempts (DeliveryDeps.long): how many at once, none that would
 * outrun the invocation, and the D1 statements they may still send, reserved from the query budget. A long
 * attempt starts only if the budget's stop still holds with its own reservation added; a row is claimed only
 * while the statements used plus every running reservation are under the stop (deliverBatch). So whatever
 * mix of long and quick rows, the statements sent past the last claim are at most the running reservations
 * (already under the stop) plus each lane's own row: STOP_CLAIMING_AT + 6 × WORST_QUERIES_PER_ROW.
 */
export class LongBounds {
  private running = 0;
  private reservedQueries = 0;
  readonly endsAt: number;
  constructor(endsAt: number) {
    this.endsAt = endsAt;
  }
  /**
   * A slot for a long attempt starting at `now` that wants `maxMs` and may send `queries` D1 statements of its
   * own: the time it may take, or undefined (give it back).
   */
  take(now: number, maxMs: number, queries = 0, budget?: QueryBudget): number | undefined {
    const left = this.endsAt - now;
    if (this.running >= LONG_AT_ONCE || left < LONG_MIN_MS) return undefined;
    if (budget && budget.used() + this.reservedQueries + queries >= budget.stopClaimingAt) return undefined;
    this.running += 1;
    this.reservedQueries += queries;
    return Math.min(maxMs, left);
  }
  give(queries = 0): void {
    this.running = Math.max(0, this.running - 1);
    this.reservedQueries = Math.max(0, this.reservedQueries - queries);
  }
  /** The statements the running long attempts may still send (each counted whole until it ends). */
  get reserved(): number {
    return this.reservedQueries;
  }
}

/** How long a row whose team has no installation waits before it is looked at again (the first time). */
export const NO_INSTALLATION_WAIT_MS = 5 * 60 * 1000;
/** The longest such a wait grows to: half the time it has waited so far, between the two. */
export const NO_INSTALLATION_WAIT_CAP_MS = 60 * 60 * 1000;
/** A row that has waited this long for an installation is parked dead with the reason (`ackbox replay` brings it back). */
export const INSTALLATION_WAIT_MAX_MS = 7 * 24 * 60 * 60 * 1000;

/**
 * A row that waits for its team's installation (missing, blocked, unreadable):
 * no attempt spent, due again after a wait that grows with how long it has
 * waited (5 minutes, up to an hour), and parked dead with the reason once it
 * has waited INSTALLATION_WAIT_MAX_MS, so a team that never comes back does
 * not keep its rows claimed forever; nothing is lost (dead rows are replayable).
 * Parked, it is marked maybe_performed by the one rule (decide.ts): an attempt
 * before the wait may have performed it.
 */
export function installationWait(row: Pick<ClaimedRow, "waitingSince" | "attempts">, now: number, reason: string): Finish {
  const waited = row.waitingSince == null ? 0 : Math.max(0, now - row.waitingSince);
  if (waited >= INSTALLATION_WAIT_MAX_MS) {
    return {
      kind: "dead",
      error: `waited ${Math.round(waited / 3_600_000)} h for an installation (limit ${INSTALLATION_WAIT_MAX_MS / 3_600_000} h): ${reason}; install the app, then replay`,
      maybePerformed: mayHavePerformed(row),
    };
  }
  const wait = Math.min(NO_INSTALLATION_WAIT_CAP_MS, Math.max(NO_INSTALLATION_WAIT_MS, Math.floor(waited / 2)));
  return { kind: "wait", nextAttemptAt: now + wait, error: reason };
}

/**
 * What to do with a queue message once its row has been dealt with.
 * - retry:  message.retry(delay): a failure; it counts toward the queue's max_retries.
 * - resend: ack it and send a new message with the delay: Slack's pacing (a 429,
 *           or a claim a cooldown refused) is not a failure, and must not walk a
 *           busy channel's messages to max_retries and the dead-letter queue.
 */
export type MessageAction =
  | { readonly action: "ack" }
  | { readonly action: "retry"; readonly delaySeconds: number }
  | { readonly action: "resend"; readonly delaySeconds: number };

const ACK: MessageAction = { action: "ack" };

/**
 * Effects performed at once by one invocation: a Worker invocation may have
 * 6 connections waiting for response headers at a time, so more calls would
 * only wait for one, with their timeout already running (and a call that
 * starts after its timeout fired is an effect we would retry: a duplicate).
 */
export const DELIVERY_CONCURRENCY = 6;

/** When D1 itself fails under a row, its message is retried this much later. */
export const INFRASTRUCTURE_RETRY_SECONDS = 30;

/**
 * Delivers the rows named by a batch of messages. Returns one action per
 * distinct id; a second message naming the same row is acked (one claim per row).
 *
 * Six lanes, each taking the next row, claiming it, performing its effect and
 * writing the outcome, then the next. A row is claimed just before its effect,
 * so its lease covers one effect, not a wait for a free connection; and a
 * Slack call that hangs holds up its own lane only. (Claiming a whole batch
 * up front could outlive its leases; claiming chunks made every row of a
 * chunk wait for its slowest call: the fault-injection run drained at about
 * 10 rows a second with a few hangs in the mix.)
 */
export async function deliverBatch(
  deps: DeliveryDeps,
  ids: readonly number[],
  /**
   * Told each row's action as soon as it is known, before the batch ends: a long effect (an assistant's answer)
   * may hold the batch for minutes, and a row that must come back later (a 429's resend) should not wait for it.
   */
  settled?: (id: number, action: MessageAction) => void,
): Promise<Map<number, MessageAction>> {
  const unique = [...new Set(ids)];
  const token = deps.newToken();
  const actions = new Map<number, MessageAction>(unique.map((id) => [id, ACK]));
  const skipped: number[] = [];
  const cooling: number[] = [];
  const pacer = new BatchPacer(deps.settings.paceAhead);
  const deferred: number[] = [];
  let next = 0;
  const lane = async () => {
    for (;;) {
      // A slot of the invocation's pool first (when shared), then the next row: a lane waiting holds no row.
      await deps.lanes?.acquire();
      const id = unique[next++];
      try {
        if (id === undefined) return;
        await deliverOne(id);
        settled?.(id, actions.get(id) ?? ACK);
      } finally {
        deps.lanes?.release();
      }
    }
  };
  const deliverOne = async (id: number) => {
    if (deps.budget && deps.budget.used() + (deps.long?.reserved ?? 0) >= deps.budget.stopClaimingAt) {
      // Near D1's per-invocation limit (the running long attempts' reservations counted): unclaimed rows go back to
      // the queue, untouched.
      actions.set(id, { action: "retry", delaySeconds: 0 });
      deferred.push(id);
      return;
    }
    try {
      const claimedAt = deps.clock();
      // One round trip: the claim, or, if its rate key holds the row back, the key's next release slot (it comes back then).
      const { row, slot } = await claimOrTakeSlot(deps.db, id, token, claimedAt, deps.settings.leaseMs, deps.settings.sweepGraceMs);
      if (row) {
        actions.set(id, await performClaimed(deps, pacer, row, claimedAt, cooling));
        return;
      }
      if (slot === undefined) skipped.push(id);
      else {
        cooling.push(id);
        actions.set(id, { action: "resend", delaySeconds: queueDelaySeconds(slot - claimedAt) });
      }
    } catch (error) {
      // D1 failed under this row (deliverRow handles everything else): its
      // message comes back later; the other lanes carry on.
      deps.log("error", "could not claim or finish a row; its message will be retried", { outbox_id: id, error: describeError(error) });
      actions.set(id, { action: "retry", delaySeconds: INFRASTRUCTURE_RETRY_SECONDS });
    }
  };
  await Promise.all(Array.from({ length: Math.min(DELIVERY_CONCURRENCY, unique.length) }, lane));
  if (skipped.length > 0) deps.log("debug", "not claimable; acked", { ids: skipped });
  if (cooling.length > 0) deps.log("info", "rate key hot after a 429; rows wait for their release slots", { ids: cooling });
  if (deferred.length > 0) {
    deps.log("warn", "D1 query budget of this invocation spent; the rest of the batch goes back to the queue", {
      queries: deps.budget?.used(),
      deferred: deferred.length,
    });
  }
  return actions;
}

/**
 * Perform → fenced finish for rows already claimed under one token: the
 * first attempt at the ack, whose rows the durable write claimed
 * (shared/outbox/record.ts). The same lanes, pacing and finish as
 * deliverBatch, without the claim round trip; a row's claim time is its
 * lease's start (claimExpiresAt − leaseMs).
 */
export async function deliverClaimed(deps: DeliveryDeps, rows: readonly ClaimedRow[]): Promise<Map<number, MessageAction>> {
  const actions = new Map<number, MessageAction>(rows.map((row) => [row.id, ACK]));
  const cooling: number[] = [];
  const pacer = new BatchPacer(deps.settings.paceAhead);
  let next = 0;
  const lane = async () => {
    for (let row = rows[next++]; row !== undefined; row = rows[next++]) {
      try {
        actions.set(row.id, await performClaimed(deps, pacer, row, row.claimExpiresAt - deps.settings.leaseMs, cooling));
      } catch (error) {
        deps.log("error", "could not finish a row; its message will be retried", { outbox_id: row.id, error: describeError(error) });
        actions.set(row.id, { action: "retry", delaySeconds: INFRASTRUCTURE_RETRY_SECONDS });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(DELIVERY_CONCURRENCY, rows.length) }, lane));
  if (cooling.length > 0) deps.log("info", "rate key hot after a 429; rows wait for their release slots", { ids: cooling });
  return actions;
}

/** A claimed row: paced within its batch, then performed and finished — or given back to its key's release slot. */
async function performClaimed(
  deps: DeliveryDeps,
  pacer: BatchPacer,
  row: ClaimedRow,
  claimedAt: number,
  cooling: number[],
): Promise<MessageAction> {
  const slot = await paceInBatch(deps, pacer, row, claimedAt);
  if (slot === undefined) return deliverRow(deps, row, Math.max(claimedAt, deps.clock()));
  cooling.push(row.id);
  return { action: "resend", delaySeconds: queueDelaySeconds(slot - deps.clock()) };
}

/**
 * In-batch pacing (shared/delivery/pacing.ts) for a claimed row: go at once,
 * go after a wait of at most one pace, or give the row back to a release
 * slot shared through D1 (shared/outbox/cooldown.ts) — also after a wait, if
 * another lane or invocation met a 429 on the key meanwhile. Returns the
 * slot the row was given back for, or undefined: perform it now.
 */
async function paceInBatch(deps: DeliveryDeps, pacer: BatchPacer, row: ClaimedRow, claimedAt: number): Promise<number | undefined> {
  const pace = pacer.reserve(row.rateKey, row.keyHot, claimedAt);
  if (pace.kind === "busy") return giveBackBusy(deps.db, row, claimedAt, deps.settings.sweepGraceMs);
  if (pace.waitMs === 0) return undefined;
  await deps.sleep(pace.waitMs);
  return giveBackIfHeldBack(deps.db, row, deps.clock(), deps.settings.sweepGraceMs);
}

async function deliverRow(deps: DeliveryDeps, row: ClaimedRow, startedAt: number): Promise<MessageAction> {
  const definition = deps.effects.get(row.effect);
  const policy: RetryPolicy = {
    maxAttempts: Math.min(deps.settings.maxAttempts, definition?.maxAttempts ?? Number.POSITIVE_INFINITY),
    backoffBaseMs: deps.settings.backoffBaseMs,
    backoffCapMs: deps.settings.backoffCapMs,
    rateLimitMaxWaitMs: deps.settings.rateLimitMaxWaitMs,
    rateLimitJitterMs: row.rateKey === null ? 1000 : paceMsOf(row.rateKey),
  };
  const about = { outbox_id: row.id, receipt_id: row.receiptId, effect: row.effect, attempt: row.attempts };

  // Rows that must not be attempted at all, decided before any Slack call. Every park below is marked by the one
  // rule (decide.ts, mayHavePerformed): a count past the limit means the last claim ended without a result (its
  // lease expired), and that holder may have performed the effect.
  const spent = row.attempts > policy.maxAttempts;
  const refusal = !definition
    ? `unknown effect ${row.effect}`
    : spent
      ? `attempts exhausted (${row.attempts - 1} of ${policy.maxAttempts} ended without a result)`
      : row.expiresAt !== null && startedAt > row.expiresAt
        ? "deadline passed before the effect could run"
        : undefined;
  if (refusal !== undefined || !definition) {
    const maybePerformed = mayHavePerformed(row); // not attempted now: marked if an earlier claim was (spent implies it)
    return finish(deps, row, { kind: "dead", error: refusal ?? "unknown effect", maybePerformed }, startedAt, about);
  }

  let context = deps.context;
  const resolved = deps.slackFor ? await deps.slackFor(row) : undefined;
  if (resolved) {
    if (!resolved.ok) {
      // The installation is missing, not the row broken: no attempt spent, and last_error says which team. An expired
      // token the ingress may not refresh is the consumer's at once (the first attempt re-sends the row undelayed).
      const waiting: Finish = resolved.dueNow
        ? { kind: "wait", nextAttemptAt: startedAt, error: resolved.reason }
        : installationWait(row, startedAt, resolved.reason);
      return finish(deps, row, waiting, startedAt, about);
    }
    context = { ...context, slack: resolved.slack, ...(resolved.step ? { step: resolved.step } : {}) };
  }

  // Resolving the installation (a token refresh, re-reads while another
  // worker refreshes) or a write that committed late (the first attempt's
  // claim, taken at the request's time) may have spent the lease: an attempt
  // that could outlive it may overlap the next claimant's (the sweep hands the
  // row out at the lease's expiry), which would perform it twice. Not
  // attempted, then: the row waits (its attempt given back, fenced on this
  // claim), due again at once.
  const readyAt = deps.clock();
  const leftMs = row.claimExpiresAt - readyAt;
  // A long effect renews its lease as it goes, but must be able to start: its first calls fit in one timeout.
  if (leftMs < attemptTimeoutMs(definition, context) + ABANDON_GRACE_MS) {
    const error = `${leftMs} ms of the lease left before the attempt, too little for one`;
    return finish(deps, row, { kind: "wait", nextAttemptAt: readyAt, error }, startedAt, about);
  }

  // A long effect holds a lane for minutes: at most LONG_AT_ONCE of them, and none that would outrun the invocation.
  let longMs = definition.long?.maxMs;
  if (definition.long && deps.long) {
    longMs = deps.long.take(readyAt, definition.long.maxMs, definition.long.queries, deps.budget);
    if (longMs === undefined) {
      const error =
        "a long effect waits for another invocation: this one has its long attempts, too little time or too few D1 queries left";
      const nextAttemptAt = readyAt + LONG_RETRY_MS;
      return finish(deps, row, { kind: "wait", nextAttemptAt, error, expected: true }, startedAt, about);
    }
  }

  let result: unknown;
  try {
    result = await performWithin(
      definition,
      row,
      context,
      definition.long && longMs !== undefined ? { lease: leaseOf(deps, row), maxMs: longMs } : undefined,
      deps.clock,
    ).finally(() => {
      if (definition.long && deps.long) deps.long.give(definition.long.queries);
    });
  } catch (error) {
    const now = deps.clock();
    const authError = resolved?.ok ? resolved.authFailure() : undefined;
    if (resolved?.ok && authError !== undefined) {
      // The installation's token is broken, not the row: block the installation
      // (its team's other rows find the block when claimed, and wait) and let this row wait too.
      const reason = await resolved.block(authError, now);
      return finish(deps, row, installationWait(row, now, reason), startedAt, about);
    }
    const failure = toFailure(error);
    if (failure.kind === "not_yet") {
      // Nothing was performed: the attempt is given back, as for a row waiting for its installation.
      return finish(
        deps,
        row,
        { kind: "wait", nextAttemptAt: now + failure.waitMs, error: failure.message, expected: true },
        startedAt,
        about,
      );
    }
    const decision: Decision = decideOnFailure(row, failure, now, policy, deps.random);
    if (decision.action === "park") {
      // A timeout, an unknown answer, an earlier attempt or an effect that ran: marked, and a filter replay leaves it out.
      const maybePerformed = mayHavePerformed(row, failure);
      return finish(deps, row, { kind: "dead", error: decision.reason, maybePerformed }, startedAt, about);
    }
    if (decision.rateLimited) {
      const { retryAfterMs, cappedFromMs } = decision.rateLimited;
      if (cappedFromMs !== undefined) {
        deps.log("warn", "Retry-After above the backoff cap; capped", {
          ...about,
          retry_after_ms: cappedFromMs,
          capped_to_ms: retryAfterMs,
        });
      }
      return finish(
        deps,
        row,
        { kind: "rate_limited", nextAttemptAt: now + decision.delayMs, error: decision.reason, retryAfterMs },
        startedAt,
        about,
        decision.delayMs,
      );
    }
    return finish(
      deps,
      row,
      { kind: "retry", nextAttemptAt: now + decision.delayMs, error: decision.reason },
      startedAt,
      about,
      decision.delayMs,
    );
  }
  if (!isCompleted(result)) return finish(deps, row, { kind: "done", result }, startedAt, about);
  if (result.followUps.length > 0 && row.depth >= MAX_FOLLOW_UP_DEPTH) {
    // Performed, but a chain this deep is a loop until shown otherwise: park
    // it where an operator sees it, and record none of what it asked for.
    const error = `follow-ups refused: depth limit ${MAX_FOLLOW_UP_DEPTH} reached (the effect was performed)`;
    return finish(deps, row, { kind: "dead", error, maybePerformed: mayHavePerformed(row, "performed") }, startedAt, about);
  }
  // A timed follow-up's time is resolved against the completion's clock (record.ts does it at the ack): past a
  // year, or after its own deadline, it cannot be recorded.
  const checkedAt = deps.clock();
  const late = result.followUps.flatMap((f) => {
    const problem = timeProblem(f, checkedAt);
    return problem ? [`${f.key}: ${problem}`] : [];
  });
  if (late.length > 0) {
    const error = `follow-ups refused: ${late.join("; ")} (the effect was performed)`;
    return finish(deps, row, { kind: "dead", error, maybePerformed: mayHavePerformed(row, "performed") }, startedAt, about);
  }
  if (!row.teamId && (result.cancels.length > 0 || result.followUps.some((f) => f.name !== undefined))) {
    // Names are per workspace (shared/outbox/model.ts, namedKey): a row with no team cannot use them.
    const error =
      "follow-ups refused: they name or cancel a row, but this row has no team (names are per workspace; the effect was performed)";
    return finish(deps, row, { kind: "dead", error, maybePerformed: mayHavePerformed(row, "performed") }, startedAt, about);
  }
  return finish(deps, row, { kind: "done", result: result.result, followUps: result.followUps, cancels: result.cancels }, startedAt, about);
}

/**
 * How long after its signal is aborted an effect that ignores it is abandoned:
 * long enough that one honouring the signal reports its own error first.
 */
const ABANDON_GRACE_MS = 100;

/** One attempt's timeout: the context's (the Worker's), or the effect's own if shorter. */
function attemptTimeoutMs(definition: EffectDefinition, context: EffectContext): number {
  return Math.min(context.timeoutMs, definition.timeoutMs ?? Number.POSITIVE_INFINITY);
}

/** A long effect's claim, renewed through the fence (fence.ts, renewClaim), each renewal timed by the clock at its write. */
interface RenewableLease extends ClaimLease {
  /** Called with the new expiry after each renewal the fence accepted. */
  onRenewed?: (expiresAt: number) => void;
}

function leaseOf(deps: DeliveryDeps, row: ClaimedRow): RenewableLease {
  let expiresAt = row.claimExpiresAt;
  const lease: RenewableLease = {
    db: deps.db,
    rowId: row.id,
    claimToken: row.claimToken,
    expiresAt: () => expiresAt,
    leaseMs: deps.settings.leaseMs,
    async renew(also = []) {
      const renewed = await renewClaim(deps.db, row, deps.clock(), deps.settings.leaseMs, also);
      if (renewed === undefined) return undefined;
      expiresAt = renewed.expiresAt;
      lease.onRenewed?.(renewed.expiresAt);
      return renewed.results;
    },
  };
  return lease;
}

/**
 * One attempt, bounded by the effect's timeout: its signal (and the fetch
 * effects are given) is aborted when the time is up, and an effect that
 * ignores the signal is abandoned shortly after and counted as failed
 * (transient). (Its fetches through ctx.fetch are aborted; only its own
 * un-awaited work could outlive it.)
 *
 * A long effect (EffectDefinition.long) is bounded instead by the lease it
 * renews: its signal aborts one call's timeout before the lease it holds ends
 * (so a call in flight ends inside it), re-armed at each renewal, and at its
 * longest time (`maxMs`) whatever it renewed.
 */
async function performWithin(
  definition: EffectDefinition,
  row: ClaimedRow,
  context: EffectContext,
  /** A long effect's lease, and the longest its attempt may take here. */
  long?: { readonly lease: RenewableLease; readonly maxMs: number },
  /** The clock the lease's times are read on (deps.clock). */
  clock: () => number = Date.now,
): Promise<unknown> {
  const lease = long?.lease;
  const timeoutMs = attemptTimeoutMs(definition, context);
  const controller = new AbortController();
  let abandon: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    controller.signal.addEventListener("abort", () => {
      abandon = setTimeout(
        () => reject(transient(`${row.effect}: ${String(controller.signal.reason?.message ?? "aborted")}`)),
        ABANDON_GRACE_MS,
      );
    });
  });
  const abortAs = (message: string) => controller.abort(new DOMException(message, "TimeoutError"));
  // Aborted as a timeout, so a call that ends on this signal says so, as it does on its own timer.
  let timer: ReturnType<typeof setTimeout> | undefined;
  let longest: ReturnType<typeof setTimeout> | undefined;
  if (lease && long) {
    const arm = (expiresAt: number) => {
      if (timer !== undefined) clearTimeout(timer);
      const left = expiresAt - timeoutMs - clock();
      timer = setTimeout(() => abortAs(`its lease was not renewed (it ends at ${new Date(expiresAt).toISOString()})`), Math.max(0, left));
    };
    arm(lease.expiresAt());
    lease.onRenewed = arm;
    longest = setTimeout(() => abortAs(`no result within its longest time, ${long.maxMs} ms`), long.maxMs);
  } else {
    timer = setTimeout(() => abortAs(`no result within ${timeoutMs} ms`), timeoutMs);
  }
  const signal = controller.signal;
  const fetchWithin: EffectFetch = (input, init) =>
    context.fetch(input, { ...init, signal: init?.signal ? AbortSignal.any([init.signal, signal]) : signal });
  try {
    const attempt = { ...context, timeoutMs, fetch: fetchWithin, signal, idempotencyKey: row.idempotencyKey, attempt: row.attempts };
    return await Promise.race([definition.perform(parsePayload(row), lease ? withLease(attempt, lease) : attempt), timedOut]);
  } finally {
    if (timer !== undefined) clearTimeout(timer);
    if (longest !== undefined) clearTimeout(longest);
    if (abandon !== undefined) clearTimeout(abandon);
    if (lease) lease.onRenewed = undefined;
  }
}

/**
 * Writes the outcome under the fence. The write is retried in-invocation with
 * p-retry, and this is the one place in the consumer where that is right: the
 * effect has already happened, so a write lost to a D1 blip would repeat it
 * when the lease runs out. The fenced write is idempotent (fence.ts), so
 * running it again is safe.
 */
async function finish(
  deps: DeliveryDeps,
  row: ClaimedRow,
  outcome: Finish,
  startedAt: number,
  about: Record<string, unknown>,
  retryDelayMs?: number,
): Promise<MessageAction> {
  const now = deps.clock();
  let applied: boolean;
  let followUpIds: readonly number[];
  let nextAttemptAt: number | undefined;
  let cancels: readonly CancelResult[] | undefined;
  let followUpRows: readonly RecordedRow[] | undefined;
  try {
    ({ applied, followUpIds, followUpRows, nextAttemptAt, cancels } = await pRetry(
      () => finishClaim(deps.db, row, outcome, now, deps.settings.sweepGraceMs, startedAt, deps.settings.queueDelayMaxMs),
      {
        retries: 3,
        minTimeout: 50,
        maxTimeout: 400,
        // Past the query budget's stop a finish is not tried again (query-budget.ts: a completion with follow-ups is up to 26 statements).
        // A taken follow-up key is an answer, not a blip: the same write would be refused again.
        shouldRetry: ({ error }) =>
          !(error instanceof FollowUpKeyTaken) && (deps.budget === undefined || deps.budget.used() < deps.budget.stopClaimingAt),
      },
    ));
  } catch (error) {
    if (error instanceof FollowUpKeyTaken && outcome.kind === "done") {
      // Performed, but its follow-ups cannot all be recorded: parked where an operator sees it (as the depth limit
      // parks), never completed with one missing. The park is fenced like any finish.
      deps.log("error", "follow-up key taken by another row; parked", { ...about, error: error.message });
      const reason = `${error.message} (the effect was performed)`;
      return finish(deps, row, { kind: "dead", error: reason, maybePerformed: mayHavePerformed(row, "performed") }, startedAt, about);
    }
    // The row keeps its lease; when it expires the sweep hands it out again.
    deps.log("error", "could not record the outcome; the lease will expire and the row be retried", {
      ...about,
      outcome: outcome.kind,
      error: describeError(error),
    });
    return ACK;
  }
  if (!applied) {
    // Invariant 4: a lost lease never marks another worker's row. Its
    // appearance means the lease is too short for the real work.
    deps.log("warn", "fence rejected the write: the lease was lost to another claim", { ...about, outcome: outcome.kind });
    return ACK;
  }
  switch (outcome.kind) {
    case "done":
      if (now > row.claimExpiresAt) deps.log("warn", "completed after the lease expired", { ...about, late_ms: now - row.claimExpiresAt });
      deps.log("info", "delivered", {
        ...about,
        ms: now - startedAt,
        ...(followUpIds.length > 0 ? { follow_up_ids: followUpIds } : {}),
        ...(cancels && cancels.length > 0 ? { cancels: cancelsText(cancels) } : {}),
      });
      // Recorded with the completion; the send is the fast path (a timed one delayed to its time), the sweep the guarantee.
      if (followUpRows && followUpRows.length > 0) await enqueueRecorded(deps.queue, deps.db, followUpRows, now, deps.log);
      return ACK;
    case "dead":
      deps.log("warn", "parked as dead", { ...about, reason: outcome.error });
      return ACK;
    case "retry":
      deps.log("info", "will retry", { ...about, reason: outcome.error, delay_ms: retryDelayMs });
      return { action: "retry", delaySeconds: queueDelaySeconds(retryDelayMs ?? 0) };
    case "rate_limited": {
      // Due at the key's release slot when that is later than the decided delay.
      const delayMs = Math.max(retryDelayMs ?? 0, (nextAttemptAt ?? now) - now);
      deps.log("info", "rate limited; no attempt spent, the key cools down", { ...about, reason: outcome.error, delay_ms: delayMs });
      return { action: "resend", delaySeconds: queueDelaySeconds(delayMs) };
    }
    case "wait": {
      // Not a failure: acked and re-sent with the delay, so it never walks toward max_retries.
      const delayMs = Math.max(0, (nextAttemptAt ?? now) - now);
      deps.log(outcome.expected ? "info" : "warn", "not attempted; the row waits", { ...about, reason: outcome.error, delay_ms: delayMs });
      return { action: "resend", delaySeconds: queueDelaySeconds(delayMs) };
    }
  }
}

function parsePayload(row: ClaimedRow) {
  let payload: unknown;
  try {
    payload = JSON.parse(row.payload);
  } catch {
    throw fatal(`${row.effect}: payload is not JSON`);
  }
  if (!isObject(payload)) throw fatal(`${row.effect}: payload is not a JSON object`);
  return payload;
}
