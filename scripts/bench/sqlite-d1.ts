/**
 * D1's binding API over node:sqlite, for benchmarks that run the product's
 * own SQL (claim, fence, cooldowns, sweep) under a virtual clock, where a
 * local workerd could not move time. D1 is SQLite; what differs (network
 * round trips, rows-read billing) is not what these benchmarks measure.
 *
 * A batch runs in one transaction, in order, as D1's does; changes() inside
 * a batch reads the previous statement's count, as the fence relies on.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite";

type Row = Record<string, unknown>;
interface Result {
  results: Row[];
  success: true;
  meta: ReturnType<typeof meta>;
}

class Statement {
  readonly db: DatabaseSync;
  readonly sql: string;
  readonly params: readonly unknown[];
  constructor(db: DatabaseSync, sql: string, params: readonly unknown[] = []) {
    this.db = db;
    this.sql = sql;
    this.params = params;
  }

  bind(...params: unknown[]): Statement {
    return new Statement(this.db, this.sql, params);
  }

  execute(): Result {
    const stmt: StatementSync = this.db.prepare(this.sql);
    const args = this.params.map((p) => (p === undefined ? null : typeof p === "boolean" ? Number(p) : p)) as SQLInputValue[];
    if (stmt.columns().length > 0) {
      const results = stmt.all(...args) as Row[];
      const changes = Number((this.db.prepare("SELECT changes() AS c").get() as { c: number }).c);
      return { results, success: true, meta: meta(changes) };
    }
    const { changes } = stmt.run(...args);
    return { results: [], success: true, meta: meta(Number(changes)) };
  }

  async run() {
    return this.execute();
  }
  async all() {
    return this.execute();
  }
  async first(column?: string) {
    const row = this.execute().results[0];
    if (row === undefined) return null;
    return column === undefined ? row : row[column];
  }
}

function meta(changes: number) {
  return { changes, duration: 0, last_row_id: 0, changed_db: changes > 0, size_after: 0, rows_read: 0, rows_written: changes };
}

/**
 * An in-memory database with every migration applied, behind D1's API. Typed
 * `unknown`: this file is checked with Node's types, which have no D1Database;
 * the simulation that takes it is checked with the Workers' (burst-sim.ts).
 */
export function sqliteD1(migrationsDir: string): unknown {
  const db = new DatabaseSync(":memory:");
  for (const file of readdirSync(migrationsDir)
    .filter((f) => f.endsWith(".sql"))
    .sort()) {
    db.exec(readFileSync(join(migrationsDir, file), "utf8"));
  }
  const d1 = {
    prepare: (sql: string) => new Statement(db, sql),
    async batch(statements: Statement[]) {
      db.exec("BEGIN");
      try {
        const results = statements.map((s) => s.execute());
        db.exec("COMMIT");
        return results;
      } catch (error) {
        db.exec("ROLLBACK");
        throw error;
      }
    },
  };
  return d1;
}
