/**
 * The test kit's network edge (shared/app/testing.ts, shared/app/whole-path.ts): while a kit run is in
 * progress, globalThis.fetch is its fake, and the real one is back after. One run at a time across both kits:
 * two overlapping runs would restore each other's fetch, and the later one's effects reach the real network.
 */
let running: string | undefined;

export async function withFakeFetch<T>(who: string, fake: typeof fetch, run: () => Promise<T>): Promise<T> {
  if (running) throw new Error(`${who}: one kit run at a time (await the ${running} before): the network edge is shared`);
  running = who;
  const original = globalThis.fetch;
  globalThis.fetch = fake;
  try {
    return await run();
  } finally {
    globalThis.fetch = original;
    running = undefined;
  }
}
