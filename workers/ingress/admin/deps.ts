import type { Log } from "../../../shared/log.ts";
import type { MeasurableQueue } from "../../../shared/ops/queue-metrics.ts";
import type { OutboxQueue } from "../../../shared/outbox/enqueue.ts";
import type { Settings } from "../../../shared/settings.ts";
import type { BackfillFor } from "./backfill.ts";

/** What the operator API uses: the shards' databases, the queue, its settings and a log. Never the whole Env. */
export interface AdminDeps {
  /**
   * Every shard's D1, index order (shared/shards/bindings.ts): shard 0 is `DB`. The API answers for all of
   * them as one system; shard 0 also holds what is the deployment's, not a team's (alert state, samples).
   */
  readonly shards: readonly D1Database[];
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
    | "shardCount"
    | "doneRetentionMs"
    | "receiptRetentionMs"
  >;
  readonly log: Log;
  /** What POST /admin/backfill reads Slack and records with (workers/ingress/admin/backfill.ts); absent: 501. */
  readonly backfillFor?: BackfillFor;
}
