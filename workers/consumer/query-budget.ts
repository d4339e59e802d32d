/**
 * D1 allows 1 000 queries per Worker invocation; past it every query fails,
 * finishes are lost and their effects repeat when the leases expire. A batch
 * of 100 messages whose D1 writes keep failing and are retried (p-retry: 4
 * tries of a finish of up to 4 statements) could get there. So the consumer
 * counts the statements it sends in an invocation — each statement of a
 * batch, and failed calls too, since D1 counts them — and stops claiming new
 * rows well before the limit: the rest of the batch goes back to the queue.
 *
 * Why STOP_CLAIMING_AT is 700: after the stop, at most DELIVERY_CONCURRENCY
 * (6) rows are still in flight, each spending at most WORST_QUERIES_PER_ROW
 * (a claim, then 4 tries of a 4-statement finish: 17): 700 + 6 × 17 = 802,
 * leaving about 200 for the rest of the invocation.
 */

export const D1_QUERIES_PER_INVOCATION = 1000;
export const WORST_QUERIES_PER_ROW = 1 + 4 * 4;
export const STOP_CLAIMING_AT = 700;

export interface QueryBudget {
  /** Statements sent so far in this invocation. */
  used(): number;
  /** Past this many, no new row is claimed. */
  readonly stopClaimingAt: number;
}

/** `db`, counting every statement sent through it (run, all, first, raw, and each statement of a batch). */
export function countingDb(db: D1Database, stopClaimingAt = STOP_CLAIMING_AT): { db: D1Database; budget: QueryBudget } {
  let used = 0;
  const statement = (target: D1PreparedStatement): D1PreparedStatement =>
    new Proxy(target, {
      get(inner, prop) {
        if (prop === "bind") return (...values: unknown[]) => statement(inner.bind(...values));
        if (prop === "run" || prop === "all" || prop === "first" || prop === "raw") {
          return (...args: unknown[]) => {
            used += 1;
            return (inner[prop] as (...a: unknown[]) => unknown).apply(inner, args);
          };
        }
        if (prop === UNWRAP) return inner;
        const value = Reflect.get(inner, prop);
        return typeof value === "function" ? value.bind(inner) : value;
      },
    });
  const counted = new Proxy(db, {
    get(inner, prop) {
      if (prop === "prepare") return (sql: string) => statement(inner.prepare(sql));
      if (prop === "batch") {
        return (statements: D1PreparedStatement[]) => {
          used += statements.length;
          return inner.batch(statements.map((s) => (s as unknown as Record<symbol, D1PreparedStatement>)[UNWRAP] ?? s));
        };
      }
      const value = Reflect.get(inner, prop);
      return typeof value === "function" ? value.bind(inner) : value;
    },
  });
  return { db: counted, budget: { used: () => used, stopClaimingAt } };
}

const UNWRAP = Symbol("unwrap");
