import type { Log } from "../../../shared/log.ts";
import type { MeasurableQueue } from "../../../shared/ops/queue-metrics.ts";
import type { OutboxQueue } from "../../../shared/outbox/enqueue.ts";
import type { Settings } from "../../../shared/settings.ts";
import { placementsOn } from "../../../shared/shards/placement.ts";
import { routingKeyOf } from "../../../shared/shards/route.ts";
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

/**
 * The one shard a workspace lives on, as a list of shard indexes (none when it is not placed on a shard this
 * deployment has): a team id (T…) or, for an org-wide install, its org (E…). Read from its placement, never
 * placed by an operator's look-up (shared/shards/placement.ts).
 */
export async function shardsOfWorkspace(deps: Pick<AdminDeps, "shards">, id: string): Promise<number[]> {
  const shardCount = deps.shards.length;
  const key = routingKeyOf(id.startsWith("E") ? { enterpriseId: id, isEnterpriseInstall: true } : { teamId: id });
  const shard = await placementsOn(deps.shards[0] as D1Database, shardCount).whereIs(key);
  return shard < shardCount ? [shard] : [];
}
