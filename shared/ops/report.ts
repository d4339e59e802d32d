/**
 * The backlog report of the operator API: measured figures, the health
 * verdict, the queue's own backlog, the alert state and (optionally) the
 * sampled history, as JSON for GET /admin/backlog and as Prometheus text for
 * GET /admin/metrics. Both renderings are pure functions of one report, so
 * the two endpoints cannot disagree.
 *
 * Times are ISO 8601 strings in JSON; ages and windows are seconds.
 */

import type { AlertState } from "./alerts.ts";
import type { BacklogFigures } from "./backlog.ts";
import type { BacklogAnswer } from "./backlog-answer.ts";
import type { HealthCheck } from "./health.ts";
import { iso } from "./iso.ts";
import type { QueueBacklog } from "./queue-metrics.ts";
import type { Sample } from "./samples.ts";

export interface BacklogReport {
  /** The whole deployment's figures: every shard's, merged (merge.ts). */
  readonly figures: BacklogFigures;
  /** Each shard's own figures, index order; given only with more than one shard. */
  readonly shards?: readonly BacklogFigures[] | undefined;
  /** The window the per-shard breakdown reports (the alert window). */
  readonly shardWindowMs?: number | undefined;
  readonly health: readonly HealthCheck[];
  readonly queue: QueueBacklog;
  readonly alerts: readonly AlertState[];
  readonly history?: readonly Sample[] | undefined;
}

const seconds = (ms: number | null): number | null => (ms === null ? null : Math.floor(ms / 1000));

export function backlogJson(report: BacklogReport): BacklogAnswer {
  const { figures, queue } = report;
  return {
    at: iso(figures.at),
    healthy: report.health.every((c) => !c.breached),
    health: [...report.health],
    outbox: {
      pending: figures.pending,
      leased: figures.leased,
      dead: figures.dead,
      byEffect: figures.byEffect,
      oldestPendingAgeSeconds: seconds(figures.oldestPendingAgeMs),
      oldestPendingDueAt: iso(figures.oldestPendingDueAt),
      waitingForTime: figures.waitingForTime,
      nextTimerAt: iso(figures.nextTimerAt),
      staleLeases: figures.staleLeases,
      neverEnqueued: figures.neverEnqueued,
      overdue: figures.overdue,
      countCap: figures.cap,
      capped: figures.capped,
    },
    blockedTeams: figures.waitingTeams.map((t) => ({
      teamId: t.teamId,
      installKey: t.installKey,
      state: t.state,
      reason: t.reason,
      blockedAt: iso(t.blockedAt),
      rows: t.rows,
      waitingSince: iso(t.oldestCreatedAt),
    })),
    customSteps: {
      executions: figures.steps.live,
      waitingForUser: figures.steps.waitingForUser,
      nearExpiry: figures.steps.nearExpiry,
      nextExpiryAt: iso(figures.steps.nextExpiryAt),
    },
    lastAlertPost: figures.lastAlertPost,
    windows: figures.windows.map((w) => ({
      seconds: w.windowMs / 1000,
      done: w.done,
      failedAttempts: w.failed,
      parkedDead: w.parkedDead,
      failureRate: w.failureRate,
      donePerMinute: Math.round((w.done / (w.windowMs / 60_000)) * 100) / 100,
    })),
    queue: queue.available
      ? {
          available: true,
          backlogCount: queue.backlogCount,
          backlogBytes: queue.backlogBytes,
          oldestMessageAt: iso(queue.oldestMessageAt),
          oldestMessageAgeSeconds: queue.oldestMessageAt === null ? null : seconds(Math.max(0, figures.at - queue.oldestMessageAt)),
        }
      : { available: false, reason: queue.reason },
    alerts: report.alerts.map((a) => ({
      kind: a.kind,
      firing: a.firing,
      since: iso(a.since),
      announced: a.announcedFiring === a.firing,
      announcedAt: iso(a.announcedAt),
    })),
    ...(report.shards && report.shards.length > 1
      ? {
          shards: report.shards.map((f, shard) => {
            const w = f.windows.find((x) => x.windowMs === report.shardWindowMs);
            return {
              shard,
              pending: f.pending,
              leased: f.leased,
              dead: f.dead,
              oldestPendingAgeSeconds: seconds(f.oldestPendingAgeMs),
              staleLeases: f.staleLeases,
              neverEnqueued: f.neverEnqueued,
              overdue: f.overdue,
              capped: f.capped,
              window: w ? { seconds: w.windowMs / 1000, done: w.done, failedAttempts: w.failed, parkedDead: w.parkedDead } : null,
            };
          }),
        }
      : {}),
    ...(report.history
      ? {
          history: report.history.map((s) => ({
            at: iso(s.at),
            pending: s.pending,
            leased: s.leased,
            dead: s.dead,
            staleLeases: s.staleLeases,
            neverEnqueued: s.neverEnqueued,
            oldestPendingAgeSeconds: seconds(s.oldestPendingAgeMs),
            doneInWindow: s.doneInWindow,
            failedInWindow: s.failedInWindow,
            windowSeconds: s.windowMs / 1000,
            queueBacklog: s.queueBacklog,
          })),
        }
      : {}),
  };
}

export type BacklogJson = BacklogAnswer;

/** Prometheus text exposition format, version 0.0.4. */
export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

export function backlogPrometheus(report: BacklogReport): string {
  const { figures, queue } = report;
  const out: string[] = [];
  const metric = (name: string, type: "gauge" | "counter", help: string, samples: [Record<string, string>, number | null][]) => {
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const [labels, value] of samples) {
      if (value === null) continue;
      out.push(`${name}${labelText(labels)} ${formatValue(value)}`);
    }
  };
  const effects = Object.entries(figures.byEffect).sort(([a], [b]) => a.localeCompare(b));
  metric(
    "ackbox_outbox_rows",
    "gauge",
    "Outbox rows by status (pending, leased, dead) and effect; each status counted up to ackbox_outbox_count_cap.",
    effects.flatMap(([effect, c]) =>
      (["pending", "leased", "dead"] as const).map((status): [Record<string, string>, number] => [{ status, effect }, c[status]]),
    ),
  );
  metric("ackbox_outbox_pending", "gauge", "Pending outbox rows (not yet claimed).", [[{}, figures.pending]]);
  metric("ackbox_outbox_leased", "gauge", "Leased outbox rows (claimed by a worker).", [[{}, figures.leased]]);
  metric("ackbox_outbox_dead", "gauge", "Dead outbox rows waiting for an operator (replay or let them age out).", [[{}, figures.dead]]);
  metric(
    "ackbox_outbox_oldest_pending_age_seconds",
    "gauge",
    "How late the most overdue unfinished (pending or leased) row is: since its time (a timer) or its creation; absent when none is late.",
    [[{}, seconds(figures.oldestPendingAgeMs)]],
  );
  metric(
    "ackbox_outbox_waiting_for_time",
    "gauge",
    "Pending timers whose time is still ahead: owed later, not late (counted among ackbox_outbox_count_cap live rows).",
    [[{}, figures.waitingForTime]],
  );
  metric("ackbox_steps_executions", "gauge", "Custom step executions whose workflow token is held (not completed, not expired).", [
    [{}, figures.steps.live],
  ]);
  metric(
    "ackbox_steps_waiting_for_user",
    "gauge",
    "Custom step executions with no completion recorded yet: waiting for a user (their deadline ends them).",
    [[{}, figures.steps.waitingForUser]],
  );
  metric(
    "ackbox_steps_near_expiry",
    "gauge",
    "Custom step executions whose workflow token dies within 3 minutes and that are not completed: late.",
    [[{}, figures.steps.nearExpiry]],
  );
  metric("ackbox_outbox_stale_leases", "gauge", "Leased rows whose lease has expired (worker died or overran).", [
    [{}, figures.staleLeases],
  ]);
  metric("ackbox_outbox_never_enqueued", "gauge", "Pending rows whose queue send failed (enqueued_at is null).", [
    [{}, figures.neverEnqueued],
  ]);
  metric("ackbox_outbox_overdue", "gauge", "Unfinished rows past their sweep time (the sweeper is behind).", [[{}, figures.overdue]]);
  metric("ackbox_outbox_count_cap", "gauge", "Counts stop at this many rows (bounded reads).", [[{}, figures.cap]]);
  metric("ackbox_outbox_counts_capped", "gauge", "1 when some count reached the cap and is a lower bound.", [[{}, figures.capped ? 1 : 0]]);
  const windows = figures.windows.map((w) => ({ ...w, label: { window: String(w.windowMs / 1000) } }));
  metric(
    "ackbox_outbox_done_in_window",
    "gauge",
    "Rows completed in the last `window` seconds.",
    windows.map((w) => [w.label, w.done]),
  );
  metric(
    "ackbox_outbox_failed_attempts_in_window",
    "gauge",
    "Failed attempts (retry, dead, dead_letter) in the last `window` seconds.",
    windows.map((w) => [w.label, w.failed]),
  );
  metric(
    "ackbox_outbox_parked_dead_in_window",
    "gauge",
    "Rows parked dead in the last `window` seconds.",
    windows.map((w) => [w.label, w.parkedDead]),
  );
  metric(
    "ackbox_outbox_failure_ratio",
    "gauge",
    "failed / (failed + done) over the last `window` seconds; absent when there were no attempts.",
    windows.map((w) => [w.label, w.failureRate]),
  );
  if (report.shards && report.shards.length > 1) {
    const perShard = report.shards.map((f, shard) => ({ f, label: { shard: String(shard) } }));
    metric(
      "ackbox_shard_outbox_rows",
      "gauge",
      "Outbox rows by shard and status (pending, leased, dead); ackbox_outbox_* are their sums. Only with SHARD_COUNT > 1.",
      perShard.flatMap(({ f, label }) =>
        (["pending", "leased", "dead"] as const).map((status): [Record<string, string>, number] => [{ ...label, status }, f[status]]),
      ),
    );
    metric(
      "ackbox_shard_oldest_pending_age_seconds",
      "gauge",
      "Age of each shard's oldest unfinished row; absent for a shard with none. Only with SHARD_COUNT > 1.",
      perShard.map(({ f, label }) => [label, seconds(f.oldestPendingAgeMs)]),
    );
  }
  metric("ackbox_health_check_breached", "gauge", "1 when a health check's threshold is breached (the alert kinds, and shard_count).", [
    ...report.health.map((c): [Record<string, string>, number] => [{ check: c.kind }, c.breached ? 1 : 0]),
  ]);
  metric("ackbox_alert_firing", "gauge", "1 while the sweeper holds an alert as firing.", [
    ...report.alerts.map((a): [Record<string, string>, number] => [{ kind: a.kind }, a.firing ? 1 : 0]),
  ]);
  metric("ackbox_queue_metrics_available", "gauge", "1 when the queue binding's metrics() answered.", [[{}, queue.available ? 1 : 0]]);
  if (queue.available) {
    metric("ackbox_queue_backlog_messages", "gauge", "Messages in the outbox queue, as the platform reports them.", [
      [{}, queue.backlogCount],
    ]);
    metric("ackbox_queue_backlog_bytes", "gauge", "Bytes in the outbox queue, as the platform reports them.", [[{}, queue.backlogBytes]]);
    metric("ackbox_queue_oldest_message_age_seconds", "gauge", "Age of the oldest message in the outbox queue.", [
      [{}, queue.oldestMessageAt === null ? null : seconds(Math.max(0, figures.at - queue.oldestMessageAt))],
    ]);
  }
  return `${out.join("\n")}\n`;
}

function labelText(labels: Record<string, string>): string {
  const entries = Object.entries(labels);
  if (entries.length === 0) return "";
  return `{${entries.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(",")}}`;
}

/** The exposition format escapes backslash, double quote and newline in label values. */
export function escapeLabel(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

function formatValue(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Number.POSITIVE_INFINITY) return "+Inf";
  if (value === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(value);
}
