/**
 * GET /admin/backlog's answer: the one contract between the Worker
 * (report.ts's backlogJson returns exactly this) and its readers (the CLI,
 * the demo). Plain types with no Workers runtime types, so Node code can
 * import it. Times are ISO 8601 strings; ages and windows are seconds.
 */

export interface BacklogAnswer {
  at: string | null;
  healthy: boolean;
  health: { kind: string; breached: boolean; value: number | null; threshold: number; detail: string }[];
  outbox: {
    pending: number;
    leased: number;
    dead: number;
    byEffect: Record<string, { pending: number; leased: number; dead: number }>;
    /** How late the most overdue unfinished row is (since its time, for a timer; its creation otherwise). */
    oldestPendingAgeSeconds: number | null;
    /** When that row became owed: its time, or its creation. */
    oldestPendingDueAt: string | null;
    /** Pending timers whose time is still ahead: owed later, not late (not in the oldest pending age). */
    waitingForTime: number;
    /** The next of those timers' time. */
    nextTimerAt: string | null;
    staleLeases: number;
    neverEnqueued: number;
    overdue: number;
    countCap: number;
    capped: boolean;
  };
  /**
   * A distributed app's teams whose rows wait for their installation: `blocked` (Slack refused its token:
   * `reason` is Slack's error) or `missing` (no installation serves the team). Oldest first; never a token.
   */
  blockedTeams: BlockedTeam[];
  /**
   * Custom step executions whose workflow token the engine still holds: `waitingForUser` have no completion
   * recorded (a step waiting for a click; its deadline ends it), `nearExpiry` have a token that dies within 3
   * minutes (past a waiting step's deadline, not completed yet: late). Absent from an older Worker.
   */
  customSteps?: { executions: number; waitingForUser: number; nearExpiry: number; nextExpiryAt: string | null };
  /** The newest alert post; `status: "dead"` means ALERT_CHANNEL cannot be posted to and alerts are only logged. */
  lastAlertPost: { id: number; status: string; error: string | null; channel: string | null } | null;
  windows: {
    seconds: number;
    done: number;
    failedAttempts: number;
    parkedDead: number;
    failureRate: number | null;
    donePerMinute: number;
  }[];
  queue:
    | {
        available: true;
        backlogCount: number;
        backlogBytes: number;
        oldestMessageAt: string | null;
        oldestMessageAgeSeconds: number | null;
      }
    | { available: false; reason: string };
  alerts: { kind: string; firing: boolean; since: string | null; announced: boolean; announcedAt: string | null }[];
  /**
   * Only with more than one shard (SHARD_COUNT > 1; a one-shard answer is unchanged): each shard's own
   * figures, so an operator sees which shard the backlog, the age or the dead rows are on. `outbox` above is
   * their sum (oldest age: the max).
   */
  shards?: ShardBacklog[];
  /**
   * Silences in what the ingress saw of a workspace longer than Slack's retry window, newest first, the last 7
   * days (shared/ops/backfill-gaps.ts): where events may have been lost, each with the backfill that recovers them.
   */
  deliveryGaps?: DeliveryGapAnswer[];
  history?: {
    at: string | null;
    pending: number;
    leased: number;
    dead: number;
    staleLeases: number;
    neverEnqueued: number;
    oldestPendingAgeSeconds: number | null;
    doneInWindow: number;
    failedInWindow: number;
    windowSeconds: number;
    queueBacklog: number | null;
  }[];
}

export interface DeliveryGapAnswer {
  teamId: string;
  /** The last request of the team seen before the silence (to a minute), and the one that ended it. */
  from: string | null;
  until: string | null;
  seconds: number;
  /** The first request naming the team refused by its signature during the silence: an outage, not a quiet time. */
  refusedFrom: string | null;
  /** The command that handles, once each, whatever Slack did not deliver in it. */
  backfill: string;
}

export interface BlockedTeam {
  teamId: string;
  /** The installation that serves the team ('T:<team>' or an org's 'E:<enterprise>'); null when missing. */
  installKey: string | null;
  state: "blocked" | "missing";
  /** Slack's error that blocked it (token_revoked, invalid_auth, …); null when missing. */
  reason: string | null;
  blockedAt: string | null;
  /** Pending rows of the team (counted among the first `countCap` pending rows). */
  rows: number;
  /** The oldest waiting row's creation: how long the team has been owed. */
  waitingSince: string | null;
}

/** One shard's part of the backlog (GET /admin/backlog's `shards`, with SHARD_COUNT > 1). */
export interface ShardBacklog {
  shard: number;
  pending: number;
  leased: number;
  dead: number;
  oldestPendingAgeSeconds: number | null;
  staleLeases: number;
  neverEnqueued: number;
  overdue: number;
  capped: boolean;
  /** The alert window's figures on this shard. */
  window: { seconds: number; done: number; failedAttempts: number; parkedDead: number } | null;
}
