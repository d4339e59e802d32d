/**
 * Is it healthy? A pure verdict over measured figures and the alert
 * thresholds. The sweeper's alerts (alerts.ts) and the operator API's
 * `health` (GET /admin/backlog, `npx ackbox backlog --check`) use this one
 * function, so the page, the CLI and the alert channel never disagree.
 */
import { type BacklogFigures, type WaitingTeam, windowOf } from "./backlog.ts";

export type AlertKind = "oldest_pending" | "new_dead" | "failure_rate";

export const ALERT_KINDS: readonly AlertKind[] = ["oldest_pending", "new_dead", "failure_rate"];

export interface Thresholds {
  readonly alertOldestPendingMs: number;
  readonly alertDeadRows: number;
  readonly alertFailureRate: number;
  readonly alertMinAttempts: number;
  readonly alertWindowMs: number;
}

export interface Check {
  readonly kind: AlertKind;
  readonly breached: boolean;
  /** The measured value, in the threshold's unit (seconds, rows, ratio); null when there was nothing to measure. */
  readonly value: number | null;
  readonly threshold: number;
  /** One line for a person. */
  readonly detail: string;
}

/** A check the backlog reports: the alert kinds, and shard_count (the Workers disagreeing on SHARD_COUNT: shard-count.ts). */
export type HealthCheck = Omit<Check, "kind"> & { readonly kind: AlertKind | "shard_count" };

export function checkHealth(figures: BacklogFigures, thresholds: Thresholds): Check[] {
  const window = windowOf(figures, thresholds.alertWindowMs);
  const windowText = `${Math.round(thresholds.alertWindowMs / 60_000)} min`;

  const ageS = figures.oldestPendingAgeMs === null ? null : Math.floor(figures.oldestPendingAgeMs / 1000);
  const limitS = Math.floor(thresholds.alertOldestPendingMs / 1000);
  // The teams whose rows are this old because no usable installation serves them: named, so the alert says who.
  const overdueTeams = figures.waitingTeams.filter((t) => figures.at - t.oldestCreatedAt > thresholds.alertOldestPendingMs);
  const oldest: Check = {
    kind: "oldest_pending",
    breached: figures.oldestPendingAgeMs !== null && figures.oldestPendingAgeMs > thresholds.alertOldestPendingMs,
    value: ageS,
    threshold: limitS,
    detail:
      (ageS === null ? "nothing pending" : `oldest pending row is ${ageS} s old (limit ${limitS} s)`) +
      (overdueTeams.length === 0 ? "" : `; waiting for their installation: ${overdueTeams.map(waitingText).join("; ")}`),
  };

  const parked = window?.parkedDead ?? 0;
  const dead: Check = {
    kind: "new_dead",
    breached: parked >= thresholds.alertDeadRows,
    value: parked,
    threshold: thresholds.alertDeadRows,
    detail: `${parked} row(s) parked dead in the last ${windowText} (limit ${thresholds.alertDeadRows})`,
  };

  const attempts = (window?.done ?? 0) + (window?.failed ?? 0);
  const rate = window?.failureRate ?? null;
  const enough = attempts >= thresholds.alertMinAttempts;
  const failure: Check = {
    kind: "failure_rate",
    breached: enough && rate !== null && rate >= thresholds.alertFailureRate,
    value: rate,
    threshold: thresholds.alertFailureRate,
    detail:
      rate === null
        ? `no attempts in the last ${windowText}`
        : `${percent(rate)} of ${attempts} attempts failed in the last ${windowText} (limit ${percent(thresholds.alertFailureRate)}` +
          (enough ? ")" : `; fewer than ${thresholds.alertMinAttempts} attempts, not judged)`),
  };
  return [oldest, dead, failure];
}

/** "team T1 blocked (token_revoked): 3 row(s) waiting since 2026-…Z" — never a token. */
export function waitingText(team: WaitingTeam): string {
  const state = team.state === "blocked" ? `blocked (${team.reason ?? "auth failure"})` : "not installed";
  return `team ${team.teamId} ${state}: ${team.rows} row(s) waiting since ${new Date(team.oldestCreatedAt).toISOString()}`;
}

function percent(ratio: number): string {
  return `${Math.round(ratio * 1000) / 10} %`;
}
