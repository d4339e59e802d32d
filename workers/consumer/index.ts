/**
 * The consumer Worker. Thin: it reads settings, builds dependencies and hands
 * each trigger to its module.
 *   queue(ackbox-outbox)     → shared/delivery/deliver.ts  claim → perform → fenced finish
 *   queue(ackbox-outbox-dlq) → dead-letters.ts  park what the queue gave up on
 *   scheduled()              → sweep.ts         re-enqueue the stale, prune the old
 *                            → shared/ops/watch.ts  then sample the backlog, check the alerts
 */
import { app } from "../../app/index.ts";
import { deliverBatch, type MessageAction } from "../../shared/delivery/deliver.ts";
import { countingDb } from "../../shared/delivery/query-budget.ts";
import { effectContextOf, slackForOf } from "../../shared/effects/context.ts";
import type { Env } from "../../shared/env.ts";
import { tokenKeys } from "../../shared/installations/crypto.ts";
import { installationRemovedEffect, withLifecycleEffect } from "../../shared/installations/lifecycle.ts";
import { refreshExpiring } from "../../shared/installations/rotation.ts";
import { consoleLog, describeError } from "../../shared/log.ts";
import { watchBacklog } from "../../shared/ops/watch.ts";
import { newClaimToken } from "../../shared/outbox/claim.ts";
import type { OutboxMessage } from "../../shared/outbox/model.ts";
import { settingsOf } from "../../shared/settings.ts";
import { recordDeadLetters } from "./dead-letters.ts";
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
    if (!settings.slackBotToken && !settings.oauth && batch.queue !== settings.deadLetterQueue) {
      consoleLog("error", "neither SLACK_BOT_TOKEN nor SLACK_CLIENT_ID is set; messages acked, rows left pending for the sweep", {
        queue: batch.queue,
      });
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
        { maxAttempts: settings.maxAttempts, effects: app.effects },
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
        queue: env.OUTBOX_QUEUE,
        effects: withLifecycleEffect(app.effects, installationRemovedEffect(db, Date.now)),
        context: effectContextOf(settings),
        settings,
        log: consoleLog,
        clock: Date.now,
        random: Math.random,
        newToken: newClaimToken,
        sleep: (ms) => scheduler.wait(ms),
        // A distributed app: each row with its team's installation's token.
        // Single-workspace mode: SLACK_BOT_TOKEN, and a refused one makes rows wait rather than die (no D1 read).
        slackFor: slackForOf(env.DB, settings),
      },
      named.map(({ id }) => id),
    );
    await answerMessages(named, actions, env.OUTBOX_QUEUE);
  },

  async scheduled(controller, env, _ctx) {
    const config = settingsOf(env);
    if (!config.ok) {
      consoleLog("error", "sweeper misconfigured; tick skipped", { errors: config.errors });
      return;
    }
    const deps = { db: env.DB, queue: env.OUTBOX_QUEUE, settings: config.settings, log: consoleLog };
    await sweep(deps, controller.scheduledTime);
    const oauth = config.settings.oauth;
    if (oauth) {
      // Rotating tokens, refreshed ahead of expiry under the installation's lease (shared/installations/rotation.ts).
      await refreshExpiring(
        {
          db: env.DB,
          keys: await tokenKeys(oauth.tokenKey, oauth.previousTokenKey),
          slackApiUrl: config.settings.slackApiUrl,
          clientId: oauth.clientId,
          clientSecret: oauth.clientSecret,
          newToken: newClaimToken,
        },
        controller.scheduledTime,
      ).then(
        ({ refreshed, failed }) => {
          if (refreshed > 0 || failed.length > 0)
            consoleLog(failed.length > 0 ? "warn" : "info", "tokens refreshed by the cron", { refreshed, failed });
        },
        (error) => consoleLog("error", "token refresh failed; effects refresh on demand", { error: describeError(error) }),
      );
    }
    // After the sweep, and never in its way: a failed sample or alert check is logged, the sweep stands.
    await watchBacklog(deps, controller.scheduledTime).catch((error) => {
      consoleLog("error", "backlog watch failed; the sweep itself completed", { error: describeError(error) });
    });
  },
} satisfies ExportedHandler<Env, OutboxMessage>;

/**
 * One answer per message. A "resend" (Slack's pacing: a 429, or a claim a
 * cooldown refused) is acked and sent again with its delay, in one sendBatch,
 * so it does not count toward max_retries; if that send fails the message is
 * retried instead, and the row, whose schedule is durable, is the sweep's.
 */
async function answerMessages(
  named: readonly { readonly message: Message<OutboxMessage>; readonly id: number }[],
  actions: ReadonlyMap<number, MessageAction>,
  queue: Queue<OutboxMessage>,
): Promise<void> {
  const answered = new Set<number>();
  const resend: { readonly message: Message<OutboxMessage>; readonly id: number; readonly delaySeconds: number }[] = [];
  for (const { message, id } of named) {
    const action = actions.get(id);
    if (action?.action === "retry" && !answered.has(id)) message.retry({ delaySeconds: action.delaySeconds });
    else if (action?.action === "resend" && !answered.has(id)) resend.push({ message, id, delaySeconds: action.delaySeconds });
    else message.ack();
    answered.add(id);
  }
  if (resend.length === 0) return;
  try {
    await queue.sendBatch(resend.map(({ id, delaySeconds }) => ({ body: { id }, delaySeconds })));
    for (const { message } of resend) message.ack();
  } catch (error) {
    consoleLog("warn", "could not re-send rate-limited messages; retrying them instead", {
      ids: resend.map(({ id }) => id),
      error: describeError(error),
    });
    for (const { message, delaySeconds } of resend) message.retry({ delaySeconds });
  }
}

function outboxIdOf(body: unknown): number | undefined {
  if (typeof body !== "object" || body === null) return undefined;
  const id = (body as { id?: unknown }).id;
  return typeof id === "number" && Number.isSafeInteger(id) && id > 0 ? id : undefined;
}
