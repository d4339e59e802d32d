import type { Log } from "../../../shared/log.ts";
import type { MeasurableQueue } from "../../../shared/ops/queue-metrics.ts";
import type { OutboxQueue } from "../../../shared/outbox/enqueue.ts";
import type { Settings } from "../../../shared/settings.ts";

/** What the operator API uses: the database, the queue, its settings and a log. Never the whole Env. */
export interface AdminDeps {
  readonly db: D1Database;
  readonly queue: OutboxQueue & MeasurableQueue;
  readonly settings: Pick<
    Settings,
    | "adminToken"
    | "sweepGraceMs"
    | "replayMaxPerCall"
    | "replayBatchSize"
    | "replayStepDelayMs"
    | "alertOldestPendingMs"
    | "alertDeadRows"
    | "alertFailureRate"
    | "alertMinAttempts"
    | "alertWindowMs"
    | "oauth"
  >;
  readonly log: Log;
}
