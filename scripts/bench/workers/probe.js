/**
 * The cost probe: runs ackbox's real Worker entries (the ingress's fetch, the
 * consumer's queue and scheduled handlers, built from workers/*) and the
 * design note's statements against real local D1, through a meter that keeps
 * D1's own rows_read / rows_written of every statement, and a counting queue.
 * Node drives it phase by phase (scripts/bench/cost.ts, flat.ts, drain.ts)
 * and measures the runtime's CPU around each phase.
 *
 *   POST /schema      {db, statements}        apply DDL to DB (ackbox) or NOTE_DB (design note)
 *   POST /seed        {db, status, count, at} bulk rows through one recursive-CTE INSERT per 100 000
 *   POST /ackbox/ingest  {events, dropSends}  signed events through ingress.fetch
 *   POST /ackbox/deliver {batchSize}          the queued messages through consumer.queue
 *   POST /ackbox/tick    {at}                 consumer.scheduled (one sweep tick) at `at`
 *   POST /ackbox/claim   {ids}                claimRows of those ids (one consumer claim)
 *   POST /note/ingest    {events}             the note's recordIntent + sweepOutbox per event
 *   POST /note/tick                           the note's sweepOutbox (its cron tick)
 *   POST /note/claim     {limit}              the note's claimBatch alone
 *   POST /reset       {db}                    delete the rows that are not done (between flat levels)
 *   POST /accounting                          how local D1 counts rows written (SCRATCH_DB)
 *   POST /count       {db, sql}               a read the bench needs (not metered)
 */
import { claimRows, newClaimToken } from "../../../shared/outbox/claim.ts";
import { signatureFor } from "../../../shared/slack/signature.ts";
import consumer from "../../../workers/consumer/index.ts";
import ingress from "../../../workers/ingress/index.ts";
import * as note from "./design-note.js";
import { countingQueue, meteredDb } from "./metered.js";

/** Messages the ingress (or a sweep) sent and the consumer has not yet been handed. */
let queued = [];
let sequence = 0;

function context() {
  const pending = [];
  return {
    ctx: { waitUntil: (p) => pending.push(p), passThroughOnException() {}, props: {} },
    settle: () => Promise.allSettled(pending),
  };
}

function meteredEnv(env) {
  const meter = meteredDb(env.DB);
  const queue = countingQueue();
  const settings = Object.fromEntries(Object.entries(env).filter(([, v]) => typeof v === "string"));
  return { env: { ...settings, DB: meter.db, OUTBOX_QUEUE: queue }, meter, queue };
}

async function signedEvent(env, now) {
  const seq = sequence++;
  const ts = `${Math.floor(now / 1000)}.${String(seq).padStart(6, "0")}`;
  const event =
    seq % 2 === 0
      ? { type: "app_mention", user: "U0HUMAN", text: "<@U0BOT> hi", ts, channel: "C0COST", event_ts: ts }
      : { type: "message", channel_type: "channel", user: "U0HUMAN", text: "hello", ts, channel: "C0COST", event_ts: ts };
  const body = JSON.stringify({
    token: "t",
    team_id: "T0COST",
    api_app_id: "A0COST",
    type: "event_callback",
    event_id: `EvCost${seq}x${now}`,
    event_time: Math.floor(now / 1000),
    event,
  });
  const timestamp = Math.floor(now / 1000);
  return new Request("https://ackbox.bench/slack/events", {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-slack-request-timestamp": String(timestamp),
      "x-slack-signature": await signatureFor(env.SLACK_SIGNING_SECRET, timestamp, body),
    },
    body,
  });
}

function messageBatch(bodies) {
  const ops = { reads: bodies.length, acks: 0, retries: 0 };
  const messages = bodies.map((body, i) => ({
    id: `m${i}`,
    timestamp: new Date(),
    body,
    attempts: 1,
    ack: () => ops.acks++,
    retry: () => ops.retries++,
  }));
  return {
    ops,
    batch: {
      queue: "ackbox-outbox",
      messages,
      ackAll: () => (ops.acks += messages.length),
      retryAll: () => (ops.retries += messages.length),
    },
  };
}

const handlers = {
  async "/schema"(env, { db, statements }) {
    const d1 = db === "note" ? env.NOTE_DB : env.DB;
    await d1.batch(statements.map((sql) => d1.prepare(sql)));
    return { applied: statements.length };
  },

  async "/seed"(env, { db, status, count, at, from = 0 }) {
    const chunk = 100_000;
    for (let start = from; start < from + count; start += chunk) {
      const end = Math.min(from + count, start + chunk) - 1;
      if (db === "note") {
        await env.NOTE_DB.prepare(
          `WITH RECURSIVE seq(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?2)
           INSERT INTO outbox (idempotency_key, effect, payload, status, attempts, claim_token, claim_expires_at, created_at, completed_at)
           SELECT 'seed' || i || ':notify', 'notify', '{"channel":"C0SEED"}', ?3, CASE ?3 WHEN 'done' THEN 1 ELSE 0 END,
                  NULL, NULL, ?4, CASE ?3 WHEN 'done' THEN ?4 END FROM seq`,
        )
          .bind(start, end, status, at)
          .run();
      } else {
        // done: one row finished every 0.6 s going back from a minute ago, the
        // history of a steady ~1.7 events/s (a million rows ≈ 6.9 days, inside
        // DONE_RETENTION_HOURS, so no prune takes them).
        // pending: a lost message, its sweep_at in the past, so the sweep owes it.
        await env.DB.prepare(
          `WITH RECURSIVE seq(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?2)
           INSERT INTO outbox (idempotency_key, receipt_id, team_id, effect, payload, status, attempts, claim_token,
                               next_attempt_at, enqueued_at, sweep_at, result, created_at, updated_at, completed_at)
           SELECT 'seed' || i || ':eyes', 'seed' || i, 'T0SEED', 'reactions.add',
                  '{"channel":"C0SEED","timestamp":"1764504000.' || printf('%06d', i % 1000000) || '","name":"eyes"}',
                  ?3, CASE ?3 WHEN 'done' THEN 1 ELSE 0 END, CASE ?3 WHEN 'done' THEN 'seed-token' END,
                  ?4 - 120000, ?4 - 120000, CASE ?3 WHEN 'pending' THEN ?4 - 60000 END,
                  CASE ?3 WHEN 'done' THEN '{"reacted":true}' END, ?4 - 120000, ?4 - 60000,
                  CASE ?3 WHEN 'done' THEN ?4 - 60000 - i * 600 END
             FROM seq`,
        )
          .bind(start, end, status, at)
          .run();
      }
    }
    return { seeded: count };
  },

  async "/ackbox/ingest"(env, { events, dropSends }) {
    const { env: e, meter, queue } = meteredEnv(env);
    const statuses = {};
    for (let i = 0; i < events; i++) {
      const { ctx, settle } = context();
      const response = await ingress.fetch(await signedEvent(env, Date.now()), e, ctx);
      statuses[response.status] = (statuses[response.status] ?? 0) + 1;
      await settle();
    }
    if (!dropSends) queued.push(...queue.sent);
    return {
      statuses,
      records: meter.records,
      queueWrites: queue.sent.length,
      sendCalls: queue.calls,
      dropped: dropSends ? queue.sent.length : 0,
    };
  },

  async "/ackbox/deliver"(env, { batchSize }) {
    const { env: e, meter, queue } = meteredEnv(env);
    const bodies = queued;
    queued = [];
    const ops = { reads: 0, acks: 0, retries: 0, batches: 0 };
    for (let i = 0; i < bodies.length; i += batchSize) {
      const { batch, ops: o } = messageBatch(bodies.slice(i, i + batchSize));
      const { ctx, settle } = context();
      await consumer.queue(batch, e, ctx);
      await settle();
      ops.reads += o.reads;
      ops.acks += o.acks;
      ops.retries += o.retries;
      ops.batches += 1;
    }
    const calls = await (await fetch("https://slack.com/api/__calls")).json();
    return { records: meter.records, ops, queueWrites: queue.sent.length, slackCalls: calls.calls };
  },

  async "/ackbox/tick"(env, { at }) {
    const { env: e, meter, queue } = meteredEnv(env);
    const { ctx, settle } = context();
    const started = Date.now();
    await consumer.scheduled({ cron: "* * * * *", scheduledTime: at, noRetry() {} }, e, ctx);
    await settle();
    const wallMs = Date.now() - started;
    queued.push(...queue.sent);
    return { records: meter.records, queueWrites: queue.sent.length, sendCalls: queue.calls, wallMs, ids: queue.sent.map((b) => b.id) };
  },

  async "/ackbox/claim"(env, { ids }) {
    const { db, records } = meteredDb(env.DB);
    const claimed = await claimRows(db, ids, newClaimToken(), Date.now(), 120_000);
    return { records, claimed: claimed.length };
  },

  async "/note/ingest"(env, { events }) {
    const meter = meteredDb(env.NOTE_DB);
    const e = { DB: meter.db };
    let delivered = 0;
    for (let i = 0; i < events; i++) {
      const request = await signedEvent(env, Date.now());
      const payload = JSON.parse(await request.text());
      const first = await note.recordIntent(payload, e);
      // The note's step 3: on a first delivery, the same claim-and-deliver loop in waitUntil (awaited here).
      if (first) delivered += await note.sweepOutbox(e, performEffect);
    }
    return { records: meter.records, delivered };
  },

  async "/note/tick"(env) {
    const meter = meteredDb(env.NOTE_DB);
    const started = Date.now();
    const delivered = await note.sweepOutbox({ DB: meter.db }, performEffect);
    return { records: meter.records, delivered, wallMs: Date.now() - started };
  },

  async "/note/claim"(env, { limit }) {
    const meter = meteredDb(env.NOTE_DB);
    const rows = await note.claimBatch({ DB: meter.db }, crypto.randomUUID(), limit);
    return { records: meter.records, claimed: rows.length };
  },

  async "/reset"(env, { db }) {
    queued = [];
    const d1 = db === "note" ? env.NOTE_DB : env.DB;
    await d1.prepare("DELETE FROM outbox WHERE status <> 'done'").run();
    return { ok: true };
  },

  /**
   * How local D1 counts rows written: one table with an index and two
   * partial indexes, written every way the outbox is. Each statement's meta
   * is returned as D1 reports it.
   */
  async "/accounting"(env) {
    const db = env.SCRATCH_DB;
    const steps = [
      ["create a table with an index and two partial indexes", "CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER, b INTEGER, s TEXT)"],
      ["", "CREATE INDEX t_a ON t (a)"],
      ["", "CREATE INDEX t_b_p ON t (b) WHERE s = 'p'"],
      ["", "CREATE INDEX t_b_d ON t (b) WHERE s = 'd'"],
      ["insert a row that enters t_a and t_b_p", "INSERT INTO t (id, a, b, s) VALUES (1, 1, 1, 'p')"],
      ["insert a row that enters t_a only", "INSERT INTO t (id, a, b, s) VALUES (2, 2, 2, 'x')"],
      ["update an indexed column (t_a re-keyed)", "UPDATE t SET a = 10 WHERE id = 1"],
      ["update an unindexed column", "UPDATE t SET b = b WHERE id = 2"],
      ["move the row from t_b_p to t_b_d", "UPDATE t SET s = 'd' WHERE id = 1"],
      ["move the row out of every partial index", "UPDATE t SET s = 'x' WHERE id = 1"],
      ["delete a row with two index entries", "DELETE FROM t WHERE id = 1"],
    ];
    const out = [];
    for (const [what, sql] of steps) {
      const { meta } = await db.prepare(sql).run();
      if (what) out.push({ what, sql, rowsRead: meta.rows_read, rowsWritten: meta.rows_written });
    }
    return { steps: out };
  },

  async "/count"(env, { db, sql }) {
    const d1 = db === "note" ? env.NOTE_DB : env.DB;
    return { row: await d1.prepare(sql).first() };
  },
};

/** The note's performEffect: the Slack call, to the same fake Slack the consumer calls. */
async function performEffect(row) {
  const response = await fetch("https://slack.com/api/chat.postMessage", { method: "POST", body: row.payload });
  await response.arrayBuffer();
}

export default {
  async fetch(request, env) {
    const { pathname } = new URL(request.url);
    const handler = handlers[pathname];
    if (!handler) return new Response("not found", { status: 404 });
    try {
      return Response.json(await handler(env, request.method === "POST" ? await request.json() : {}));
    } catch (error) {
      return Response.json({ error: String(error?.stack ?? error) }, { status: 500 });
    }
  },
};
