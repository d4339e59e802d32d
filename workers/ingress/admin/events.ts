/**
 * GET /admin/events/<event_id or operation id>: the audit trail.
 */
import { redactCredentials } from "../../../shared/credentials.ts";
import { auditTrail } from "../../../shared/ops/audit.ts";
import type { AdminDeps } from "./deps.ts";
import { badRequest, json } from "./params.ts";

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export async function getEvent(rawId: string, deps: AdminDeps): Promise<Response> {
  let id: string;
  try {
    id = decodeURIComponent(rawId);
  } catch {
    return badRequest("id: not a valid URL-encoded id");
  }
  if (id === "" || id.length > 300) return badRequest("id: want an event_id or operation id of at most 300 characters");
  const trail = await auditTrail(deps.db, id);
  if (!trail) return json({ error: "not_found", message: `no receipt or outbox row for ${id} (it may have been pruned)` }, 404);
  const rows = await Promise.all(
    trail.rows.map(async (r) => ({
      id: r.id,
      key: r.key,
      effect: r.effect,
      parentId: r.parentId,
      depth: r.depth,
      status: r.status,
      attempts: r.attempts,
      lastError: r.lastError,
      // Credentials (a response_url, a token) never leave in an operator answer: shared/credentials.ts.
      payload: (await redactCredentials(parseJson(r.payload))).value,
      result: r.result === null ? null : (await redactCredentials(parseJson(r.result))).value,
      createdAt: iso(r.createdAt),
      enqueuedAt: iso(r.enqueuedAt),
      nextAttemptAt: iso(r.nextAttemptAt),
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
    })),
  );
  return json({
    id: trail.id,
    receipt: trail.receipt && {
      id: trail.receipt.id,
      kind: trail.receipt.kind,
      type: trail.receipt.type,
      teamId: trail.receipt.teamId,
      retryNum: trail.receipt.retryNum,
      receivedAt: iso(trail.receipt.receivedAt),
    },
    complete: rows.length > 0 && rows.every((r) => r.status === "done"),
    rows,
  });
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
