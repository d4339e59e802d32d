/**
 * The sweeper's watch step, run after the sweep on every cron tick: measure
 * the backlog once (bounded: TICK_COUNT_CAP), keep a sample of it for the
 * dashboard (and prune old samples), then check the alert thresholds.
 *
 * With several shards the deployment is watched as ONE system: the cron
 * measures each shard during its walk (measureShard, one bounded batch per
 * shard), and after the walk this step merges the figures (merge.ts), records
 * one sample and judges the alerts once, on the merge — one alert, not one
 * per shard. The sample, the alert state and the alert posts live on shard 0
 * (deps.db): they are the deployment's, not a team's, and shard 0 (the `DB`
 * binding) is the one database every deployment has, so a one-shard
 * deployment keeps its history where it was and the operator API reads them
 * from one place.
 */
import type { Log } from "../log.ts";
import type { OutboxQueue } from "../outbox/enqueue.ts";
import type { Settings } from "../settings.ts";
import { type AlertOutcome, checkAlerts } from "./alerts.ts";
import { type BacklogFigures, measureBacklog, TICK_COUNT_CAP } from "./backlog.ts";
import type { Thresholds } from "./health.ts";
import { mergeFigures } from "./merge.ts";
import { type MeasurableQueue, type QueueBacklog, readQueueBacklog } from "./queue-metrics.ts";
import { recordSample, type Sample, sampleOf } from "./samples.ts";

export interface WatchDeps {
  /** Shard 0: where the sample and the alert state are kept and the alert posts recorded. */
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

/** One shard's figures for the watch: the alert window only, TICK_COUNT_CAP. One D1 batch. */
export function measureShard(
  db: D1Database,
  now: number,
  settings: Pick<Thresholds, "alertWindowMs"> & Partial<Pick<Settings, "oauth">>,
): Promise<BacklogFigures> {
  // A distributed app's alerts name the teams whose rows wait for their installation.
  return measureBacklog(db, now, { windowsMs: [settings.alertWindowMs], cap: TICK_COUNT_CAP, installations: settings.oauth !== undefined });
}

/**
 * `perShard`: every shard's figures, measured during the cron's walk (index
 * order, shard 0 first); without it, deps.db is measured alone (one shard).
 */
export async function watchBacklog(deps: WatchDeps, now: number, perShard?: readonly BacklogFigures[]): Promise<WatchReport> {
  const { settings } = deps;
  const figures = mergeFigures(perShard ?? [await measureShard(deps.db, now, settings)]);
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
