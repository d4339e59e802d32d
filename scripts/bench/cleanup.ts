/**
 * What must be stopped if the bench is interrupted (Ctrl-C, SIGTERM): every
 * local run and runtime registers its stop here while it is up, and run.ts
 * calls them all before exiting on a signal. Normal ends stop things in
 * their own `finally` blocks.
 */
const stops = new Set<() => Promise<void>>();

/** Registers a stop; returns the function that unregisters it. */
export function onInterrupt(stop: () => Promise<void>): () => void {
  stops.add(stop);
  return () => stops.delete(stop);
}

export async function stopEverything(): Promise<void> {
  const pending = [...stops];
  stops.clear();
  await Promise.allSettled(pending.map((stop) => stop()));
}
