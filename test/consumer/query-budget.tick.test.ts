/**
 * One cron tick at MAX_SHARDS with the most work every step can find
 * (workers/consumer/sweep-share.ts): every shard with a full scrub and a sweep
 * backlog larger than a tick takes, and REFRESH_PER_TICK installations due on
 * shard 0 whose refreshed pair cannot be written (each refresh's claim, every
 * try of its write and its block). Counted at the D1 edge, as D1 counts an
 * invocation's queries: the tick stays under 1 000, every shard is swept,
 * scrubbed and measured, and the deployment's sample is written.
 *
 * The tests' deployment has two D1s; the 16 shards' bindings alternate
 * between them (shard i on DB if i is even, on DB_1 if odd), each binding
 * counted on its own. Eight shards share each database's rows, so each is
 * seeded with eight shards' worth of work.
 */
import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { countingDb, D1_QUERIES_PER_INVOCATION } from "../../shared/delivery/query-budget.ts";
import { tokenKeys } from "../../shared/installations/crypto.ts";
import { REFRESH_PER_TICK } from "../../shared/installations/rotation.ts";
import { saveInstallation } from "../../shared/installations/store.ts";
import type { OutboxMessage } from "../../shared/outbox/model.ts";
import { SCRUB_BATCH_SIZE } from "../../shared/outbox/scrub.ts";
import { MAX_SHARDS } from "../../shared/settings.ts";
import {
  ROTATION_QUERIES,
  SHARD_FIXED_QUERIES,
  scrubQueries,
  shardShareOf,
  sweepQueries,
  TICK_BUDGET,
  WATCH_QUERIES,
} from "../../workers/consumer/sweep-share.ts";
import { captureLog } from "../support/console-capture.ts";
import worker from "../support/entries/consumer.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { testInstallation } from "../support/installations.ts";
import { resetAllShards, shardDbs } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";

const slack = useFakeSlack();
const TOKEN_KEY = "4a".repeat(32);
const OAUTH = {
  SLACK_CLIENT_ID: "1.2",
  SLACK_CLIENT_SECRET: "secret",
  SLACK_REDIRECT_URL: "https://ackbox.example/slack/oauth_redirect",
  TOKEN_ENCRYPTION_KEY: TOKEN_KEY,
};

beforeEach(async () => {
  await resetAllShards();
  for (const db of shardDbs()) await db.prepare("DELETE FROM installations").run();
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** `n` rows by one INSERT … SELECT over a counter (fast: thousands of rows in one statement). */
async function seed(
  db: D1Database,
  n: number,
  row: { status: string; effect: string; payload: string; sweepAt: number | null; expiresAt: number | null },
) {
  await db
    .prepare(
      `WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?1)
       INSERT INTO outbox (idempotency_key, receipt_id, team_id, effect, payload, status, attempts, next_attempt_at, expires_at,
                           enqueued_at, sweeps, sweep_at, created_at, updated_at, completed_at)
       SELECT ?2 || i || ':main', ?2 || i, 'T0TEAM', ?3, ?4, ?5, 1, ?6, ?7, ?6, 0, ?8, ?6, ?6, CASE WHEN ?5 = 'dead' THEN ?6 ELSE NULL END
         FROM k`,
    )
    .bind(
      n,
      `Ev${row.status}${Math.random().toString(36).slice(2, 8)}-`,
      row.effect,
      row.payload,
      row.status,
      NOW - 3_600_000,
      row.expiresAt,
      row.sweepAt,
    )
    .run();
}

/** `db` with the refreshed pair's write failing, as an overloaded D1 does: each refresh spends every try and then blocks. */
function failingRefreshWrites(db: D1Database): D1Database {
  return new Proxy(db, {
    get(target, prop) {
      if (prop === "prepare") {
        return (sql: string) => {
          const statement = target.prepare(sql);
          if (!/SET bot_token = \?1, refresh_token = \?2/.test(sql)) return statement;
          return new Proxy(statement, {
            get(inner, p) {
              if (p === "bind") return (...values: unknown[]) => failingRun(inner.bind(...values));
              const value = Reflect.get(inner, p);
              return typeof value === "function" ? value.bind(inner) : value;
            },
          });
        };
      }
      const value = Reflect.get(target, prop);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
function failingRun(statement: D1PreparedStatement): D1PreparedStatement {
  return new Proxy(statement, {
    get(inner, p) {
      if (p === "run") return async () => Promise.reject(new Error("D1_ERROR: simulated overload"));
      const value = Reflect.get(inner, p);
      return typeof value === "function" ? value.bind(inner) : value;
    },
  });
}

describe("one cron tick at MAX_SHARDS, every step with its most work", () => {
  it("stays under D1's 1 000 queries per invocation, and still sweeps, scrubs and measures every shard and writes the deployment's sample", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    const perDb = MAX_SHARDS / 2;
    for (const db of [db0, db1]) {
      // A sweep backlog (stale pending rows) and a full scrub (dead response_url rows past their deadline, due) per shard.
      await seed(db, perDb * 900, {
        status: "pending",
        effect: "reactions.add",
        payload: JSON.stringify({ channel: "C1", timestamp: "1.1", name: "eyes" }),
        sweepAt: NOW - 1000,
        expiresAt: null,
      });
      await seed(db, perDb * SCRUB_BATCH_SIZE, {
        status: "dead",
        effect: "response_url",
        payload: JSON.stringify({ url: "https://hooks.slack.com/commands/T0TEAM/1/secret-part", body: { text: "x" } }),
        sweepAt: null,
        expiresAt: NOW - 1000,
      });
      await db
        .prepare("INSERT INTO outbox_scrub_due (due_at, outbox_id) SELECT ?1, id FROM outbox WHERE status = 'dead'")
        .bind(NOW - 1000)
        .run();
    }
    const keys = await tokenKeys(TOKEN_KEY, undefined);
    for (let i = 0; i < REFRESH_PER_TICK + 5; i++) {
      await saveInstallation(
        db0,
        keys,
        testInstallation(`T0ROT${i}`, `xoxe.xoxb-${i}`, { refreshToken: `xoxe-1-${i}`, tokenExpiresAt: NOW + 60_000 }),
        NOW - 3_600_000,
      );
    }
    slack.current.always(
      "oauth.v2.access",
      reply.ok({ access_token: "xoxe.xoxb-new", refresh_token: "xoxe-1-new", expires_in: 43_200, token_type: "bot" }),
    );

    const bindings: Record<string, D1Database> = {};
    const counts: { used(): number }[] = [];
    for (let shard = 0; shard < MAX_SHARDS; shard++) {
      const real = shard % 2 === 0 ? db0 : db1;
      const counted = countingDb(shard === 0 ? failingRefreshWrites(real) : real, Number.POSITIVE_INFINITY);
      bindings[shard === 0 ? "DB" : `DB_${shard}`] = counted.db;
      counts.push(counted.budget);
    }
    const raw = captureLog();
    const sent: OutboxMessage[] = [];
    const queue = {
      send: async (body: OutboxMessage) => void sent.push(body),
      sendBatch: async (messages: Iterable<MessageSendRequest<OutboxMessage>>) => {
        for (const m of messages) sent.push(m.body);
      },
    };
    const ctx = createExecutionContext();
    const tickEnv = { ...env, ...OAUTH, ...bindings, SHARD_COUNT: String(MAX_SHARDS), OUTBOX_QUEUE: queue };
    await worker.scheduled(createScheduledController({ scheduledTime: NOW, cron: "* * * * *" }), tickEnv as unknown as typeof env, ctx);
    await waitOnExecutionContext(ctx);

    const spent = counts.reduce((sum, c) => sum + c.used(), 0);
    vi.restoreAllMocks();
    const lines = raw.map((line) => JSON.parse(line) as Record<string, unknown>);
    console.info(`queries spent by a worst-case tick at ${MAX_SHARDS} shards: ${spent}`);
    expect(spent).toBeLessThanOrEqual(TICK_BUDGET);
    expect(spent).toBeLessThan(D1_QUERIES_PER_INVOCATION);
    // Every refresh went to the end (claim, four tries of the write, the block): the rotation's worst case was met.
    const rotation = lines.find((l) => l.msg === "tokens refreshed by the cron") as { failed: string[] } | undefined;
    expect(rotation?.failed).toHaveLength(REFRESH_PER_TICK);
    // Every shard swept some rows and scrubbed some, and none was left unmeasured.
    const sweeps = lines.filter((l) => l.msg === "sweep") as { shard: number; reenqueued: number; scrubbed: number }[];
    expect(sweeps.map((l) => l.shard)).toEqual([...Array(MAX_SHARDS).keys()]);
    for (const line of sweeps) {
      expect(line.reenqueued).toBeGreaterThan(0);
      expect(line.scrubbed).toBeGreaterThan(0);
    }
    expect(lines.filter((l) => l.level === "error")).toEqual([]);
    expect(await db0.prepare("SELECT COUNT(*) AS n FROM backlog_samples WHERE at = ?1").bind(NOW).first("n")).toBe(1);
  }, 120_000);
});

describe("every shard count up to MAX_SHARDS: the shares' worst cases add up under the tick's budget", () => {
  it.each([...Array(MAX_SHARDS).keys()].map((i) => i + 1))(
    "%i shard(s): rotation, every shard's worst share, the watch ≤ TICK_BUDGET; every shard sweeps and scrubs",
    (n) => {
      const defaults = { sweepBatchSize: 200, sweepMaxSteps: 4 };
      let used = ROTATION_QUERIES;
      for (let shard = 0; shard < n; shard++) {
        const share = shardShareOf(defaults, used, n - shard);
        expect(share).toBeDefined();
        if (!share) return;
        expect(share.sweepBatchSize).toBeGreaterThan(0);
        expect(share.scrubLimit).toBeGreaterThan(0);
        used += SHARD_FIXED_QUERIES + scrubQueries(share.scrubLimit) + sweepQueries(share.sweepBatchSize, share.sweepMaxSteps);
      }
      expect(used + WATCH_QUERIES).toBeLessThanOrEqual(TICK_BUDGET);
    },
  );

  it("one shard keeps the configured steps it can afford: 600 rows a tick of the default 800 once its worst scrub and rotation are held back", () => {
    expect(shardShareOf({ sweepBatchSize: 200, sweepMaxSteps: 4 }, ROTATION_QUERIES, 1)).toEqual({
      sweepBatchSize: 200,
      sweepMaxSteps: 3,
      scrubLimit: 50,
    });
  });
});
