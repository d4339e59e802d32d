/**
 * The operator API's JSON, as the CLI reads it (the Worker side is
 * shared/ops/report.ts and workers/ingress/admin/*). The backlog's, the dead
 * list's, the replay's and the audit trail's shapes are imported from the
 * Worker's own contracts (plain types, no Workers runtime); the installations'
 * is still a copy kept here.
 */

/** GET /admin/backlog: the Worker's own answer type (one contract: shared/ops/backlog-answer.ts). */
export type { BacklogAnswer as Backlog, BlockedTeam } from "../shared/ops/backlog-answer.ts";

/** GET /admin/dead, POST /admin/replay: the Worker's own answer types (one contract: shared/ops/dead-answer.ts). */
export type { DeadPageAnswer as DeadPage, DeadRowAnswer as DeadRow, ReplayAnswer } from "../shared/ops/dead-answer.ts";
/** GET /admin/timers: the Worker's own answer type (one contract: shared/ops/timers-answer.ts). */
export type { TimerRowAnswer as TimerRow, TimersPageAnswer as TimersPage } from "../shared/ops/timers-answer.ts";
/** GET /admin/events/<id>: the Worker's own answer type (one contract: shared/ops/trail-answer.ts). */
export type { TrailAnswer as Trail } from "../shared/ops/trail-answer.ts";

/** GET /admin/installations (workers/ingress/admin/installations.ts): never a token. */
export interface InstallationsAnswer {
  mode: "distributed" | "single-workspace";
  now: string;
  installations: {
    installKey: string;
    teamId: string | null;
    enterpriseId: string | null;
    orgWide: boolean;
    botUserId: string | null;
    scopes: string[];
    installerUserId: string | null;
    installedAt: string;
    updatedAt: string;
    tokenExpiresAt: string | null;
    keyId: string;
    blocked: boolean;
    blockedReason: string | null;
  }[];
}
