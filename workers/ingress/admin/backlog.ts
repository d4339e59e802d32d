/**
 * GET /admin/backlog (JSON) and GET /admin/metrics (Prometheus text): one
 * measurement, two renderings (shared/ops/report.ts).
 */
import { readAlertStates } from "../../../shared/ops/alerts.ts";
import { ADMIN_COUNT_CAP, measureBacklog } from "../../../shared/ops/backlog.ts";
import { checkHealth } from "../../../shared/ops/health.ts";
import { type MeasurableQueue, readQueueBacklog } from "../../../shared/ops/queue-metrics.ts";
import { type BacklogReport, backlogJson, backlogPrometheus, PROMETHEUS_CONTENT_TYPE } from "../../../shared/ops/report.ts";
import { readSamples } from "../../../shared/ops/samples.ts";
import type { AdminDeps } from "./deps.ts";
import { badRequest, json } from "./params.ts";

/** Windows the backlog reports on, besides the alert window. */
const REPORT_WINDOWS_MS = [5 * 60_000, 60 * 60_000];
const MAX_HISTORY_HOURS = 48;

async function report(deps: AdminDeps, now: number, historyHours: number): Promise<BacklogReport> {
  const { settings } = deps;
  const figures = await measureBacklog(deps.db, now, {
    windowsMs: [...REPORT_WINDOWS_MS, settings.alertWindowMs],
    cap: ADMIN_COUNT_CAP,
    installations: settings.oauth !== undefined,
  });
  const [queue, alerts, history] = await Promise.all([
    readQueueBacklog(deps.queue as MeasurableQueue),
    readAlertStates(deps.db),
    historyHours > 0 ? readSamples(deps.db, now - historyHours * 3_600_000, now) : Promise.resolve(undefined),
  ]);
  return { figures, health: checkHealth(figures, settings), queue, alerts, history };
}

export async function getBacklog(url: URL, deps: AdminDeps, now: number): Promise<Response> {
  const hours = url.searchParams.get("hours");
  if (hours !== null && (!/^\d{1,2}$/.test(hours) || Number(hours) > MAX_HISTORY_HOURS)) {
    return badRequest(`hours: want a whole number from 0 to ${MAX_HISTORY_HOURS}`);
  }
  return json(backlogJson(await report(deps, now, Number(hours ?? 0))));
}

export async function getMetrics(deps: AdminDeps, now: number): Promise<Response> {
  return new Response(backlogPrometheus(await report(deps, now, 0)), {
    headers: { "content-type": PROMETHEUS_CONTENT_TYPE, "cache-control": "no-store" },
  });
}
