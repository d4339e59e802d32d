import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { type DeadCursor, listDead } from "../../shared/ops/dead.ts";
import { meteredDb } from "../support/metered-db.ts";
import { adminDeps, callAdmin } from "../support/ops.ts";
import { insertRow, resetTables } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";

const SECOND = 1000;
const MINUTE = 60 * SECOND;

beforeEach(() => resetTables(env.DB));

interface DeadBody {
  rows: {
    id: number;
    receiptId: string;
    teamId: string | null;
    effect: string;
    lastError: string | null;
    diedAt: string;
    payload: unknown;
  }[];
  nextCursor: string | null;
  error?: string;
}

/** Dead rows, newest first by construction, with two pairs sharing a completed_at (the keyset's tie-break), and live rows with the same errors. */
async function seedDead() {
  const dead = async (minutesAgo: number, effect: string, team: string, error: string) =>
    insertRow(env.DB, {
      status: "dead",
      effect,
      teamId: team,
      lastError: error,
      completedAt: NOW - minutesAgo * MINUTE,
      createdAt: NOW - 2 * 60 * MINUTE,
    });
  const d = {
    a: await dead(1, "chat.postMessage", "T0ONE", "chat.postMessage: channel_not_found"),
    b: await dead(5, "reactions.add", "T0ONE", "attempts exhausted (8 of 8): reactions.add: HTTP 503"),
    c: await dead(5, "chat.postMessage", "T0TWO", "chat.postMessage: not_in_channel"),
    d: await dead(30, "chat.update", "T0TWO", "chat.update: message_not_found"),
    e: await dead(30, "chat.postMessage", "T0TWO", "chat.postMessage: Channel_Not_Found"),
    f: await dead(90, "response_url", "T0ONE", "deadline passed before the effect could run"),
  };
  await insertRow(env.DB, { status: "pending", effect: "chat.postMessage", lastError: "chat.postMessage: channel_not_found" });
  await insertRow(env.DB, { status: "done", effect: "chat.postMessage", lastError: "chat.postMessage: channel_not_found" });
  // Newest first; at equal completed_at, the higher id first.
  const order = [d.a, d.c, d.b, d.e, d.d, d.f];
  return { d, order };
}

const ids = (body: DeadBody) => body.rows.map((r) => r.id);

describe("GET /admin/dead", () => {
  it("lists only dead rows, newest first, with what an operator needs to decide", async () => {
    const { d, order } = await seedDead();
    const { deps } = adminDeps();
    const { status, body } = await callAdmin<DeadBody>(deps, "/admin/dead", NOW);
    expect(status).toBe(200);
    expect(ids(body)).toEqual(order);
    expect(body.nextCursor).toBeNull();
    expect(body.rows[0]).toMatchObject({
      id: d.a,
      effect: "chat.postMessage",
      teamId: "T0ONE",
      lastError: "chat.postMessage: channel_not_found",
      diedAt: new Date(NOW - MINUTE).toISOString(),
      payload: { channel: "C0WATCHED", timestamp: "1764504000.000200", name: "eyes" },
    });
  });

  it.each([
    ["effect", "?effect=chat.postMessage", ["a", "c", "e"]],
    ["error substring, any case", "?error=CHANNEL_NOT_FOUND", ["a", "e"]],
    ["team", "?team=T0TWO", ["c", "e", "d"]],
    ["since (inclusive)", `?since=${NOW - 5 * MINUTE}`, ["a", "c", "b"]],
    ["until (exclusive)", `?until=${NOW - 5 * MINUTE}`, ["e", "d", "f"]],
    ["a relative since", "?since=31m", ["a", "c", "b", "e", "d"]],
    [
      "an ISO range",
      `?since=${new Date(NOW - 30 * MINUTE).toISOString()}&until=${new Date(NOW - 5 * MINUTE + 1).toISOString()}`,
      ["c", "b", "e", "d"],
    ],
    ["several at once", "?effect=chat.postMessage&team=T0TWO&error=channel", ["c", "e"]],
  ])("filters by %s", async (_, query, expected) => {
    const { d } = await seedDead();
    const { deps } = adminDeps();
    const { body } = await callAdmin<DeadBody>(deps, `/admin/dead${query}`, NOW);
    expect(ids(body)).toEqual(expected.map((k) => d[k as keyof typeof d]));
  });

  it("pages with a keyset cursor: every row once, in order, across ties", async () => {
    const { order } = await seedDead();
    const { deps } = adminDeps();
    const seen: number[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 10; page++) {
      const query: string = cursor === null ? "?limit=2" : `?limit=2&cursor=${cursor}`;
      const { body } = await callAdmin<DeadBody>(deps, `/admin/dead${query}`, NOW);
      expect(body.rows.length).toBeLessThanOrEqual(2);
      seen.push(...ids(body));
      cursor = body.nextCursor;
      if (cursor === null) break;
    }
    expect(seen).toEqual(order);
  });

  it.each([
    ["a page over the maximum", "?limit=201", "limit"],
    ["a zero limit", "?limit=0", "limit"],
    ["a forged cursor", "?cursor=12", "cursor"],
    ["a time it cannot read", "?since=last-tuesday", "since"],
    ["since after until", "?since=1h&until=2h", "since must be before until"],
  ])("answers 400 for %s", async (_, query, message) => {
    const { deps } = adminDeps();
    const { status, body } = await callAdmin<DeadBody>(deps, `/admin/dead${query}`, NOW);
    expect(status).toBe(400);
    expect(body.error).toContain(message);
  });
});

describe("bounded pages (invariant 6)", () => {
  it("walks at most scanLimit dead rows per page: a selective filter gets short pages with a cursor, and finds every match", async () => {
    const { d } = await seedDead();
    const matches: number[] = [];
    const walked: number[] = [];
    let cursor: DeadCursor | null = null;
    for (let page = 0; page < 10; page++) {
      const result = await listDead(env.DB, { error: "channel_not_found" }, cursor, 2, 3);
      matches.push(...result.rows.map((r) => r.id));
      if (result.scanned !== null) walked.push(result.scanned);
      cursor = result.next;
      if (cursor === null) break;
    }
    expect(matches).toEqual([d.a, d.e]);
    // Pages of at most 3 walked rows: [a c b] holds a; [e d f] holds e and used its whole walk,
    // so a third page looks past f and finds the end.
    expect(walked).toEqual([3, 3]);
  });

  it("reads as many rows for a full page with 3 000 older dead rows behind it as without", async () => {
    await seedDead();
    const { db, meter } = meteredDb(env.DB);
    const measure = async (filter: { error?: string }) => {
      meter.reset();
      expect((await listDead(db, filter, null, 2)).rows).toHaveLength(2);
      return meter.rowsRead;
    };
    const before = [await measure({}), await measure({ error: "channel_not_found" })];
    await env.DB.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
       INSERT INTO outbox (idempotency_key, receipt_id, effect, payload, status, attempts, next_attempt_at, created_at, updated_at, completed_at, last_error)
       SELECT 'old' || i || ':k', 'old' || i, 'reactions.add', '{}', 'dead', 1, 0, 0, 0, 1, 'old' FROM n`,
    ).run();
    const after = [await measure({}), await measure({ error: "channel_not_found" })];
    expect(Math.min(...before)).toBeGreaterThan(0); // a meter that saw nothing would pass at 0 = 0
    expect(after).toEqual(before);
    // The filtered page found its 2 matches among the 4 newest and stopped there.
    console.log(`dead page of 2: ${before[0]} rows read unfiltered, ${before[1]} filtered (error substring)`);
  });

  it("a filter matching nothing costs at most the scan limit, not the table", async () => {
    const { db, meter } = meteredDb(env.DB);
    await env.DB.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
       INSERT INTO outbox (idempotency_key, receipt_id, effect, payload, status, attempts, next_attempt_at, created_at, updated_at, completed_at, last_error)
       SELECT 'old' || i || ':k', 'old' || i, 'reactions.add', '{}', 'dead', 1, 0, 0, 0, i, 'old' FROM n`,
    ).run();
    const page = await listDead(db, { effect: "chat.update" }, null, 50, 1000);
    expect(page.rows).toEqual([]);
    expect(page.scanned).toBe(1000);
    expect(page.next).not.toBeNull();
    console.log(`dead page, filter matching nothing among 3 000: ${meter.rowsRead} rows read (scan limit 1 000)`);
    expect(meter.rowsRead).toBeLessThanOrEqual(2 * 1000 + 10);
  });
});
