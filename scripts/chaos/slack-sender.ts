/**
 * Slack's side of the conversation, compressed in time: every event signed,
 * delivered, and redelivered the way Slack does it.
 *
 * - A delivery that does not get a 2xx (a 500, a refused connection while the
 *   local process is down, a timeout) is retried up to 3 times, on Slack's
 *   schedule (nearly at once, about a minute, about five minutes) scaled down
 *   by `retrySchedule`, with X-Slack-Retry-Num / X-Slack-Retry-Reason.
 * - A share of events is redelivered anyway, as Slack does when our 200 was
 *   late: some concurrently with the first delivery, some a little later.
 *
 * Which events are redelivered, when, and which deliveries carry an injected
 * write fault is the event's plan (scripts/chaos/plan.ts), fixed by the seed.
 */
import { asSlackRetry, postSigned, type SlackRequest } from "../../cli/local/slack-payloads.ts";
import { type EventPlan, MAX_RETRIES, WRITE_FAULT_HEADER, type WriteFault } from "./plan.ts";

export interface ChaosEvent {
  /** The receipt id the ingress keys it by (event_id or operation id). */
  readonly receiptId: string;
  readonly kind: "mention" | "message" | "command" | "click";
  /** The shard its team lives on (placed at its first sight, never moved): where its receipt and rows must be. */
  readonly shard: number;
  /** What happened (shared/slack/facts.ts), for a message or a mention: a copy of it (a backfill's) has its rows. */
  readonly fact?: string;
  /** An OAuth run: its workspace, whose token its effect must carry. */
  readonly team?: string;
  readonly request: SlackRequest;
  /** The key of the effect it must cause at Slack (scripts/chaos/faulty-slack.ts effectKey). */
  readonly effectKey: string;
  /** Aimed at a channel that does not exist: its effect must end parked as dead. */
  readonly fatal: boolean;
  /** Its redeliveries and injected write faults, from the seed. */
  readonly plan: EventPlan;
}

export interface Delivery {
  readonly retryNum: number;
  /** HTTP status, or 0 for no answer (connection refused, timeout). */
  readonly status: number;
  readonly at: number;
  /** The write fault injected into this delivery's durable write. */
  readonly writeFault: WriteFault;
}

export interface SentEvent {
  readonly event: ChaosEvent;
  readonly deliveries: readonly Delivery[];
  /** At least one delivery answered 200. */
  readonly acked: boolean;
}

export interface SenderPlan {
  readonly ingressUrl: string;
  readonly secret: string;
  /** Delays of Slack's three retries after a failed delivery (ms). */
  readonly retrySchedule: readonly number[];
  /**
   * Awaited before the last retry, after its delay: Slack's last comes about 5 minutes on, after any restart a
   * compressed schedule could not outlast on a slow machine, so the run's outage ends before it.
   */
  readonly beforeLastRetry?: () => Promise<void>;
  readonly concurrency: number;
  /** Called once per event, after its first delivery. */
  readonly onProgress?: (sent: number) => void;
}

export async function sendAll(events: readonly ChaosEvent[], plan: SenderPlan): Promise<SentEvent[]> {
  const results: SentEvent[] = new Array(events.length);
  let next = 0;
  let started = 0;
  const worker = async () => {
    for (;;) {
      const index = next++;
      const event = events[index];
      if (event === undefined) return;
      results[index] = await deliverLikeSlack(event, plan, () => plan.onProgress?.(++started));
    }
  };
  await Promise.all(Array.from({ length: plan.concurrency }, worker));
  return results;
}

async function deliverLikeSlack(event: ChaosEvent, plan: SenderPlan, firstDone: () => void): Promise<SentEvent> {
  const deliveries: Delivery[] = [];
  let retries = 0;
  const post = async (retryNum: number, reason: string): Promise<number> => {
    const slack = retryNum === 0 ? event.request : asSlackRetry(event.request, retryNum, reason);
    const writeFault = event.plan.writeFaults[retryNum] ?? "none";
    const request = writeFault === "none" ? slack : { ...slack, headers: { ...slack.headers, [WRITE_FAULT_HEADER]: writeFault } };
    let status = 0;
    let applied = writeFault;
    try {
      const posted = await postSigned(plan.ingressUrl, plan.secret, request, { timeoutMs: 5_000 });
      status = posted.status;
      // The request answered without a D1 batch to fail: the fault was never applied (test/chaos/ingress-with-faults.ts
      // says so).
      if (posted.headers.get(WRITE_FAULT_HEADER) === "unspent") applied = "none";
    } catch {
      status = 0;
    }
    deliveries.push({ retryNum, status, at: Date.now(), writeFault: applied });
    return status;
  };

  const first = [post(0, "")];
  if (event.plan.duplicateNow && retries < MAX_RETRIES) first.push(post(++retries, "http_timeout"));
  let acked = (await Promise.all(first)).some((status) => status === 200);
  firstDone();

  for (const delay of plan.retrySchedule) {
    if (acked || retries >= MAX_RETRIES) break;
    await sleep(delay);
    if (retries + 1 === MAX_RETRIES) await plan.beforeLastRetry?.();
    const reason = deliveries.at(-1)?.status === 0 ? "connection_failed" : "http_error";
    acked = (await post(++retries, reason)) === 200 || acked;
  }
  if (acked && retries < MAX_RETRIES && event.plan.duplicateLaterMs !== null) {
    await sleep(event.plan.duplicateLaterMs);
    await post(++retries, "http_timeout");
  }
  return { event, deliveries, acked };
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
