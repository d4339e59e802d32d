import type { Log } from "../../shared/log.ts";
import { parkDeadLetter } from "../../shared/outbox/dead-letter.ts";

/**
 * What a parked row's last_error says. (A dead-lettered message arrives as a
 * first delivery on the dead-letter queue: how many times the outbox queue
 * tried it is not in the message; the row's attempts count is.)
 */
export const DEAD_LETTER_REASON = "the outbox queue gave up on this row's message after max_retries (dead-letter queue)";

/** Parks the row behind each dead-lettered message (shared/outbox/dead-letter.ts says which rows). */
export async function recordDeadLetters(db: D1Database, ids: readonly number[], now: number, log: Log): Promise<void> {
  for (const id of ids) {
    const { parked } = await parkDeadLetter(db, id, DEAD_LETTER_REASON, now);
    log(parked ? "warn" : "info", parked ? "dead-lettered row parked" : "dead letter for a row that is done or in flight; left alone", {
      outbox_id: id,
      reason: DEAD_LETTER_REASON,
    });
  }
}
