/**
 * When to backfill: the silences in a channel's deliveries longer than
 * Slack's retry window (delivery_gaps, written by the ack when a channel's
 * next event ends one: shared/outbox/record.ts). A quiet channel has them
 * too; many channels with one gap at once, or a gap over a time the ingress
 * was down or refusing requests (a bad deploy, every request 401 after a
 * signing-secret change), is lost events: `ackbox backfill` recovers them.
 */
import { SLACK_RETRY_WINDOW_MS } from "../outbox/record.ts";
import type { DeliveryGapAnswer } from "./backlog-answer.ts";

/** How far back /admin/backlog looks for gaps, and how many it shows (the newest). */
export const GAPS_LOOKBACK_MS = 7 * 24 * 3_600_000;
export const GAPS_SHOWN = 20;

export interface DeliveryGap {
  readonly teamId: string;
  readonly channel: string;
  /** The last event seen before the silence (ms). */
  readonly from: number;
  /** The event that ended it (ms). */
  readonly until: number;
}

/** Rows read: at most GAPS_SHOWN, a range of the primary key (newest first). */
const newestGaps = `
SELECT team_id, channel, gap_from, gap_until FROM delivery_gaps
 WHERE gap_until >= ?1
 ORDER BY gap_until DESC
 LIMIT ?2`;

/** The newest gaps of every shard, newest first. */
export async function readDeliveryGaps(shards: readonly D1Database[], now: number): Promise<DeliveryGap[]> {
  const perShard = await Promise.all(
    shards.map(async (db) => {
      const { results } = await db
        .prepare(newestGaps)
        .bind(now - GAPS_LOOKBACK_MS, GAPS_SHOWN)
        .all<{ team_id: string; channel: string; gap_from: number; gap_until: number }>();
      return results.map((r) => ({ teamId: r.team_id, channel: r.channel, from: r.gap_from, until: r.gap_until }));
    }),
  );
  return perShard
    .flat()
    .sort((a, b) => b.until - a.until)
    .slice(0, GAPS_SHOWN);
}

/**
 * A gap as /admin/backlog answers it, with the command that recovers it: from
 * Slack's retry window before the silence began (a delivery failing then was
 * still being retried) to the event that ended it. `--team` in a distributed app.
 */
export function gapAnswerOf(gap: DeliveryGap, distributed: boolean, earliestMs = Number.NEGATIVE_INFINITY): DeliveryGapAnswer {
  const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
  const team = distributed ? ` --team ${gap.teamId}` : "";
  return {
    teamId: gap.teamId,
    channel: gap.channel,
    from: new Date(gap.from).toISOString(),
    until: new Date(gap.until).toISOString(),
    seconds: Math.round((gap.until - gap.from) / 1000),
    // Never from before what a backfill accepts (earliestBackfillMs): the part of a gap older than that cannot be recovered.
    backfill: `npx ackbox backfill --channel ${gap.channel} --since ${iso(Math.max(gap.from - SLACK_RETRY_WINDOW_MS, Math.ceil(earliestMs / 1000) * 1000))} --until ${iso(gap.until)}${team}`,
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
