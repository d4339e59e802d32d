/**
 * THE BACKLOG, measured: what the outbox holds right now and how it fared over
 * recent windows. Read by the operator API (GET /admin/backlog, /admin/metrics)
 * and by the sweeper each tick (a sample for the dashboard, and the alert checks).
 *
 * Vocabulary (the operator's, see docs/operating.md):
 * - live:            pending or leased, i.e. not yet finished.
 * - owed since:      when a row became owed: its time for a timer (due_at),
 *                    its creation for any other row.
 * - oldest pending:  the live row owed the longest, by when it became owed:
 *                    how late the most overdue unfinished effect is. A timer
 *                    whose time is still ahead is not late and is not in it.
 *                    Exact for pending rows (outbox_pending_by_due, migration
 *                    0015), whatever the backlog's size; leased rows count
 *                    through the bounded scan, where expired leases sort first.
 * - waiting for their time: pending timers whose time is still ahead
 *                    (counted, with the next one's time, in the bounded scan,
 *                    where they sort last: sweep_at is their time).
 * - stale lease:     leased, lease expired: its worker died or overran; the
 *                    sweep hands it out again.
 * - never enqueued:  pending with enqueued_at NULL: its queue send failed; the
 *                    next sweep sends it.
 * - overdue:         live and past sweep_at: the sweeper has not caught up.
 * - window figures:  rows done, attempts failed (retry, dead, dead_letter
 *                    audit rows) and rows parked dead in (now − window, now],
 *                    the sweeper's own alert posts left out (alert-rows.ts): a
 *                    dead alert post must not raise the next alert. A 429
 *                    (rate_limited) is Slack's pacing, not a failed attempt.
 *                    A cancelled row (cancel(name)) was never performed: not
 *                    done here, and never a failure.
 * - waiting teams:   a distributed app's teams whose pending rows wait for
 *                    their installation: blocked (Slack refused its token)
 *                    or missing (none serves the team). Counted among the
 *                    first `cap` live rows, one primary-key read of the
 *                    installation (and of the receipt, for an org's) per row.
 * - last alert post: the newest alert post's state; `dead` means ALERT_CHANNEL
 *                    cannot be posted to, and alerts are logged only.
 * - custom steps:    executions whose workflow token the engine still holds
 *                    (shared/steps/): those waiting for a user (no completion
 *                    recorded yet), and those near their token's expiry (it
 *                    dies within DEADLINE_MARGIN_MS: past a waiting step's
 *                    deadline, yet not completed). Among the first `cap`, by
 *                    expiry, through step_executions_live (migration 0019).
 *
 * Cost (invariant 6): every statement reads through a partial index or the
 * attempts' time index and stops at a LIMIT, so a tick costs the same with a
 * million done rows in history as with none. Counts stop at `cap`; a count
 * that reached it is a lower bound, and `capped` says so.
 */

import { DEADLINE_MARGIN_MS } from "../steps/execution.ts";
import { ALERT_ATTEMPT_SQL, ALERT_ROW_SQL } from "./alert-rows.ts";

/** Counts per status of one effect. */
export interface EffectCounts {
  pending: number;
  leased: number;
  dead: number;
}

export interface WindowFigures {
  readonly windowMs: number;
  /** Rows completed in the window. */
  readonly done: number;
  /** Failed attempts recorded in the window (retry, dead, dead_letter). */
  readonly failed: number;
  /** Rows parked dead in the window. */
  readonly parkedDead: number;
  /** failed ÷ (failed + done); null when the window saw neither. */
  readonly failureRate: number | null;
}

export interface BacklogFigures {
  readonly at: number;
  readonly cap: number;
  /** Some count reached `cap`: the counts are lower bounds. */
  readonly capped: boolean;
  readonly pending: number;
  readonly leased: number;
  readonly dead: number;
  readonly byEffect: Readonly<Record<string, EffectCounts>>;
  /** When the live row owed the longest became owed (its time, or its creation); null when nothing is late. */
  readonly oldestPendingDueAt: number | null;
  /** How late that row is: now − oldestPendingDueAt. */
  readonly oldestPendingAgeMs: number | null;
  /** Pending timers whose time is still ahead: owed later, not late. Among the first `cap` live rows. */
  readonly waitingForTime: number;
  /** The next of those timers' time; null when none. */
  readonly nextTimerAt: number | null;
  readonly staleLeases: number;
  readonly neverEnqueued: number;
  readonly overdue: number;
  readonly windows: readonly WindowFigures[];
  /** Teams whose rows wait for their installation (measured only with `installations`), oldest first. */
  readonly waitingTeams: readonly WaitingTeam[];
  /** Custom step executions whose workflow token is still held (shared/steps/): live, waiting for a user, near expiry. */
  readonly steps: StepFigures;
  /** The newest alert post (alerts.ts), if any: dead means the channel it went to (ALERT_CHANNEL then) cannot be posted to. */
  readonly lastAlertPost: {
    readonly id: number;
    readonly status: string;
    readonly error: string | null;
    readonly channel: string | null;
  } | null;
}

/** Custom step executions in flight. */
export interface StepFigures {
  /** Executions whose workflow token the engine holds (not completed, not expired). */
  readonly live: number;
  /** Of those, the ones with no completion recorded: a step waiting for a user (its deadline will end it). */
  readonly waitingForUser: number;
  /** Of those, the ones whose token dies within DEADLINE_MARGIN_MS: late, at risk of ending with an error. */
  readonly nearExpiry: number;
  /** When the next held token dies; null when none is held. */
  readonly nextExpiryAt: number | null;
}

/** A team whose pending rows wait for its installation: blocked by an auth failure, or missing. Never a token. */
export interface WaitingTeam {
  readonly teamId: string;
  readonly installKey: string | null;
  readonly state: "blocked" | "missing";
  readonly reason: string | null;
  readonly blockedAt: number | null;
  readonly rows: number;
  readonly oldestCreatedAt: number;
}

/** Waiting teams reported at most: a page for a person, not an export. */
export const WAITING_TEAMS_LIMIT = 50;

/** Counts the operator API reads on demand. */
export const ADMIN_COUNT_CAP = 10_000;
/** Counts the sweeper reads every tick: smaller, since it runs every minute. */
export const TICK_COUNT_CAP = 1_000;

/**
 * The live backlog in one pass over outbox_sweepable, stalest first, at most
 * ?2 rows. Rows read: 2 per live row (its index entry and the row), at most 2 × cap.
 */
const liveByEffect = `
SELECT effect, status,
       COUNT(*)                                                       AS n,
       MIN(CASE WHEN owed_since <= ?1 THEN owed_since END)            AS oldest_due_at,
       SUM(status = 'leased' AND claim_expires_at <= ?1)              AS stale_leases,
       SUM(status = 'pending' AND enqueued_at IS NULL AND owed_since <= ?1) AS never_enqueued,
       SUM(sweep_at <= ?1)                                            AS overdue,
       SUM(status = 'pending' AND owed_since > ?1)                    AS waiting,
       MIN(CASE WHEN status = 'pending' AND owed_since > ?1 THEN owed_since END) AS next_timer_at
  FROM (SELECT effect, status, coalesce(due_at, created_at) AS owed_since, claim_expires_at, enqueued_at, sweep_at
          FROM outbox
         WHERE status IN ('pending', 'leased')
         ORDER BY sweep_at
         LIMIT ?2)
 GROUP BY effect, status`;

/**
 * When the pending row owed the longest became owed, through outbox_pending_by_due: one index probe, 1 row
 * read. Later than now when every pending row is a timer whose time is ahead: then nothing is late.
 */
const oldestPending = `SELECT MIN(coalesce(due_at, created_at)) AS oldest FROM outbox WHERE status = 'pending'`;

/** Dead rows, newest first through outbox_dead_by_age, at most ?1. Rows read: about 2 per dead row, at most 2 × cap. */
const deadByEffect = `
SELECT effect, COUNT(*) AS n
  FROM (SELECT effect FROM outbox WHERE status = 'dead' ORDER BY completed_at DESC LIMIT ?1)
 GROUP BY effect`;

/**
 * Rows performed (finished as `done`) in (?1, ?2], through outbox_done_by_age, alert posts and cancelled rows
 * (done, never performed: shared/outbox/cancel-named.ts) left out: 2 rows read per row counted.
 */
const doneInWindow = `
SELECT COUNT(*) AS n
  FROM (SELECT 1 FROM outbox
         WHERE status = 'done' AND completed_at > ?1 AND completed_at <= ?2 AND NOT ${ALERT_ROW_SQL} AND cancelled_by IS NULL
         LIMIT ?3)`;

/** Rows parked dead in (?1, ?2], through outbox_dead_by_age, alert posts left out. */
const deadInWindow = `
SELECT COUNT(*) AS n
  FROM (SELECT 1 FROM outbox WHERE status = 'dead' AND completed_at > ?1 AND completed_at <= ?2 AND NOT ${ALERT_ROW_SQL} LIMIT ?3)`;

/** Failed attempts in (?1, ?2], through outbox_attempts_by_time (migration 0002), alert posts' left out (a row read each). */
const failuresInWindow = `
SELECT COUNT(*) AS n
  FROM (SELECT 1 FROM outbox_attempts
         WHERE finished_at > ?1 AND finished_at <= ?2 AND outcome IN ('retry', 'dead', 'dead_letter') AND NOT ${ALERT_ATTEMPT_SQL}
         LIMIT ?3)`;

/**
 * Executions whose workflow token is held and alive, by expiry through step_executions_live, at most ?3; each
 * waiting when its completion's named row (namedKey(team, "step.<id>"): `name:<team>:step.<id>`, its name has no
 * ":" to escape) is not recorded. Rows read: 2 per execution, and 1 for its completion's key.
 */
const liveExecutions = `
SELECT COUNT(*) AS live,
       SUM(NOT EXISTS (SELECT 1 FROM outbox AS o WHERE o.idempotency_key = 'name:' || s.team_id || ':step.' || s.execution_id)) AS waiting,
       SUM(s.expires_at <= ?2) AS near_expiry,
       MIN(s.expires_at) AS next_expiry
  FROM (SELECT execution_id, team_id, expires_at FROM step_executions
         WHERE token IS NOT NULL AND expires_at > ?1
         ORDER BY expires_at
         LIMIT ?3) AS s`;

/** The newest alert post: a range of the idempotency_key index (the alert posts, a few per alert window, pruned like any row). */
const lastAlertPost = `
SELECT id, status, last_error, CASE WHEN json_valid(payload) THEN json_extract(payload, '$.channel') END AS channel
  FROM outbox WHERE ${ALERT_ROW_SQL} ORDER BY created_at DESC, id DESC LIMIT 1`;

/**
 * Pending rows of teams no usable installation serves, per team, through
 * outbox_sweepable (at most ?1 rows): the team's own installation, else
 * (none) its org's, as the consumer finds it (installations/store.ts). The
 * engine's own installation.removed rows do not wait for one.
 */
const waitingTeams = `
SELECT o.team_id AS team_id, COUNT(*) AS n, MIN(o.created_at) AS oldest,
       COALESCE(t.install_key, e.install_key) AS install_key,
       COALESCE(t.blocked_reason, e.blocked_reason) AS blocked_reason,
       COALESCE(t.blocked_at, e.blocked_at) AS blocked_at
  FROM (SELECT team_id, receipt_id, created_at, status, effect FROM outbox
         WHERE status IN ('pending', 'leased')
         ORDER BY sweep_at
         LIMIT ?1) o
  LEFT JOIN installations t ON t.install_key = 'T:' || o.team_id
  LEFT JOIN receipts r ON t.install_key IS NULL AND r.id = o.receipt_id
  LEFT JOIN installations e ON e.install_key = 'E:' || r.enterprise_id
 WHERE o.status = 'pending' AND o.team_id IS NOT NULL AND o.effect != 'installation.removed'
   AND (COALESCE(t.install_key, e.install_key) IS NULL OR COALESCE(t.blocked_reason, e.blocked_reason) IS NOT NULL)
 GROUP BY o.team_id
 ORDER BY oldest
 LIMIT ?2`;

interface LiveRow {
  effect: string;
  status: "pending" | "leased";
  n: number;
  oldest_due_at: number | null;
  stale_leases: number;
  never_enqueued: number;
  overdue: number;
  waiting: number;
  next_timer_at: number | null;
}

export interface MeasureOptions {
  /** Windows to report, in ms (e.g. 5 min, 1 h, the alert window). */
  readonly windowsMs: readonly number[];
  readonly cap: number;
  /** A distributed app: measure the teams waiting for their installation (single-workspace mode has none). */
  readonly installations?: boolean;
}

/** Measures the backlog at `now`: one D1 batch (one round trip, one snapshot). */
export async function measureBacklog(db: D1Database, now: number, options: MeasureOptions): Promise<BacklogFigures> {
  const { cap } = options;
  const windowsMs = [...new Set(options.windowsMs)];
  const statements = [
    db.prepare(liveByEffect).bind(now, cap),
    db.prepare(deadByEffect).bind(cap),
    db.prepare(lastAlertPost),
    db.prepare(oldestPending),
    db.prepare(liveExecutions).bind(now, now + DEADLINE_MARGIN_MS, cap),
    ...windowsMs.flatMap((windowMs) => [
      db.prepare(doneInWindow).bind(now - windowMs, now, cap),
      db.prepare(failuresInWindow).bind(now - windowMs, now, cap),
      db.prepare(deadInWindow).bind(now - windowMs, now, cap),
    ]),
  ];
  // Last, so the window statements keep their places; the same snapshot as the counts.
  if (options.installations) statements.push(db.prepare(waitingTeams).bind(cap, WAITING_TEAMS_LIMIT));
  const results = await db.batch<Record<string, unknown>>(statements);
  const live = (results[0]?.results ?? []) as unknown as LiveRow[];
  const dead = (results[1]?.results ?? []) as unknown as { effect: string; n: number }[];
  const lastAlert = results[2]?.results[0] as { id: number; status: string; last_error: string | null; channel: string | null } | undefined;

  const byEffect: Record<string, EffectCounts> = {};
  const countsOf = (effect: string): EffectCounts => {
    byEffect[effect] ??= { pending: 0, leased: 0, dead: 0 };
    return byEffect[effect];
  };
  let pending = 0;
  let leased = 0;
  let staleLeases = 0;
  let neverEnqueued = 0;
  let overdue = 0;
  let waitingForTime = 0;
  let nextTimerAt: number | null = null;
  const exactPending = (results[3]?.results[0] as { oldest?: number | null } | undefined)?.oldest ?? null;
  // Owed since a time still ahead: every pending row is a timer waiting for its time, none is late.
  let oldest: number | null = exactPending !== null && exactPending <= now ? exactPending : null;
  for (const row of live) {
    countsOf(row.effect)[row.status] += row.n;
    if (row.status === "pending") pending += row.n;
    else leased += row.n;
    staleLeases += row.stale_leases ?? 0;
    neverEnqueued += row.never_enqueued ?? 0;
    overdue += row.overdue ?? 0;
    waitingForTime += row.waiting ?? 0;
    if (row.next_timer_at !== null && (nextTimerAt === null || row.next_timer_at < nextTimerAt)) nextTimerAt = row.next_timer_at;
    if (row.oldest_due_at !== null && (oldest === null || row.oldest_due_at < oldest)) oldest = row.oldest_due_at;
  }
  let deadCount = 0;
  for (const row of dead) {
    countsOf(row.effect).dead += row.n;
    deadCount += row.n;
  }

  const count = (i: number) => Number((results[i]?.results[0] as { n?: number } | undefined)?.n ?? 0);
  let windowCapped = false;
  const windows = windowsMs.map((windowMs, w): WindowFigures => {
    const base = WINDOWS_AT + w * 3;
    const done = count(base);
    const failed = count(base + 1);
    const parkedDead = count(base + 2);
    if (done >= cap || failed >= cap || parkedDead >= cap) windowCapped = true;
    return { windowMs, done, failed, parkedDead, failureRate: done + failed === 0 ? null : failed / (done + failed) };
  });

  return {
    at: now,
    cap,
    capped: pending + leased >= cap || deadCount >= cap || windowCapped,
    pending,
    leased,
    dead: deadCount,
    byEffect,
    oldestPendingDueAt: oldest,
    oldestPendingAgeMs: oldest === null ? null : Math.max(0, now - oldest),
    waitingForTime,
    nextTimerAt,
    staleLeases,
    neverEnqueued,
    overdue,
    windows,
    waitingTeams: options.installations ? waitingOf(results[WINDOWS_AT + windowsMs.length * 3]?.results ?? []) : [],
    steps: stepsOf(results[4]?.results[0]),
    lastAlertPost: lastAlert
      ? { id: lastAlert.id, status: lastAlert.status, error: lastAlert.last_error, channel: lastAlert.channel }
      : null,
  };
}

/** Where the window statements start in the batch: after the live counts, dead counts, alert post, oldest pending, executions. */
const WINDOWS_AT = 5;

function stepsOf(row: Record<string, unknown> | undefined): StepFigures {
  const n = (value: unknown) => Number(value ?? 0);
  return {
    live: n(row?.live),
    waitingForUser: n(row?.waiting),
    nearExpiry: n(row?.near_expiry),
    nextExpiryAt: typeof row?.next_expiry === "number" ? row.next_expiry : null,
  };
}

function waitingOf(rows: readonly Record<string, unknown>[]): WaitingTeam[] {
  return (
    rows as unknown as {
      team_id: string;
      n: number;
      oldest: number;
      install_key: string | null;
      blocked_reason: string | null;
      blocked_at: number | null;
    }[]
  ).map((r) => ({
    teamId: r.team_id,
    installKey: r.install_key,
    state: r.install_key === null ? "missing" : "blocked",
    reason: r.blocked_reason,
    blockedAt: r.blocked_at,
    rows: r.n,
    oldestCreatedAt: r.oldest,
  }));
}

/** The figures of one window, if it was measured. */
export function windowOf(figures: BacklogFigures, windowMs: number): WindowFigures | undefined {
  return figures.windows.find((w) => w.windowMs === windowMs);
}
