/**
 * The burst benchmark's simulation: the consumer's own modules — deliverBatch
 * (claim, in-batch pacing, perform, decide, fenced finish, cooldowns and
 * release slots), the dead-letter settlement and the sweep — over real SQLite
 * with every migration, driven by a virtual clock, a model of Cloudflare
 * Queues and a fake Slack that enforces a per-channel rate. Virtual time lets
 * a burst that Slack's limit spreads over minutes run in seconds; every
 * decision is the product's.
 *
 * Modelled, not measured: Queues delivers a partial batch max_batch_timeout
 * after its oldest message became visible (0, as workers/consumer/wrangler.toml
 * sets it: at once), a full one (100) at once,
 * runs as many consumer invocations at a time as there are batches, counts
 * message.retry() toward max_retries (10) and then dead-letters; a re-sent
 * message starts afresh. The sweep's cron fires every 60 s.
 *
 * Checked with the Workers' types (the root tsconfig), like the code it runs.
 */
import { type DeliveryDeps, deliverBatch } from "../../shared/delivery/deliver.ts";
import { effectRegistry } from "../../shared/effects/registry.ts";
import type { Log } from "../../shared/log.ts";
import type { OutboxQueue } from "../../shared/outbox/enqueue.ts";
import { parseSettings } from "../../shared/settings.ts";
import type { SlackWebApi } from "../../shared/slack/web-api.ts";
import { httpFailure } from "../../shared/slack/web-api.ts";
import { recordDeadLetters } from "../../workers/consumer/dead-letters.ts";
import { sweep } from "../../workers/consumer/sweep.ts";
import { mulberry32 } from "../chaos/plan.ts";
import type { BurstOptions, BurstRun, BurstVariantName } from "./burst-types.ts";

/** ackbox's policy with PACE_AHEAD at its default (off) and on: the variant is the product's own setting. */
export const VARIANTS: readonly { readonly name: BurstVariantName; readonly paceAhead: boolean }[] = [
  { name: "ackbox (PACE_AHEAD off, the default)", paceAhead: false },
  { name: "ackbox, PACE_AHEAD on", paceAhead: true },
];

const MAX_BATCH_SIZE = 100;
const MAX_BATCH_TIMEOUT_MS = 0;
const MAX_RETRIES = 10;
const CRON_MS = 60_000;
/** Slack methods and response_url only: the burst sends chat.postMessage. */
const EFFECTS = effectRegistry([]);
const TEAM = "T0BURST";

interface Message {
  readonly id: number;
  visibleAt: number;
  retries: number;
}

/** Virtual time: sleeps resolve when the loop moves the clock past them. */
class VirtualClock {
  now = 0;
  readonly #timers: { at: number; resolve: () => void }[] = [];
  sleep = (ms: number): Promise<void> => new Promise((resolve) => this.#timers.push({ at: this.now + Math.max(0, ms), resolve }));
  nextTimer(): number | undefined {
    return this.#timers.reduce<number | undefined>((min, t) => (min === undefined || t.at < min ? t.at : min), undefined);
  }
  fire(): void {
    for (let i = this.#timers.length - 1; i >= 0; i--) {
      const timer = this.#timers[i];
      if (timer && timer.at <= this.now) {
        this.#timers.splice(i, 1);
        timer.resolve();
      }
    }
  }
}

/** Slack's per-channel limit as a token bucket: `burst` calls at once, then `rate` a second; beyond it, 429 + Retry-After: 1. */
function fakeSlack(
  clock: VirtualClock,
  options: BurstOptions,
  calls: { ok: number; limited: number; perRow: Map<string, number>; lastOkAt: number },
): SlackWebApi {
  const buckets = new Map<string, { tokens: number; at: number }>();
  return {
    async call(method, params) {
      const channel = String(params.channel);
      const bucket = buckets.get(channel) ?? { tokens: options.burst, at: clock.now };
      bucket.tokens = Math.min(options.burst, bucket.tokens + ((clock.now - bucket.at) / 1000) * options.perChannelPerSecond);
      bucket.at = clock.now;
      buckets.set(channel, bucket);
      const allowed = bucket.tokens >= 1;
      if (allowed) bucket.tokens -= 1;
      await clock.sleep(options.callLatencyMs);
      if (!allowed) {
        calls.limited += 1;
        throw httpFailure(method, 429, "1");
      }
      calls.ok += 1;
      calls.lastOkAt = clock.now;
      const key = `${channel}:${String(params.text)}`;
      calls.perRow.set(key, (calls.perRow.get(key) ?? 0) + 1);
      return { ok: true, body: { channel, ts: `${clock.now}.000000` } };
    },
  };
}

/** Settles every microtask: the product's SQL runs synchronously underneath, so one macrotask turn drains it all. */
const settle = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

export async function simulateBurst(
  db: D1Database,
  options: BurstOptions,
  events: number,
  channels: number,
  variant: (typeof VARIANTS)[number],
): Promise<BurstRun> {
  const parsed = parseSettings({});
  if (!parsed.ok) throw new Error(parsed.errors.join("; "));
  const settings = { ...parsed.settings, paceAhead: variant.paceAhead };
  const clock = new VirtualClock();
  const calls = { ok: 0, limited: 0, perRow: new Map<string, number>(), lastOkAt: 0 };
  const log: Log = () => {};
  const queue: Message[] = [];
  let tokens = 0;
  let deadLettered = 0;
  let inflight = 0;

  // The burst, as the ingress records it: one pending chat.postMessage row per event, its message sent at once.
  const insert = db.prepare(
    `INSERT INTO outbox (idempotency_key, receipt_id, team_id, effect, payload, status, attempts, next_attempt_at, enqueued_at, sweep_at, created_at, updated_at)
     VALUES (?1, ?2, ?3, 'chat.postMessage', ?4, 'pending', 0, 0, 0, ?5, 0, 0) RETURNING id`,
  );
  for (let i = 0; i < events; i++) {
    const payload = JSON.stringify({ channel: `C0BURST${i % channels}`, text: `event ${i}` });
    const row = await insert.bind(`Ev${i}:reply`, `Ev${i}`, TEAM, payload, settings.sweepGraceMs).first<{ id: number }>();
    if (row) queue.push({ id: row.id, visibleAt: 0, retries: 0 });
  }

  const outboxQueue: OutboxQueue = {
    async sendBatch(messages) {
      for (const m of messages) queue.push({ id: m.body.id, visibleAt: clock.now + (m.delaySeconds ?? 0) * 1000, retries: 0 });
    },
  };
  const deps: DeliveryDeps = {
    db,
    queue: outboxQueue,
    effects: EFFECTS,
    context: {
      slack: fakeSlack(clock, options, calls),
      responseUrlHosts: [],
      timeoutMs: settings.effectTimeoutMs,
      fetch: () => Promise.reject(new Error("the burst simulation performs Slack methods only")),
      edge: () => Promise.reject(new Error("the burst simulation performs Slack methods only")),
    },
    settings,
    log,
    clock: () => clock.now,
    random: mulberry32(events * 31 + channels * 7919 + variant.name.length),
    newToken: () => `claim-${++tokens}`,
    sleep: clock.sleep,
  };

  const invoke = async (batch: Message[]) => {
    inflight += 1;
    const actions = await deliverBatch(
      deps,
      batch.map((m) => m.id),
    );
    for (const message of batch) {
      const action = actions.get(message.id);
      if (action?.action === "retry") {
        message.retries += 1;
        if (message.retries > MAX_RETRIES) {
          deadLettered += 1;
          await recordDeadLetters(db, [message.id], clock.now, { maxAttempts: settings.maxAttempts, effects: EFFECTS }, log);
        } else {
          message.visibleAt = clock.now + action.delaySeconds * 1000;
          queue.push(message);
        }
      } else if (action?.action === "resend") {
        queue.push({ id: message.id, visibleAt: clock.now + action.delaySeconds * 1000, retries: 0 });
      }
    }
    inflight -= 1;
  };

  const unfinished = async () =>
    (await db.prepare("SELECT COUNT(*) AS n FROM outbox WHERE status IN ('pending', 'leased')").first<{ n: number }>())?.n ?? 0;

  let nextCron = CRON_MS;
  const cap = options.capSeconds * 1000;
  for (let guard = 0; guard < 5_000_000; guard++) {
    // Deliver every batch that is ready now: full, or its oldest message visible for max_batch_timeout.
    queue.sort((a, b) => a.visibleAt - b.visibleAt);
    let visible = queue.findIndex((m) => m.visibleAt > clock.now);
    if (visible < 0) visible = queue.length;
    while (visible > 0 && (visible >= MAX_BATCH_SIZE || clock.now - (queue[0]?.visibleAt ?? 0) >= MAX_BATCH_TIMEOUT_MS)) {
      const batch = queue.splice(0, Math.min(MAX_BATCH_SIZE, visible));
      visible -= batch.length;
      void invoke(batch);
    }
    if (clock.now >= nextCron) {
      nextCron += CRON_MS;
      await sweep({ db, queue: outboxQueue, settings, log }, clock.now);
    }
    await settle();
    if (inflight === 0 && queue.length === 0 && (await unfinished()) === 0) break;
    // Move the clock to the next thing that can happen (invocations that just finished pushed messages: sort again).
    queue.sort((a, b) => a.visibleAt - b.visibleAt);
    const oldestVisible = queue[0] && queue[0].visibleAt <= clock.now ? queue[0].visibleAt + MAX_BATCH_TIMEOUT_MS : undefined;
    const nextVisible = queue.find((m) => m.visibleAt > clock.now)?.visibleAt;
    const next = Math.min(
      ...[clock.nextTimer(), oldestVisible, nextVisible, nextCron].filter((t): t is number => t !== undefined && t >= clock.now),
    );
    if (next > cap) break;
    clock.now = Math.max(clock.now, next);
    clock.fire();
  }

  const counts = await db
    .prepare("SELECT SUM(status = 'done') AS done, SUM(status = 'dead') AS dead, SUM(status IN ('pending', 'leased')) AS live FROM outbox")
    .first<{ done: number; dead: number; live: number }>();
  const delivered = counts?.done ?? 0;
  const slackCalls = calls.ok + calls.limited;
  const idealSeconds = events / (channels * options.perChannelPerSecond);
  const drainSeconds = delivered === events ? calls.lastOkAt / 1000 : null;
  return {
    variant: variant.name,
    channels,
    events,
    delivered,
    dead: counts?.dead ?? 0,
    unfinished: counts?.live ?? 0,
    slackCalls,
    rateLimited: calls.limited,
    rateLimitedShare: slackCalls === 0 ? 0 : calls.limited / slackCalls,
    duplicates: [...calls.perRow.values()].reduce((sum, n) => sum + n - 1, 0),
    drainSeconds,
    idealSeconds,
    drainOverIdeal: drainSeconds === null ? null : drainSeconds / idealSeconds,
    deadLettered,
  };
}
