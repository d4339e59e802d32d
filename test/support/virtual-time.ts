/**
 * Virtual time for code that waits (invariant 7: no correctness test waits on the wall clock): a clock, a sleep
 * that moves it, and repeating callbacks (`every`) that fire, in time order and awaited, as sleeps move the clock
 * past them. A slow model (its sleeps between chunks) and an answer's heartbeat then meet at the times they would.
 */
export interface VirtualTime {
  readonly clock: () => number;
  /** Moves the clock by `ms`, firing (and awaiting) every callback due on the way. */
  readonly sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  readonly every: (ms: number, fn: () => unknown) => () => void;
  /** Sets the clock to `to` (forward only), firing what is due on the way. */
  readonly advanceTo: (to: number) => Promise<void>;
}

export function virtualTime(start: number): VirtualTime {
  let now = start;
  let seq = 0;
  const timers = new Map<number, { at: number; ms: number; fn: () => unknown }>();
  const advanceTo = async (to: number) => {
    for (;;) {
      let next: [number, { at: number; ms: number; fn: () => unknown }] | undefined;
      for (const entry of timers) if (entry[1].at <= to && (!next || entry[1].at < next[1].at)) next = entry;
      if (!next) break;
      const [, timer] = next;
      now = Math.max(now, timer.at);
      timer.at += timer.ms;
      await timer.fn();
    }
    now = Math.max(now, to);
  };
  return {
    clock: () => now,
    async sleep(ms, signal) {
      if (signal?.aborted) throw signal.reason;
      await advanceTo(now + ms);
      // A turn of the event loop, as a real wait gives: what the sleeper raced with gets to run.
      await new Promise((resolve) => setTimeout(resolve, 0));
      if (signal?.aborted) throw signal.reason;
    },
    every(ms, fn) {
      const id = ++seq;
      timers.set(id, { at: now + ms, ms, fn });
      return () => timers.delete(id);
    },
    advanceTo,
  };
}
