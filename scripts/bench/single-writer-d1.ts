/**
 * Bench only: a D1 database as production has it — ONE writer. Locally every
 * D1 is SQLite on this machine's disk and CPUs, so N local databases are not
 * N writers: they share 2 CPUs. This wrapper puts the production property
 * back by simulation. Each database serves its calls one at a time, in
 * arrival order, and each call occupies it for a fixed `holdMs` per statement:
 *
 *   - a single statement (run / all / first / raw): holdMs;
 *   - a batch of k statements: k × holdMs. D1 runs a batch as one transaction
 *     whose statements execute "sequentially, non-concurrently" on the
 *     database's one thread; what a batch saves is "latency from network round
 *     trips" (https://developers.cloudflare.com/d1/worker-api/d1-database/#batch),
 *     which is not the database's time. So the writer is busy for the sum of
 *     its statements, not for one.
 *
 * The hold is kept on the database's own timeline, not by sleeping after each
 * call: a call that arrives while the database is busy starts at `freeAt`,
 * ends at `start + k × holdMs`, and `freeAt` moves there. A timer that fires
 * late (this machine is shared) delays when the caller sees its answer, never
 * how much the database can do in a second: its capacity is exactly
 * 1000 / holdMs statements a second, whatever the load on the CPUs.
 *
 * The SQL itself runs at arrival (the inner database is synchronous SQLite,
 * scripts/bench/sqlite-d1.ts), so the order of effects is the order of the
 * timeline; the caller gets its answer (or its error) when its hold ends.
 *
 * Checked with the Workers' types (the root tsconfig), like the code it serves.
 */

export interface WriterStats {
  /** Calls: one per run/all/first/raw, one per batch. */
  calls: number;
  /** Statements, each statement of a batch counted. */
  statements: number;
  /** ms the database was held (Σ statements × holdMs). */
  heldMs: number;
  /** ms the inner SQLite spent executing, measured (what this machine's local database costs per statement). */
  executeMs: number;
  /** The longest a call waited for the database before its hold began, ms. */
  maxWaitMs: number;
}

interface Writer {
  readonly stats: WriterStats;
  call<T>(statements: number, execute: () => Promise<T>): Promise<T>;
}

const UNWRAP = Symbol("single-writer statement");

class HeldStatement {
  readonly [UNWRAP]: D1PreparedStatement;
  readonly #writer: Writer;
  constructor(writer: Writer, inner: D1PreparedStatement) {
    this.#writer = writer;
    this[UNWRAP] = inner;
  }
  bind(...values: unknown[]): HeldStatement {
    return new HeldStatement(this.#writer, this[UNWRAP].bind(...values));
  }
  run() {
    return this.#writer.call(1, () => this[UNWRAP].run());
  }
  all() {
    return this.#writer.call(1, () => this[UNWRAP].all());
  }
  first(column?: string) {
    return this.#writer.call(1, () => (column === undefined ? this[UNWRAP].first() : this[UNWRAP].first(column)));
  }
  raw() {
    return this.#writer.call(1, () => this[UNWRAP].raw());
  }
}

/** `inner` behind one writer that holds each statement `holdMs`; `stats` counts what it served. */
export function singleWriter(
  inner: D1Database,
  holdMs: number,
  clock: () => number = () => performance.now(),
): { readonly db: D1Database; readonly stats: WriterStats } {
  const stats: WriterStats = { calls: 0, statements: 0, heldMs: 0, executeMs: 0, maxWaitMs: 0 };
  let freeAt = 0;
  const writer: Writer = {
    stats,
    async call(statements, execute) {
      const arrival = clock();
      const start = Math.max(arrival, freeAt);
      const end = start + statements * holdMs;
      freeAt = end;
      stats.calls += 1;
      stats.statements += statements;
      stats.heldMs += statements * holdMs;
      stats.maxWaitMs = Math.max(stats.maxWaitMs, start - arrival);
      // The inner SQLite is synchronous: the statement has run when execute() returns its promise.
      const before = clock();
      const answer = execute().then(
        (value) => ({ ok: true as const, value }),
        (error: unknown) => ({ ok: false as const, error }),
      );
      stats.executeMs += clock() - before;
      const [settled] = await Promise.all([answer, sleepUntil(end, clock)]);
      if (!settled.ok) throw settled.error;
      return settled.value;
    },
  };
  const db = {
    prepare: (sql: string) => new HeldStatement(writer, inner.prepare(sql)),
    batch: (list: HeldStatement[]) => writer.call(list.length, () => inner.batch(list.map((s) => s[UNWRAP]))),
    exec: (sql: string) => writer.call(1, () => inner.exec(sql)),
    withSession: () => {
      throw new Error("the bench's single-writer D1 has no sessions");
    },
  };
  return { db: db as unknown as D1Database, stats };
}

function sleepUntil(at: number, clock: () => number): Promise<void> {
  const ms = at - clock();
  return ms <= 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, ms));
}
