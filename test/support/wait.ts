/**
 * Polls `read` until `done` accepts its value or `ms` pass; returns the last
 * value either way, so the assertion that follows says what was seen. For
 * asynchronous deliveries (real queues), never for crossing a time boundary.
 * The default bound (4 s) is under vitest's 5 s test timeout, so the wait
 * ends and its assertion reports first; a longer `ms` wants a longer timeout.
 */
export async function waitFor<T>(read: () => Promise<T>, done: (value: T) => boolean, ms = 4_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
