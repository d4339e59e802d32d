/**
 * The invariant checker: after the run has quiesced, compares what Slack was
 * sent (the sender's log), what the database holds, and what the fake Slack
 * applied. Pure: it takes the three records and returns the verdict.
 *
 * - Ack implies durable: every event that got a 200 has its receipt and outbox row.
 * - Nothing lost: every acked event's effect was applied at least once, or its
 *   row is dead for a fatal reason (its channel does not exist).
 * - Nothing stuck: no row is pending or leased once the run has quiesced.
 * - Duplicates only in the allowed window: an effect applied more than once
 *   must be explained by a moment when it was performed but its completion
 *   could not be recorded — an answer Slack lost after applying (a timeout),
 *   a crash of the local process between effect and completion, or a lease
 *   lost to another worker (a fence rejection). Anything else is a violation.
 * - Visible duplicates: only chat.postMessage and response_url can show a
 *   repeat; reactions and updates absorb it (Slack's already_reacted; the same text).
 */
import type { Application, Ledger } from "./faulty-slack.ts";
import type { SentEvent } from "./slack-sender.ts";

export interface RowRecord {
  readonly id: number;
  readonly idempotency_key: string;
  readonly receipt_id: string;
  readonly effect: string;
  readonly status: string;
  readonly attempts: number;
  readonly last_error: string | null;
}

export interface Outage {
  readonly killedAt: number;
  readonly restartedAt: number;
}

export interface Verdict {
  readonly events: { sent: number; acked: number; neverAcked: number; fatal: number };
  readonly deliveries: { total: number; answered500: number; noAnswer: number; redeliveries: number; redeliveredAfterFailure: number };
  readonly effects: {
    distinctApplied: number;
    applications: number;
    duplicates: number;
    explainedDuplicates: number;
    visibleDuplicates: number;
  };
  readonly rows: { total: number; done: number; dead: number; stuck: number; deadByReason: Record<string, number> };
  /** Each repeated effect and what explains it, with its applications' times relative to the first crash (ms). */
  readonly duplicateDetails: readonly {
    key: string;
    explainedBy: Explanation | null;
    applied: readonly { atMs: number; answered: boolean }[];
  }[];
  /** The rows of each lost event, for diagnosis. */
  readonly lostDetails: readonly { receiptId: string; effectKey: string; rows: readonly RowRecord[] }[];
  readonly violations: {
    ackedWithoutRow: string[];
    lost: string[];
    stuck: number[];
    unexplainedDuplicates: string[];
    deadForNoFatalReason: string[];
  };
  readonly ok: boolean;
}

const FATAL_REASON = /channel_not_found/;

export function checkInvariants(input: {
  readonly sent: readonly SentEvent[];
  readonly rows: readonly RowRecord[];
  readonly fenceLost: ReadonlySet<number>;
  readonly ledger: Ledger;
  readonly outages: readonly Outage[];
}): Verdict {
  const { sent, rows, ledger, outages } = input;
  const rowsByReceipt = new Map<string, RowRecord[]>();
  for (const row of rows) rowsByReceipt.set(row.receipt_id, [...(rowsByReceipt.get(row.receipt_id) ?? []), row]);

  const ackedWithoutRow: string[] = [];
  const lost: string[] = [];
  const deadForNoFatalReason: string[] = [];
  const lostDetails: Verdict["lostDetails"][number][] = [];
  for (const { event, acked } of sent) {
    const own = rowsByReceipt.get(event.receiptId) ?? [];
    if (acked && own.length === 0) ackedWithoutRow.push(event.receiptId);
    const applied = ledger.applied.get(event.effectKey)?.length ?? 0;
    const deadFatally = own.some((row) => row.status === "dead" && FATAL_REASON.test(row.last_error ?? ""));
    if (acked && applied === 0 && !deadFatally) {
      lost.push(event.receiptId);
      lostDetails.push({ receiptId: event.receiptId, effectKey: event.effectKey, rows: own });
    }
    for (const row of own) {
      if (row.status === "dead" && !FATAL_REASON.test(row.last_error ?? ""))
        deadForNoFatalReason.push(`${row.receipt_id}: ${row.last_error}`);
    }
  }

  const stuck = rows.filter((row) => row.status === "pending" || row.status === "leased").map((row) => row.id);
  const deadByReason: Record<string, number> = {};
  for (const row of rows.filter((r) => r.status === "dead")) {
    const reason = (row.last_error ?? "unknown").replace(/^[\w.]+: /, "");
    deadByReason[reason] = (deadByReason[reason] ?? 0) + 1;
  }

  const rowByEffectKey = new Map<string, RowRecord>();
  for (const { event } of sent) {
    const row = rowsByReceipt.get(event.receiptId)?.[0];
    if (row) rowByEffectKey.set(event.effectKey, row);
  }
  let duplicates = 0;
  let explainedDuplicates = 0;
  let visibleDuplicates = 0;
  const unexplainedDuplicates: string[] = [];
  const duplicateDetails: Verdict["duplicateDetails"][number][] = [];
  const origin = outages[0]?.killedAt ?? 0;
  for (const [key, applications] of ledger.applied) {
    if (applications.length < 2) continue;
    const extra = applications.length - 1;
    duplicates += extra;
    const row = rowByEffectKey.get(key);
    const explainedBy = explain(applications, outages, row !== undefined && input.fenceLost.has(row.id));
    duplicateDetails.push({ key, explainedBy, applied: applications.map((a) => ({ atMs: a.at - origin, answered: a.answered })) });
    if (explainedBy) explainedDuplicates += extra;
    else unexplainedDuplicates.push(`${key} applied ${applications.length}×`);
  }
  for (const count of ledger.messagesPerThread.values()) visibleDuplicates += Math.max(0, count - 1);
  for (const [key, applications] of ledger.applied) {
    if (key.startsWith("respond:")) visibleDuplicates += Math.max(0, applications.length - 1);
  }

  const deliveries = sent.flatMap((s) => s.deliveries);
  const violations = { ackedWithoutRow, lost, stuck, unexplainedDuplicates, deadForNoFatalReason };
  return {
    events: {
      sent: sent.length,
      acked: sent.filter((s) => s.acked).length,
      neverAcked: sent.filter((s) => !s.acked).length,
      fatal: sent.filter((s) => s.event.fatal).length,
    },
    deliveries: {
      total: deliveries.length,
      answered500: deliveries.filter((d) => d.status === 500).length,
      noAnswer: deliveries.filter((d) => d.status === 0).length,
      redeliveries: deliveries.filter((d) => d.retryNum > 0).length,
      redeliveredAfterFailure: sent.filter((s) => s.deliveries.some((d) => d.status !== 200) && s.deliveries.some((d) => d.retryNum > 0))
        .length,
    },
    effects: {
      distinctApplied: ledger.applied.size,
      applications: [...ledger.applied.values()].reduce((sum, a) => sum + a.length, 0),
      duplicates,
      explainedDuplicates,
      visibleDuplicates,
    },
    rows: {
      total: rows.length,
      done: rows.filter((r) => r.status === "done").length,
      dead: rows.filter((r) => r.status === "dead").length,
      stuck: stuck.length,
      deadByReason,
    },
    duplicateDetails,
    lostDetails,
    violations,
    ok: Object.values(violations).every((list) => list.length === 0),
  };
}

export type Explanation = "answer_lost" | "crash" | "fence_lost";

/** How long an effect may take from Slack applying it to its completion being written, beyond which a crash cannot explain a repeat. */
const EFFECT_TO_COMPLETION_MS = 2_000;

/**
 * What put this repeat in the allowed window, if anything: an application
 * before the last whose answer Slack lost; or one applied just before a crash
 * of the local process (within the time an effect's completion takes) and
 * applied again after it; or a row whose fence rejected a completion.
 */
function explain(applications: readonly Application[], outages: readonly Outage[], fenceLost: boolean): Explanation | null {
  if (fenceLost) return "fence_lost";
  if (applications.slice(0, -1).some((a) => !a.answered)) return "answer_lost";
  const crashed = outages.some(
    (outage) =>
      applications.some((a) => a.at <= outage.killedAt && a.at >= outage.killedAt - EFFECT_TO_COMPLETION_MS) &&
      applications.some((a) => a.at > outage.killedAt),
  );
  return crashed ? "crash" : null;
}
