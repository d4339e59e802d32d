/**
 * `db` with every multi-statement batch failing (a finish with its audit row, a completion with follow-ups), as an
 * overloaded D1 does; single statements and claims (a batch led by the claim: claim.ts's claimOrTakeSlot) go through.
 */
export function failingFinishes(db: D1Database): D1Database {
  // Each statement handed out, by what it was prepared from: the batch sees the SQL and sends D1 its own statement.
  const prepared = new WeakMap<D1PreparedStatement, { readonly sql: string; readonly real: D1PreparedStatement }>();
  const tagged = (real: D1PreparedStatement, sql: string): D1PreparedStatement => {
    const handed = new Proxy(real, {
      get(target, prop) {
        if (prop === "bind") return (...values: unknown[]) => tagged(target.bind(...values), sql);
        const value = Reflect.get(target, prop);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    prepared.set(handed, { sql, real });
    return handed;
  };
  const isClaim = (statement: D1PreparedStatement | undefined) =>
    statement !== undefined && /SET status = 'leased'/.test(prepared.get(statement)?.sql ?? "");
  return new Proxy(db, {
    get(target, prop) {
      if (prop === "prepare") return (sql: string) => tagged(target.prepare(sql), sql);
      if (prop === "batch") {
        return async (statements: D1PreparedStatement[]) => {
          if (statements.length > 1 && !isClaim(statements[0])) throw new Error("D1_ERROR: simulated overload");
          return target.batch(statements.map((s) => prepared.get(s)?.real ?? s));
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
