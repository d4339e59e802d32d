/**
 * The consumer Worker over an app: a project's entry is `export default consumer(app)`
 * (workers/consumer/index.ts). Thin: it reads settings, builds dependencies and hands
 * each trigger to its module.
 *   queue(ackbox-outbox)     → shared/delivery/deliver.ts  claim → perform → fenced finish
 *   queue(ackbox-outbox-dlq) → dead-letters.ts  park what the queue gave up on
 *   scheduled()              → sweep.ts         re-enqueue the stale, prune the old
 *                            → shared/ops/watch.ts  then sample the backlog, check the alerts
 */
import type { SlackApp } from "../../shared/app/app.ts";
import { appSettingsOf } from "../../shared/app/settings.ts";
import { answerEffect } from "../../shared/assistant/answer.ts";
import { DELIVERY_CONCURRENCY, deliverBatch, LongBounds, type MessageAction } from "../../shared/delivery/deliver.ts";
import { LanePool } from "../../shared/delivery/lanes.ts";
import { countingDb, type InvocationCount, STOP_CLAIMING_AT } from "../../shared/delivery/query-budget.ts";
import { effectContextOf, slackForOf } from "../../shared/effects/context.ts";
import { networkEdge } from "../../shared/effects/outbound.ts";
import { withEffect } from "../../shared/effects/registry.ts";
import type { Env } from "../../shared/env.ts";
import { tokenKeys } from "../../shared/installations/crypto.ts";
import { installationRemovedEffect, withLifecycleEffect } from "../../shared/installations/lifecycle.ts";
import { refreshExpiring } from "../../shared/installations/rotation.ts";
import { consoleLog, describeError, type Log } from "../../shared/log.ts";
import type { BacklogFigures } from "../../shared/ops/backlog.ts";
import { reportUnknownShard } from "../../shared/ops/shard-count.ts";
import { measureShard, watchBacklog } from "../../shared/ops/watch.ts";
import { newClaimToken } from "../../shared/outbox/claim.ts";
import type { OutboxQueue } from "../../shared/outbox/enqueue.ts";
import type { OutboxMessage } from "../../shared/outbox/model.ts";
import { type Settings, settingsOf } from "../../shared/settings.ts";
import { shardsOf } from "../../shared/shards/bindings.ts";
import { groupByShard } from "../../shared/shards/messages.ts";
import { placementsOn } from "../../shared/shards/placement.ts";
import { shardQueue } from "../../shared/shards/queue.ts";
import { upgradeStep } from "../../shared/shards/upgrade.ts";
import { recordDeadLetters } from "./dead-letters.ts";
import { sweep } from "./sweep.ts";
import { shardShareOf } from "./sweep-share.ts";

/** What a consumer is built with besides the app. */
export interface ConsumerOptions {
  /** The fetch every outbound call goes out through (EffectContext.edge): the real network unless a test kit's fakes. */
  readonly edge?: typeof fetch;
}

/** What of a consumer invocation's 15 minutes (wall time: Cloudflare's Queues limits) its long attempts may use. */
const LONG_INVOCATION_MS = 14 * 60_000;

/** An assistant's answer (shared/assistant/answer.ts): the engine's effect, one per isolate. */
const ANSWER = answerEffect();

export function consumer(app: SlackApp, { edge = networkEdge }: ConsumerOptions = {}) {
  return {
    async queue(batch, env, _ctx) {
      const config = settingsOf(env);
      // A configuration error must neither spend attempts nor push messages
      // toward the dead-letter queue: the messages are acked and the rows, which
      // are durable, stay pending; the sweep re-sends them once a fixed
      // configuration is deployed.
      if (!config.ok) {
        consoleLog("error", "consumer misconfigured; messages acked, rows left pending for the sweep", { errors: config.errors });
        batch.ackAll();
        return;
      }
      const settings = config.settings;
      const appConfig = appSettingsOf(app.declaredSettings, env);
      const appSettings = appConfig.ok ? appConfig.settings : undefined;
      if (!appConfig.ok && batch.queue !== settings.deadLetterQueue) {
        // The app's own settings (shared/app/settings.ts): its effects read them (a dead letter's park does not).
        // Treated as the engine's are.
        consoleLog("error", "consumer misconfigured (the app's settings); messages acked, rows left pending for the sweep", {
          errors: appConfig.errors,
        });
        batch.ackAll();
        return;
      }
      if (!settings.slackBotToken && !settings.oauth && batch.queue !== settings.deadLetterQueue) {
        consoleLog("error", "neither SLACK_BOT_TOKEN nor SLACK_CLIENT_ID is set; messages acked, rows left pending for the sweep", {
          queue: batch.queue,
        });
        batch.ackAll();
        return;
      }
      const shards = shardDbsOf(env, settings.shardCount, "consumer misconfigured; messages acked, rows left pending for the sweep");
      if (!shards) {
        batch.ackAll();
        return;
      }
      const { groups, malformed, unknownShard } = groupByShard(batch.messages, shards.length);
      for (const message of malformed) {
        consoleLog("warn", "malformed queue message acked", { queue: batch.queue, message_id: message.id });
        message.ack();
      }
      for (const { message, id, shard } of unknownShard) {
        // Not this consumer's shard: nothing is claimed anywhere. The ingress wrote the row there, so the Workers
        // disagree on SHARD_COUNT (or it was lowered under live rows): that shard is neither delivered nor swept.
        consoleLog("error", "queue message names a shard that is not configured; acked, nothing claimed", {
          queue: batch.queue,
          message_id: message.id,
          outbox_id: id,
          shard,
          shard_count: shards.length,
        });
        message.ack();
      }
      if (unknownShard.length > 0) {
        // Loud, not one log line: a mark on shard 0 that /admin/backlog reports, and the alert (shared/ops/shard-count.ts).
        await reportUnknownShard(
          { db: shards[0] as D1Database, queue: env.OUTBOX_QUEUE, settings, log: consoleLog },
          { shard: Math.max(...unknownShard.map(({ shard }) => shard)), shardCount: shards.length },
          Date.now(),
        ).catch((error) => consoleLog("error", "could not record the SHARD_COUNT mismatch", { error: describeError(error) }));
      }

      // Each shard's messages against its own D1 (row ids are unique only within a shard), the groups in parallel
      // but sharing what is the invocation's: one query count (D1's 1 000 queries) and one pool of six lanes (the
      // connections a Worker may hold open; the budget's margin past its stop assumes that many rows in flight).
      const invocation: InvocationCount = { used: 0 };
      const lanes = new LanePool(DELIVERY_CONCURRENCY);
      // A consumer invocation lives 15 minutes (Cloudflare's Queues limits): its long attempts end a minute before.
      const long = new LongBounds(Date.now() + LONG_INVOCATION_MS);
      // Every shard counted, not only the group's own: a row's installation is read on shard 0 (where every
      // installation lives) — D1 counts those statements against this invocation as well.
      const counted = shards.map((shardDb) => countingDb(shardDb, STOP_CLAIMING_AT, invocation));
      const countedDbs = counted.map(({ db }) => db);
      const deliverGroup = async (index: number, named: NonNullable<ReturnType<typeof groups.get>>) => {
        const shardDb = shards[index] as D1Database;
        const queue = shardQueue(env.OUTBOX_QUEUE, index);
        if (batch.queue === settings.deadLetterQueue) {
          await recordDeadLetters(
            shardDb,
            named.map(({ id }) => id),
            Date.now(),
            { maxAttempts: settings.maxAttempts, effects: app.effects },
            consoleLog,
          );
          for (const { message } of named) message.ack();
          return;
        }
        const { db, budget } = counted[index] as (typeof counted)[number];
        const home = countedDbs[0] as D1Database;
        const early = resendEarly(named, queue);
        const actions = await deliverBatch(
          {
            db,
            budget,
            lanes,
            long,
            // Follow-ups are inserted in this shard's D1 and enqueued naming it.
            queue,
            // The engine's own effects beside the app's: an uninstall's, and an assistant's answer (shared/assistant/).
            effects: withLifecycleEffect(withEffect(app.effects, ANSWER), installationRemovedEffect(db, Date.now, home)),
            context: effectContextOf(settings, settings.effectTimeoutMs, appSettings, edge),
            settings,
            log: consoleLog,
            clock: Date.now,
            random: Math.random,
            newToken: newClaimToken,
            sleep: (ms) => scheduler.wait(ms),
            // A distributed app: each row with its team's installation's token, read on shard 0.
            // Through the counting dbs: their reads are this invocation's queries too.
            // Single-workspace mode: SLACK_BOT_TOKEN, and a refused one makes rows wait rather than die (no D1 read).
            slackFor: slackForOf(home, settings, db, { edge, budget, log: consoleLog }),
          },
          named.map(({ id }) => id),
          early.settled,
        );
        await early.done();
        answerMessages(named, actions, early.answered);
      };
      await Promise.all([...groups].map(([index, named]) => deliverGroup(index, named)));
    },

    async scheduled(controller, env, _ctx) {
      const config = settingsOf(env);
      if (!config.ok) {
        consoleLog("error", "sweeper misconfigured; tick skipped", { errors: config.errors });
        return;
      }
      const shards = shardDbsOf(env, config.settings.shardCount, "sweeper misconfigured; tick skipped");
      if (!shards) return;
      // One count of the queries this tick issues, over every shard (D1's 1 000 are the invocation's): the token
      // rotation on shard 0 first, what an older ackbox left (bounded), then every shard in turn with its share of what is left (shardShareOf), then
      // one sample and one alert judgement for the whole deployment (watchAll). workers/consumer/sweep-share.ts.
      const count: InvocationCount = { used: 0 };
      const counted = shards.map((db) => countingDb(db, Number.POSITIVE_INFINITY, count).db);
      const now = controller.scheduledTime;
      await rotateTokens(counted[0] as D1Database, config.settings, now, edge);
      await upgradeOlderData(env, counted, config.settings, now);
      const measured: (BacklogFigures | undefined)[] = [];
      for (const [index, db] of counted.entries()) {
        const share = shardShareOf(config.settings, count.used, counted.length - index);
        if (!share) {
          consoleLog("error", "tick's query budget spent; this shard is swept and measured on the next tick", {
            shard: index,
            used: count.used,
          });
          measured.push(undefined);
          continue;
        }
        measured.push(await tickShard(env, db, index, { ...config.settings, ...share }, share.scrubLimit, now));
      }
      await watchAll(env, counted, measured, config.settings, now);
    },
  } satisfies ExportedHandler<Env, OutboxMessage>;
}

/** One shard's part of the tick: sweep, prune and scrub, and its backlog measured for the watch (undefined if that failed). */
async function tickShard(
  env: Env,
  db: D1Database,
  index: number,
  settings: Settings,
  scrubLimit: number,
  now: number,
): Promise<BacklogFigures | undefined> {
  const log: Log = (level, msg, fields) => consoleLog(level, msg, { shard: index, ...fields });
  const queue = shardQueue(env.OUTBOX_QUEUE, index);
  const deps = { db, queue, settings, log, clock: Date.now };
  await sweep(deps, now, scrubLimit).catch((error) => {
    // One shard's failure must not cost the others their tick.
    log("error", "sweep failed on this shard; the other shards' ticks stand", { error: describeError(error) });
  });
  // After the sweep, and never in its way: a failed measure is logged, the sweep stands.
  return measureShard(db, now, settings).catch((error) => {
    log("error", "backlog measure failed on this shard; the sweep itself completed", { error: describeError(error) });
    return undefined;
  });
}

/**
 * Rotating tokens, refreshed ahead of expiry under each installation's lease (shared/installations/rotation.ts),
 * on shard 0, where installations live.
 */
async function rotateTokens(home: D1Database, settings: Settings, now: number, edge: typeof fetch): Promise<void> {
  const oauth = settings.oauth;
  if (!oauth) return;
  await refreshExpiring(
    {
      db: home,
      keys: await tokenKeys(oauth.tokenKey, oauth.previousTokenKey),
      slackApiUrl: settings.slackApiUrl,
      edge,
      clientId: oauth.clientId,
      clientSecret: oauth.clientSecret,
      newToken: newClaimToken,
      // The tick's scheduledTime decides what is due; each refresh lease is timed at its own claim.
      clock: Date.now,
    },
    now,
  ).then(
    ({ refreshed, failed }) => {
      if (refreshed > 0 || failed.length > 0)
        consoleLog(failed.length > 0 ? "warn" : "info", "tokens refreshed by the cron", { shard: 0, refreshed, failed });
    },
    (error) => consoleLog("error", "token refresh failed; effects refresh on demand", { shard: 0, error: describeError(error) }),
  );
}

/**
 * What an older ackbox left (shared/shards/upgrade.ts): routing keys without a placement, installation copies
 * on shards ≥ 1. Bounded (upgradeQueries, counted in the tick's budget: workers/consumer/sweep-share.ts); once
 * both are empty, one read of empty tables a shard.
 */
async function upgradeOlderData(env: Env, shards: readonly D1Database[], settings: Settings, now: number): Promise<void> {
  const placements = placementsOn(shards[0] as D1Database, shards.length);
  const deps = { shards, placements, queueOf: (shard: number) => shardQueue(env.OUTBOX_QUEUE, shard), sweepGraceMs: settings.sweepGraceMs };
  await upgradeStep({ ...deps, log: consoleLog }, now).catch((error) =>
    consoleLog("error", "upgrade step failed; what is left is taken on the next tick", { error: describeError(error) }),
  );
}

/**
 * After the walk: the deployment's one sample and one alert judgement, on the
 * shards' figures merged (shared/ops/watch.ts), kept on shard 0. If a shard
 * could not be measured, the tick records no sample and judges no alert: a
 * partial sum could "recover" an alert whose rows sit on the unmeasured shard;
 * the alert state stands until a tick measures every shard (each failure is
 * logged with its shard).
 */
async function watchAll(
  env: Env,
  shards: readonly D1Database[],
  measured: readonly (BacklogFigures | undefined)[],
  settings: Settings,
  now: number,
): Promise<void> {
  const missing = measured.flatMap((figures, shard) => (figures ? [] : [shard]));
  if (missing.length > 0) {
    consoleLog("error", "backlog not measured on every shard; no sample and no alert check this tick", { shards: missing });
    return;
  }
  const queue = shardQueue(env.OUTBOX_QUEUE, 0);
  // The queue's backlog is one figure for all shards (one queue).
  const outbox = env.OUTBOX_QUEUE as Partial<Queue<OutboxMessage>>;
  const metrics = typeof outbox.metrics === "function" ? { metrics: () => env.OUTBOX_QUEUE.metrics() } : {};
  const deps = { db: shards[0] as D1Database, queue: { sendBatch: queue.sendBatch.bind(queue), ...metrics }, settings, log: consoleLog };
  await watchBacklog(deps, now, measured as readonly BacklogFigures[]).catch((error) => {
    consoleLog("error", "backlog watch failed; the sweep itself completed", { error: describeError(error) });
  });
}

/** The shards' D1s in index order, or undefined after a log line naming the missing bindings. */
function shardDbsOf(env: Env, count: number, what: string): readonly D1Database[] | undefined {
  try {
    return shardsOf(env as unknown as Readonly<Record<string, unknown>>, count).map((shard) => shard.db);
  } catch (error) {
    consoleLog("error", what, { error: describeError(error) });
    return undefined;
  }
}

/**
 * One answer per message, once the batch is done: a retry (a failure: it counts toward max_retries) or an ack. A
 * "resend" (Slack's pacing: a 429, or a claim a cooldown refused) was answered already, as its row settled
 * (resendEarly). A second message naming one row is acked.
 */
function answerMessages(
  named: readonly { readonly message: Message<OutboxMessage>; readonly id: number }[],
  actions: ReadonlyMap<number, MessageAction>,
  resent: ReadonlySet<number>,
): void {
  const answered = new Set<number>();
  for (const { message, id } of named) {
    if (resent.has(id)) continue;
    const action = actions.get(id);
    if (action?.action === "retry" && !answered.has(id)) message.retry({ delaySeconds: action.delaySeconds });
    else message.ack();
    answered.add(id);
  }
}

/**
 * A resend (Slack's pacing: a 429, or a claim a cooldown refused) is acked and sent again with its delay, so it does
 * not count toward max_retries — as soon as its row is settled, not when the batch ends: a long effect in the same
 * batch (an assistant's answer, minutes) would otherwise delay it by that long. If the send fails the message is
 * retried with the delay instead, and the row, whose schedule is durable, is the sweep's. `done` waits for the
 * sends in flight.
 */
function resendEarly(
  named: readonly { readonly message: Message<OutboxMessage>; readonly id: number }[],
  queue: OutboxQueue,
): { settled: (id: number, action: MessageAction) => void; done: () => Promise<unknown>; answered: Set<number> } {
  const answered = new Set<number>();
  const sends: Promise<void>[] = [];
  return {
    answered,
    done: () => Promise.all(sends),
    settled(id, action) {
      if (action.action !== "resend" || answered.has(id)) return;
      answered.add(id);
      const messages = named.filter((n) => n.id === id).map((n) => n.message);
      sends.push(
        queue.sendBatch([{ body: { id }, delaySeconds: action.delaySeconds }]).then(
          () => {
            for (const message of messages) message.ack();
          },
          (error: unknown) => {
            consoleLog("warn", "could not re-send a rate-limited message; retrying it instead", { id, error: describeError(error) });
            for (const message of messages) message.retry({ delaySeconds: action.delaySeconds });
          },
        ),
      );
    },
  };
}
