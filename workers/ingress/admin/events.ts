/**
 * GET /admin/events/<event_id or operation id>[?team=<team id> | ?shard=<n>]: the audit trail.
 *
 * An event lives on its team's shard, but an id alone does not name a team:
 * without a hint the trail is looked up on every shard, in parallel (2–3
 * queries per shard, N shards: bounded by SHARD_COUNT ≤ 16). ?shard looks on
 * that shard only (the dashboard passes a dead row's); ?team on the one shard
 * the workspace lives on (its placement, shared/shards/placement.ts: one read
 * on shard 0), a team id (T…) or, for an org-wide install, its org (E…). An
 * alert's operation id and a teamless input live on shard 0.
 */
import { type AuditTrail, auditTrail } from "../../../shared/ops/audit.ts";
import { iso } from "../../../shared/ops/iso.ts";
import { formatRowRef } from "../../../shared/ops/row-ref.ts";
import type { TrailAnswer, TrailRowAnswer } from "../../../shared/ops/trail-answer.ts";
import { type AdminDeps, shardsOfWorkspace } from "./deps.ts";
import { badRequest, json, redactedJson } from "./params.ts";

export async function getEvent(rawId: string, url: URL, deps: AdminDeps): Promise<Response> {
  let id: string;
  try {
    id = decodeURIComponent(rawId);
  } catch {
    return badRequest("id: not a valid URL-encoded id");
  }
  if (id === "" || id.length > 300) return badRequest("id: want an event_id or operation id of at most 300 characters");
  const team = url.searchParams.get("team");
  const shardParam = url.searchParams.get("shard");
  const shardCount = deps.shards.length;
  if (team !== null && !/^[A-Z0-9]{1,40}$/.test(team)) return badRequest("team: want a Slack team id such as T0123ABCD");
  if (team !== null && shardParam !== null) return badRequest("give team or shard, not both");
  if (shardParam !== null && (!/^\d{1,4}$/.test(shardParam) || Number(shardParam) >= shardCount)) {
    return badRequest(`shard: want a shard index from 0 to ${shardCount - 1} (SHARD_COUNT is ${shardCount})`);
  }
  const where =
    shardParam !== null ? [Number(shardParam)] : team !== null ? await shardsOfWorkspace(deps, team) : deps.shards.map((_, shard) => shard);
  const found = (
    await Promise.all(where.map(async (shard) => ({ shard, trail: await auditTrail(deps.shards[shard] as D1Database, id) })))
  ).filter((f): f is { shard: number; trail: AuditTrail } => f.trail !== null);
  if (found.length === 0) {
    // With one shard the message is as before sharding; with several it says where it looked.
    const place =
      shardParam !== null
        ? ` on shard ${shardParam}`
        : team !== null
          ? ` on team ${team}'s shard`
          : shardCount > 1
            ? ` on any of the ${shardCount} shards`
            : "";
    return json({ error: "not_found", message: `no receipt or outbox row for ${id}${place} (it may have been pruned)` }, 404);
  }
  const rows: TrailRowAnswer[] = [];
  for (const { shard, trail } of found) {
    for (const r of trail.rows) {
      rows.push({
        ref: formatRowRef({ shard, id: r.id }, shardCount),
        shard,
        id: r.id,
        key: r.key,
        receiptId: r.receiptId,
        effect: r.effect,
        parentId: r.parentId,
        depth: r.depth,
        status: r.status,
        name: r.name,
        cancelledBy: r.cancelledBy,
        attempts: r.attempts,
        lastError: r.lastError,
        // Credentials (a response_url, a token) never leave in an operator answer: redactedJson.
        payload: await redactedJson(r.payload),
        result: r.result === null ? null : await redactedJson(r.result),
        createdAt: iso(r.createdAt),
        enqueuedAt: iso(r.enqueuedAt),
        nextAttemptAt: iso(r.nextAttemptAt),
        dueAt: iso(r.dueAt),
        leaseExpiresAt: iso(r.claimExpiresAt),
        deadline: iso(r.expiresAt),
        completedAt: iso(r.completedAt),
        sweeps: r.sweeps,
        history: r.history.map((a) => ({
          attempt: a.attempt,
          outcome: a.outcome,
          error: a.error,
          startedAt: iso(a.startedAt),
          finishedAt: iso(a.finishedAt),
        })),
      });
    }
  }
  const withReceipt = found.find((f) => f.trail.receipt !== null);
  const receipt = withReceipt?.trail.receipt;
  const withExecution = found.find((f) => f.trail.execution !== null);
  const execution = withExecution?.trail.execution;
  const answer: TrailAnswer = {
    id,
    shards: found.map((f) => f.shard),
    receipt:
      withReceipt && receipt
        ? {
            shard: withReceipt.shard,
            id: receipt.id,
            kind: receipt.kind,
            type: receipt.type,
            teamId: receipt.teamId,
            retryNum: receipt.retryNum,
            receivedAt: iso(receipt.receivedAt),
            fact: receipt.fact,
          }
        : null,
    // A cancelled row is finished too: as the app asked, never performed. An input that only cancelled is complete.
    complete:
      (rows.length > 0 || found.some((f) => f.trail.cancels.length > 0)) &&
      rows.every((r) => r.status === "done" || r.status === "cancelled"),
    rows,
    cancels: found.flatMap(({ shard, trail }) =>
      trail.cancels.map((c) => ({
        name: c.name,
        byRow: c.byRow,
        outcome: c.outcome,
        rowRef: c.rowId === null ? null : formatRowRef({ shard, id: c.rowId }, shardCount),
        rowStatus: c.rowStatus,
        at: iso(c.at),
      })),
    ),
    ...(withExecution && execution
      ? {
          execution: {
            shard: withExecution.shard,
            id: execution.executionId,
            teamId: execution.teamId,
            callbackId: execution.callbackId,
            receiptId: execution.receiptId,
            tokenIssuedAt: iso(execution.issuedAt),
            tokenExpiresAt: iso(execution.expiresAt),
            // Never the token: whether it is held, or why it is gone.
            workflowToken: execution.tokenHeld ? "held" : (execution.endReason ?? "gone"),
            endedAt: iso(execution.endedAt),
            completion: execution.completion && {
              rowRef: formatRowRef({ shard: withExecution.shard, id: execution.completion.rowId }, shardCount),
              effect: execution.completion.effect,
              status: execution.completion.status,
            },
            deadline: execution.deadline && {
              rowRef: formatRowRef({ shard: withExecution.shard, id: execution.deadline.rowId }, shardCount),
              status: execution.deadline.status,
              dueAt: iso(execution.deadline.dueAt),
            },
          },
        }
      : {}),
    answers: found.flatMap(({ shard, trail }) =>
      trail.answers.map((a) => ({
        rowRef: formatRowRef({ shard, id: a.rowId }, shardCount),
        channel: a.channel,
        threadTs: a.threadTs,
        messageTs: a.messageTs,
        state: a.state,
        streamTs: a.streamTs,
        sentChars: a.sentChars,
        answerChars: a.answerChars,
        modelCalls: a.modelCalls,
        stopRequestedAt: iso(a.stopRequestedAt),
      })),
    ),
  };
  return json(answer);
}
