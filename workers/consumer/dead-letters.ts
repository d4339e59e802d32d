import type { EffectRegistry } from "../../shared/effects/registry.ts";
import type { Log } from "../../shared/log.ts";
import { settleDeadLetter } from "../../shared/outbox/dead-letter.ts";

/**
 * What a parked row's last_error says. (A dead-lettered message arrives as a
 * first delivery on the dead-letter queue: how many times the outbox queue
 * tried it is not in the message; the row's attempts count is.)
 */
export const DEAD_LETTER_REASON = "the outbox queue gave up on this row's message after max_retries (dead-letter queue)";

/** Settles the row behind each dead-lettered message (shared/outbox/dead-letter.ts says how). */
export async function recordDeadLetters(
  db: D1Database,
  ids: readonly number[],
  now: number,
  policy: { readonly maxAttempts: number; readonly effects: EffectRegistry },
  log: Log,
): Promise<void> {
  const byEffect = policy.effects.attemptLimits();
  for (const id of ids) {
    const outcome = await settleDeadLetter(db, id, DEAD_LETTER_REASON, now, { maxAttempts: policy.maxAttempts, byEffect });
    if (outcome === "parked")
      log("warn", "dead-lettered row parked: its attempts are spent", { outbox_id: id, reason: DEAD_LETTER_REASON });
    else if (outcome === "handed_back") log("warn", "dead-lettered row has attempts left; handed back to the sweep", { outbox_id: id });
    else log("info", "dead letter for a row that is done, in flight or waiting for its retry; left alone", { outbox_id: id });
  }
}
