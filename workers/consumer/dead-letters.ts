import type { Log } from "../../shared/log.ts";
import { parkDeadLetter } from "../../shared/outbox/dead-letter.ts";

/** Parks the row behind each dead-lettered message (shared/outbox/dead-letter.ts says which rows). */
export async function recordDeadLetters(
  db: D1Database,
  letters: readonly { readonly id: number; readonly deliveries: number }[],
  now: number,
  log: Log,
): Promise<void> {
  for (const letter of letters) {
    const reason = `queue retries exhausted after ${letter.deliveries} deliveries`;
    const { parked } = await parkDeadLetter(db, letter.id, reason, now);
    log(parked ? "warn" : "info", parked ? "dead-lettered row parked" : "dead letter for a row that is done or in flight; left alone", {
      outbox_id: letter.id,
      reason,
    });
  }
}
