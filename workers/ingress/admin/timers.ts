/**
 * GET /admin/timers[?team=<team id>][&due_before=<time>][&limit=<n>][&cursor=<cursor>]: pending timers (rows
 * with a time of the app's choosing) and cancelled ones, soonest first, across every shard (shared/ops/timers.ts:
 * a bounded walk per shard and page). ?team looks on the one shard that team lives on (its placement: one read
 * on shard 0; an org-wide install's rows live on its org's shard: leave ?team out for those). due_before takes epoch ms, ISO 8601, or a span from now
 * (90s, 15m, 2h, 7d). Never a credential: payloads are redacted.
 */
import { iso } from "../../../shared/ops/iso.ts";
import { formatRowRef } from "../../../shared/ops/row-ref.ts";
import { decodeTimerCursor, encodeTimerCursor, listTimersAcross, TIMERS_PAGE_MAX, timerState } from "../../../shared/ops/timers.ts";
import type { TimerRowAnswer, TimersPageAnswer } from "../../../shared/ops/timers-answer.ts";
import { nameOfKey } from "../../../shared/outbox/model.ts";
import { type AdminDeps, shardsOfWorkspace } from "./deps.ts";
import { badRequest, json, parseLimit, parseTime, redactedJson } from "./params.ts";

const DEFAULT_PAGE = 50;

export async function getTimers(url: URL, deps: AdminDeps, now: number): Promise<Response> {
  const params = url.searchParams;
  const unknown = [...params.keys()].filter((k) => !["team", "due_before", "limit", "cursor"].includes(k));
  if (unknown.length > 0) return badRequest(`unknown parameter(s) ${unknown.join(", ")} (want team, due_before, limit, cursor)`);
  const team = params.get("team");
  if (team !== null && !/^[A-Z0-9]{1,40}$/.test(team)) return badRequest("team: want a Slack team id such as T0123ABCD");
  const dueBefore = parseTime("due_before", params.get("due_before"), now, "ahead");
  if (!dueBefore.ok) return badRequest(dueBefore.error);
  const limit = parseLimit(params.get("limit"), DEFAULT_PAGE, TIMERS_PAGE_MAX);
  if (!limit.ok) return badRequest(limit.error);
  const shardCount = deps.shards.length;
  const cursorText = params.get("cursor");
  const cursor = cursorText ? decodeTimerCursor(cursorText, shardCount) : null;
  if (cursorText && !cursor) return badRequest("cursor: not a cursor this API handed out");
  // A workspace lives on one shard (its placement): only that shard is read (the others' pages would be empty walks).
  const home = team === null ? undefined : await shardsOfWorkspace(deps, team);
  const shards = deps.shards.map((db, shard) => (home === undefined || home.includes(shard) ? db : undefined));
  const page = await listTimersAcross(shards, { team: team ?? undefined, dueBefore: dueBefore.value }, cursor, limit.value);
  const rows = await Promise.all(
    page.rows.map(
      async (row): Promise<TimerRowAnswer> => ({
        ref: formatRowRef(row, shardCount),
        shard: row.shard,
        id: row.id,
        key: row.key,
        name: nameOfKey(row.key) ?? null,
        receiptId: row.receiptId,
        teamId: row.teamId,
        effect: row.effect,
        dueAt: iso(row.dueAt),
        state: timerState(row, now),
        attempts: row.attempts,
        nextAttemptAt: iso(row.nextAttemptAt),
        lastError: row.lastError,
        createdAt: iso(row.createdAt),
        cancelledBy: row.cancelledBy,
        cancelledAt: row.cancelledBy === null ? null : iso(row.completedAt),
        payload: await redactedJson(row.payload),
      }),
    ),
  );
  const answer: TimersPageAnswer = {
    shardCount,
    at: iso(now),
    rows,
    nextCursor: page.next ? encodeTimerCursor(page.next, shardCount) : null,
  };
  return json(answer);
}
