/**
 * The shards benchmark's simulated single writer (scripts/bench/single-writer-d1.ts):
 * one call at a time per database, each statement held a fixed time on the
 * database's own timeline, the SQL run in arrival order. A virtual clock makes
 * the timeline exact; the waits themselves are the hold (a few ms).
 */
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { sqliteD1 } from "../../scripts/bench/sqlite-d1.ts";

const ROOT = resolve(import.meta.dirname, "../..");

interface Stats {
  calls: number;
  statements: number;
  heldMs: number;
  executeMs: number;
  maxWaitMs: number;
}
interface Statement {
  bind(...values: unknown[]): Statement;
  run(): Promise<{ meta: { changes: number } }>;
  first(column?: string): Promise<unknown>;
}
interface Db {
  prepare(sql: string): Statement;
  batch(statements: Statement[]): Promise<unknown[]>;
}
// Imported by path: the module is type-checked with the Workers' types, like the code it serves.
const { singleWriter } = (await import(pathToFileURL(resolve(ROOT, "scripts/bench/single-writer-d1.ts")).href)) as {
  singleWriter(inner: unknown, holdMs: number, clock?: () => number): { db: Db; stats: Stats };
};

function scratch(): unknown {
  const db = sqliteD1(resolve(ROOT, "migrations")) as Db & { exec(sql: string): Promise<unknown> };
  void db.exec("CREATE TABLE t (n INTEGER PRIMARY KEY)");
  return db;
}

describe("single-writer D1 (bench)", () => {
  it("serves calls arriving together one after another: each waits for the holds before it, a batch holds once per statement", async () => {
    let now = 1000;
    const { db, stats } = singleWriter(scratch(), 5, () => now);
    const answered: string[] = [];
    const one = db
      .prepare("INSERT INTO t (n) VALUES (?1)")
      .bind(1)
      .run()
      .then(() => answered.push("one"));
    const batch = db
      .batch([db.prepare("INSERT INTO t (n) VALUES (2)"), db.prepare("INSERT INTO t (n) VALUES (3)"), db.prepare("SELECT 1")])
      .then(() => answered.push("batch"));
    const read = db.prepare("SELECT COUNT(*) AS c FROM t").first("c");
    // The clock stands still: the timeline alone decides each call's start.
    expect(stats).toMatchObject({ calls: 3, statements: 5, heldMs: 25, maxWaitMs: 20 });
    now = 1030;
    await Promise.all([one, batch]);
    // The read arrived last, after both writes had run: the order of effects is the order of arrival.
    expect(await read).toBe(3);
    expect(answered).toEqual(["one", "batch"]);
  });

  it("a call that arrives once the database is free starts at once: no hold is owed for idle time", async () => {
    let now = 0;
    const { db, stats } = singleWriter(scratch(), 5, () => now);
    await db.prepare("SELECT 1").first();
    now = 100;
    await db.prepare("SELECT 1").first();
    expect(stats.maxWaitMs).toBe(0);
  });

  it("answers a failing statement with its error, after its hold, and keeps serving", async () => {
    const { db, stats } = singleWriter(scratch(), 2);
    await db.prepare("INSERT INTO t (n) VALUES (7)").run();
    const started = performance.now();
    await expect(db.prepare("INSERT INTO t (n) VALUES (7)").run()).rejects.toThrow(/UNIQUE/);
    expect(performance.now() - started).toBeGreaterThanOrEqual(1.5);
    expect(await db.prepare("SELECT COUNT(*) AS c FROM t").first("c")).toBe(1);
    expect(stats.calls).toBe(3);
  });

  it("measures the inner SQLite's own time separately from the hold", async () => {
    const { db, stats } = singleWriter(scratch(), 1);
    await db.prepare("SELECT 1").first();
    expect(stats.executeMs).toBeGreaterThan(0);
    // The hold is the simulated writer's time alone: what this machine's SQLite took is not added to it.
    expect(stats.heldMs).toBe(1);
  });
});
