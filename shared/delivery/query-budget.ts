import { MAX_CANCELS, MAX_INTENTS } from "../../shared/app/intents.ts";
import { INSTALLATION_WORST_QUERIES } from "../installations/resolve.ts";
import { EXECUTION_WORST_QUERIES } from "../steps/execution.ts";

/**
 * D1 allows 1 000 queries per Worker invocation; past it every query fails,
 * finishes are lost and their effects repeat when the leases expire. A batch
 * of 100 messages whose D1 writes keep failing and are retried (p-retry: 4
 * tries of a finish) could get there. So the consumer counts the statements
 * it sends in an invocation — each statement of a batch, and failed calls
 * too, since D1 counts them — and past STOP_CLAIMING_AT it claims no new row
 * (the rest of the batch goes back to the queue) and tries a failing finish
 * no more (deliver.ts: that row's lease expires and the sweep hands it out).
 *
 * A finish can be large: a completion carries the effect's follow-ups in the
 * same batch, up to MAX_INTENTS of them, and a cancel among them is three
 * statements (at most MAX_CANCELS of those): 1 + 25 + 2 × 5 = 36. Four tries
 * of that per lane would be 144 statements, and six lanes past the stop 864,
 * so retries stop at the stop too. Past it, each of the DELIVERY_CONCURRENCY
 * (6) lanes sends at most WORST_QUERIES_PER_ROW: a claim with its cooldown
 * check (3, claim.ts's claimOrTakeSlot), a pacing give-back (3), the row's
 * installation (INSTALLATION_WORST_QUERIES, 16: it waits for no refresh past
 * the stop), its custom step execution's (EXECUTION_WORST_QUERIES, 1), one
 * try of the largest finish (36), the audit row of a lost completion and the
 * mark of a failed enqueue: 530 + 6 × 61 = 896, leaving about 100 to spare.
 *
 * A long effect (an assistant's answer) holds a lane for minutes and writes as
 * it goes, at most the statements it declares (`long.queries`:
 * ANSWER_WORST_QUERIES, 64, bounded by construction in
 * shared/assistant/answer.ts). Those are reserved while it runs (deliver.ts,
 * LongBounds): it starts only if the statements used plus every reservation,
 * its own included, are under the stop, and no row is claimed unless the
 * statements used plus the reservations are. What can be sent after the last
 * claim is then the reservations (under the stop with what was used) plus each
 * lane's own row: the same 530 + 6 × 61, whatever mix of long and quick rows.
 */

export const D1_QUERIES_PER_INVOCATION = 1000;
/** The largest finish: the completion, each follow-up one statement, each cancel three (shared/outbox/fence.ts). */
export const LARGEST_FINISH = 1 + MAX_INTENTS + 2 * MAX_CANCELS;
export const WORST_QUERIES_PER_ROW = 3 + 3 + INSTALLATION_WORST_QUERIES + EXECUTION_WORST_QUERIES + LARGEST_FINISH + 1 + 1;
export const STOP_CLAIMING_AT = 530;

export interface QueryBudget {
  /** Statements sent so far in this invocation. */
  used(): number;
  /** Past this many, no new row is claimed. */
  readonly stopClaimingAt: number;
}

/** One invocation's statement count, shared by every D1 it talks to: the limit is the invocation's, not a database's. */
export interface InvocationCount {
  used: number;
}

/**
 * `db`, counting every statement sent through it (run, all, first, raw, and each statement of a batch) into
 * `count` — pass one count to every shard's wrapper in an invocation. The margin past the stop assumes
 * DELIVERY_CONCURRENCY lanes in flight, so the consumer's parallel shard groups share one LanePool (lanes.ts).
 */
export function countingDb(
  db: D1Database,
  stopClaimingAt = STOP_CLAIMING_AT,
  count: InvocationCount = { used: 0 },
): { db: D1Database; budget: QueryBudget } {
  const tally = count;
  const statement = (target: D1PreparedStatement): D1PreparedStatement =>
    new Proxy(target, {
      get(inner, prop) {
        if (prop === "bind") return (...values: unknown[]) => statement(inner.bind(...values));
        if (prop === "run" || prop === "all" || prop === "first" || prop === "raw") {
          return (...args: unknown[]) => {
            tally.used += 1;
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
          tally.used += statements.length;
          return inner.batch(statements.map((s) => (s as unknown as Record<symbol, D1PreparedStatement>)[UNWRAP] ?? s));
        };
      }
      const value = Reflect.get(inner, prop);
      return typeof value === "function" ? value.bind(inner) : value;
    },
  });
  return { db: counted, budget: { used: () => tally.used, stopClaimingAt } };
}

const UNWRAP = Symbol("unwrap");
