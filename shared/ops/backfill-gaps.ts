/**
 * When to backfill: the silences in what the ingress saw of a workspace
 * longer than Slack's retry window (delivery_gaps, on shard 0, written after
 * the answer to the request that ends one: shared/ops/activity.ts). A quiet
 * workspace has them too; many workspaces with one gap at once, or a gap
 * during which requests naming the team were refused by their signature
 * (every request 401 after a signing-secret change), is lost events:
 * `ackbox backfill --all-channels` recovers them, once each.
 */
import { SLACK_RETRY_WINDOW_MS } from "./activity.ts";
import type { DeliveryGapAnswer } from "./backlog-answer.ts";

/** How far back /admin/backlog looks for gaps, and how many it shows (the newest). */
export const GAPS_LOOKBACK_MS = 7 * 24 * 3_600_000;
export const GAPS_SHOWN = 20;

export interface DeliveryGap {
  readonly teamId: string;
  /** The org whose org-wide install served the team's requests, if one did: its backfill names it (--enterprise). */
  readonly enterpriseId?: string | null;
  /** The last request seen of the team before the silence (ms; to a minute: the silence began at it or later). */
  readonly from: number;
  /** The request that ended it (ms). */
  readonly until: number;
  /** The first request naming the team refused by its signature during the silence (ms), if any: an outage, not a lull. */
  readonly refusedFrom: number | null;
}

/** Rows read: at most GAPS_SHOWN, a range of the primary key (newest first). */
const newestGaps = `
SELECT team_id, enterprise_id, gap_from, gap_until, refused_from FROM delivery_gaps
 WHERE gap_until >= ?1
 ORDER BY gap_until DESC
 LIMIT ?2`;

/** The newest gaps, newest first, from shard 0 (`home`), where the ingress writes them for every team. */
export async function readDeliveryGaps(home: D1Database, now: number): Promise<DeliveryGap[]> {
  const { results } = await home
    .prepare(newestGaps)
    .bind(now - GAPS_LOOKBACK_MS, GAPS_SHOWN)
    .all<{ team_id: string; enterprise_id: string | null; gap_from: number; gap_until: number; refused_from: number | null }>();
  return results.map((r) => ({
    teamId: r.team_id,
    enterpriseId: r.enterprise_id,
    from: r.gap_from,
    until: r.gap_until,
    refusedFrom: r.refused_from,
  }));
}

/**
 * A gap as /admin/backlog answers it, with the command that recovers it:
 * every conversation the bot is in (the measure is the team's, not a
 * channel's), from Slack's retry window before the silence began (a delivery
 * failing then was still being retried) to the request that ended it.
 * `--team` in a distributed app (and `--enterprise` for a workspace an
 * org-wide install serves).
 */
export function gapAnswerOf(gap: DeliveryGap, distributed: boolean, earliestMs = Number.NEGATIVE_INFINITY): DeliveryGapAnswer {
  const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
  const team = distributed ? ` --team ${gap.teamId}${gap.enterpriseId ? ` --enterprise ${gap.enterpriseId}` : ""}` : "";
  return {
    teamId: gap.teamId,
    from: new Date(gap.from).toISOString(),
    until: new Date(gap.until).toISOString(),
    seconds: Math.round((gap.until - gap.from) / 1000),
    refusedFrom: gap.refusedFrom === null ? null : new Date(gap.refusedFrom).toISOString(),
    // Never from before what a backfill accepts (earliestBackfillMs): the part of a gap older than that cannot be recovered.
    backfill: `npx ackbox backfill --all-channels --since ${iso(Math.max(gap.from - SLACK_RETRY_WINDOW_MS, Math.ceil(earliestMs / 1000) * 1000))} --until ${iso(gap.until)}${team}`,
  };
}

/** How far inside the retention a backfill must start: the prune may run while it pages. */
export const RETENTION_MARGIN_MS = 3_600_000;

/**
 * The earliest `oldest` a backfill accepts at `now`: "already handled" is an
 * outbox row or receipt that still exists, and past their retention a
 * delivered message would be delivered again.
 */
export function earliestBackfillMs(
  now: number,
  settings: { readonly doneRetentionMs: number; readonly receiptRetentionMs: number },
): number {
  return now - Math.min(settings.doneRetentionMs, settings.receiptRetentionMs) + RETENTION_MARGIN_MS;
}
