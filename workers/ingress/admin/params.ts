/**
 * Parsing of the operator API's inputs (query strings and JSON bodies). Every
 * problem is a value (`{ ok: false, error }`) that the handler turns into a
 * 400 with that message.
 */
import { redactCredentials } from "../../../shared/credentials.ts";
import type { DeadFilter } from "../../../shared/ops/dead.ts";
import { decodeShardCursor, type ShardDeadCursor } from "../../../shared/ops/dead-shards.ts";
import { readBodyWithLimit } from "../../../shared/slack/read-body.ts";

export type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string };

const UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * A time: epoch milliseconds ("1764504000000"), ISO 8601
 * ("2026-11-30T12:00:00Z"), or a span relative to `now` ("90s", "15m", "2h", "7d"): an age (that long ago),
 * or for a time ahead (a timer's: `direction` "ahead") that long from now.
 */
export function parseTime(
  name: string,
  text: string | null | undefined,
  now: number,
  direction: "ago" | "ahead" = "ago",
): Parsed<number | undefined> {
  if (text === null || text === undefined || text.trim() === "") return { ok: true, value: undefined };
  const t = text.trim();
  const relative = /^(\d{1,9})([smhd])$/.exec(t);
  if (relative) {
    const span = Number(relative[1]) * (UNITS[relative[2] ?? "s"] ?? 1000);
    return { ok: true, value: direction === "ago" ? now - span : now + span };
  }
  if (/^\d{1,16}$/.test(t)) return { ok: true, value: Number(t) };
  const parsed = Date.parse(t);
  if (/^\d{4}-\d{2}-\d{2}/.test(t) && Number.isFinite(parsed)) return { ok: true, value: parsed };
  const span = direction === "ago" ? "an age like 15m, 2h, 7d" : "a span from now like 15m, 2h, 7d";
  return { ok: false, error: `${name}: want epoch ms, ISO 8601 or ${span}; got ${JSON.stringify(t.slice(0, 40))}` };
}

export function parseLimit(text: string | null | undefined, fallback: number, max: number): Parsed<number> {
  if (text === null || text === undefined || text === "") return { ok: true, value: fallback };
  if (!/^\d{1,6}$/.test(text) || Number(text) < 1 || Number(text) > max) {
    return { ok: false, error: `limit: want a whole number from 1 to ${max}; got ${JSON.stringify(text.slice(0, 20))}` };
  }
  return { ok: true, value: Number(text) };
}

export function parseCursor(text: string | null | undefined, shardCount: number): Parsed<ShardDeadCursor | null> {
  if (text === null || text === undefined || text === "") return { ok: true, value: null };
  const cursor = decodeShardCursor(text, shardCount);
  return cursor ? { ok: true, value: cursor } : { ok: false, error: "cursor: not a cursor this API handed out" };
}

const TEXT_FILTERS = ["effect", "error", "team"] as const;

/** A dead-row filter from query parameters or a JSON object's fields. */
export function parseFilter(get: (name: string) => unknown, now: number): Parsed<DeadFilter> {
  const filter: { -readonly [K in keyof DeadFilter]: DeadFilter[K] } = {};
  for (const name of TEXT_FILTERS) {
    const value = get(name);
    if (value === undefined || value === null || value === "") continue;
    if (typeof value !== "string" || value.length > 200) return { ok: false, error: `${name}: want a string of at most 200 characters` };
    filter[name] = value;
  }
  for (const name of ["since", "until"] as const) {
    const value = get(name);
    if (value !== undefined && value !== null && typeof value !== "string" && typeof value !== "number") {
      return { ok: false, error: `${name}: want a string or a number` };
    }
    const parsed = parseTime(name, value === undefined || value === null ? undefined : String(value), now);
    if (!parsed.ok) return parsed;
    if (parsed.value !== undefined) filter[name] = parsed.value;
  }
  if (filter.since !== undefined && filter.until !== undefined && filter.since >= filter.until) {
    return { ok: false, error: "since must be before until" };
  }
  return { ok: true, value: filter };
}

/**
 * A POST body that must be one JSON object of known fields, read with a size cap: the fields, or the answer
 * to send instead (413 over the cap, 400 naming what is wrong, with `example` as the shape wanted).
 */
export async function readJsonFields(
  request: Request,
  limit: number,
  known: readonly string[],
  example: string,
): Promise<{ readonly ok: true; readonly fields: Record<string, unknown> } | { readonly ok: false; readonly answer: Response }> {
  const body = await readBodyWithLimit(request, limit);
  if (!body.ok) return { ok: false, answer: json({ error: body.reason }, 413) };
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder().decode(body.bytes));
  } catch {
    return { ok: false, answer: badRequest(`body: want JSON, e.g. ${example}`) };
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    return { ok: false, answer: badRequest("body: want a JSON object") };
  }
  const fields = parsed as Record<string, unknown>;
  const unknown = Object.keys(fields).filter((name) => !known.includes(name));
  if (unknown.length > 0) return { ok: false, answer: badRequest(`body: unknown field(s) ${unknown.join(", ")}`) };
  return { ok: true, fields };
}

/**
 * A stored JSON text (a row's payload or result) as an operator answer carries it: parsed (the text itself if it
 * is not JSON), every credential redacted — a response_url, a token never leaves (shared/credentials.ts).
 */
export async function redactedJson(text: string): Promise<unknown> {
  let value: unknown = text;
  try {
    value = JSON.parse(text);
  } catch {
    // Kept as text.
  }
  return (await redactCredentials(value)).value;
}

export function badRequest(error: string): Response {
  return json({ error }, 400);
}

export function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body, null, 2), {
    status,
    headers: { "content-type": "application/json; charset=utf-8", "cache-control": "no-store" },
  });
}
