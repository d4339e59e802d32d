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

/**
 * Delivers the rows named by a batch of messages. Returns one action per
 * distinct id; a second message naming the same row is acked (one claim per row).
 *
 * Rows are claimed a chunk at a time, just before their effects run. Slack
 * calls go 6 at a time (the D1 writes around them are not limited: they are
 * not connections), and a chunk is sized so that even if every effect in it
 * ran to its timeout, the chunk would finish within half the lease. A whole
 * batch of 100 claimed up front could outlive its leases while it waited for
 * connections.
 */
export async function deliverBatch(deps: DeliveryDeps, ids: readonly number[]): Promise<Map<number, MessageAction>> {
  const unique = [...new Set(ids)];
  const token = deps.newToken();
  const actions = new Map<number, MessageAction>(unique.map((id) => [id, ACK]));
  const chunkSize = DELIVERY_CONCURRENCY * Math.max(1, Math.floor(deps.settings.leaseMs / 2 / deps.context.timeoutMs));
  const skipped: number[] = [];
  const slots = semaphore(DELIVERY_CONCURRENCY);
  for (let start = 0; start < unique.length; start += chunkSize) {
    const chunk = unique.slice(start, start + chunkSize);
    const claimedAt = deps.clock();
    const claimed = await claimRows(deps.db, chunk, token, claimedAt, deps.settings.leaseMs);
    skipped.push(...chunk.filter((id) => !claimed.some((row) => row.id === id)));
    const outcomes = await Promise.all(claimed.map((row) => deliverRow(deps, row, claimedAt, slots)));
    for (const [i, row] of claimed.entries()) actions.set(row.id, outcomes[i] ?? ACK);
  }
  if (skipped.length > 0) deps.log("debug", "not claimable; acked", { ids: skipped });
  return actions;
}

async function deliverRow(deps: DeliveryDeps, row: ClaimedRow, startedAt: number, slots: Semaphore): Promise<MessageAction> {
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
    const payload = parsePayload(row);
    result = await slots.run(() => definition.perform(payload, deps.context));
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

interface Semaphore {
  run<T>(work: () => Promise<T>): Promise<T>;
}

/** At most `size` of the works given to run() at once; the others wait their turn, in order. */
function semaphore(size: number): Semaphore {
  let free = size;
  const waiting: (() => void)[] = [];
  return {
    async run(work) {
      if (free > 0) free -= 1;
      else await new Promise<void>((resolve) => waiting.push(resolve));
      try {
        return await work();
      } finally {
        const next = waiting.shift();
        if (next) next();
        else free += 1;
      }
    },
  };
}
