import { describe, expect, it } from "vitest";
import {
  INLINE_MAX_IN_FLIGHT,
  INLINE_MAX_REQUESTS,
  INLINE_MAX_ROWS,
  INLINE_MAX_WAIT_MS,
  inlineIndexes,
} from "../../shared/delivery/first-attempt.ts";
import { InlineGate, STALE_REQUEST_MS, STALE_SLOT_MS, type Timer } from "../../shared/delivery/inline-gate.ts";

const NOW = 1_000_000;

/** A timer the test fires by hand: no wall clock crossed. */
function manualTimer(): Timer & { pending: { ms: number; fire: () => void }[] } {
  const pending: { ms: number; fire: () => void; cancelled: boolean }[] = [];
  const timer = ((ms: number, fn: () => void) => {
    const entry = { ms, fire: () => !entry.cancelled && fn(), cancelled: false };
    pending.push(entry);
    return () => {
      entry.cancelled = true;
    };
  }) as Timer & { pending: typeof pending };
  timer.pending = pending;
  return timer;
}

/** The bounds as the ingress builds them, with `maxInFlight` slots. */
const gateOf = (maxInFlight = INLINE_MAX_IN_FLIGHT, timer: Timer = manualTimer()) =>
  new InlineGate(maxInFlight, INLINE_MAX_REQUESTS, INLINE_MAX_WAIT_MS, timer);

/** Whether `promise` has settled, after the microtasks queued so far have run. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(() => {
    done = true;
  });
  for (let i = 0; i < 5; i++) await Promise.resolve();
  return done;
}

import type { EffectRegistry } from "../../shared/effects/registry.ts";

describe("InlineGate: at most INLINE_MAX_IN_FLIGHT inline rows in flight per isolate", () => {
  it(`takes the ${INLINE_MAX_IN_FLIGHT}th row and refuses the ${INLINE_MAX_IN_FLIGHT + 1}th with in_flight; a slot given back is taken again`, () => {
    const g = gateOf();
    for (let i = 0; i < INLINE_MAX_IN_FLIGHT; i++) expect(g.take(1, NOW)).toBe(1);
    expect(g.inFlight).toBe(INLINE_MAX_IN_FLIGHT);
    expect(g.take(1, NOW)).toBe("in_flight");
    expect(g.inFlight).toBe(INLINE_MAX_IN_FLIGHT);
    g.give(1);
    expect(g.take(1, NOW)).toBe(1);
  });

  it("gives a request what is left under the cap, not more", () => {
    const g = gateOf(3);
    expect(g.take(2, NOW)).toBe(2);
    expect(g.take(2, NOW)).toBe(1);
    expect(g.take(1, NOW)).toBe("in_flight");
    expect(g.inFlight).toBe(3);
  });

  it(`a slot never given back (its request cancelled before the answer) is free again after STALE_SLOT_MS: both sides`, () => {
    const g = gateOf();
    expect(g.take(INLINE_MAX_IN_FLIGHT, NOW)).toBe(INLINE_MAX_IN_FLIGHT);
    expect(g.take(1, NOW + STALE_SLOT_MS)).toBe("in_flight");
    expect(g.take(1, NOW + STALE_SLOT_MS + 1)).toBe(1);
    expect(g.inFlight).toBe(1);
  });

  it("asks for nothing, gets nothing and is never refused; gives back never below zero", () => {
    const g = gateOf(0);
    expect(g.take(0, NOW)).toBe(0);
    g.give(5);
    expect(g.inFlight).toBe(0);
    expect(g.take(1, NOW)).toBe("in_flight");
  });
});

describe(`InlineGate: inline rows start while at most INLINE_MAX_REQUESTS (${INLINE_MAX_REQUESTS}) requests are in progress in the isolate`, () => {
  it(`takes slots whatever the requests in progress: a burst's rows are claimed, not sent to the queue`, () => {
    const g = gateOf();
    for (let i = 0; i <= 4 * INLINE_MAX_REQUESTS; i++) g.requestStarted(NOW);
    expect(g.take(1, NOW)).toBe(1);
    expect(g.inFlight).toBe(1);
  });

  it(`quiet() resolves at once with ${INLINE_MAX_REQUESTS} requests in progress, and waits at ${INLINE_MAX_REQUESTS + 1} until one of them is answered`, async () => {
    const timer = manualTimer();
    const g = gateOf(INLINE_MAX_IN_FLIGHT, timer);
    const ends = Array.from({ length: INLINE_MAX_REQUESTS }, () => g.requestStarted(NOW));
    expect(await settled(g.quiet(NOW))).toBe(true);
    const one = g.requestStarted(NOW);
    const waiting = g.quiet(NOW);
    expect(await settled(waiting)).toBe(false);
    expect(g.waitingCount).toBe(1);
    one();
    expect(await settled(waiting)).toBe(true);
    expect(g.waitingCount).toBe(0);
    // Woken, its timer is cancelled: firing it later resolves nothing twice and leaves nothing behind.
    for (const t of timer.pending) t.fire();
    expect(g.waitingCount).toBe(0);
    for (const end of ends) end();
    expect(g.requestsInProgress(NOW)).toBe(0);
  });

  it(`a request answered while more than ${INLINE_MAX_REQUESTS} others are still in progress wakes nobody`, async () => {
    const g = gateOf();
    const ends = Array.from({ length: INLINE_MAX_REQUESTS + 2 }, () => g.requestStarted(NOW));
    const waiting = g.quiet(NOW);
    ends[0]?.();
    expect(await settled(waiting)).toBe(false);
    ends[1]?.();
    expect(await settled(waiting)).toBe(true);
  });

  it(`quiet() waits INLINE_MAX_WAIT_MS (${INLINE_MAX_WAIT_MS} ms) at most: then it resolves with the requests still in progress`, async () => {
    const timer = manualTimer();
    const g = gateOf(INLINE_MAX_IN_FLIGHT, timer);
    for (let i = 0; i <= INLINE_MAX_REQUESTS; i++) g.requestStarted(NOW);
    const waiting = g.quiet(NOW);
    expect(timer.pending.map((t) => t.ms)).toEqual([INLINE_MAX_WAIT_MS]);
    expect(await settled(waiting)).toBe(false);
    timer.pending[0]?.fire();
    expect(await settled(waiting)).toBe(true);
    expect(g.waitingCount).toBe(0);
    expect(g.requestsInProgress(NOW)).toBe(INLINE_MAX_REQUESTS + 1);
  });

  it("a request that has ended is counted no more, and ending it twice ends no other", () => {
    const g = gateOf();
    const first = g.requestStarted(NOW);
    g.requestStarted(NOW);
    first();
    first();
    expect(g.requestsInProgress(NOW)).toBe(1);
  });

  it(`a request started more than STALE_REQUEST_MS ago (cancelled: its end never told) is counted no more: both sides`, async () => {
    const g = gateOf();
    for (let i = 0; i <= INLINE_MAX_REQUESTS; i++) g.requestStarted(NOW);
    expect(g.requestsInProgress(NOW + STALE_REQUEST_MS)).toBe(INLINE_MAX_REQUESTS + 1);
    expect(await settled(g.quiet(NOW + STALE_REQUEST_MS))).toBe(false);
    expect(g.requestsInProgress(NOW + STALE_REQUEST_MS + 1)).toBe(0);
    expect(await settled(g.quiet(NOW + STALE_REQUEST_MS + 1))).toBe(true);
  });
});

describe(`inlineIndexes: at most INLINE_MAX_ROWS (${INLINE_MAX_ROWS}) rows of a request go inline`, () => {
  const registry = {
    get: (name: string) => (name.startsWith("slack.") || name === "app.inline" ? { inline: true } : { inline: false }),
  } as unknown as EffectRegistry;

  it(`takes the first ${INLINE_MAX_ROWS} inline effects in order; the ${INLINE_MAX_ROWS + 1}th is not attempted inline`, () => {
    const effects = Array.from({ length: INLINE_MAX_ROWS + 1 }, () => ({ effect: "slack.reactions.add" }));
    expect(inlineIndexes(effects, registry, 0)).toEqual(Array.from({ length: INLINE_MAX_ROWS }, (_, i) => i));
    expect(inlineIndexes(effects.slice(0, INLINE_MAX_ROWS), registry, 0)).toHaveLength(INLINE_MAX_ROWS);
  });

  it("skips effects that do not go inline, and counts only those that do", () => {
    const effects = [{ effect: "app.queued" }, { effect: "slack.chat.postMessage" }, { effect: "app.queued" }, { effect: "app.inline" }];
    expect(inlineIndexes(effects, registry, 0)).toEqual([1, 3]);
  });

  it("never a timer whose time is ahead: it takes no slot, and a timer already due goes like any row", () => {
    const effects = [
      { effect: "slack.chat.postMessage", afterMs: 60_000 },
      { effect: "slack.chat.postMessage", at: 5_000 },
      { effect: "app.inline" },
    ];
    expect(inlineIndexes(effects, registry, 10_000)).toEqual([1, 2]);
    expect(inlineIndexes(effects, registry, 1_000)).toEqual([2]);
  });
});
