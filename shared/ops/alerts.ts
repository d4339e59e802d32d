/**
 * ALERTS: the sweeper's checks of the backlog against the thresholds, and
 * what it tells ALERT_CHANNEL.
 *
 * - A breach posts one message and its end posts one recovery message, both
 *   through the outbox itself: a receipt of kind 'alert' and a
 *   chat.postMessage row, recorded by recordIntent like any Slack event.
 * - The receipt id is an operation id per window,
 *   `alert:<kind>:<raised|resolved>:<window start ms>`, so the receipt's
 *   dedupe makes each message at most once per window, even from two
 *   overlapping ticks. A state that flaps inside one window is not announced
 *   again until the next window, and then only if it still holds.
 * - alert_state (migration 0002) keeps what was last announced; it is written
 *   only when something changes, never on a quiet tick.
 * - With ALERT_CHANNEL unset, the same transitions are only logged.
 */
import type { Log } from "../log.ts";
import { enqueueRows, type OutboxQueue } from "../outbox/enqueue.ts";
import { recordIntent } from "../outbox/record.ts";
import type { Settings } from "../settings.ts";
import { ALERT_ID_PREFIX } from "./alert-rows.ts";
import type { BacklogFigures } from "./backlog.ts";
import { ALERT_KINDS, type AlertKind, type Check, checkHealth, type Thresholds } from "./health.ts";

export interface AlertState {
  readonly kind: AlertKind;
  /** What the checks measured last. */
  readonly firing: boolean;
  /** When `firing` last changed. */
  readonly since: number;
  /** The state last announced (posted or logged). */
  readonly announcedFiring: boolean;
  readonly announcedAt: number | null;
  readonly lastValue: number | null;
}

export type Phase = "raised" | "resolved";

export interface AlertDecision {
  /** The state to keep, before any announcement. */
  readonly next: AlertState;
  /** Whether `next` differs from the stored state (and must be written). */
  readonly changed: boolean;
  /** What to announce, if the announced state lags the measured one. */
  readonly announce: Phase | null;
}

/** Pure: the stored state (or none), this check, and the clock. */
export function decideAlert(stored: AlertState | undefined, check: Check, now: number): AlertDecision {
  const previous: AlertState = stored ?? {
    kind: check.kind,
    firing: false,
    since: now,
    announcedFiring: false,
    announcedAt: null,
    lastValue: null,
  };
  const firing = check.breached;
  const flipped = firing !== previous.firing;
  const next: AlertState = { ...previous, firing, since: flipped ? now : previous.since, lastValue: check.value };
  return {
    next,
    changed: flipped || stored === undefined,
    announce: firing === previous.announcedFiring ? null : firing ? "raised" : "resolved",
  };
}

/** The alert's operation id: one per kind, phase and window. */
export function alertOperationId(kind: AlertKind, phase: Phase, now: number, windowMs: number): string {
  return `${ALERT_ID_PREFIX}${kind}:${phase}:${now - (now % windowMs)}`;
}

export function alertText(check: Check, phase: Phase, figures: BacklogFigures): string {
  const title: Record<AlertKind, string> = {
    oldest_pending: "backlog is old",
    new_dead: "rows are being parked dead",
    failure_rate: "effects are failing",
  };
  const state = `${figures.pending} pending, ${figures.leased} leased, ${figures.dead} dead`;
  if (phase === "raised") {
    return `:rotating_light: ackbox: ${title[check.kind]}: ${check.detail}. Now: ${state}. Run \`npx ackbox backlog\` and \`npx ackbox dead list\` (docs/operating.md).`;
  }
  return `:white_check_mark: ackbox: recovered (${check.kind}): ${check.detail}. Now: ${state}.`;
}

export interface AlertDeps {
  readonly db: D1Database;
  readonly queue: OutboxQueue;
  readonly settings: Thresholds & Pick<Settings, "alertChannel" | "sweepGraceMs">;
  readonly log: Log;
}

export interface AlertOutcome {
  readonly kind: AlertKind;
  readonly firing: boolean;
  /** What was announced this tick: posted (or logged), or deduplicated by an earlier one in this window. */
  readonly announced: { readonly phase: Phase; readonly operationId: string; readonly posted: boolean } | null;
}

const readStates = `SELECT kind, firing, since, announced_firing, announced_at, last_value FROM alert_state`;

/** Rows written: 1, and only when the state changed. */
const writeState = `
INSERT INTO alert_state (kind, firing, since, announced_firing, announced_at, last_value, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
ON CONFLICT (kind) DO UPDATE SET
  firing = excluded.firing, since = excluded.since, announced_firing = excluded.announced_firing,
  announced_at = excluded.announced_at, last_value = excluded.last_value, updated_at = excluded.updated_at`;

export async function readAlertStates(db: D1Database): Promise<AlertState[]> {
  const { results } = await db.prepare(readStates).all<{
    kind: AlertKind;
    firing: number;
    since: number;
    announced_firing: number;
    announced_at: number | null;
    last_value: number | null;
  }>();
  return results.map((r) => ({
    kind: r.kind,
    firing: r.firing === 1,
    since: r.since,
    announcedFiring: r.announced_firing === 1,
    announcedAt: r.announced_at,
    lastValue: r.last_value,
  }));
}

export async function checkAlerts(deps: AlertDeps, figures: BacklogFigures, now: number): Promise<AlertOutcome[]> {
  const checks = checkHealth(figures, deps.settings);
  const stored = new Map((await readAlertStates(deps.db)).map((s) => [s.kind, s]));
  const outcomes: AlertOutcome[] = [];
  for (const kind of ALERT_KINDS) {
    const check = checks.find((c) => c.kind === kind);
    if (!check) continue;
    const decision = decideAlert(stored.get(kind), check, now);
    let state = decision.next;
    let changed = decision.changed;
    let announced: AlertOutcome["announced"] = null;
    if (decision.announce) {
      const phase = decision.announce;
      const operationId = alertOperationId(kind, phase, now, deps.settings.alertWindowMs);
      const posted = await announce(deps, check, phase, operationId, figures, now);
      announced = { phase, operationId, posted };
      if (posted) {
        state = { ...state, announcedFiring: phase === "raised", announcedAt: now };
        changed = true;
      }
    }
    if (changed) {
      await deps.db
        .prepare(writeState)
        .bind(kind, state.firing ? 1 : 0, state.since, state.announcedFiring ? 1 : 0, state.announcedAt, state.lastValue, now)
        .run();
    }
    outcomes.push({ kind, firing: state.firing, announced });
  }
  return outcomes;
}

/** true: announced now; false: this window already carried this message (try again next window). */
async function announce(
  deps: AlertDeps,
  check: Check,
  phase: Phase,
  operationId: string,
  figures: BacklogFigures,
  now: number,
): Promise<boolean> {
  const text = alertText(check, phase, figures);
  const fields = {
    kind: check.kind,
    phase,
    operation_id: operationId,
    value: check.value,
    threshold: check.threshold,
    detail: check.detail,
  };
  const channel = deps.settings.alertChannel;
  if (!channel) {
    deps.log(phase === "raised" ? "warn" : "info", `alert ${phase} (ALERT_CHANNEL unset: logged only)`, fields);
    return true;
  }
  // The last alert post to this channel was parked dead (channel_not_found, not_in_channel, …): another post
  // would only die the same way. Logged instead, with why, until an operator fixes the channel and replays
  // that row — or points ALERT_CHANNEL at another channel (a deleted one cannot be fixed), which posts again.
  if (figures.lastAlertPost?.status === "dead" && figures.lastAlertPost.channel === channel) {
    deps.log("warn", `alert ${phase} (ALERT_CHANNEL cannot be posted to: logged only until its dead alert post is replayed)`, {
      ...fields,
      alert_channel_error: figures.lastAlertPost.error,
      dead_alert_outbox_id: figures.lastAlertPost.id,
    });
    return true;
  }
  const verdict = await recordIntent(
    deps.db,
    { id: operationId, kind: "alert", type: `${check.kind}.${phase}` },
    [{ key: "post", effect: "chat.postMessage", payload: { channel, text } }],
    now,
    deps.settings.sweepGraceMs,
  );
  if (!verdict.firstDelivery) {
    deps.log("info", "alert already posted in this window; will announce in the next if it still holds", fields);
    return false;
  }
  deps.log(phase === "raised" ? "warn" : "info", `alert ${phase}`, { ...fields, outbox_ids: verdict.outboxIds });
  await enqueueRows(deps.queue, deps.db, verdict.outboxIds, now, deps.log);
  return true;
}
