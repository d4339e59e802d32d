/** `db` with every multi-statement batch failing (a finish with its audit row, a completion with follow-ups), as an overloaded D1 does; single statements and one-statement batches (claims) go through. */
export function failingFinishes(db: D1Database): D1Database {
  return new Proxy(db, {
    get(target, prop) {
      if (prop === "batch") {
        return async (statements: D1PreparedStatement[]) => {
          if (statements.length > 1) throw new Error("D1_ERROR: simulated overload");
          return target.batch(statements);
        };
      }
      const value = Reflect.get(target, prop);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/**
 * `db` that runs `meanwhile` once, just before its first batch reaches D1: another worker's write landing between a
 * read and the statements that act on it (a claim between the sweep's candidates and its takes, a replay between a
 * selection and its step). Returns the D1 and whether it has run.
 */
export function beforeFirstBatch(db: D1Database, meanwhile: (db: D1Database) => Promise<unknown>): { db: D1Database; ran: () => boolean } {
  let ran = false;
  const wrapped = new Proxy(db, {
    get(target, prop) {
      if (prop === "batch") {
        return async (statements: D1PreparedStatement[]) => {
          if (!ran) {
            ran = true;
            await meanwhile(target);
          }
          return target.batch(statements);
        };
      }
      const value = Reflect.get(target, prop);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { db: wrapped, ran: () => ran };
}
