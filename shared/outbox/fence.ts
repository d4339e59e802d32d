import { scrubStoredPayload } from "../credentials.ts";
import { MAX_QUEUE_DELAY_SECONDS } from "../delivery/decide.ts";
import { cancelResultOf, cancelStatements } from "./cancel-named.ts";
import { coolDownStatement, slotOrSql } from "./cooldown.ts";
import {
  type CancelResult,
  type ClaimedRow,
  followUpKey,
  type IntendedEffect,
  namedKey,
  type RecordedRow,
  type Schedule,
  scheduleOf,
} from "./model.ts";

/**
 * Every write that follows a claim, fenced on the claim's token.
 *
 * `WHERE id = ? AND claim_token = ?` is the fence: if this worker overran its
 * lease and another worker has since claimed the row under a new token, the
 * write matches nothing and cannot mark the other worker's work done (which
 * would turn a duplicate into a loss). A lease that expired but was not yet
 * re-claimed still completes: the effect was performed and nobody else holds
 * the row, so accepting it prevents a certain duplicate.
 *
 * A 429 (rate_limited) is a retry that gives its attempt back: one batch of
 * the cooldown of the row's rate key and its release slot (cooldown.ts), the
 * fenced UPDATE to the slot (RETURNING: its row is the verdict), the audit row.
 *
 * A completion is one UPDATE, whose own row count is the verdict; only when
 * the fence rejects it is an audit row written, by a second statement. A
 * retry or a parking is one batch: the fenced UPDATE, then an audit row whose
 * outcome reads changes() of that UPDATE (D1 runs a batch in order, in one
 * transaction: 'fence_lost' if the UPDATE matched nothing).
 *
 * A finished row stops carrying credentials (shared/credentials.ts: a
 * response_url, a token) in the same fenced UPDATE: a completion always, a
 * parking once the row's deadline has passed (before it, a replay may still
 * need the URL: the row is scheduled for scrubbing at its deadline instead,
 * one more statement in the parking batch; a row with no deadline keeps it
 * until it is pruned, redacted in every operator answer). The cost on the happy path: no
 * statement and no row written more — the payload column is rewritten in the
 * row the completion writes anyway, and only for a payload that holds a
 * credential (otherwise ?5 is NULL and the stored text stays as it was).
 */

export type Finish =
  | {
      readonly kind: "done";
      readonly result: unknown;
      readonly followUps?: readonly IntendedEffect[];
      /** Names of the workspace's rows to cancel with this completion (shared/outbox/cancel-named.ts). */
      readonly cancels?: readonly string[];
    }
  | { readonly kind: "retry"; readonly nextAttemptAt: number; readonly error: string }
  /** Parked. maybePerformed: its effect may have happened (a filter replay leaves it out; migration 0010). */
  | { readonly kind: "dead"; readonly error: string; readonly maybePerformed?: boolean }
  /** Slack answered 429: retry, give the attempt back, cool the row's rate key down for retryAfterMs. */
  | { readonly kind: "rate_limited"; readonly nextAttemptAt: number; readonly error: string; readonly retryAfterMs: number }
  /**
   * Not attempted: what the row needs is missing (its team has no
   * installation). Back to pending at nextAttemptAt, the attempt given back,
   * `error` as last_error; no audit row (nothing was attempted).
   */
  | {
      readonly kind: "wait";
      readonly nextAttemptAt: number;
      readonly error: string;
      /** The effect said it is not its time yet (failure.ts, not_yet): an ordinary wait, logged as such. */
      readonly expected?: boolean;
    };

export interface FinishOutcome {
  /** false: the fence rejected the write; another claim owns the row now. */
  readonly applied: boolean;
  /** Ids of follow-up rows this write inserted (none if a previous run of it already had). */
  readonly followUpIds: readonly number[];
  /** The same rows, each with how its message goes (a timed one delayed to its time, or left to the sweep). */
  readonly followUpRows?: readonly RecordedRow[];
  /** What each cancel of the completion found (none recorded by a re-run of it, or under a rejected fence). */
  readonly cancels?: readonly CancelResult[];
  /** A rate-limited retry: when the row is due, its key's release slot (cooldown.ts) if later than asked. */
  readonly nextAttemptAt?: number;
}

/** Rows written: the row and its index entries (done: leaves outbox_sweepable, enters outbox_done_by_age). */
const completeIfClaimed = `
UPDATE outbox
   SET status = 'done', claim_expires_at = NULL, sweep_at = NULL,
       result = ?3, completed_at = ?4, updated_at = ?4, payload = COALESCE(?5, payload)
 WHERE id = ?1 AND claim_token = ?2`;

/**
 * Back to pending, due at next_attempt_at. enqueued_at is the time the delayed
 * queue message is due, and sweep_at a grace period after it: the sweeper
 * never touches a row that is waiting for its retry time.
 */
const retryIfClaimed = `
UPDATE outbox
   SET status = 'pending', claim_expires_at = NULL,
       next_attempt_at = ?3, enqueued_at = ?3, sweep_at = ?3 + ?4,
       last_error = ?5, updated_at = ?6, waiting_since = NULL
 WHERE id = ?1 AND claim_token = ?2`;

/**
 * A 429, as retryIfClaimed, and the attempt the claim counted is given back:
 * Slack's pacing is not a failure, and must not walk a busy channel's rows
 * to MAX_ATTEMPTS (decide.ts bounds it by wall-clock time instead). Due at
 * the later of the decided time and the release slot the cooldown statement,
 * run just before in the batch, gave the row's key.
 */
const rateLimitedIfClaimed = `
UPDATE outbox
   SET status = 'pending', claim_expires_at = NULL,
       -- Given back once: a re-run of this write (deliver.ts retries a blip) finds the row pending and keeps the count.
       attempts = CASE WHEN status = 'leased' THEN max(attempts - 1, 0) ELSE attempts END,
       next_attempt_at = ${slotOrSql("?3")}, enqueued_at = ${slotOrSql("?3")}, sweep_at = ${slotOrSql("?3")} + ?4,
       rate_limited_since = coalesce(rate_limited_since, ?6),
       -- Slack answered: the installation served the row, so a later wait for one starts afresh (as retryIfClaimed).
       last_error = ?5, updated_at = ?6, waiting_since = NULL
 WHERE id = ?1 AND claim_token = ?2
RETURNING next_attempt_at`;

/**
 * A row that was not attempted: back to pending, the claim's attempt given back once (as rateLimitedIfClaimed).
 * waiting_since marks a wait for its installation (?7 = 0: migration 0008, the install's wake finds it by it); an
 * expected wait (?7 = 1: the effect's own not_yet) leaves it as it is.
 */
const waitIfClaimed = `
UPDATE outbox
   SET status = 'pending', claim_expires_at = NULL,
       attempts = CASE WHEN status = 'leased' THEN max(attempts - 1, 0) ELSE attempts END,
       next_attempt_at = ?3, enqueued_at = ?3, sweep_at = ?3 + ?4,
       last_error = ?5, updated_at = ?6, waiting_since = CASE WHEN ?7 = 1 THEN waiting_since ELSE coalesce(waiting_since, ?6) END
 WHERE id = ?1 AND claim_token = ?2`;

const parkIfClaimed = `
UPDATE outbox
   SET status = 'dead', claim_expires_at = NULL, sweep_at = NULL, maybe_performed = max(maybe_performed, ?6),
       last_error = ?3, completed_at = ?4, updated_at = ?4, payload = COALESCE(?5, payload)
 WHERE id = ?1 AND claim_token = ?2`;

/**
 * A dead row whose credential a replay may still use (its deadline is ahead):
 * due for scrubbing at the deadline (migration 0004, shared/outbox/scrub.ts).
 * Runs last in the parking batch and checks the row itself, so a rejected
 * fence schedules nothing.
 */
const scrubAtDeadline = `
INSERT INTO outbox_scrub_due (due_at, outbox_id)
SELECT expires_at, id FROM outbox WHERE id = ?1 AND claim_token = ?2 AND status = 'dead' AND expires_at IS NOT NULL
ON CONFLICT DO NOTHING`;

/**
 * The audit row of a failed attempt. It runs right after the fenced UPDATE in
 * the same batch, so changes() is that UPDATE's count: 'fence_lost' if it
 * matched nothing. (Only inside a batch: a standalone changes() would read
 * whatever statement last ran on the connection.)
 */
const recordAttempt = `
INSERT INTO outbox_attempts (outbox_id, attempt, outcome, error, claim_token, started_at, finished_at)
VALUES (?1, ?2, CASE WHEN changes() = 1 THEN ?3 ELSE 'fence_lost' END, ?4, ?5, ?6, ?7)
ON CONFLICT DO NOTHING`;

/** The audit row of a completion the fence rejected: the effect happened, its row belongs to another claim. */
const recordLostCompletion = `
INSERT INTO outbox_attempts (outbox_id, attempt, outcome, error, claim_token, started_at, finished_at)
VALUES (?1, ?2, 'fence_lost', 'performed, but the lease was lost before completion', ?3, ?4, ?5)
ON CONFLICT DO NOTHING`;

const verdict = "SELECT changes() AS changes";

/**
 * A follow-up, inserted only if its parent is done under THIS claim: it runs
 * right after completeIfClaimed in the same batch (one transaction), and
 * selects the parent by id, token and status. A fence that rejected the
 * completion leaves the parent under another token (or not done): nothing is
 * inserted. A plain follow-up's key (?3) is followUpKey's, from the parent's
 * (shared/outbox/model.ts: the child's key escaped as an input's is), bound,
 * never joined in SQL: a repeated completion (a retried write, or the effect
 * repeated after a crash and completed by a new claim) finds the key taken by
 * the parent's own child and skips it, recorded once. There is no ON
 * CONFLICT for it: a key taken by any other row is a collision, and the
 * unique index's error fails the whole batch (FollowUpKeyTaken), the parent's
 * completion included, as a taken key fails the ack's (record.ts): a
 * completion never stands with a follow-up missing. It carries its parent's
 * fact, so `events show <fact>` finds the chain. enqueued_at is optimistic,
 * as at the ingress (shared/outbox/record.ts): the consumer sends the ids
 * after the batch, and the sweep brings back any it could not. A timed
 * follow-up's times (?8 next_attempt_at, ?9 enqueued_at, ?10 sweep_at, ?11
 * due_at) are its schedule's, resolved against this completion's time
 * (scheduleOf). Rows read: 1 (the parent by primary key) + 1 (the key, by the
 * unique index). Rows written: 3, or 0.
 *
 * A named follow-up (?3: its namedKey, shared/outbox/model.ts) is keyed by its
 * name and team instead: a repeat of the name, from this chain or any input of
 * the workspace, records nothing, as at the ack (record.ts: ON CONFLICT DO
 * NOTHING). Not under its parent's key, it carries the fact of its chain (the
 * parent's, else the parent's receipt's id), by which the audit trail finds
 * named rows (migration 0014); +1 row written (outbox_named_by_fact).
 *
 * A follow-up belongs to its parent's custom step execution, if any (p.execution_id, migration 0019): performed
 * with its workflow token; +1 row written (outbox_by_execution) for such a row only.
 */
const followUpInsert = (fact: string, guard: string) => `
INSERT INTO outbox (idempotency_key, receipt_id, team_id, effect, payload, parent_id, depth,
                    next_attempt_at, expires_at, enqueued_at, sweep_at, created_at, updated_at, fact, due_at, execution_id)
SELECT ?3, p.receipt_id, p.team_id, ?4, ?5, p.id, p.depth + 1,
       ?8, ?7, ?9, ?10, ?6, ?6, ${fact}, ?11, p.execution_id
  FROM outbox AS p
 WHERE p.id = ?1 AND p.claim_token = ?2 AND p.status = 'done'
${guard}
RETURNING id`;
const insertFollowUp = followUpInsert(
  "p.fact",
  "   AND NOT EXISTS (SELECT 1 FROM outbox AS o WHERE o.idempotency_key = ?3 AND o.parent_id = p.id)",
);
const insertNamedFollowUp = followUpInsert("coalesce(p.fact, p.receipt_id)", "ON CONFLICT (idempotency_key) DO NOTHING");

/**
 * A completion refused whole: a follow-up's key is another row's (not a child the parent's earlier completion
 * recorded), or two follow-ups share one. Nothing was written; the effect was performed (deliver.ts parks the row,
 * marked maybe_performed, rather than complete a chain with a hole in it).
 */
export class FollowUpKeyTaken extends Error {
  constructor(parentKey: string, keys: readonly string[], cause: unknown) {
    super(`follow-ups refused: a key of ${parentKey}'s follow-ups (${keys.join(", ")}) is already another row's; nothing was written`, {
      cause,
    });
    this.name = "FollowUpKeyTaken";
  }
}

export async function finishClaim(
  db: D1Database,
  row: ClaimedRow,
  finish: Finish,
  now: number,
  sweepGraceMs: number,
  startedAt: number,
  /** The longest a timed follow-up's message is delayed (QUEUE_DELAY_MAX_SECONDS). */
  queueDelayMaxMs: number = MAX_QUEUE_DELAY_SECONDS * 1000,
): Promise<FinishOutcome> {
  if (finish.kind === "done") {
    // The happy path is one statement: its own meta.changes is the verdict.
    // Only a rejected completion (rare) writes its audit row, in a second one.
    // Follow-ups ride in the same batch, after the completion they depend on.
    const scrubbed = (await scrubStoredPayload(row.payload)) ?? null;
    const complete = db.prepare(completeIfClaimed).bind(row.id, row.claimToken, JSON.stringify(finish.result ?? null), now, scrubbed);
    const followUps = finish.followUps ?? [];
    const cancelNames = finish.cancels ?? [];
    const teamOf = () => {
      // Names are per workspace: the consumer refuses a teamless row's names before it finishes (deliver.ts).
      if (!row.teamId) throw new Error(`row ${row.id} has no team: it cannot name or cancel rows`);
      return row.teamId;
    };
    let changes: number;
    let followUpIds: number[] = [];
    let followUpRows: RecordedRow[] = [];
    let cancels: CancelResult[] = [];
    if (followUps.length === 0 && cancelNames.length === 0) {
      changes = (await complete.run()).meta.changes;
    } else {
      const schedules = followUps.map((f) => scheduleOf(f, now, sweepGraceMs, queueDelayMaxMs));
      const keys = followUps.map((f) => (f.name === undefined ? followUpKey(row.idempotencyKey, f.key) : namedKey(teamOf(), f.name)));
      const plainKeys = keys.filter((_, i) => followUps[i]?.name === undefined);
      if (new Set(plainKeys).size < plainKeys.length)
        throw new FollowUpKeyTaken(row.idempotencyKey, plainKeys, "two follow-ups share a key");
      const inserts = followUps.map((f, i) => {
        const at = schedules[i] as Schedule;
        return db
          .prepare(f.name === undefined ? insertFollowUp : insertNamedFollowUp)
          .bind(
            row.id,
            row.claimToken,
            keys[i],
            f.effect,
            JSON.stringify(f.payload),
            now,
            f.expiresAt ?? null,
            at.nextAttemptAt,
            at.enqueuedAt,
            at.sweepAt,
            at.dueAt,
          );
      });
      const source = { kind: "completion", receiptId: row.receiptId, rowId: row.id, claimToken: row.claimToken } as const;
      // After the completion they depend on (their guard is the parent done under this token) and the inserts.
      const cancelling = cancelNames.flatMap((name) => cancelStatements(db, teamOf(), name, source, now));
      const [completed, ...rest] = await db
        .batch<Record<string, unknown>>([complete, ...inserts, ...cancelling])
        .catch((error: unknown) => {
          throw /UNIQUE constraint failed: outbox\.idempotency_key/.test(String(error))
            ? new FollowUpKeyTaken(row.idempotencyKey, plainKeys, error)
            : error;
        });
      changes = completed?.meta.changes ?? 0;
      followUpRows = rest
        .slice(0, inserts.length)
        .flatMap((result, i) =>
          result.results.map((r): RecordedRow => ({ id: Number(r.id), delaySeconds: (schedules[i] as Schedule).delaySeconds })),
        );
      followUpIds = followUpRows.map((r) => r.id);
      // Each cancel is three statements; the second is its verdict.
      cancels = cancelNames.flatMap((name, i) => {
        const verdict = cancelResultOf(name, rest[inserts.length + 3 * i + 1]?.results ?? []);
        return verdict ? [verdict] : [];
      });
    }
    if (changes === 1) {
      return {
        applied: true,
        followUpIds,
        ...(followUpRows.length > 0 ? { followUpRows } : {}),
        ...(cancelNames.length > 0 ? { cancels } : {}),
      };
    }
    await db.prepare(recordLostCompletion).bind(row.id, row.attempts, row.claimToken, startedAt, now).run();
    return { applied: false, followUpIds: [] };
  }
  if (finish.kind === "rate_limited") {
    // The 429 is a fact about Slack whoever holds the row now: the cooldown is written even if the fence rejects the rest.
    // The audit row sits directly after the UPDATE: its changes() must read that statement's count.
    const [, updated] = await db.batch<{ next_attempt_at: number }>([
      coolDownStatement(db, row.id, now, finish.retryAfterMs),
      db.prepare(rateLimitedIfClaimed).bind(row.id, row.claimToken, finish.nextAttemptAt, sweepGraceMs, finish.error, now),
      db.prepare(recordAttempt).bind(row.id, row.attempts, "rate_limited", finish.error, row.claimToken, startedAt, now),
    ]);
    const nextAttemptAt = updated?.results[0]?.next_attempt_at;
    return nextAttemptAt === undefined ? { applied: false, followUpIds: [] } : { applied: true, followUpIds: [], nextAttemptAt };
  }
  if (finish.kind === "wait") {
    const waited = await db
      .prepare(waitIfClaimed)
      .bind(row.id, row.claimToken, finish.nextAttemptAt, sweepGraceMs, finish.error, now, finish.expected ? 1 : 0)
      .run();
    return waited.meta.changes === 1
      ? { applied: true, followUpIds: [], nextAttemptAt: finish.nextAttemptAt }
      : { applied: false, followUpIds: [] };
  }
  let update: D1PreparedStatement;
  let audit: D1PreparedStatement;
  const later: D1PreparedStatement[] = [];
  if (finish.kind === "retry") {
    update = db.prepare(retryIfClaimed).bind(row.id, row.claimToken, finish.nextAttemptAt, sweepGraceMs, finish.error, now);
    audit = db.prepare(recordAttempt).bind(row.id, row.attempts, "retry", finish.error, row.claimToken, startedAt, now);
  } else {
    const scrubbed = (await scrubStoredPayload(row.payload)) ?? null;
    // No deadline: a replay may need the credential any time until the row is pruned (DEAD_RETENTION_DAYS).
    const deadlinePassed = row.expiresAt !== null && now >= row.expiresAt;
    update = db
      .prepare(parkIfClaimed)
      .bind(row.id, row.claimToken, finish.error, now, deadlinePassed ? scrubbed : null, finish.maybePerformed ? 1 : 0);
    audit = db.prepare(recordAttempt).bind(row.id, row.attempts, "dead", finish.error, row.claimToken, startedAt, now);
    if (scrubbed !== null && !deadlinePassed) later.push(db.prepare(scrubAtDeadline).bind(row.id, row.claimToken));
  }
  // verdict sits directly after the UPDATE: it must read that statement's count.
  const [, changed] = await db.batch<{ changes: number }>([update, db.prepare(verdict), audit, ...later]);
  return { applied: changed?.results[0]?.changes === 1, followUpIds: [] };
}

/**
 * A long effect's lease renewed (shared/effects/effect.ts, ClaimLease): the claim's expiry, and its sweep_at with it,
 * moved to a lease after the clock read at this write — the rule of every lease — fenced on the token and on the
 * row still being leased. Its RETURNING row is the verdict. Rows written: the row and its outbox_sweepable entry.
 */
const renewIfClaimed = `
UPDATE outbox
   SET claim_expires_at = ?3 + ?4, sweep_at = ?3 + ?4, updated_at = ?3
 WHERE id = ?1 AND claim_token = ?2 AND status = 'leased'
RETURNING claim_expires_at`;

/**
 * What a statement riding in a renewal's batch checks, so it writes only while the claim holds (`?n` and `?m` are
 * the statement's own parameters for the row's id and token): the renewal before it in the same transaction has
 * decided, and a lost lease writes nothing.
 */
export function leaseHeldSql(idParam: string, tokenParam: string): string {
  return `EXISTS (SELECT 1 FROM outbox WHERE id = ${idParam} AND claim_token = ${tokenParam} AND status = 'leased')`;
}

/**
 * Renews `row`'s lease until `now` + `leaseMs` (now: the clock read just before), with `also` in the same batch.
 * Returns the new expiry and `also`'s results, or undefined when the fence rejected it (the lease was lost).
 */
export async function renewClaim(
  db: D1Database,
  row: Pick<ClaimedRow, "id" | "claimToken">,
  now: number,
  leaseMs: number,
  also: readonly D1PreparedStatement[] = [],
): Promise<{ readonly expiresAt: number; readonly results: readonly D1Result<Record<string, unknown>>[] } | undefined> {
  const [renewed, ...results] = await db.batch<Record<string, unknown>>([
    db.prepare(renewIfClaimed).bind(row.id, row.claimToken, now, leaseMs),
    ...also,
  ]);
  const expiresAt = renewed?.results[0]?.claim_expires_at;
  return typeof expiresAt === "number" ? { expiresAt, results } : undefined;
}
