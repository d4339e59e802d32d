/**
 * The sweeper's watch step, run after the sweep on every cron tick: measure
 * the backlog once (bounded: TICK_COUNT_CAP), keep a sample of it for the
 * dashboard (and prune old samples), then check the alert thresholds.
 */
import type { Log } from "../log.ts";
import type { OutboxQueue } from "../outbox/enqueue.ts";
import type { Settings } from "../settings.ts";
import { type AlertOutcome, checkAlerts } from "./alerts.ts";
import { measureBacklog, TICK_COUNT_CAP } from "./backlog.ts";
import type { Thresholds } from "./health.ts";
import { type MeasurableQueue, type QueueBacklog, readQueueBacklog } from "./queue-metrics.ts";
import { recordSample, type Sample, sampleOf } from "./samples.ts";

export interface WatchDeps {
  readonly db: D1Database;
  readonly queue: OutboxQueue & MeasurableQueue;
  readonly settings: Thresholds &
    Pick<Settings, "alertChannel" | "sweepGraceMs" | "sampleRetentionMs" | "pruneBatchSize"> &
    Partial<Pick<Settings, "oauth">>;
  readonly log: Log;
}

export interface WatchReport {
  readonly sample: Sample;
  readonly samplesPruned: number;
  readonly queue: QueueBacklog;
  readonly alerts: readonly AlertOutcome[];
}

export async function watchBacklog(deps: WatchDeps, now: number): Promise<WatchReport> {
  const { settings } = deps;
  // A distributed app's alerts name the teams whose rows wait for their installation.
  const figures = await measureBacklog(deps.db, now, {
    windowsMs: [settings.alertWindowMs],
    cap: TICK_COUNT_CAP,
    installations: settings.oauth !== undefined,
  });
  const queue = await readQueueBacklog(deps.queue);
  const sample = sampleOf(figures, settings.alertWindowMs, queue);
  const { pruned } = await recordSample(deps.db, sample, settings.sampleRetentionMs, settings.pruneBatchSize);
  const alerts = await checkAlerts(deps, figures, now);
  const firing = alerts.filter((a) => a.firing).map((a) => a.kind);
  deps.log(firing.length > 0 ? "warn" : "debug", "backlog", {
    pending: sample.pending,
    leased: sample.leased,
    dead: sample.dead,
    oldest_pending_age_ms: sample.oldestPendingAgeMs,
    stale_leases: sample.staleLeases,
    never_enqueued: sample.neverEnqueued,
    queue_backlog: sample.queueBacklog,
    firing,
    samples_pruned: pruned,
  });
  return { sample, samplesPruned: pruned, queue, alerts };
}
