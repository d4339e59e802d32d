import {
  createExecutionContext,
  createMessageBatch,
  createScheduledController,
  getQueueResult,
  waitOnExecutionContext,
} from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { deliverBatch } from "../../shared/delivery/deliver.ts";
import { recordingLog } from "../../shared/log.ts";
import { alertOperationId, decideAlert } from "../../shared/ops/alerts.ts";
import { measureBacklog } from "../../shared/ops/backlog.ts";
import { watchBacklog } from "../../shared/ops/watch.ts";
import type { Settings } from "../../shared/settings.ts";
import { deliveryDeps, testSettings } from "../support/consumer.ts";
import worker from "../support/entries/consumer.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { insertAttempt, resetOpsTables } from "../support/ops.ts";
import { insertRow, readRow, recordingQueue, resetTables } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";

const SECOND = 1000;
const MINUTE = 60 * SECOND;
/** ALERT_WINDOW_SECONDS' default: 15 minutes. NOW (12:00:00 UTC) is the start of a window. */
const WINDOW = 15 * MINUTE;

beforeEach(async () => {
  await resetTables(env.DB);
  await resetOpsTables(env.DB);
});

function tick(over: Partial<Settings> = {}) {
  const queue = recordingQueue();
  const log = recordingLog();
  const deps = { db: env.DB, queue, settings: testSettings(over), log };
  return { run: (now: number) => watchBacklog(deps, now), queue, log };
}

interface AlertReceipt {
  id: string;
  kind: string;
  type: string;
}

async function alertReceipts(): Promise<AlertReceipt[]> {
  const { results } = await env.DB.prepare(
    "SELECT id, kind, type FROM receipts WHERE kind = 'alert' ORDER BY received_at, id",
  ).all<AlertReceipt>();
  return results;
}

async function alertPosts(): Promise<{ channel: string; text: string }[]> {
  const { results } = await env.DB.prepare(
    "SELECT payload FROM outbox WHERE receipt_id LIKE 'alert:%' AND effect = 'chat.postMessage' ORDER BY created_at, id",
  ).all<{ payload: string }>();
  return results.map((r) => JSON.parse(r.payload));
}

/** A pending row that is `ageSeconds` old at NOW. */
const owe = (ageSeconds: number) => insertRow(env.DB, { status: "pending", createdAt: NOW - ageSeconds * SECOND, sweepAt: NOW + MINUTE });

describe("oldest pending age (ALERT_OLDEST_PENDING_SECONDS = 600)", () => {
  it("does not alert at the threshold, and raises one alert through the outbox one second past it", async () => {
    await owe(600);
    const { run, queue } = tick();
    await run(NOW);
    expect(await alertReceipts()).toEqual([]);

    const report = await run(NOW + SECOND);
    const id = alertOperationId("oldest_pending", "raised", NOW + SECOND, WINDOW);
    expect(id).toBe(`alert:oldest_pending:raised:${NOW}`);
    expect(await alertReceipts()).toEqual([{ id, kind: "alert", type: "oldest_pending.raised" }]);
    const [post] = await alertPosts();
    expect(post?.channel).toBe("C0ALERTS");
    expect(post?.text).toContain("backlog is old: oldest pending row is 601 s old (limit 600 s)");
    expect(post?.text).toContain("npx ackbox backlog");
    const [row] = (await env.DB.prepare("SELECT id FROM outbox WHERE receipt_id = ?").bind(id).all<{ id: number }>()).results;
    expect(queue.sent).toEqual([row?.id]);
    expect(report.alerts.find((a) => a.kind === "oldest_pending")).toMatchObject({
      firing: true,
      announced: { phase: "raised", operationId: id, posted: true },
    });
  });

  it("names, in a distributed app, each team whose rows wait past the limit for a blocked or missing installation", async () => {
    await env.DB.prepare("DELETE FROM installations").run();
    await env.DB.prepare(
      `INSERT INTO installations (install_key, team_id, is_enterprise_install, scopes, installed_at, updated_at, key_id, bot_token,
         blocked_reason, blocked_at)
       VALUES ('T:T0BLOCK', 'T0BLOCK', 0, '', ?1, ?1, 'k1', 'sealed', 'invalid_auth', ?1), ('T:T0OK', 'T0OK', 0, '', ?1, ?1, 'k1', 'sealed', NULL, NULL)`,
    )
      .bind(NOW - 20 * MINUTE)
      .run();
    const at = (team: string, ageSeconds: number) =>
      insertRow(env.DB, { status: "pending", teamId: team, createdAt: NOW - ageSeconds * SECOND, sweepAt: NOW + MINUTE });
    await at("T0BLOCK", 900); // past the boundary
    await at("T0BLOCK", 30);
    await at("T0GONE", 601); // past it, by one second: no installation at all
    await at("T0LATE", 600); // at it: not yet
    await at("T0OK", 900); // old, but its installation is fine: not waiting for one
    const oauth = {
      clientId: "1.2",
      clientSecret: "s",
      scopes: [],
      redirectUrl: "https://x.test/slack/oauth_redirect",
      tokenKey: "7d".repeat(32),
      previousTokenKey: undefined,
    };
    await tick({ oauth }).run(NOW);
    const [post] = await alertPosts();
    expect(post?.text).toContain(
      `waiting for their installation: team T0BLOCK blocked (invalid_auth): 2 row(s) waiting since ${new Date(NOW - 900 * SECOND).toISOString()}; ` +
        `team T0GONE not installed: 1 row(s) waiting since ${new Date(NOW - 601 * SECOND).toISOString()}.`,
    );
    expect(post?.text).not.toMatch(/T0LATE|T0OK|sealed/);
  });

  it("names no team in single-workspace mode", async () => {
    await insertRow(env.DB, { status: "pending", teamId: "T0GONE", createdAt: NOW - 900 * SECOND, sweepAt: NOW + MINUTE });
    await tick({ oauth: undefined }).run(NOW);
    const [post] = await alertPosts();
    expect(post?.text).toContain("backlog is old: oldest pending row is 900 s old (limit 600 s). Now:");
  });

  it("posts once per breach: not again while it holds, in this window or the next", async () => {
    await owe(700);
    const { run } = tick();
    await run(NOW);
    await run(NOW + MINUTE);
    await run(NOW + WINDOW + MINUTE);
    await run(NOW + 3 * WINDOW);
    expect((await alertReceipts()).map((r) => r.type)).toEqual(["oldest_pending.raised"]);
  });

  it("posts one recovery message when it clears, and nothing more", async () => {
    const id = await owe(700);
    const { run } = tick();
    await run(NOW);
    await env.DB.prepare("UPDATE outbox SET status = 'done', sweep_at = NULL, completed_at = ?1 WHERE id = ?2")
      .bind(NOW + MINUTE, id)
      .run();
    await run(NOW + 2 * MINUTE);
    await run(NOW + 3 * MINUTE);
    expect((await alertReceipts()).map((r) => r.id)).toEqual([
      `alert:oldest_pending:raised:${NOW}`,
      `alert:oldest_pending:resolved:${NOW}`,
    ]);
    // The alert's own row (pending: this test delivers nothing) is now the oldest pending row.
    expect((await alertPosts())[1]?.text).toContain("recovered (oldest_pending): oldest pending row is 120 s old (limit 600 s)");
  });

  it("announces a state that flaps inside one window at most once per window, and the state that holds in the next", async () => {
    const id = await owe(700);
    const { run, log } = tick();
    const done = () =>
      env.DB.prepare("UPDATE outbox SET status = 'done', sweep_at = NULL, completed_at = ?1 WHERE id = ?2").bind(NOW, id).run();
    const pending = () =>
      env.DB.prepare("UPDATE outbox SET status = 'pending', sweep_at = ?1, completed_at = NULL WHERE id = ?2")
        .bind(NOW + MINUTE, id)
        .run();
    await run(NOW); // raised (posted)
    await done();
    await run(NOW + MINUTE); // resolved (posted)
    await pending();
    await run(NOW + 2 * MINUTE); // raised again: this window already carried a "raised"
    await run(NOW + 3 * MINUTE); // still held back
    expect((await alertReceipts()).map((r) => r.type)).toEqual(["oldest_pending.raised", "oldest_pending.resolved"]);
    expect(log.records.some((r) => r.msg.startsWith("alert already posted in this window"))).toBe(true);

    await run(NOW + WINDOW); // next window, still breached: announced now
    expect((await alertReceipts()).map((r) => r.id)).toEqual([
      `alert:oldest_pending:raised:${NOW}`,
      `alert:oldest_pending:resolved:${NOW}`,
      `alert:oldest_pending:raised:${NOW + WINDOW}`,
    ]);
  });

  it("posts once when two ticks overlap", async () => {
    await owe(700);
    const a = tick();
    const b = tick();
    await Promise.all([a.run(NOW), b.run(NOW + SECOND)]);
    expect((await alertReceipts()).map((r) => r.type)).toEqual(["oldest_pending.raised"]);
    expect([...a.queue.sent, ...b.queue.sent]).toHaveLength(1);
  });
});

describe("new dead rows (ALERT_DEAD_ROWS = 1 within ALERT_WINDOW_SECONDS)", () => {
  it("raises when a row was parked dead in the last window, and resolves once a window passes without one", async () => {
    await insertRow(env.DB, { status: "dead", completedAt: NOW - WINDOW }); // just outside (now − window, now]
    const { run } = tick();
    await run(NOW);
    expect(await alertReceipts()).toEqual([]);
    await insertRow(env.DB, { status: "dead", completedAt: NOW + 30 * SECOND });
    await run(NOW + MINUTE);
    await run(NOW + 30 * SECOND + WINDOW - SECOND); // the row is still inside the window
    await run(NOW + 30 * SECOND + WINDOW); // now it is not
    // (The alert's own row, never delivered here, grows old enough to raise oldest_pending too.)
    expect((await alertReceipts()).filter((r) => r.type.startsWith("new_dead")).map((r) => r.id)).toEqual([
      `alert:new_dead:raised:${NOW}`,
      `alert:new_dead:resolved:${NOW + WINDOW}`,
    ]);
    expect((await alertPosts())[0]?.text).toContain("rows are being parked dead: 1 row(s) parked dead in the last 15 min (limit 1)");
  });
});

describe("alerts do not feed themselves", () => {
  const slack = useFakeSlack();

  it("with an ALERT_CHANNEL that answers channel_not_found, three hours of cron ticks leave one dead alert post and one report, not a raise/resolve cycle", async () => {
    slack.current.always("chat.postMessage", reply.error("channel_not_found"));
    await insertRow(env.DB, { status: "dead", completedAt: NOW - MINUTE }); // one real failure: new_dead raises
    const { run, queue, log } = tick();
    for (let at = NOW; at <= NOW + 3 * 60 * MINUTE; at += MINUTE) {
      await run(at);
      // The consumer delivers what the tick enqueued, as the real queue would within the minute.
      const ids = queue.sent.splice(0);
      if (ids.length > 0) await deliverBatch(deliveryDeps(at + SECOND).deps, ids);
    }

    const alertRows = await env.DB.prepare("SELECT status, last_error FROM outbox WHERE receipt_id LIKE 'alert:%'").all();
    expect(alertRows.results).toEqual([{ status: "dead", last_error: "chat.postMessage: channel_not_found" }]);
    expect(slack.current.callsTo("chat.postMessage")).toHaveLength(1);
    const reports = log.records.filter((r) => r.msg.includes("ALERT_CHANNEL cannot be posted to"));
    expect(reports).toHaveLength(1); // the recovery, logged with why it was not posted
    expect(reports[0]?.fields).toMatchObject({
      kind: "new_dead",
      phase: "resolved",
      alert_channel_error: "chat.postMessage: channel_not_found",
    });
    // The backlog says so to an operator, and counts no dead alert post as a new dead row.
    const figures = await measureBacklog(env.DB, NOW + 3 * 60 * MINUTE, { windowsMs: [WINDOW], cap: 1000 });
    expect(figures.lastAlertPost).toMatchObject({ status: "dead", error: "chat.postMessage: channel_not_found" });
    expect(figures.windows[0]?.parkedDead).toBe(0);
    // 181 ticks on simulated time: the work is fixed, but ~2 s idle becomes 6 s on a loaded machine.
  }, 30_000);

  it("an ALERT_CHANNEL changed away from a deleted channel posts the next alert: only a dead post to the current channel holds alerts back", async () => {
    slack.current.script("chat.postMessage", reply.error("channel_not_found")).always("chat.postMessage", reply.ok({ ts: "1.1" }));
    await insertRow(env.DB, { status: "dead", completedAt: NOW - MINUTE }); // one real failure: new_dead raises
    const gone = tick({ alertChannel: "C0GONE" });
    await gone.run(NOW);
    await deliverBatch(deliveryDeps(NOW + SECOND).deps, gone.queue.sent.splice(0));
    expect(await alertPosts()).toEqual([expect.objectContaining({ channel: "C0GONE" })]);

    // The channel was deleted, so the operator points ALERT_CHANNEL at another (a replay of the dead post would die again).
    const moved = tick({ alertChannel: "C0NEW" });
    await moved.run(NOW + WINDOW); // the window passed without a new dead row: new_dead resolves
    expect((await alertPosts()).map((p) => p.channel)).toEqual(["C0GONE", "C0NEW"]);
    expect(moved.log.records.filter((r) => r.msg.includes("ALERT_CHANNEL cannot be posted to"))).toEqual([]);
  });

  it("leaves alert posts out of the dead-row and failure-rate measures, and 429s out of the failures", async () => {
    const alertRow = await insertRow(env.DB, { key: `alert:new_dead:raised:${NOW}:post`, status: "dead", completedAt: NOW - SECOND });
    const eventRow = await insertRow(env.DB, { status: "dead", completedAt: NOW - SECOND });
    await insertAttempt(env.DB, { outboxId: alertRow, attempt: 1, outcome: "dead", finishedAt: NOW - SECOND });
    await insertAttempt(env.DB, { outboxId: eventRow, attempt: 1, outcome: "dead", finishedAt: NOW - SECOND });
    await insertAttempt(env.DB, { outboxId: eventRow, attempt: 2, outcome: "rate_limited", finishedAt: NOW - SECOND });
    const figures = await measureBacklog(env.DB, NOW, { windowsMs: [WINDOW], cap: 1000 });
    expect(figures.windows[0]).toMatchObject({ parkedDead: 1, failed: 1 });
  });
});

describe("failure rate (ALERT_FAILURE_RATE = 0.5, at least ALERT_MIN_ATTEMPTS = 10)", () => {
  it("raises when half of enough recent attempts failed, not before", async () => {
    const row = await insertRow(env.DB, { status: "pending", createdAt: NOW, sweepAt: NOW + MINUTE });
    for (let i = 0; i < 4; i++) await insertRow(env.DB, { status: "done", completedAt: NOW - i * SECOND });
    for (let i = 1; i <= 4; i++) await insertAttempt(env.DB, { outboxId: row, attempt: i, outcome: "retry", finishedAt: NOW - i * SECOND });
    const { run } = tick();
    await run(NOW); // 4 of 8 failed: half, but too few attempts to judge
    expect(await alertReceipts()).toEqual([]);
    await insertRow(env.DB, { status: "done", completedAt: NOW });
    await insertAttempt(env.DB, { outboxId: row, attempt: 5, outcome: "retry", finishedAt: NOW });
    await run(NOW + SECOND); // 5 of 10
    expect((await alertReceipts()).map((r) => r.type)).toEqual(["failure_rate.raised"]);
    expect((await alertPosts())[0]?.text).toContain("effects are failing: 50 % of 10 attempts failed in the last 15 min (limit 50 %)");
  });
});

describe("with ALERT_CHANNEL unset", () => {
  it("only logs the transitions: no receipt, no outbox row, no send", async () => {
    const id = await owe(700);
    const { run, queue, log } = tick({ alertChannel: undefined });
    await run(NOW);
    await env.DB.prepare("UPDATE outbox SET status = 'done', sweep_at = NULL, completed_at = ?1 WHERE id = ?2").bind(NOW, id).run();
    await run(NOW + MINUTE);
    await run(NOW + 2 * MINUTE);
    expect(await alertReceipts()).toEqual([]);
    expect(queue.sent).toEqual([]);
    const said = log.records.filter((r) => r.msg.startsWith("alert ")).map((r) => [r.level, r.msg, r.fields.kind]);
    expect(said).toEqual([
      ["warn", "alert raised (ALERT_CHANNEL unset: logged only)", "oldest_pending"],
      ["info", "alert resolved (ALERT_CHANNEL unset: logged only)", "oldest_pending"],
    ]);
  });
});

describe("alert state", () => {
  it("is written only when something changes, never on a quiet tick", async () => {
    await owe(700);
    const { run } = tick();
    await run(NOW);
    const read = () => env.DB.prepare("SELECT * FROM alert_state ORDER BY kind").all();
    const after = (await read()).results;
    await run(NOW + MINUTE);
    await run(NOW + 2 * MINUTE);
    expect((await read()).results).toEqual(after);
    expect(after.map((s) => [s.kind, s.firing, s.announced_firing])).toEqual([
      ["failure_rate", 0, 0],
      ["new_dead", 0, 0],
      ["oldest_pending", 1, 1],
    ]);
  });

  it("decides purely from the stored state, the check and the clock", () => {
    const check = { kind: "new_dead" as const, breached: true, value: 2, threshold: 1, detail: "" };
    expect(decideAlert(undefined, check, NOW)).toMatchObject({ changed: true, announce: "raised", next: { firing: true, since: NOW } });
    const firingAnnounced = { kind: "new_dead" as const, firing: true, since: NOW, announcedFiring: true, announcedAt: NOW, lastValue: 2 };
    expect(decideAlert(firingAnnounced, check, NOW + MINUTE)).toMatchObject({ changed: false, announce: null });
    expect(decideAlert(firingAnnounced, { ...check, breached: false }, NOW + MINUTE)).toMatchObject({
      changed: true,
      announce: "resolved",
      next: { firing: false, since: NOW + MINUTE },
    });
  });
});

describe("scheduled(): the cron tick", () => {
  const slack = useFakeSlack();

  it("after the sweep, samples the backlog and posts a breach to ALERT_CHANNEL through the queue and the consumer, once", async () => {
    // The tick's queue sends are captured and handed to the consumer's queue() as the platform would
    // deliver them: no wait on a real queue's timing. queue() reads the real clock, so the tick runs at
    // it (no boundary is crossed).
    const now = Date.now();
    const owed = await insertRow(env.DB, {
      status: "pending",
      createdAt: now - 700 * SECOND,
      nextAttemptAt: now + 3_600_000,
      sweepAt: now + MINUTE,
    });
    slack.current.script("chat.postMessage", reply.ok({ channel: "C0ALERTS", ts: "1764504000.000900" }));
    const tick = async (at: number) => {
      const queue = recordingQueue();
      const ctx = createExecutionContext();
      await worker.scheduled(
        createScheduledController({ scheduledTime: at, cron: "* * * * *" }),
        { ...env, OUTBOX_QUEUE: queue as unknown as Queue },
        ctx,
      );
      await waitOnExecutionContext(ctx);
      return queue.sent;
    };
    const deliver = async (ids: readonly number[]) => {
      const batch = createMessageBatch(
        "ackbox-outbox",
        ids.map((id) => ({ id: crypto.randomUUID(), timestamp: new Date(), attempts: 1, body: { id } })),
      );
      const ctx = createExecutionContext();
      await worker.queue(batch, env, ctx);
      return getQueueResult(batch, ctx);
    };
    const alertRow = () =>
      env.DB.prepare("SELECT id, status FROM outbox WHERE receipt_id = ?")
        .bind(alertOperationId("oldest_pending", "raised", now, WINDOW))
        .first<{ id: number; status: string }>();

    const enqueued = await tick(now);
    const alert = await alertRow();
    expect(enqueued).toEqual([alert?.id]);
    expect((await deliver(enqueued)).explicitAcks).toHaveLength(1);

    const calls = slack.current.callsTo("chat.postMessage");
    expect(calls).toHaveLength(1);
    expect(calls[0]?.authorization).toBe("Bearer xoxb-test-bot-token");
    const sent = (calls[0]?.json ?? calls[0]?.params) as { channel?: string; text?: string };
    expect(sent.channel).toBe("C0ALERTS");
    expect(sent.text).toContain("backlog is old");
    expect((await alertRow())?.status).toBe("done");
    expect(await env.DB.prepare("SELECT at, pending FROM backlog_samples").all()).toMatchObject({ results: [{ at: now, pending: 1 }] });
    expect((await readRow(env.DB, owed)).status).toBe("pending");

    // Once: after the alert's row is done, the next tick (the breach still on, the owed row now
    // due for the sweep) re-sends the owed row but neither a second alert nor the done one.
    const next = await tick(now + MINUTE);
    expect(next).toEqual([owed]);
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM outbox WHERE effect = 'chat.postMessage'").first<number>("n")).toBe(1);
    expect(slack.current.callsTo("chat.postMessage")).toHaveLength(1);
  });
});
