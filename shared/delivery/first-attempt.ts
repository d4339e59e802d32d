/**
 * The first attempt at the ack: the ingress performs a request's new rows
 * itself, right after the answer, with the consumer's own perform → fenced
 * finish (deliver.ts). One code path, two triggers; the lease keeps them
 * apart. The sweep stays the guarantee: a row the ingress claimed and did
 * not finish is the sweep's once its lease expires.
 *
 * No round trip between the answer and the Slack call: the durable write
 * claims the inline rows as it inserts them (shared/outbox/record.ts, with
 * the consumer's claim statement, so its gates hold: a row whose rate key is
 * cooling down is inserted pending and goes to the queue). The ingress holds
 * a random claim token and the inline lease from the moment the row exists;
 * after the answer it calls Slack at once and finishes fenced on the token.
 *
 * Bounded by six numbers, each stated once below: at most INLINE_MAX_ROWS
 * rows per request, one round (never a second), each effect within
 * INLINE_TIMEOUT_MAX_MS under an inline lease of twice that; per isolate
 * (InlineGate), at most INLINE_MAX_IN_FLIGHT inline rows in flight (past it a
 * request's rows go to the queue at once, as they would without the first
 * attempt), started only while at most INLINE_MAX_REQUESTS requests are in
 * progress: until then they wait, at most INLINE_MAX_WAIT_MS. Which rows go
 * first is the app's choice per effect (EffectDefinition.inline: on for Slack
 * methods, an app effect's `inline` option).
 *
 * An inline row gets no queue message of its own. If the ingress dies before
 * it finishes the row (mid-effect, while the row waits for the acks, or
 * before the answer), the sweep hands the row out at the first cron tick
 * after its inline lease expires — the claim moved its sweep_at there — so
 * at most a cron interval (60 s) after the lease's 20 s; sooner than a
 * consumer that dies mid-effect is recovered (its lease is LEASE_SECONDS).
 * A message sent at the ack and delayed by the lease would bring that row
 * back at the lease's expiry instead, at the price of three queue operations,
 * a consumer invocation and a claim for every inline row, which nearly
 * always finds it done: 1 message per event, where the sweep costs nothing
 * until a row is owed. An attempt that failed or met a cooldown is sent to
 * the queue with the delay the consumer would have given its message.
 */
import type { EffectRegistry } from "../effects/registry.ts";
import { describeError } from "../log.ts";
import { enqueueRows } from "../outbox/enqueue.ts";
import { type ClaimedRow, dueAtOf, type IntendedEffect } from "../outbox/model.ts";
import type { InlineClaim } from "../outbox/record.ts";
import type { Settings } from "../settings.ts";
import { type DeliveryDeps, deliverClaimed } from "./deliver.ts";
import type { InlineGate, Refused } from "./inline-gate.ts";

/** Rows attempted inline per request; the rest of a request's rows go to the queue at once. */
export const INLINE_MAX_ROWS = 3;
/** The longest an inline effect may take, whatever EFFECT_TIMEOUT_SECONDS says: well inside waitUntil's 30 s. */
export const INLINE_TIMEOUT_MAX_MS = 10_000;
/**
 * Inline rows one isolate has in flight at most. Past it the rows go to the
 * queue: a slow Slack must not pile calls up in one isolate.
 */
export const INLINE_MAX_IN_FLIGHT = 128;
/**
 * Requests in progress in one isolate (those being answered, not those whose
 * rows are being performed) above which its inline rows wait before they
 * start: the isolate's acks go first, since Slack gives each 3 s and nobody
 * waits on an effect that way. A burst — a standup at 9:00, a busy channel's
 * mentions — is answered, then its rows start at once, each in the request
 * that recorded it (each invocation has its own six connections; a queued
 * burst would take the consumer's six lanes, a round trip to Slack per six
 * rows). A steady load at half the isolate's saturation keeps one or two in
 * progress, so its rows never wait. In production a request is in progress
 * for its D1 round trip too: with random arrivals and 50 ms an ack, more than
 * 8 are in progress about 0.1 % of the time at 40 requests a second.
 */
export const INLINE_MAX_REQUESTS = 8;
/**
 * The longest an inline row waits for the isolate's requests to drain to
 * INLINE_MAX_REQUESTS, ms: the pre-ack budget (ACK_BUDGET_MS, 2 s by default),
 * the time a Slack request is given before its answer (every request counts,
 * though: an operator's or a health check too, so the bound is the wait's cap).
 * Only a load that keeps more than INLINE_MAX_REQUESTS requests in progress
 * for that long makes a row wait it out, and then the row starts anyway, inside
 * its lease: wait (2 s) + effect (10 s) < inline lease (20 s) < waitUntil (30 s)
 * by default, and whatever the settings the wait ends early enough that one
 * attempt still fits the lease the write took (quietFor).
 */
export const INLINE_MAX_WAIT_MS = 2_000;
/** An inline attempt's timeout and lease: the lease twice the timeout, as shared/settings.ts requires of every attempt. */
export function inlineBounds(settings: Pick<Settings, "effectTimeoutMs" | "leaseMs">): { timeoutMs: number; leaseMs: number } {
  const timeoutMs = Math.min(settings.effectTimeoutMs, INLINE_TIMEOUT_MAX_MS);
  return { timeoutMs, leaseMs: Math.min(settings.leaseMs, 2 * timeoutMs) };
}

/**
 * Why a request's rows were not claimed for the first attempt: none of its
 * effects goes first inline, or the isolate's inline rows were at
 * INLINE_MAX_IN_FLIGHT ("in_flight"). Said in the ack's log line.
 */
export type NotPlanned = { readonly queued: "no_inline_effect" | Refused };

/** What the ack path asks of the first attempt (workers/ingress/ack.ts). */
export interface FirstAttempt {
  /**
   * Before the durable write: which of the request's effects it claims for the
   * ingress, or why none. Holds in-flight slots until `release`.
   */
  plan(effects: readonly InlineCandidate[], now: number): PlannedClaim | NotPlanned;
  /**
   * After the answer: enqueues the rest at once, and performs the claimed
   * rows once at most INLINE_MAX_REQUESTS requests are in progress in the
   * isolate (InlineGate.quiet). Calls `performed` once the rows are performed
   * and finished (before the queue sends are done: the bound counts effects,
   * not messages). Never throws.
   */
  deliver(claimed: readonly ClaimedRow[], ids: readonly number[], now: number, performed?: () => void): Promise<void>;
}

export interface PlannedClaim {
  readonly claim: InlineClaim;
  /** Gives the in-flight slots back; idempotent. */
  readonly release: () => void;
}

/**
 * The indexes of a request's effects that go first inline, in order, at most INLINE_MAX_ROWS: never a timer
 * whose time is still ahead at `now` (the claim would refuse it anyway; it takes no slot).
 */
export function inlineIndexes(effects: readonly InlineCandidate[], registry: EffectRegistry, now: number): number[] {
  return effects
    .flatMap((e, i) => (registry.get(e.effect)?.inline === true && dueAtOf(e, now) <= now ? [i] : []))
    .slice(0, INLINE_MAX_ROWS);
}

type InlineCandidate = Pick<IntendedEffect, "effect" | "at" | "afterMs">;

/**
 * The first attempt with the consumer's delivery deps (the inline lease in
 * settings.leaseMs, the inline timeout in the context) and the isolate's
 * bounds: its inline rows in flight, and its requests in progress.
 */
export function firstAttemptOf(deps: DeliveryDeps, gate: InlineGate): FirstAttempt {
  return {
    plan(effects, now) {
      const wanted = inlineIndexes(effects, deps.effects, now);
      if (wanted.length === 0) return { queued: "no_inline_effect" };
      const got = gate.take(wanted.length, now);
      if (typeof got === "string") return { queued: got };
      let held = got;
      return {
        claim: { token: deps.newToken(), leaseMs: deps.settings.leaseMs, clock: deps.clock, indexes: wanted.slice(0, got) },
        release: () => {
          gate.give(held);
          held = 0;
        },
      };
    },
    deliver: (claimed, ids, now, performed) =>
      deliverFirstAttempt(deps, claimed, ids, now, performed, claimed.length > 0 ? quietFor(gate, deps, claimed) : undefined),
  };
}

/** Time kept between the end of a row's wait and its lease's end beyond one attempt's timeout, ms. */
const ATTEMPT_MARGIN_MS = 500;

/**
 * The acks' drain (InlineGate.quiet), waited for no longer than leaves every claimed row one whole attempt
 * (the inline timeout) and a margin inside the lease its write took: with a short EFFECT_TIMEOUT_SECONDS (a
 * lease of 4 s for 2 s) a row that waited the full INLINE_MAX_WAIT_MS would have too little lease left, and
 * be given back to the queue instead of performed (deliver.ts refuses an attempt that could outlive it).
 */
function quietFor(gate: InlineGate, deps: DeliveryDeps, claimed: readonly ClaimedRow[]): Promise<void> {
  const now = deps.clock();
  const expiresAt = Math.min(...claimed.map((row) => row.claimExpiresAt));
  return gate.quiet(now, expiresAt - now - deps.context.timeoutMs - ATTEMPT_MARGIN_MS);
}

/**
 * Performs `claimed` (rows the durable write claimed for this ingress) once
 * `ready` resolves (the isolate's acks drained: InlineGate.quiet), and
 * enqueues the rest of `ids` at once. Never throws: what fails here is the
 * queue's and the sweep's to finish (a row claimed here and never performed,
 * the isolate gone while it waited, is the sweep's at its lease's expiry).
 */
export async function deliverFirstAttempt(
  deps: DeliveryDeps,
  claimed: readonly ClaimedRow[],
  ids: readonly number[],
  now: number,
  performed: () => void = () => {},
  ready: Promise<void> = Promise.resolve(),
): Promise<void> {
  const inline = new Set(claimed.map((row) => row.id));
  const queued = ids.filter((id) => !inline.has(id));
  try {
    // The Slack calls first; the queue sends a macrotask later.
    const performing = ready.then(() => deliverClaimed(deps, claimed)).finally(performed);
    const sending =
      queued.length > 0
        ? new Promise((resolve) => setTimeout(resolve, 0)).then(() => enqueueRows(deps.queue, deps.db, queued, now, deps.log))
        : undefined;
    const [actions] = await Promise.all([performing, sending]);
    const again = [...actions].flatMap(([id, action]) =>
      action.action === "ack" ? [] : [{ body: { id }, contentType: "json" as const, delaySeconds: action.delaySeconds }],
    );
    if (again.length > 0) {
      // Said once per request: the benchmark counts these, and an operator sees why a reply took the queue's path.
      deps.log("info", "first attempt left rows to the queue", {
        outbox_ids: again.map((m) => m.body.id),
        actions: [...actions.values()].map((a) => a.action),
      });
      await deps.queue.sendBatch(again);
    }
  } catch (error) {
    // The rows are durable: the sweep hands each out when its lease, or its retry's delay and the sweep's grace, has passed.
    deps.log("warn", "first attempt at the ack did not finish; the sweep has the rows", {
      ids,
      error: describeError(error),
    });
  }
}
