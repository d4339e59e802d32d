import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { recordingLog } from "../../shared/log.ts";
import { measureBacklog } from "../../shared/ops/backlog.ts";
import type { BacklogAnswer } from "../../shared/ops/backlog-answer.ts";
import { readQueueBacklog } from "../../shared/ops/queue-metrics.ts";
import { reportUnknownShard } from "../../shared/ops/shard-count.ts";
import { capturingDb, queryPlan, statementMatching } from "../support/captured-sql.ts";
import { meteredDb } from "../support/metered-db.ts";
import { adminDeps, callAdmin, insertAttempt, messageQueue, resetOpsTables } from "../support/ops.ts";
import { insertRow, resetTables } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

beforeEach(async () => {
  await resetTables(env.DB);
  await resetOpsTables(env.DB);
});

/**
 * One row on each side of every boundary the backlog reports on, at NOW:
 * lease expiry (± 1 s), sweep_at (= NOW is overdue, + 1 s is not), and the
 * 5-minute and 1-hour windows (± 1 s), for done rows, dead rows and attempts.
 */
async function seedBacklog() {
  const rows = {
    oldestPending: await insertRow(env.DB, {
      status: "pending",
      effect: "chat.postMessage",
      createdAt: NOW - 600 * SECOND,
      enqueuedAt: null,
      sweepAt: NOW,
    }),
    youngPending: await insertRow(env.DB, {
      status: "pending",
      effect: "reactions.add",
      createdAt: NOW - 10 * SECOND,
      sweepAt: NOW + SECOND,
    }),
    staleLease: await insertRow(env.DB, {
      status: "leased",
      effect: "reactions.add",
      createdAt: NOW - 300 * SECOND,
      claimExpiresAt: NOW - SECOND,
      sweepAt: NOW - SECOND,
    }),
    freshLease: await insertRow(env.DB, {
      status: "leased",
      effect: "chat.update",
      createdAt: NOW - 5 * SECOND,
      claimExpiresAt: NOW + SECOND,
      sweepAt: NOW + SECOND,
    }),
    deadIn5m: await insertRow(env.DB, { status: "dead", effect: "chat.postMessage", completedAt: NOW - 5 * MINUTE + SECOND }),
    deadIn1h: await insertRow(env.DB, { status: "dead", effect: "reactions.add", completedAt: NOW - 5 * MINUTE - SECOND }),
    deadOld: await insertRow(env.DB, { status: "dead", effect: "reactions.add", completedAt: NOW - HOUR - SECOND }),
    doneIn5m: await insertRow(env.DB, { status: "done", completedAt: NOW - 5 * MINUTE + SECOND }),
    doneIn1h: await insertRow(env.DB, { status: "done", completedAt: NOW - 5 * MINUTE - SECOND }),
    doneOld: await insertRow(env.DB, { status: "done", completedAt: NOW - HOUR - SECOND }),
    doneAfterNow: await insertRow(env.DB, { status: "done", completedAt: NOW + SECOND }),
  };
  const attempt = (outcome: string, finishedAt: number, attempt = 1) =>
    insertAttempt(env.DB, { outboxId: rows.youngPending, attempt, outcome, error: "x", finishedAt });
  await attempt("retry", NOW - SECOND);
  await attempt("dead", NOW - 5 * MINUTE - SECOND, 2);
  await attempt("dead_letter", NOW - HOUR - SECOND, 3);
  await attempt("fence_lost", NOW - SECOND, 4); // not a failure of the effect
  await attempt("replay", NOW - SECOND, 5); // an operator's act, not a failure
  return rows;
}

/** The answer's one definition, as the CLI reads it. */
type BacklogBody = BacklogAnswer;

describe("GET /admin/backlog", () => {
  it("reports the figures of the seeded rows at the injected time", async () => {
    await seedBacklog();
    const { deps } = adminDeps();
    const { status, body } = await callAdmin<BacklogBody>(deps, "/admin/backlog", NOW);
    expect(status).toBe(200);
    expect(body.at).toBe(new Date(NOW).toISOString());
    expect(body.outbox).toEqual({
      pending: 2,
      leased: 2,
      dead: 3,
      byEffect: {
        "chat.postMessage": { pending: 1, leased: 0, dead: 1 },
        "reactions.add": { pending: 1, leased: 1, dead: 2 },
        "chat.update": { pending: 0, leased: 1, dead: 0 },
      },
      oldestPendingAgeSeconds: 600,
      oldestPendingDueAt: new Date(NOW - 600 * SECOND).toISOString(),
      waitingForTime: 0,
      nextTimerAt: null,
      staleLeases: 1,
      neverEnqueued: 1,
      overdue: 2,
      countCap: 10_000,
      capped: false,
    });
    expect(body.windows).toEqual([
      { seconds: 300, done: 1, failedAttempts: 1, parkedDead: 1, failureRate: 0.5, donePerMinute: 0.2 },
      { seconds: 3600, done: 2, failedAttempts: 2, parkedDead: 2, failureRate: 0.5, donePerMinute: 0.03 },
      { seconds: 900, done: 2, failedAttempts: 2, parkedDead: 2, failureRate: 0.5, donePerMinute: 0.13 },
    ]);
  });

  it("reports a custom step waiting for a user and a timer waiting for its time, as operators read them", async () => {
    // A step waiting for a click: its workflow token held, no completion recorded; and one whose completion is
    // recorded (under way): both executions, one waiting for a user.
    const execution = (id: string, expiresAt: number) =>
      env.DB.prepare(
        `INSERT INTO step_executions (execution_id, team_id, callback_id, receipt_id, key_id, token, issued_at, expires_at)
         VALUES (?1, 'T0TEAM', 'wait', ?2, 'k1', 'sealed', ?3, ?4)`,
      )
        .bind(id, `Ev0${id}`, expiresAt - 15 * MINUTE, expiresAt)
        .run();
    await execution("Fx0WAITING", NOW + 10 * MINUTE);
    await execution("Fx0COMPLETING", NOW + 12 * MINUTE);
    await insertRow(env.DB, {
      status: "pending",
      key: "name:T0TEAM:step.Fx0COMPLETING",
      effect: "functions.completeSuccess",
      createdAt: NOW - 30 * SECOND,
    });
    // A timer an hour ahead: pending, owed later, not late.
    const dueAt = NOW + HOUR;
    await insertRow(env.DB, { status: "pending", dueAt, nextAttemptAt: dueAt, sweepAt: dueAt + MINUTE, createdAt: NOW - MINUTE });

    const { body } = await callAdmin<BacklogBody>(adminDeps().deps, "/admin/backlog", NOW);
    expect(body.customSteps).toEqual({
      executions: 2,
      waitingForUser: 1,
      nearExpiry: 0,
      nextExpiryAt: new Date(NOW + 10 * MINUTE).toISOString(),
    });
    // Only the completion is late, owed since its creation; the timer is owed later, not in the oldest pending age.
    expect(body.outbox).toMatchObject({
      pending: 2,
      waitingForTime: 1,
      nextTimerAt: new Date(dueAt).toISOString(),
      oldestPendingAgeSeconds: 30,
      oldestPendingDueAt: new Date(NOW - 30 * SECOND).toISOString(),
    });
  });

  it("moves the oldest-pending age with the clock, and judges it against ALERT_OLDEST_PENDING_SECONDS (600) strictly", async () => {
    await seedBacklog();
    const { deps } = adminDeps({ settings: { alertMinAttempts: 1_000 } });
    const at600 = await callAdmin<BacklogBody>(deps, "/admin/backlog", NOW);
    const at601 = await callAdmin<BacklogBody>(deps, "/admin/backlog", NOW + SECOND);
    const oldest = (b: BacklogBody) => b.health.find((c) => c.kind === "oldest_pending");
    expect([at600.body.outbox.oldestPendingAgeSeconds, oldest(at600.body)?.breached]).toEqual([600, false]);
    expect([at601.body.outbox.oldestPendingAgeSeconds, oldest(at601.body)?.breached]).toEqual([601, true]);
    expect(oldest(at601.body)?.detail).toBe("oldest pending row is 601 s old (limit 600 s)");
    expect(at601.body.healthy).toBe(false);
  });

  it("is healthy with nothing owed, nothing dead and nothing failing", async () => {
    await insertRow(env.DB, { status: "done", completedAt: NOW - MINUTE });
    const { deps } = adminDeps();
    const { body } = await callAdmin<BacklogBody>(deps, "/admin/backlog", NOW);
    expect(body.healthy).toBe(true);
    expect(body.outbox.oldestPendingAgeSeconds).toBeNull();
    expect(body.health.map((c) => [c.kind, c.breached])).toEqual([
      ["oldest_pending", false],
      ["new_dead", false],
      ["failure_rate", false],
      ["shard_count", false],
    ]);
  });

  it("flags new dead rows in the alert window, and a failure rate only once the window has ALERT_MIN_ATTEMPTS", async () => {
    await seedBacklog();
    const few = await callAdmin<BacklogBody>(adminDeps({ settings: { alertMinAttempts: 5 } }).deps, "/admin/backlog", NOW - SECOND);
    const enough = await callAdmin<BacklogBody>(adminDeps({ settings: { alertMinAttempts: 4 } }).deps, "/admin/backlog", NOW - SECOND);
    const check = (b: BacklogBody, kind: string) => b.health.find((c) => c.kind === kind);
    expect(check(few.body, "new_dead")).toMatchObject({ breached: true, value: 2, threshold: 1 });
    expect(check(few.body, "failure_rate")).toMatchObject({ breached: false, value: 0.5 });
    expect(check(few.body, "failure_rate")?.detail).toContain("fewer than 5 attempts, not judged");
    expect(check(enough.body, "failure_rate")).toMatchObject({ breached: true, value: 0.5, threshold: 0.5 });
  });

  it("adds the sampled history when asked (?hours=), oldest first, within the range", async () => {
    const sample = (at: number, pending: number) =>
      env.DB.prepare(
        `INSERT INTO backlog_samples (at, pending, leased, dead, stale_leases, never_enqueued, oldest_pending_age_ms, done_in_window, failed_in_window, window_ms)
         VALUES (?, ?, 0, 0, 0, 0, NULL, 0, 0, 900000)`,
      )
        .bind(at, pending)
        .run();
    await sample(NOW - HOUR - SECOND, 1);
    await sample(NOW - 30 * MINUTE, 2);
    await sample(NOW - MINUTE, 3);
    const { deps } = adminDeps();
    const without = await callAdmin<BacklogBody>(deps, "/admin/backlog", NOW);
    const withHistory = await callAdmin<BacklogBody>(deps, "/admin/backlog?hours=1", NOW);
    expect(without.body.history).toBeUndefined();
    expect(withHistory.body.history?.map((s) => [s.at, s.pending])).toEqual([
      [new Date(NOW - 30 * MINUTE).toISOString(), 2],
      [new Date(NOW - MINUTE).toISOString(), 3],
    ]);
    expect((await callAdmin(deps, "/admin/backlog?hours=49", NOW)).status).toBe(400);
  });
});

describe("the queue's own backlog", () => {
  it("reports the binding's metrics() where the platform answers", async () => {
    const queue = messageQueue({
      metrics: async () => ({ backlogCount: 12, backlogBytes: 345, oldestMessageTimestamp: new Date(NOW - 30 * SECOND) }),
    });
    const { deps } = adminDeps({ queue });
    const { body } = await callAdmin<BacklogBody>(deps, "/admin/backlog", NOW);
    expect(body.queue).toEqual({
      available: true,
      backlogCount: 12,
      backlogBytes: 345,
      oldestMessageAt: new Date(NOW - 30 * SECOND).toISOString(),
      oldestMessageAgeSeconds: 30,
    });
  });

  it("reports null with a reason when metrics() is missing, throws or hangs, and the rest of the report stands", async () => {
    const missing = await callAdmin<BacklogBody>(adminDeps({ queue: messageQueue() }).deps, "/admin/backlog", NOW);
    expect(missing.status).toBe(200);
    expect(missing.body.queue).toEqual({ available: false, reason: "this queue binding has no metrics()" });
    const throwing = messageQueue({
      metrics: async () => {
        throw new Error("queue metrics not supported here");
      },
    });
    const thrown = await callAdmin<BacklogBody>(adminDeps({ queue: throwing }).deps, "/admin/backlog", NOW);
    expect(thrown.body.queue).toEqual({ available: false, reason: "metrics() failed: queue metrics not supported here" });
    const hanging = await readQueueBacklog({ metrics: () => new Promise<QueueMetrics>(() => {}) }, 20);
    expect(hanging).toEqual({ available: false, reason: "metrics() failed: no answer within 20 ms" });
  });

  it("asks the real local queue binding (which answers zeros: there is no local view of a queue backlog)", async () => {
    const { deps } = adminDeps({ queue: env.OUTBOX_QUEUE });
    const { body } = await callAdmin<BacklogBody>(deps, "/admin/backlog", NOW);
    expect(body.queue).toMatchObject({ available: true, backlogCount: 0, backlogBytes: 0 });
  });
});

describe("GET /admin/metrics", () => {
  it("renders the same figures in Prometheus text format", async () => {
    await seedBacklog();
    const queue = messageQueue({ metrics: async () => ({ backlogCount: 4, backlogBytes: 100 }) });
    const { deps } = adminDeps({ queue });
    const { status, body, headers } = await callAdmin<string>(deps, "/admin/metrics", NOW + SECOND);
    expect(status).toBe(200);
    expect(headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    const lines = body.trimEnd().split("\n");
    for (const line of [
      'ackbox_outbox_rows{status="pending",effect="chat.postMessage"} 1',
      'ackbox_outbox_rows{status="dead",effect="reactions.add"} 2',
      "ackbox_outbox_pending 2",
      "ackbox_outbox_leased 2",
      "ackbox_outbox_dead 3",
      "ackbox_outbox_oldest_pending_age_seconds 601",
      "ackbox_outbox_stale_leases 2", // at NOW + 1 s the fresh lease has expired too
      "ackbox_outbox_never_enqueued 1",
      'ackbox_outbox_done_in_window{window="300"} 1', // the row done at NOW + 1 s; the one at NOW − 5 min + 1 s just left
      'ackbox_outbox_failed_attempts_in_window{window="3600"} 2',
      'ackbox_outbox_failure_ratio{window="3600"} 0.4',
      'ackbox_health_check_breached{check="oldest_pending"} 1',
      "ackbox_queue_metrics_available 1",
      "ackbox_queue_backlog_messages 4",
      "ackbox_queue_backlog_bytes 100",
      "# TYPE ackbox_outbox_pending gauge",
    ]) {
      expect(lines).toContain(line);
    }
    // Every line is a comment or a well-formed sample, and every metric has HELP and TYPE first.
    const sample =
      /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"(,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*\})? -?[0-9.e+]+$/;
    const typed = new Set<string>();
    for (const line of lines) {
      if (line.startsWith("# TYPE ")) typed.add(line.split(" ")[2] ?? "");
      else if (!line.startsWith("# HELP ")) {
        expect(line).toMatch(sample);
        expect(typed.has(line.split(/[{ ]/)[0] ?? "")).toBe(true);
      }
    }
  });

  it("escapes label values", async () => {
    await insertRow(env.DB, { status: "pending", effect: 'we"ird\\effect\nname' });
    const { deps } = adminDeps();
    const { body } = await callAdmin<string>(deps, "/admin/metrics", NOW);
    expect(body).toContain('ackbox_outbox_rows{status="pending",effect="we\\"ird\\\\effect\\nname"} 1');
  });

  it("omits what was not measured: the queue figures when the platform does not report them, a ratio with no attempts", async () => {
    const { deps } = adminDeps({ queue: messageQueue() });
    const { body } = await callAdmin<string>(deps, "/admin/metrics", NOW);
    expect(body).toContain("ackbox_queue_metrics_available 0");
    expect(body).not.toContain("ackbox_queue_backlog_messages ");
    // Nothing attempted and nothing pending: the ratio and the age are absent, never 0 or NaN.
    expect(body).not.toMatch(/^ackbox_outbox_failure_ratio\{/m);
    expect(body).not.toMatch(/^ackbox_outbox_oldest_pending_age_seconds /m);
  });
});

describe("cost does not grow with history (invariant 6)", () => {
  it("reads the live backlog through outbox_sweepable and failures through outbox_attempts_by_time", async () => {
    // The statements measureBacklog really sends, captured at the D1 boundary and explained with their own values.
    const { db, statements } = capturingDb(env.DB);
    await measureBacklog(db, NOW, { windowsMs: [HOUR], cap: 10 });
    const plan = (pattern: RegExp) => queryPlan(env.DB, statementMatching(statements, pattern));
    expect(await plan(/status IN \('pending', 'leased'\)/)).toContain("outbox_sweepable");
    expect(await plan(/FROM outbox_attempts/)).toContain("outbox_attempts_by_time");
    expect(await plan(/status = 'done' AND completed_at/)).toContain("outbox_done_by_age");
    expect(await plan(/status = 'dead' AND completed_at/)).toContain("outbox_dead_by_age");
    expect(await plan(/status = 'dead' ORDER BY completed_at DESC/)).toContain("outbox_dead_by_age");
    for (const statement of statements) expect(await queryPlan(env.DB, statement)).not.toMatch(/^SCAN (outbox|outbox_attempts)$/m);
  });

  it("reads as many rows with 3 000 old done rows and their attempts as with none", async () => {
    await seedBacklog();
    const { db, meter } = meteredDb(env.DB);
    const measure = async () => {
      meter.reset();
      await measureBacklog(db, NOW, { windowsMs: [5 * MINUTE, HOUR], cap: 10_000 });
      return meter.rowsRead;
    };
    const before = await measure();
    await env.DB.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
       INSERT INTO outbox (idempotency_key, receipt_id, effect, payload, status, attempts, next_attempt_at, created_at, updated_at, completed_at)
       SELECT 'old' || i || ':k', 'old' || i, 'reactions.add', '{}', 'done', 1, 0, 0, 0, 1 FROM n`,
    ).run();
    await env.DB.prepare(
      `INSERT INTO outbox_attempts (outbox_id, attempt, outcome, error, finished_at)
       SELECT id, 1, 'retry', 'old', 1 FROM outbox WHERE receipt_id LIKE 'old%'`,
    ).run();
    const after = await measure();
    expect(before).toBeGreaterThan(0); // a meter that saw nothing would pass at 0 = 0
    expect(after).toBe(before);
    console.log(`backlog measurement over the seeded selection: ${before} rows read, with or without 3 000 old done rows`);
  });

  it("stops counting at the cap and says the counts are lower bounds", async () => {
    for (let i = 0; i < 5; i++) await insertRow(env.DB, { status: "pending", sweepAt: NOW + i });
    const capped = await measureBacklog(env.DB, NOW, { windowsMs: [HOUR], cap: 3 });
    expect([capped.pending, capped.capped]).toEqual([3, true]);
    const exact = await measureBacklog(env.DB, NOW, { windowsMs: [HOUR], cap: 6 });
    expect([exact.pending, exact.capped]).toEqual([5, false]);
  });

  it("gives the exact oldest pending age even when the oldest row is past the cap (the sweep pushed it to the back)", async () => {
    // Re-sent by the sweep, the oldest row's sweep_at is the latest of all: a scan by sweep_at stopping at the cap misses it.
    const oldest = NOW - 2 * HOUR;
    await insertRow(env.DB, { status: "pending", createdAt: oldest, sweepAt: NOW + 10 * MINUTE, sweeps: 5 });
    for (let i = 0; i < 5; i++) await insertRow(env.DB, { status: "pending", createdAt: NOW - MINUTE, sweepAt: NOW + i });
    const figures = await measureBacklog(env.DB, NOW, { windowsMs: [HOUR], cap: 3 });
    expect(figures.capped).toBe(true);
    expect([figures.oldestPendingDueAt, figures.oldestPendingAgeMs]).toEqual([oldest, 2 * HOUR]);
  });

  it("still counts an old stale lease in the oldest age, and ignores finished rows", async () => {
    await insertRow(env.DB, { status: "done", createdAt: NOW - 5 * HOUR });
    await insertRow(env.DB, { status: "dead", createdAt: NOW - 4 * HOUR });
    await insertRow(env.DB, { status: "pending", createdAt: NOW - MINUTE });
    await insertRow(env.DB, { status: "leased", createdAt: NOW - 3 * HOUR, claimExpiresAt: NOW - SECOND, sweepAt: NOW - SECOND });
    const figures = await measureBacklog(env.DB, NOW, { windowsMs: [HOUR], cap: 100 });
    expect(figures.oldestPendingAgeMs).toBe(3 * HOUR);
  });
});

describe("teams waiting for their installation (a distributed app)", () => {
  const OAUTH = {
    clientId: "111.222",
    clientSecret: "client-secret",
    scopes: [],
    redirectUrl: "https://x.test/slack/oauth_redirect",
    tokenKey: "7d".repeat(32),
    previousTokenKey: undefined,
  };

  /** T0OK installed; T0BLOCK installed but blocked; T0NONE not installed; T0GRID served by its org's install. */
  async function seedTeams() {
    await env.DB.prepare("DELETE FROM installations").run();
    const install = (key: string, team: string | null, enterprise: string | null, blocked: string | null) =>
      env.DB.prepare(
        `INSERT INTO installations (install_key, enterprise_id, team_id, is_enterprise_install, scopes, installed_at, updated_at,
           key_id, bot_token, blocked_reason, blocked_at)
         VALUES (?1, ?2, ?3, ?4, '', ?5, ?5, 'k1', 'sealed', ?6, ?7)`,
      )
        .bind(key, enterprise, team, team === null ? 1 : 0, NOW - HOUR, blocked, blocked ? NOW - 5 * MINUTE : null)
        .run();
    await install("T:T0OK", "T0OK", null, null);
    await install("T:T0BLOCK", "T0BLOCK", null, "token_revoked");
    await install("E:E0ORG", null, "E0ORG", null);
    await env.DB.prepare(
      "INSERT INTO receipts (id, kind, type, team_id, enterprise_id, delivery_id, received_at) VALUES ('EvGRID', 'event', 'app_mention', 'T0GRID', 'E0ORG', 'd', ?1)",
    )
      .bind(NOW - HOUR)
      .run();
    await insertRow(env.DB, { status: "pending", teamId: "T0OK", createdAt: NOW - 900 * SECOND });
    // Either side of the oldest-pending alert's boundary (600 s): T0BLOCK's oldest is past it, T0NONE's is not.
    await insertRow(env.DB, { status: "pending", teamId: "T0BLOCK", createdAt: NOW - 700 * SECOND });
    await insertRow(env.DB, { status: "pending", teamId: "T0BLOCK", createdAt: NOW - 10 * SECOND });
    await insertRow(env.DB, { status: "dead", teamId: "T0BLOCK", createdAt: NOW - 800 * SECOND });
    await insertRow(env.DB, { status: "pending", teamId: "T0NONE", createdAt: NOW - 599 * SECOND });
    // The engine's uninstall step does not wait for an installation.
    await insertRow(env.DB, { status: "pending", teamId: "T0NONE", effect: "installation.removed", createdAt: NOW - 900 * SECOND });
    await insertRow(env.DB, { key: "EvGRID:main", status: "pending", teamId: "T0GRID", createdAt: NOW - 900 * SECOND });
  }

  it("names each blocked or missing team with its waiting rows and since when, oldest first; never a token", async () => {
    await seedTeams();
    const { deps } = adminDeps({ settings: { oauth: OAUTH } });
    const { status, body } = await callAdmin<BacklogBody & { blockedTeams: unknown[]; health: { kind: string; detail: string }[] }>(
      deps,
      "/admin/backlog",
      NOW,
    );
    expect(status).toBe(200);
    expect(body.blockedTeams).toEqual([
      {
        teamId: "T0BLOCK",
        installKey: "T:T0BLOCK",
        state: "blocked",
        reason: "token_revoked",
        blockedAt: new Date(NOW - 5 * MINUTE).toISOString(),
        rows: 2,
        waitingSince: new Date(NOW - 700 * SECOND).toISOString(),
      },
      {
        teamId: "T0NONE",
        installKey: null,
        state: "missing",
        reason: null,
        blockedAt: null,
        rows: 1,
        waitingSince: new Date(NOW - 599 * SECOND).toISOString(),
      },
    ]);
    // The health check (and so the alert) names the team past the boundary, and only that one.
    const oldest = body.health.find((c) => c.kind === "oldest_pending");
    expect(oldest?.detail).toContain(
      `waiting for their installation: team T0BLOCK blocked (token_revoked): 2 row(s) waiting since ${new Date(NOW - 700 * SECOND).toISOString()}`,
    );
    expect(oldest?.detail).not.toContain("T0NONE");
    expect(JSON.stringify(body)).not.toContain("sealed");
  });

  it("reports none in single-workspace mode (no installations to wait for)", async () => {
    await seedTeams();
    const { deps } = adminDeps({ settings: { oauth: undefined } });
    const { body } = await callAdmin<{ blockedTeams: unknown[] }>(deps, "/admin/backlog", NOW);
    expect(body.blockedTeams).toEqual([]);
  });
});

describe("the last alert post", () => {
  it("is in the answer, so a dead one (ALERT_CHANNEL cannot be posted to) shows beside the backlog", async () => {
    const id = await insertRow(env.DB, {
      key: `alert:new_dead:raised:${NOW - HOUR}:post`,
      status: "dead",
      effect: "chat.postMessage",
      payload: { channel: "C0ALERTS", text: "x" },
      lastError: "chat.postMessage: channel_not_found",
      createdAt: NOW - HOUR,
    });
    const { deps } = adminDeps();
    const { body } = await callAdmin<{ lastAlertPost: unknown }>(deps, "/admin/backlog", NOW);
    expect(body.lastAlertPost).toEqual({ id, status: "dead", error: "chat.postMessage: channel_not_found", channel: "C0ALERTS" });
  });
});

describe("the Workers disagreeing on SHARD_COUNT (the consumer's mark on shard 0)", () => {
  const WINDOW = 15 * MINUTE; // ALERT_WINDOW_SECONDS' default
  const mark = (now: number, alertChannel: string | undefined) => {
    const queue = messageQueue();
    const log = recordingLog();
    const deps = { db: env.DB, queue, settings: { alertChannel, alertWindowMs: WINDOW, sweepGraceMs: MINUTE }, log };
    return { done: reportUnknownShard(deps, { shard: 2, shardCount: 2 }, now), queue, log };
  };
  const marks = () =>
    env.DB.prepare("SELECT r.id, o.effect, o.payload FROM receipts r LEFT JOIN outbox o ON o.receipt_id = r.id ORDER BY r.id").all<{
      id: string;
      effect: string | null;
      payload: string | null;
    }>();
  const check = (b: BacklogBody) => b.health.find((c) => c.kind === "shard_count");

  it("a silent mismatch is an error in the backlog: breached from the consumer's mark until two alert windows after it", async () => {
    const start = NOW - (NOW % WINDOW);
    await mark(start, undefined).done; // no alert post: its row would be pending, and old, in the figures
    const { deps } = adminDeps();
    const at = async (now: number) => (await callAdmin<BacklogBody>(deps, "/admin/backlog", now)).body;
    const just = await at(start);
    expect(check(just)).toMatchObject({ breached: true, value: 0, threshold: 1800 });
    expect(check(just)?.detail).toContain("its SHARD_COUNT is lower than this ingress's (2)");
    expect(just.healthy).toBe(false);
    expect(check(await at(start + 2 * WINDOW - 1))?.breached).toBe(true);
    const after = await at(start + 2 * WINDOW);
    expect([check(after)?.breached, after.healthy]).toEqual([false, true]);
    const metrics = await callAdmin<string>(deps, "/admin/metrics", start);
    expect(metrics.body.split("\n")).toContain('ackbox_health_check_breached{check="shard_count"} 1');
  });

  it("the mark posts the alert to ALERT_CHANNEL once per alert window, naming both counts' fix; enqueued on shard 0", async () => {
    const start = NOW - (NOW % WINDOW);
    const first = mark(start, "C0ALERTS");
    await first.done;
    await mark(start + WINDOW - 1, "C0ALERTS").done; // the same window: deduped by the receipt
    await mark(start + WINDOW, "C0ALERTS").done; // the next one: posted again
    const { results } = await marks();
    expect(results.map((r) => [r.id, r.effect])).toEqual([
      [`alert:shard_count:raised:${start}`, "chat.postMessage"],
      [`alert:shard_count:raised:${start + WINDOW}`, "chat.postMessage"],
    ]);
    const payload = JSON.parse(results[0]?.payload ?? "{}");
    expect(payload.channel).toBe("C0ALERTS");
    expect(payload.text).toContain("the consumer (SHARD_COUNT 2) got a queue message for shard 2");
    expect(first.queue.messages.map((m) => m.body)).toEqual([{ id: expect.any(Number) }]);
    expect(first.log.records.find((r) => r.msg === "alert raised")?.fields).toMatchObject({
      kind: "shard_count",
      shard: 2,
      shard_count: 2,
    });
  });

  it("without ALERT_CHANNEL the mark is left all the same (logged, nothing posted), and the backlog reports it", async () => {
    const { done, log } = mark(NOW, undefined);
    await done;
    const { results } = await marks();
    expect(results.map((r) => r.effect)).toEqual([null]);
    expect(log.records.map((r) => [r.level, r.msg])).toEqual([["error", "alert raised (ALERT_CHANNEL unset: logged only)"]]);
    const { body } = await callAdmin<BacklogBody>(adminDeps().deps, "/admin/backlog", NOW);
    expect(check(body)?.breached).toBe(true);
  });
});
