/**
 * Backlog samples: one small row per sweeper tick, the dashboard's picture of
 * the backlog over time. Kept SAMPLE_RETENTION_HOURS, pruned in the same tick
 * by a LIMITed delete (at one sample a minute, 48 h is 2 880 rows).
 */
import type { BacklogFigures } from "./backlog.ts";
import { windowOf } from "./backlog.ts";
import type { QueueBacklog } from "./queue-metrics.ts";

export interface Sample {
  readonly at: number;
  readonly pending: number;
  readonly leased: number;
  readonly dead: number;
  readonly staleLeases: number;
  readonly neverEnqueued: number;
  readonly oldestPendingAgeMs: number | null;
  readonly doneInWindow: number;
  readonly failedInWindow: number;
  readonly windowMs: number;
  readonly queueBacklog: number | null;
  readonly countsCapped: boolean;
}

/** Keyed by the tick's scheduled time: a re-run tick writes nothing. Rows written: 1. */
const insertSample = `
INSERT INTO backlog_samples (at, pending, leased, dead, stale_leases, never_enqueued, oldest_pending_age_ms,
                             done_in_window, failed_in_window, window_ms, queue_backlog, counts_capped)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
ON CONFLICT (at) DO NOTHING`;

/** Oldest first, at most ?2. `at` is the rowid: a rowid range, rows read = rows deleted. */
const pruneSamples = `
DELETE FROM backlog_samples WHERE at IN (SELECT at FROM backlog_samples WHERE at < ?1 ORDER BY at LIMIT ?2)`;

/** A time range of samples, oldest first, at most ?3. */
const samplesBetween = `
SELECT * FROM backlog_samples WHERE at >= ?1 AND at <= ?2 ORDER BY at LIMIT ?3`;

export function sampleOf(figures: BacklogFigures, windowMs: number, queue: QueueBacklog): Sample {
  const window = windowOf(figures, windowMs);
  return {
    at: figures.at,
    pending: figures.pending,
    leased: figures.leased,
    dead: figures.dead,
    staleLeases: figures.staleLeases,
    neverEnqueued: figures.neverEnqueued,
    oldestPendingAgeMs: figures.oldestPendingAgeMs,
    doneInWindow: window?.done ?? 0,
    failedInWindow: window?.failed ?? 0,
    windowMs,
    queueBacklog: queue.available ? queue.backlogCount : null,
    countsCapped: figures.capped,
  };
}

/** Records a sample and prunes those past retention, in one batch. Returns how many were pruned. */
export async function recordSample(db: D1Database, sample: Sample, retentionMs: number, pruneLimit: number): Promise<{ pruned: number }> {
  const [, pruned] = await db.batch([
    db
      .prepare(insertSample)
      .bind(
        sample.at,
        sample.pending,
        sample.leased,
        sample.dead,
        sample.staleLeases,
        sample.neverEnqueued,
        sample.oldestPendingAgeMs,
        sample.doneInWindow,
        sample.failedInWindow,
        sample.windowMs,
        sample.queueBacklog,
        sample.countsCapped ? 1 : 0,
      ),
    db.prepare(pruneSamples).bind(sample.at - retentionMs, pruneLimit),
  ]);
  return { pruned: pruned?.meta.changes ?? 0 };
}

interface SampleRecord {
  at: number;
  pending: number;
  leased: number;
  dead: number;
  stale_leases: number;
  never_enqueued: number;
  oldest_pending_age_ms: number | null;
  done_in_window: number;
  failed_in_window: number;
  window_ms: number;
  queue_backlog: number | null;
  counts_capped: number;
}

export const SAMPLES_MAX = 2_880;

export async function readSamples(db: D1Database, from: number, to: number, limit: number = SAMPLES_MAX): Promise<Sample[]> {
  const { results } = await db.prepare(samplesBetween).bind(from, to, limit).all<SampleRecord>();
  return results.map((r) => ({
    at: r.at,
    pending: r.pending,
    leased: r.leased,
    dead: r.dead,
    staleLeases: r.stale_leases,
    neverEnqueued: r.never_enqueued,
    oldestPendingAgeMs: r.oldest_pending_age_ms,
    doneInWindow: r.done_in_window,
    failedInWindow: r.failed_in_window,
    windowMs: r.window_ms,
    queueBacklog: r.queue_backlog,
    countsCapped: r.counts_capped === 1,
  }));
}
