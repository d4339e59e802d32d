/**
 * The consumer Worker. Thin: it reads settings, builds dependencies and hands
 * each trigger to its module.
 *   queue(ackbox-outbox)     → deliver.ts       claim → perform → fenced finish
 *   queue(ackbox-outbox-dlq) → dead-letters.ts  park what the queue gave up on
 *   scheduled()              → sweep.ts         re-enqueue the stale, prune the old
 *                            → shared/ops/watch.ts  then sample the backlog, check the alerts
 */
import { EFFECTS } from "../../shared/effects/registry.ts";
import type { Env } from "../../shared/env.ts";
import { consoleLog, describeError } from "../../shared/log.ts";
import { watchBacklog } from "../../shared/ops/watch.ts";
import { newClaimToken } from "../../shared/outbox/claim.ts";
import type { OutboxMessage } from "../../shared/outbox/model.ts";
import { settingsOf } from "../../shared/settings.ts";
import { slackWebApi } from "../../shared/slack/web-api.ts";
import { recordDeadLetters } from "./dead-letters.ts";
import { deliverBatch } from "./deliver.ts";
import { countingDb } from "./query-budget.ts";
import { sweep } from "./sweep.ts";

export default {
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
    if (!settings.slackBotToken && batch.queue !== settings.deadLetterQueue) {
      consoleLog("error", "SLACK_BOT_TOKEN is not set; messages acked, rows left pending for the sweep", { queue: batch.queue });
      batch.ackAll();
      return;
    }
    const named = batch.messages.flatMap((message) => {
      const id = outboxIdOf(message.body);
      if (id === undefined) {
        consoleLog("warn", "malformed queue message acked", { queue: batch.queue, message_id: message.id });
        message.ack();
        return [];
      }
      return [{ message, id }];
    });

    if (batch.queue === settings.deadLetterQueue) {
      await recordDeadLetters(
        env.DB,
        named.map(({ id }) => id),
        Date.now(),
        { maxAttempts: settings.maxAttempts, effects: EFFECTS },
        consoleLog,
      );
      for (const { message } of named) message.ack();
      return;
    }

    const { db, budget } = countingDb(env.DB);
    const actions = await deliverBatch(
      {
        db,
        budget,
        effects: EFFECTS,
        context: {
          slack: slackWebApi(settings.slackBotToken, settings.slackApiUrl),
          responseUrlHosts: settings.responseUrlHosts,
          timeoutMs: settings.effectTimeoutMs,
        },
        settings,
        log: consoleLog,
        clock: Date.now,
        random: Math.random,
        newToken: newClaimToken,
      },
      named.map(({ id }) => id),
    );
    const answered = new Set<number>();
    for (const { message, id } of named) {
      const action = actions.get(id);
      if (action?.action === "retry" && !answered.has(id)) message.retry({ delaySeconds: action.delaySeconds });
      else message.ack();
      answered.add(id);
    }
  },

  async scheduled(controller, env, _ctx) {
    const config = settingsOf(env);
    if (!config.ok) {
      consoleLog("error", "sweeper misconfigured; tick skipped", { errors: config.errors });
      return;
    }
    const deps = { db: env.DB, queue: env.OUTBOX_QUEUE, settings: config.settings, log: consoleLog };
    await sweep(deps, controller.scheduledTime);
    // After the sweep, and never in its way: a failed sample or alert check is logged, the sweep stands.
    await watchBacklog(deps, controller.scheduledTime).catch((error) => {
      consoleLog("error", "backlog watch failed; the sweep itself completed", { error: describeError(error) });
    });
  },
} satisfies ExportedHandler<Env, OutboxMessage>;

function outboxIdOf(body: unknown): number | undefined {
  if (typeof body !== "object" || body === null) return undefined;
  const id = (body as { id?: unknown }).id;
  return typeof id === "number" && Number.isSafeInteger(id) && id > 0 ? id : undefined;
}
