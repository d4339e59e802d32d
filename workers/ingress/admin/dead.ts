/**
 * GET /admin/dead (list, filtered, paginated) and POST /admin/replay.
 */
import { DEAD_PAGE_MAX } from "../../../shared/ops/dead.ts";
import type { DeadPageAnswer, DeadRowAnswer, ReplayAnswer } from "../../../shared/ops/dead-answer.ts";
import { encodeShardCursor, listDeadAcross, type ShardDeadRow } from "../../../shared/ops/dead-shards.ts";
import { iso } from "../../../shared/ops/iso.ts";
import { type ReplayReport, ReplayRequestError, type ReplaySelection, replayDead } from "../../../shared/ops/replay.ts";
import { formatRowRef, parseRowRef, type RowRef } from "../../../shared/ops/row-ref.ts";
import type { AdminDeps } from "./deps.ts";
import { badRequest, json, parseCursor, parseFilter, parseLimit, readJsonFields, redactedJson } from "./params.ts";

const DEFAULT_PAGE = 50;
/** A replay body: a list of ids or a filter; 10 000 ids fit well inside. */
const REPLAY_BODY_MAX_BYTES = 256 * 1024;

async function deadRowJson(row: ShardDeadRow, shardCount: number): Promise<DeadRowAnswer> {
  return {
    ref: formatRowRef(row, shardCount),
    shard: row.shard,
    id: row.id,
    receiptId: row.receiptId,
    teamId: row.teamId,
    effect: row.effect,
    attempts: row.attempts,
    lastError: row.lastError,
    createdAt: iso(row.createdAt),
    diedAt: iso(row.completedAt),
    expiresAt: iso(row.expiresAt),
    maybePerformed: row.maybePerformed,
    payload: await redactedJson(row.payload),
  };
}

export async function getDead(url: URL, deps: AdminDeps, now: number): Promise<Response> {
  const params = url.searchParams;
  const filter = parseFilter((name) => params.get(name) ?? undefined, now);
  if (!filter.ok) return badRequest(filter.error);
  const limit = parseLimit(params.get("limit"), DEFAULT_PAGE, DEAD_PAGE_MAX);
  if (!limit.ok) return badRequest(limit.error);
  const shardCount = deps.shards.length;
  const cursor = parseCursor(params.get("cursor"), shardCount);
  if (!cursor.ok) return badRequest(cursor.error);
  const page = await listDeadAcross(deps.shards, filter.value, cursor.value, limit.value);
  const answer: DeadPageAnswer = {
    shardCount,
    rows: await Promise.all(page.rows.map((row) => deadRowJson(row, shardCount))),
    nextCursor: page.next ? encodeShardCursor(page.next, shardCount) : null,
    scanned: page.scanned,
  };
  return json(answer);
}

export async function postReplay(request: Request, deps: AdminDeps, now: number): Promise<Response> {
  const body = await readJsonFields(
    request,
    REPLAY_BODY_MAX_BYTES,
    ["ids", "filter", "cursor", "limit", "dryRun"],
    '{"ids":[1,2]} or {"filter":{"effect":"chat.postMessage"},"dryRun":true}',
  );
  if (!body.ok) return body.answer;
  const fields = body.fields;
  if (fields.dryRun !== undefined && typeof fields.dryRun !== "boolean") return badRequest("dryRun: want true or false");
  const dryRun = fields.dryRun === true;

  let selection: ReplaySelection;
  if ((fields.ids === undefined) === (fields.filter === undefined)) {
    return badRequest(
      'give exactly one of ids (a list of row refs, "<shard>:<id>" with several shards) or filter (an object; {} means every dead row)',
    );
  }
  const shardCount = deps.shards.length;
  if (fields.ids !== undefined) {
    if (!Array.isArray(fields.ids)) {
      return badRequest(shardCount > 1 ? 'ids: want a list of row refs "<shard>:<id>", e.g. ["1:42"]' : "ids: want a list of row ids");
    }
    const refs: RowRef[] = [];
    for (const value of fields.ids) {
      const ref = parseRowRef(value, shardCount);
      if (!ref.ok) return badRequest(`ids: ${ref.error}`);
      refs.push(ref.value);
    }
    if (fields.cursor !== undefined || fields.limit !== undefined) return badRequest("cursor and limit go with filter, not ids");
    selection = { by: "refs", refs };
  } else {
    if (typeof fields.filter !== "object" || fields.filter === null || Array.isArray(fields.filter)) {
      return badRequest("filter: want an object with any of effect, error, team, since, until");
    }
    const raw = fields.filter as Record<string, unknown>;
    const unknownKeys = Object.keys(raw).filter((k) => !["effect", "error", "team", "since", "until"].includes(k));
    if (unknownKeys.length > 0) return badRequest(`filter: unknown key(s) ${unknownKeys.join(", ")}`);
    const filter = parseFilter((name) => raw[name], now);
    if (!filter.ok) return badRequest(filter.error);
    const cursor = parseCursor(typeof fields.cursor === "string" ? fields.cursor : undefined, shardCount);
    if (!cursor.ok || (fields.cursor !== undefined && typeof fields.cursor !== "string"))
      return badRequest("cursor: not a cursor this API handed out");
    const limit = fields.limit === undefined ? undefined : Number(fields.limit);
    if (limit !== undefined && (!Number.isSafeInteger(limit) || limit < 1)) return badRequest("limit: want a whole number of at least 1");
    selection = { by: "filter", filter: filter.value, cursor: cursor.value, limit };
  }

  let report: ReplayReport;
  try {
    report = await replayDead(deps, { selection, dryRun }, now);
  } catch (error) {
    if (error instanceof ReplayRequestError) return badRequest(error.message);
    throw error;
  }
  const answer: ReplayAnswer = {
    dryRun: report.dryRun,
    shardCount,
    replayed: report.replayed.map((r) => ({ ref: formatRowRef(r, shardCount), ...r })),
    count: report.replayed.length,
    skipped: report.skipped.map((r) => ({ ref: formatRowRef(r, shardCount), ...r })),
    perShard: [...report.perShard],
    enqueue: report.enqueue,
    steps: report.steps,
    maxPerCall: deps.settings.replayMaxPerCall,
    more: report.more,
    nextCursor: report.next ? encodeShardCursor(report.next, shardCount) : null,
  };
  return json(answer);
}
