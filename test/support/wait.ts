/**
 * Polls `read` until `done` accepts its value or `ms` pass; returns the last
 * value either way, so the assertion that follows says what was seen. For
 * asynchronous deliveries (real queues), never for crossing a time boundary.
 */
export async function waitFor<T>(read: () => Promise<T>, done: (value: T) => boolean, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
