/**
 * The outbox: what ackbox owes Slack, and who is paying it right now.
 *
 * Glossary
 * - receipt:    one row per Slack delivery id (the Events API's event_id, or an
 *               operation id for slash commands and interactions). Inserted with
 *               ON CONFLICT DO NOTHING: the database, not the code, decides which
 *               of two concurrent deliveries is the first.
 * - fact:       what an input is, as opposed to its envelope (shared/slack/facts.ts):
 *               a message's team, channel, ts and type; a command's or an
 *               interaction's operation id; an event's event_id when it has no
 *               natural identity. Every copy of a fact (a retry, the same message
 *               under another event_id, a backfill) has its own receipt.
 * - outbox row: one intended side effect (a Slack Web API call, a response_url
 *               POST), committed in the same D1 batch as its receipt, before the
 *               ack. Unique by idempotency key, "<fact>:<effect key>" with any
 *               ":" of the effect key written "%3A" (idempotencyKey): one fact,
 *               one row per effect, whichever copy recorded it.
 * - claim:      one UPDATE that stamps a fresh random token and a lease expiry on
 *               rows that are claimable, and returns them. Check and act in one
 *               statement, so two claimers can never both win a row.
 * - lease:      how long a claim holds. It expires; it is never released. A
 *               worker that dies mid-effect releases nothing, and expiry is the
 *               only release that survives a cancelled invocation. The clock
 *               rule, for every lease (an outbox claim, the ack's inline claim,
 *               an installation's refresh lease, and the sweep's take, whose
 *               sweep_at says when it looks again): the statement that takes it
 *               binds the time read just before it, so the lease ends a full
 *               lease after its write. A time captured earlier (a cron tick's
 *               scheduledTime, a request's start) may decide what is due, never
 *               when a lease ends: code that takes a lease is given a clock,
 *               not a `now` (test/consumer/lease-clock.test.ts).
 * - fence:      every write after a claim says `AND claim_token = ?` and reads
 *               whether it matched. Zero rows means the lease was lost to another
 *               worker: logged, never an exception, never a completion.
 * - sweep:      the cron step that re-enqueues rows whose queue message was lost,
 *               never sent, or whose lease expired. The queue is the fast path;
 *               the sweep is the guarantee.
 * - park:       mark a row dead: a fatal Slack error, too many attempts, or a
 *               deadline passed. Dead rows wait for an operator.
 * - replay:     an operator moves dead rows back to pending and re-enqueues them.
 * - named row:  a row the app named (IntentOptions.name), keyed by the name and
 *               its workspace (namedKey), not by the input: one row per name and
 *               workspace, whichever input or effect asks for it first.
 * - cancel:     an intent that is not a row: one statement, in the batch of the
 *               input (or completion) that asks, that ends a named row still
 *               pending and never attempted as cancelled (status done,
 *               cancelled_by set: shared/outbox/cancel-named.ts).
 *
 * Delivery is at-least-once, on purpose: the effect is performed before the
 * fenced completion is written, so a crash between the two repeats the effect.
 * The other order would lose it silently.
 */

export type OutboxStatus = "pending" | "leased" | "done" | "dead";

export const OUTBOX_STATUSES: readonly OutboxStatus[] = ["pending", "leased", "done", "dead"];

/** The body of every outbox queue message: which row to look at, on which shard (shared/shards/). */
export interface OutboxMessage {
  readonly id: number;
  /** The D1 shard the row lives on; absent = 0 (every message of a one-shard deployment, and of before sharding). */
  readonly shard?: number;
}

/** An effect the app intends, before it has an id. */
export interface IntendedEffect {
  /** Unique within one receipt; becomes the idempotency key's suffix. */
  readonly key: string;
  readonly effect: string;
  readonly payload: unknown;
  /** Not performed after this time (ms); e.g. a response_url's 30 minutes. */
  readonly expiresAt?: number;
  /** The row's name (IntentOptions.name): its key is namedKey(team, name), not the input's or the parent's. */
  readonly name?: string;
  /** Not performed before this time (ms): a timer (IntentOptions.at). A time in the past means now. */
  readonly at?: number;
  /** Not performed before this long (ms) after the time the intent is recorded (IntentOptions.after, in seconds). */
  readonly afterMs?: number;
}

/** The furthest ahead a timer may be set: a time more than a year from the time it is recorded is refused. */
export const MAX_TIMER_AHEAD_MS = 365 * 24 * 60 * 60 * 1000;

/** When a row recorded at `now` is due: its `at`, or `now` + its `after`; never before `now`. */
export function dueAtOf(effect: Pick<IntendedEffect, "at" | "afterMs">, now: number): number {
  const asked = effect.at ?? (effect.afterMs === undefined ? now : now + effect.afterMs);
  return Math.max(now, asked);
}

/**
 * Why a timed intent cannot be recorded at `now`, or undefined: more than a year ahead, or after the row's own
 * deadline (a response_url's 30 minutes), when it could only park. Checked where the time is resolved: the ack
 * (shared/app/app.ts) and, for follow-ups, the completion (shared/delivery/deliver.ts).
 */
export function timeProblem(effect: Pick<IntendedEffect, "at" | "afterMs" | "expiresAt">, now: number): string | undefined {
  if (effect.at === undefined && effect.afterMs === undefined) return undefined;
  const due = dueAtOf(effect, now);
  if (due - now > MAX_TIMER_AHEAD_MS) {
    return `its time is ${Math.round((due - now) / 86_400_000)} days ahead, more than a year (the most a timer may wait)`;
  }
  if (effect.expiresAt !== undefined && due > effect.expiresAt) {
    return `its time (${new Date(due).toISOString()}) is after its deadline (expiresAt ${new Date(effect.expiresAt).toISOString()}): it could only park`;
  }
  return undefined;
}

/**
 * How a row recorded at `now` is written and sent (record.ts, fence.ts): due now, it is sent at once and the
 * sweep looks a grace period later, as ever. A timer (due later) is next_attempt_at = due_at = its time: the
 * claim refuses it before then, whoever asks. Within the queue's longest delay (QUEUE_DELAY_MAX_SECONDS: 12 h on
 * Cloudflare) its message is sent delayed to its time (rounded up to a second: never early); beyond it no
 * message is sent (enqueued_at NULL), so nothing waits for hours in the queue. Either way sweep_at is its
 * time, not its time + grace: if the delayed message was lost, or there is none, the first cron tick after its
 * time sends it (lateness: at most one cron interval), and if the message comes first the claim moves sweep_at
 * on before the tick. A re-send racing the message is one more claim that finds the row taken.
 */
export interface Schedule {
  readonly nextAttemptAt: number;
  /** The timer's time; null when the row was due when recorded. */
  readonly dueAt: number | null;
  /** When its queue message is due; null when none is sent (beyond the queue's delay). */
  readonly enqueuedAt: number | null;
  readonly sweepAt: number;
  /** The message's delay; null when none is sent. */
  readonly delaySeconds: number | null;
}

export function scheduleOf(
  effect: Pick<IntendedEffect, "at" | "afterMs">,
  now: number,
  sweepGraceMs: number,
  queueDelayMaxMs: number,
): Schedule {
  const due = dueAtOf(effect, now);
  if (due <= now) return { nextAttemptAt: now, dueAt: null, enqueuedAt: now, sweepAt: now + sweepGraceMs, delaySeconds: 0 };
  const queued = due - now <= queueDelayMaxMs;
  return {
    nextAttemptAt: due,
    dueAt: due,
    enqueuedAt: queued ? due : null,
    sweepAt: due,
    delaySeconds: queued ? Math.ceil((due - now) / 1000) : null,
  };
}

/** A row just recorded and how its message goes: at once (0), delayed, or not at all (null: the sweep sends it at its time). */
export interface RecordedRow {
  readonly id: number;
  readonly delaySeconds: number | null;
}

/**
 * How deep a chain of follow-ups may go: a row the ingress recorded is depth
 * 0, its follow-ups depth 1, theirs 2, … An effect at this depth that asks
 * for more is parked instead (its effect was performed; its follow-ups are
 * not recorded). Five is twice the longest chain the example app needs
 * (placeholder → lookup → update), and bounds a looping chain to six rows.
 */
export const MAX_FOLLOW_UP_DEPTH = 5;

/** A row as the consumer sees it once it holds the claim. */
export interface ClaimedRow {
  readonly id: number;
  readonly receiptId: string;
  /** "<fact>:<effect key>" (idempotencyKey), or "<parent's key>><child key>" for a follow-up. */
  readonly idempotencyKey: string;
  /** 0 for a row the ingress recorded; parent's depth + 1 for a follow-up. */
  readonly depth: number;
  readonly effect: string;
  readonly payload: string;
  /** Including the attempt this claim starts. */
  readonly attempts: number;
  readonly expiresAt: number | null;
  readonly createdAt: number;
  readonly claimToken: string;
  readonly claimExpiresAt: number;
  /** When Slack first answered 429 for it in this life (migration 0003); null if never. */
  readonly rateLimitedSince: number | null;
  /** The row's rate key (shared/delivery/pacing.ts); null when it is not paced. */
  readonly rateKey: string | null;
  /** Whether the key had release slots queued when claimed (shared/outbox/cooldown.ts): Slack has been pacing it. */
  readonly keyHot: boolean;
  /** The Slack team the row acts in (its receipt's); a distributed app performs it with that team's installation. */
  readonly teamId?: string | null;
  /** When it first waited for its team's installation, not attempted since (migration 0008); null otherwise. */
  readonly waitingSince?: number | null;
  /** The custom step execution the row belongs to (migration 0019): performed with its workflow token (shared/steps/rows.ts). */
  readonly executionId?: string | null;
}

/**
 * "<identity>:<effect key>", the effect key's own ":" written "%3A". Both parts
 * may contain ":" (a block_suggestion's id embeds what the user typed, and
 * intent keys allow it), so written plainly "X:foo" + "k:z" and "X:foo:k" + "z"
 * would be one key. Escaped, the last ":" is the separator, so the key decodes
 * to exactly one pair ("%" is not allowed in effect keys, so "%3A" is never
 * literal). An effect key without ":" is written as it always was: keys of
 * rows already recorded stay what they are.
 */
export function idempotencyKey(identity: string, effectKey: string): string {
  return `${identity}:${escapedEffectKey(effectKey)}`;
}

/**
 * A follow-up's key: its parent's and its own, the own key's ":" written
 * "%3A" as in idempotencyKey. Effect keys cannot contain ">"
 * (shared/app/intents.ts), so the last ">" splits a follow-up's key, and what
 * follows the last ":" of a follow-up's key holds a ">", which no input's
 * effect key can: a follow-up's key is never an input's (unescaped, a typed
 * block_suggestion id "v:k>x" with intent key "y" was the follow-up "x:y" of
 * the row "v:k"). A key without ":" is written as it always was. The one
 * writer of follow-ups (shared/outbox/fence.ts) binds this, never a key
 * joined in SQL.
 */
export function followUpKey(parentKey: string, effectKey: string): string {
  return `${parentKey}>${escapedEffectKey(effectKey)}`;
}

/** An effect key as a key's last part: its ":" written "%3A" (the one escape, for inputs' rows and follow-ups alike). */
function escapedEffectKey(effectKey: string): string {
  return effectKey.replaceAll(":", "%3A");
}

/**
 * A named row's key: "name:<team>:<name>", the name's ":" written "%3A" as in
 * idempotencyKey (it is idempotencyKey("name:<team>", name)). Unique per
 * workspace, whatever input records it: a retry, another input, another
 * handler or an effect's follow-up naming it again finds the key taken and
 * records nothing. It cannot be an input's key: no fact is "name:<team>"
 * (shared/slack/facts.ts: facts and operation ids start with their kind,
 * event ids with "Ev"), nor a follow-up's (those hold a ">", which names
 * cannot). Team ids have no ":", so two workspaces' names never meet.
 */
export function namedKey(teamId: string, name: string): string {
  return idempotencyKey(`name:${teamId}`, name);
}

/** The name of a named row's key (namedKey's inverse), or undefined for any other key. */
export function nameOfKey(key: string): string | undefined {
  if (!key.startsWith("name:")) return undefined;
  const separator = key.indexOf(":", "name:".length);
  return separator < 0 ? undefined : key.slice(separator + 1).replaceAll("%3A", ":");
}

/** The key range of every named row (outbox_named_by_fact's WHERE, migration 0014): "name:" up to, not including, "name;". */
export const NAMED_KEYS_SQL = "idempotency_key >= 'name:' AND idempotency_key < 'name;'";

/**
 * What a cancel found (shared/outbox/cancel-named.ts): the row ended as
 * cancelled; too late (claimed, attempted, done or dead: never
 * half-cancelled); cancelled already (by an earlier cancel); or no row of
 * that name in the workspace (not an error).
 */
export type CancelOutcome = "cancelled" | "too_late" | "already_cancelled" | "nothing_to_cancel";

export interface CancelResult {
  readonly name: string;
  readonly outcome: CancelOutcome;
  /** The named row, when there is one. */
  readonly rowId: number | null;
  /** Its status when the cancel looked (pending, leased, done, dead), when there is one. */
  readonly rowStatus: string | null;
}
