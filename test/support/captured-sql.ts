/**
 * A D1Database that records every statement the product runs through it — its
 * SQL and its bound values, whether run alone or in a batch — so a test can
 * EXPLAIN QUERY PLAN the very statement the product sends, not a copy of it:
 * when the product's SQL drifts off its index, the plan test fails with it.
 */
export interface CapturedStatement {
  readonly sql: string;
  readonly params: readonly unknown[];
}

const RAW = Symbol("raw statement");
const CAPTURED = Symbol("captured statement");

export function capturingDb(db: D1Database): { db: D1Database; statements: CapturedStatement[] } {
  const statements: CapturedStatement[] = [];
  const wrap = (raw: D1PreparedStatement, captured: CapturedStatement): D1PreparedStatement =>
    new Proxy(raw, {
      get(target, prop) {
        if (prop === RAW) return target;
        if (prop === CAPTURED) return captured;
        if (prop === "bind") return (...values: unknown[]) => wrap(target.bind(...values), { sql: captured.sql, params: values });
        if (prop === "run" || prop === "all" || prop === "first" || prop === "raw") {
          return (...args: unknown[]) => {
            statements.push(captured);
            return (target[prop] as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
        const value = Reflect.get(target, prop);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  const proxy = new Proxy(db, {
    get(target, prop) {
      if (prop === "prepare") return (sql: string) => wrap(target.prepare(sql), { sql, params: [] });
      if (prop === "batch") {
        return (batch: D1PreparedStatement[]) => {
          const parts = batch as unknown as { [RAW]: D1PreparedStatement; [CAPTURED]: CapturedStatement }[];
          for (const part of parts) statements.push(part[CAPTURED]);
          return target.batch(parts.map((part) => part[RAW]));
        };
      }
      const value = Reflect.get(target, prop);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { db: proxy, statements };
}

/** SQLite's plan for a captured statement, with its own bound values, one step a line. */
export async function queryPlan(db: D1Database, statement: CapturedStatement): Promise<string> {
  const { results } = await db
    .prepare(`EXPLAIN QUERY PLAN ${statement.sql}`)
    .bind(...statement.params)
    .all<{ detail: string }>();
  return results.map((r) => r.detail).join("\n");
}

/** The first captured statement whose SQL matches, failing loudly if the product sent none. */
export function statementMatching(statements: readonly CapturedStatement[], pattern: RegExp): CapturedStatement {
  const found = statements.find((s) => pattern.test(s.sql));
  if (!found) throw new Error(`the product sent no statement matching ${pattern}:\n${statements.map((s) => s.sql).join("\n---\n")}`);
  return found;
}
