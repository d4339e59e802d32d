/**
 * A row that waits for the isolate's acks (InlineGate.quiet) waits no longer than leaves it one whole attempt
 * inside the lease its write took: the wait is INLINE_MAX_WAIT_MS with the defaults (a 10 s timeout, a 20 s
 * inline lease), and shorter when a short EFFECT_TIMEOUT_SECONDS makes the inline lease short (2 s, 4 s), where a
 * row that waited the full 2 s would be given back to the queue unperformed.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import {
  firstAttemptOf,
  INLINE_MAX_IN_FLIGHT,
  INLINE_MAX_REQUESTS,
  INLINE_MAX_WAIT_MS,
  inlineBounds,
} from "../../shared/delivery/first-attempt.ts";
import { InlineGate, type Timer } from "../../shared/delivery/inline-gate.ts";
import { handleSlackRequest } from "../../workers/ingress/ack.ts";
import { deliveryDeps, testSettings } from "../support/consumer.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { ingressDeps } from "../support/ingress.ts";
import { allRows, resetTables } from "../support/rows.ts";
import { eventRequest, mention, NOW } from "../support/slack-requests.ts";
import { testApp } from "../support/test-app.ts";

const slackFake = useFakeSlack();
beforeEach(() => resetTables(env.DB));

/** A burst that never drains: the row waits out its whole wait, which the gate's timer is asked for. */
async function waitedOut(effectTimeoutMs: number, leaseMs: number) {
  slackFake.current.always("chat.postMessage", reply.ok({ ts: "9.1" }));
  const bounds = inlineBounds(testSettings({ effectTimeoutMs, leaseMs }));
  const timers: { ms: number; fire: () => void }[] = [];
  const timer: Timer = (ms, fire) => {
    timers.push({ ms, fire });
    return () => {};
  };
  const gate = new InlineGate(INLINE_MAX_IN_FLIGHT, INLINE_MAX_REQUESTS, INLINE_MAX_WAIT_MS, timer);
  for (let i = 0; i <= INLINE_MAX_REQUESTS; i++) gate.requestStarted(NOW);
  const app = testApp();
  const inline = deliveryDeps(NOW, { effects: app.effects, settings: { leaseMs: bounds.leaseMs, effectTimeoutMs } });
  const context = { ...inline.deps.context, timeoutMs: bounds.timeoutMs };
  const harness = ingressDeps({ app, firstAttempt: firstAttemptOf({ ...inline.deps, context }, gate) });
  const response = await handleSlackRequest(await eventRequest(mention()), harness.deps, NOW);
  expect(response.status).toBe(200);
  await new Promise((resolve) => setTimeout(resolve, 50));
  expect(gate.waitingCount).toBe(1);
  const [wait] = timers;
  if (!wait) throw new Error("the row did not wait");
  // The wait runs out: its time passes on the clock the lease was taken by, then the gate's timer fires.
  inline.clock.set(NOW + wait.ms);
  wait.fire();
  await harness.settled();
  const [row] = await allRows(env.DB);
  return { bounds, waitMs: wait.ms, row, calls: slackFake.current.callsTo("chat.postMessage").length };
}

describe("a row that waits out the isolate's acks", () => {
  it("with the defaults (a 10 s timeout, a 20 s inline lease) waits INLINE_MAX_WAIT_MS, then is performed inline", async () => {
    const { bounds, waitMs, row, calls } = await waitedOut(10_000, 300_000);
    expect(bounds).toEqual({ timeoutMs: 10_000, leaseMs: 20_000 });
    expect(waitMs).toBe(INLINE_MAX_WAIT_MS);
    expect({ calls, status: row?.status }).toEqual({ calls: 1, status: "done" });
  });

  it("with EFFECT_TIMEOUT_SECONDS = 2 (a 4 s inline lease) waits less, so one attempt still fits, and is performed inline", async () => {
    const { bounds, waitMs, row, calls } = await waitedOut(2_000, 6_000);
    expect(bounds).toEqual({ timeoutMs: 2_000, leaseMs: 4_000 });
    expect(waitMs).toBeLessThan(INLINE_MAX_WAIT_MS);
    expect(waitMs).toBeGreaterThan(0);
    expect({ calls, status: row?.status, last_error: row?.last_error }).toEqual({ calls: 1, status: "done", last_error: null });
  });
});
