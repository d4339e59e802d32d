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
import { type Decision, decideOnFailure, queueDelaySeconds, type RetryPolicy } from "../../shared/delivery/decide.ts";
import { fatal, toFailure } from "../../shared/delivery/failure.ts";
import type { EffectContext, EffectDefinition } from "../../shared/effects/effect.ts";
import { describeError, type Log } from "../../shared/log.ts";
import { claimRows } from "../../shared/outbox/claim.ts";
import { type Finish, finishClaim } from "../../shared/outbox/fence.ts";
import type { ClaimedRow } from "../../shared/outbox/model.ts";
import type { Settings } from "../../shared/settings.ts";
import { isObject } from "../../shared/slack/inputs.ts";
import type { QueryBudget } from "./query-budget.ts";

export interface DeliveryDeps {
  readonly db: D1Database;
  readonly effects: ReadonlyMap<string, EffectDefinition>;
  readonly context: EffectContext;
  readonly settings: Pick<Settings, "leaseMs" | "maxAttempts" | "backoffBaseMs" | "backoffCapMs" | "sweepGraceMs">;
  readonly log: Log;
  /** The clock: read at the claim and again at each finish, since an effect takes time. */
  readonly clock: () => number;
  readonly random: () => number;
  readonly newToken: () => string;
  /** D1 statements this invocation has sent; no new claim past its stop (query-budget.ts). */
  readonly budget?: QueryBudget;
}

/** What to do with a queue message once its row has been dealt with. */
export type MessageAction = { readonly action: "ack" } | { readonly action: "retry"; readonly delaySeconds: number };

const ACK: MessageAction = { action: "ack" };

/**
 * Effects performed at once by one invocation: a Worker may hold 6
 * connections open at a time, so more would only wait for one, with their
 * timeout already running (and a call that starts after its timeout fired is
 * an effect we would retry: a duplicate).
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
export async function deliverBatch(deps: DeliveryDeps, ids: readonly number[]): Promise<Map<number, MessageAction>> {
  const unique = [...new Set(ids)];
  const token = deps.newToken();
  const actions = new Map<number, MessageAction>(unique.map((id) => [id, ACK]));
  const skipped: number[] = [];
  const deferred: number[] = [];
  let next = 0;
  const lane = async () => {
    for (let id = unique[next++]; id !== undefined; id = unique[next++]) {
      if (deps.budget && deps.budget.used() >= deps.budget.stopClaimingAt) {
        // Near D1's per-invocation limit: unclaimed rows go back to the queue, untouched.
        actions.set(id, { action: "retry", delaySeconds: 0 });
        deferred.push(id);
        continue;
      }
      try {
        const claimedAt = deps.clock();
        const [row] = await claimRows(deps.db, [id], token, claimedAt, deps.settings.leaseMs);
        if (row) actions.set(id, await deliverRow(deps, row, claimedAt));
        else skipped.push(id);
      } catch (error) {
        // D1 failed under this row (deliverRow handles everything else): its
        // message comes back later; the other lanes carry on.
        deps.log("error", "could not claim or finish a row; its message will be retried", { outbox_id: id, error: describeError(error) });
        actions.set(id, { action: "retry", delaySeconds: INFRASTRUCTURE_RETRY_SECONDS });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(DELIVERY_CONCURRENCY, unique.length) }, lane));
  if (skipped.length > 0) deps.log("debug", "not claimable; acked", { ids: skipped });
  if (deferred.length > 0) {
    deps.log("warn", "D1 query budget of this invocation spent; the rest of the batch goes back to the queue", {
      queries: deps.budget?.used(),
      deferred: deferred.length,
    });
  }
  return actions;
}

async function deliverRow(deps: DeliveryDeps, row: ClaimedRow, startedAt: number): Promise<MessageAction> {
  const definition = deps.effects.get(row.effect);
  const policy: RetryPolicy = {
    maxAttempts: Math.min(deps.settings.maxAttempts, definition?.maxAttempts ?? Number.POSITIVE_INFINITY),
    backoffBaseMs: deps.settings.backoffBaseMs,
    backoffCapMs: deps.settings.backoffCapMs,
  };
  const about = { outbox_id: row.id, receipt_id: row.receiptId, effect: row.effect, attempt: row.attempts };

  // Rows that must not be attempted at all, decided before any Slack call.
  const refusal = !definition
    ? `unknown effect ${row.effect}`
    : row.attempts > policy.maxAttempts
      ? `attempts exhausted (${row.attempts - 1} of ${policy.maxAttempts} ended without a result)`
      : row.expiresAt !== null && startedAt > row.expiresAt
        ? "deadline passed before the effect could run"
        : undefined;
  if (refusal !== undefined || !definition) {
    return finish(deps, row, { kind: "dead", error: refusal ?? "unknown effect" }, startedAt, about);
  }

  let result: unknown;
  try {
    result = await definition.perform(parsePayload(row), deps.context);
  } catch (error) {
    const failure = toFailure(error);
    const now = deps.clock();
    const decision: Decision = decideOnFailure(row, failure, now, policy, deps.random);
    if (decision.action === "park") return finish(deps, row, { kind: "dead", error: decision.reason }, startedAt, about);
    return finish(
      deps,
      row,
      { kind: "retry", nextAttemptAt: now + decision.delayMs, error: decision.reason },
      startedAt,
      about,
      decision.delayMs,
    );
  }
  return finish(deps, row, { kind: "done", result }, startedAt, about);
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
  try {
    ({ applied } = await pRetry(() => finishClaim(deps.db, row, outcome, now, deps.settings.sweepGraceMs, startedAt), {
      retries: 3,
      minTimeout: 50,
      maxTimeout: 400,
    }));
  } catch (error) {
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
      deps.log("info", "delivered", { ...about, ms: now - startedAt });
      return ACK;
    case "dead":
      deps.log("warn", "parked as dead", { ...about, reason: outcome.error });
      return ACK;
    case "retry":
      deps.log("info", "will retry", { ...about, reason: outcome.error, delay_ms: retryDelayMs });
      return { action: "retry", delaySeconds: queueDelaySeconds(retryDelayMs ?? 0) };
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
