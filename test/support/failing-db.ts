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
