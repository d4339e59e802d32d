/**
 * A D1Database that adds up D1's own cost figures (meta.rows_read,
 * meta.rows_written) of every statement run through it, so tests can assert
 * what an operation costs in the units D1 bills.
 */
export interface Meter {
  rowsRead: number;
  rowsWritten: number;
  statements: number;
  /** Calls to D1: a batch is one, whatever it holds; so is each statement run alone. */
  roundTrips: number;
  reset(): void;
}

/**
 * `except`: statements whose SQL it matches are run but not counted (e.g. the ingress's activity write after the
 * answer, shared/ops/activity.ts, beside what an ack costs: admin.gaps.test.ts measures it on its own).
 */
export function meteredDb(db: D1Database, options: { readonly except?: RegExp } = {}): { db: D1Database; meter: Meter } {
  const meter: Meter = {
    rowsRead: 0,
    rowsWritten: 0,
    statements: 0,
    roundTrips: 0,
    reset() {
      meter.rowsRead = 0;
      meter.rowsWritten = 0;
      meter.statements = 0;
      meter.roundTrips = 0;
    },
  };
  // A statement without D1's figures would count as free: refuse it, so a cost can never pass at 0 = 0.
  const count = (meta: { rows_read?: number; rows_written?: number } | undefined) => {
    if (typeof meta?.rows_read !== "number" || typeof meta.rows_written !== "number")
      throw new Error(`metered D1: a result without rows_read/rows_written: ${JSON.stringify(meta)}`);
    meter.statements += 1;
    meter.rowsRead += meta.rows_read;
    meter.rowsWritten += meta.rows_written;
  };
  const excepted = new WeakSet<D1PreparedStatement>();
  const wrap = (statement: D1PreparedStatement, uncounted = false): D1PreparedStatement => {
    if (uncounted) excepted.add(statement);
    return new Proxy(statement, {
      get(target, prop) {
        if (prop === "bind") return (...values: unknown[]) => wrap(target.bind(...values), uncounted);
        if (uncounted && prop !== "unwrap") {
          const value = Reflect.get(target, prop);
          return typeof value === "function" ? value.bind(target) : value;
        }
        if (prop === "run" || prop === "all") {
          return async () => {
            meter.roundTrips += 1;
            const result = await (target[prop] as () => Promise<D1Result>).call(target);
            count(result.meta);
            return result;
          };
        }
        if (prop === "first") {
          return async (column?: string) => {
            meter.roundTrips += 1;
            const result = await target.all();
            count(result.meta);
            const row = result.results[0] as Record<string, unknown> | undefined;
            return row === undefined ? null : column === undefined ? row : row[column];
          };
        }
        if (prop === "raw") {
          // raw() returns no meta: run it as all() for the figures, and answer in raw()'s shape.
          return async (options?: { columnNames?: boolean }) => {
            meter.roundTrips += 1;
            const result = await target.all();
            count(result.meta);
            const rows = result.results as Record<string, unknown>[];
            const columns = rows[0] === undefined ? [] : Object.keys(rows[0]);
            const values = rows.map((row) => Object.values(row));
            return options?.columnNames ? [columns, ...values] : values;
          };
        }
        if (prop === "unwrap") return () => target;
        const value = Reflect.get(target, prop);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  };
  const proxy = new Proxy(db, {
    get(target, prop) {
      if (prop === "prepare") return (sql: string) => wrap(target.prepare(sql), options.except?.test(sql) ?? false);
      if (prop === "batch") {
        return async (statements: D1PreparedStatement[]) => {
          const raw = statements.map((s) => (s as unknown as { unwrap(): D1PreparedStatement }).unwrap());
          const counts = raw.map((s) => !excepted.has(s));
          if (counts.some(Boolean)) meter.roundTrips += 1;
          const results = await target.batch(raw);
          for (const [i, result] of results.entries()) if (counts[i]) count(result.meta);
          return results;
        };
      }
      const value = Reflect.get(target, prop);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { db: proxy, meter };
}
