/**
 * What the ingress does after the answer, in waitUntil, given what the
 * durable write did (write.ts). The one place where work outlives the
 * request:
 *
 * - accepted: delivery. The first attempt performs the rows the write
 *   claimed and enqueues the rest; without it every row is enqueued for the
 *   consumer. The sweep is the guarantee either way.
 * - duplicate: nothing, beyond giving the first attempt's slots back.
 * - not recorded, the write overrunning its budget or failing: the batch may
 *   yet commit. An event's late rows are delivered as if accepted (Slack
 *   retries it and finds a duplicate); a command's or an interaction's are
 *   cancelled (Slack never retries them, and the user may run it again), so
 *   one run never becomes two — those the write claimed for this ingress
 *   included (its token).
 */
import type { PlannedClaim } from "../../shared/delivery/first-attempt.ts";
import { describeError, type Fields, type Log } from "../../shared/log.ts";
import { cancelUnattemptedRows } from "../../shared/outbox/cancel.ts";
import { enqueueRecorded, enqueueRows } from "../../shared/outbox/enqueue.ts";
import type { ClaimedRow, RecordedRow } from "../../shared/outbox/model.ts";
import type { RecordVerdict } from "../../shared/outbox/record.ts";
import type { RecordableInput } from "../../shared/slack/inputs.ts";
import type { Written, WrittenOn } from "./write.ts";

/** The work after the answer, for waitUntil; undefined if there is none. */
export function afterAnswer(written: Written, input: RecordableInput, log: Log, now: number): Promise<unknown> | undefined {
  switch (written.verdict) {
    case "accepted":
      return deliverAfter(written.on, written.claimed, written.rows, now, log, written.plan?.release);
    case "duplicate":
      written.plan?.release();
      return undefined;
    case "not_recorded":
      return written.late && written.on ? lateCommit(written.late, written.on, written.plan, input, log, now) : undefined;
  }
}

/**
 * Delivery of recorded rows, once they are durable. Claimed rows start in
 * the same turn as the answer (a microtask, not a macrotask): the Slack call
 * is issued beside the Response, before the isolate takes up the next
 * request's work. With nothing claimed, the queue sends wait a macrotask, so
 * they never compete with the ack. A timer is sent on its own, delayed to its
 * time, or not at all beyond the queue's delay (the sweep sends it then).
 */
function deliverAfter(
  on: WrittenOn,
  claimed: readonly ClaimedRow[],
  rows: readonly RecordedRow[],
  now: number,
  log: Log,
  release: (() => void) | undefined,
): Promise<unknown> {
  const ids = rows.filter((r) => r.delaySeconds === 0).map((r) => r.id);
  const timers = rows.filter((r) => r.delaySeconds !== 0);
  const later = timers.length > 0 ? enqueueRecorded(on.queue, on.db, timers, now, log) : undefined;
  const firstAttempt = on.firstAttempt;
  if (!firstAttempt) return Promise.all([enqueueRows(on.queue, on.db, ids, now, log), later]);
  const turn = claimed.length > 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, 0));
  return Promise.all([turn.then(() => firstAttempt.deliver(claimed, ids, now, release)).finally(() => release?.()), later]);
}

function lateCommit(
  late: Promise<RecordVerdict>,
  on: WrittenOn,
  plan: PlannedClaim | undefined,
  input: RecordableInput,
  log: Log,
  now: number,
): Promise<unknown> {
  const about: Fields = { surface: input.surface, id: input.id };
  const release = plan?.release;
  return late.then(
    async (verdict) => {
      if (!verdict.firstDelivery) return release?.();
      if (input.surface === "event") {
        const how = on.firstAttempt ? "delivering (the first attempt)" : "enqueued";
        log("warn", `durable write committed after its 500; ${how}`, { ...about, outbox_ids: verdict.outboxIds });
        return deliverAfter(on, verdict.claimed, verdict.rows, now, log, release);
      }
      release?.();
      const cancelled = await cancelUnattemptedRows(on.db, verdict.outboxIds, now, plan?.claim.token).catch((error) => {
        // Still pending: the sweep performs them after SWEEP_GRACE_SECONDS. Say so, with the ids an operator needs.
        log("error", "durable write committed after its 500; could not cancel: the sweep will perform these rows", {
          ...about,
          outbox_ids: verdict.outboxIds,
          error: describeError(error),
        });
        return undefined;
      });
      if (cancelled === undefined) return;
      log("warn", "durable write committed after its 500; cancelled (Slack does not retry this surface)", {
        ...about,
        outbox_ids: verdict.outboxIds,
        cancelled,
      });
    },
    () => release?.(),
  );
}
