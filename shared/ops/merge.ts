/**
 * ONE SYSTEM from N shards' figures: the backlog each shard measured
 * (backlog.ts, one bounded batch per shard), merged into the figures of the
 * whole deployment, which the operator API, the sample and the alerts read.
 *
 *   counts (pending, leased, dead, per effect, stale, never enqueued, overdue) summed
 *   oldest pending   the oldest of the shards' (the max age)
 *   timers waiting   summed; the next timer the earliest of the shards'
 *   windows          done, failed and parked dead summed per window; the
 *                    failure rate recomputed from the sums (never an average
 *                    of the shards' rates, which would weigh a quiet shard as
 *                    much as a busy one)
 *   capped           when any shard's count reached its cap (the sum is then a lower bound)
 *   waiting teams    every shard's, oldest first, at most WAITING_TEAMS_LIMIT
 *   last alert post  shard 0's: the cron posts alerts on the home shard only (watch.ts)
 *
 * Pure: no D1, so it is tested on its own.
 */
import { type BacklogFigures, type EffectCounts, WAITING_TEAMS_LIMIT, type WindowFigures } from "./backlog.ts";

export function mergeFigures(perShard: readonly BacklogFigures[]): BacklogFigures {
  const [home] = perShard;
  if (!home) throw new RangeError("mergeFigures: no shard's figures");
  if (perShard.length === 1) return home;

  const byEffect: Record<string, EffectCounts> = {};
  for (const figures of perShard) {
    for (const [effect, counts] of Object.entries(figures.byEffect)) {
      const sum = byEffect[effect] ?? { pending: 0, leased: 0, dead: 0 };
      byEffect[effect] = sum;
      sum.pending += counts.pending;
      sum.leased += counts.leased;
      sum.dead += counts.dead;
    }
  }
  const sum = (of: (f: BacklogFigures) => number) => perShard.reduce((total, f) => total + of(f), 0);
  const earliest = (of: (f: BacklogFigures) => number | null) =>
    perShard.reduce<number | null>((min, f) => {
      const value = of(f);
      return value === null || (min !== null && min <= value) ? min : value;
    }, null);
  const oldest = earliest((f) => f.oldestPendingDueAt);
  const at = Math.max(...perShard.map((f) => f.at));

  return {
    at,
    cap: home.cap,
    capped: perShard.some((f) => f.capped),
    pending: sum((f) => f.pending),
    leased: sum((f) => f.leased),
    dead: sum((f) => f.dead),
    byEffect,
    oldestPendingDueAt: oldest,
    oldestPendingAgeMs: oldest === null ? null : Math.max(0, at - oldest),
    waitingForTime: sum((f) => f.waitingForTime),
    nextTimerAt: earliest((f) => f.nextTimerAt),
    staleLeases: sum((f) => f.staleLeases),
    neverEnqueued: sum((f) => f.neverEnqueued),
    overdue: sum((f) => f.overdue),
    windows: home.windows.map((w) => mergeWindow(w.windowMs, perShard)),
    waitingTeams: perShard
      .flatMap((f) => f.waitingTeams)
      .sort((a, b) => a.oldestCreatedAt - b.oldestCreatedAt || a.teamId.localeCompare(b.teamId))
      .slice(0, WAITING_TEAMS_LIMIT),
    steps: {
      live: sum((f) => f.steps.live),
      waitingForUser: sum((f) => f.steps.waitingForUser),
      nearExpiry: sum((f) => f.steps.nearExpiry),
      nextExpiryAt: earliest((f) => f.steps.nextExpiryAt),
    },
    lastAlertPost: home.lastAlertPost,
  };
}

function mergeWindow(windowMs: number, perShard: readonly BacklogFigures[]): WindowFigures {
  let done = 0;
  let failed = 0;
  let parkedDead = 0;
  for (const figures of perShard) {
    const w = figures.windows.find((x) => x.windowMs === windowMs);
    done += w?.done ?? 0;
    failed += w?.failed ?? 0;
    parkedDead += w?.parkedDead ?? 0;
  }
  return { windowMs, done, failed, parkedDead, failureRate: done + failed === 0 ? null : failed / (done + failed) };
}
