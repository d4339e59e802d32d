/**
 * GET /admin/backlog (JSON) and GET /admin/metrics (Prometheus text): one
 * measurement, two renderings (shared/ops/report.ts).
 */

import { readAlertStates } from "../../../shared/ops/alerts.ts";
import { earliestBackfillMs, gapAnswerOf, readDeliveryGaps } from "../../../shared/ops/backfill-gaps.ts";
import { ADMIN_COUNT_CAP, measureBacklog } from "../../../shared/ops/backlog.ts";
import { checkHealth } from "../../../shared/ops/health.ts";
import { mergeFigures } from "../../../shared/ops/merge.ts";
import { type MeasurableQueue, readQueueBacklog } from "../../../shared/ops/queue-metrics.ts";
import { type BacklogReport, backlogJson, backlogPrometheus, PROMETHEUS_CONTENT_TYPE } from "../../../shared/ops/report.ts";
import { readSamples } from "../../../shared/ops/samples.ts";
import { lastUnknownShardAt, shardCountCheck } from "../../../shared/ops/shard-count.ts";
import type { AdminDeps } from "./deps.ts";
import { badRequest, json } from "./params.ts";

/** Windows the backlog reports on, besides the alert window. */
const REPORT_WINDOWS_MS = [5 * 60_000, 60 * 60_000];
const MAX_HISTORY_HOURS = 48;

/**
 * Every shard measured (one bounded batch each, in parallel), merged into one
 * system's figures (shared/ops/merge.ts); the health is judged on the merge,
 * as the cron's alerts are. Alert state and samples are the deployment's, kept
 * on shard 0 (shared/ops/watch.ts). Queries per request: N batches of
 * ≤ 4 + 3 × 3 statements, plus 3 on shard 0.
 */
async function report(deps: AdminDeps, now: number, historyHours: number): Promise<BacklogReport> {
  const { settings } = deps;
  const home = deps.shards[0] as D1Database;
  const perShard = await Promise.all(
    deps.shards.map((db) =>
      measureBacklog(db, now, {
        windowsMs: [...REPORT_WINDOWS_MS, settings.alertWindowMs],
        cap: ADMIN_COUNT_CAP,
        installations: settings.oauth !== undefined,
      }),
    ),
  );
  const figures = mergeFigures(perShard);
  const [queue, alerts, unknownShardAt, history] = await Promise.all([
    readQueueBacklog(deps.queue as MeasurableQueue),
    readAlertStates(home),
    // The consumer's mark of a queue message for a shard it does not have (the Workers disagree on SHARD_COUNT).
    lastUnknownShardAt(home),
    historyHours > 0 ? readSamples(home, now - historyHours * 3_600_000, now) : Promise.resolve(undefined),
  ]);
  return {
    figures,
    shards: perShard.length > 1 ? perShard : undefined,
    shardWindowMs: settings.alertWindowMs,
    health: [...checkHealth(figures, settings), shardCountCheck(unknownShardAt, now, deps.shards.length, settings.alertWindowMs)],
    queue,
    alerts,
    history,
  };
}

export async function getBacklog(url: URL, deps: AdminDeps, now: number): Promise<Response> {
  const hours = url.searchParams.get("hours");
  if (hours !== null && (!/^\d{1,2}$/.test(hours) || Number(hours) > MAX_HISTORY_HOURS)) {
    return badRequest(`hours: want a whole number from 0 to ${MAX_HISTORY_HOURS}`);
  }
  const [answer, gaps] = await Promise.all([report(deps, now, Number(hours ?? 0)), readDeliveryGaps(deps.shards[0] as D1Database, now)]);
  const distributed = deps.settings.oauth !== undefined;
  return json({
    ...backlogJson(answer),
    deliveryGaps: gaps.map((gap) => gapAnswerOf(gap, distributed, earliestBackfillMs(now, deps.settings))),
  });
}

export async function getMetrics(deps: AdminDeps, now: number): Promise<Response> {
  return new Response(backlogPrometheus(await report(deps, now, 0)), {
    headers: { "content-type": PROMETHEUS_CONTENT_TYPE, "cache-control": "no-store" },
  });
}
