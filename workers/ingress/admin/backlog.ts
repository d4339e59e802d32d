/**
 * GET /admin/backlog (JSON) and GET /admin/metrics (Prometheus text): one
 * measurement, two renderings (shared/ops/report.ts).
 */

import { leftToMove } from "../../../shared/installations/move.ts";
import { readAlertStates } from "../../../shared/ops/alerts.ts";
import { gapAnswerOf, readDeliveryGaps } from "../../../shared/ops/backfill-gaps.ts";
import { ADMIN_COUNT_CAP, measureBacklog } from "../../../shared/ops/backlog.ts";
import { checkHealth } from "../../../shared/ops/health.ts";
import { mergeFigures } from "../../../shared/ops/merge.ts";
import { type MeasurableQueue, readQueueBacklog } from "../../../shared/ops/queue-metrics.ts";
import { type BacklogReport, backlogJson, backlogPrometheus, PROMETHEUS_CONTENT_TYPE } from "../../../shared/ops/report.ts";
import { readSamples } from "../../../shared/ops/samples.ts";
import { transitionOf } from "../../../shared/shards/transition.ts";
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
 * ≤ 4 + 3 × 3 statements, plus 2 on shard 0, plus 2 a shard while a shard is
 * being added (SHARD_COUNT_PREVIOUS).
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
  // While a shard is being added: what the moved teams left on each shard (2 read statements a shard).
  const transition = transitionOf(settings);
  const shardMove = transition
    ? {
        previousCount: transition.previous,
        count: transition.count,
        byShard: await Promise.all(deps.shards.map((db, shard) => leftToMove(db, shard, transition.count))),
      }
    : undefined;
  const [queue, alerts, history] = await Promise.all([
    readQueueBacklog(deps.queue as MeasurableQueue),
    readAlertStates(home),
    historyHours > 0 ? readSamples(home, now - historyHours * 3_600_000, now) : Promise.resolve(undefined),
  ]);
  return {
    figures,
    shards: perShard.length > 1 ? perShard : undefined,
    shardWindowMs: settings.alertWindowMs,
    health: checkHealth(figures, settings),
    queue,
    alerts,
    history,
    shardMove,
  };
}

export async function getBacklog(url: URL, deps: AdminDeps, now: number): Promise<Response> {
  const hours = url.searchParams.get("hours");
  if (hours !== null && (!/^\d{1,2}$/.test(hours) || Number(hours) > MAX_HISTORY_HOURS)) {
    return badRequest(`hours: want a whole number from 0 to ${MAX_HISTORY_HOURS}`);
  }
  const [answer, gaps] = await Promise.all([report(deps, now, Number(hours ?? 0)), readDeliveryGaps(deps.shards, now)]);
  const distributed = deps.settings.oauth !== undefined;
  return json({ ...backlogJson(answer), deliveryGaps: gaps.map((gap) => gapAnswerOf(gap, distributed)) });
}

export async function getMetrics(deps: AdminDeps, now: number): Promise<Response> {
  return new Response(backlogPrometheus(await report(deps, now, 0)), {
    headers: { "content-type": PROMETHEUS_CONTENT_TYPE, "cache-control": "no-store" },
  });
}
