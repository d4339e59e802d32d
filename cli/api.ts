/**
 * The operator API's JSON, as the CLI reads it (the Worker side is
 * shared/ops/report.ts and workers/ingress/admin/*). The backlog's shape is
 * imported from the Worker's own contract (plain types, no Workers runtime);
 * the others are still copies kept here.
 */

/** GET /admin/backlog: the Worker's own answer type (one contract: shared/ops/backlog-answer.ts). */
export type { BacklogAnswer as Backlog, BlockedTeam } from "../shared/ops/backlog-answer.ts";

export interface DeadRow {
  id: number;
  receiptId: string;
  teamId: string | null;
  effect: string;
  attempts: number;
  lastError: string | null;
  createdAt: string;
  diedAt: string;
  expiresAt: string | null;
  payload: unknown;
}

export interface DeadPage {
  rows: DeadRow[];
  nextCursor: string | null;
}

export interface ReplayAnswer {
  dryRun: boolean;
  count: number;
  replayed: { id: number; receiptId: string; effect: string; lastError: string | null; step: number; delaySeconds: number }[];
  skipped: { id: number; reason: string }[];
  enqueue: { sent: number; failed: number };
  steps: number;
  maxPerCall: number;
  more: boolean;
  nextCursor: string | null;
}

export interface Trail {
  id: string;
  receipt: { id: string; kind: string; type: string; teamId: string | null; retryNum: number | null; receivedAt: string } | null;
  complete: boolean;
  rows: {
    id: number;
    key: string;
    effect: string;
    /** The row whose effect asked for this one (a follow-up); null for a row the ingress recorded. */
    parentId: number | null;
    depth: number;
    status: string;
    attempts: number;
    lastError: string | null;
    payload: unknown;
    result: unknown;
    createdAt: string;
    enqueuedAt: string | null;
    nextAttemptAt: string;
    leaseExpiresAt: string | null;
    deadline: string | null;
    completedAt: string | null;
    sweeps: number;
    history: { attempt: number; outcome: string; error: string | null; startedAt: string | null; finishedAt: string }[];
  }[];
}

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
