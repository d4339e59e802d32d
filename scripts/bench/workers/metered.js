/**
 * Metering for the cost probe, in the units Cloudflare bills.
 *
 * meteredDb wraps a D1Database and keeps one record per statement run
 * through it, with D1's own figures from the result's `meta` (rows_read,
 * rows_written); the idea of test/support/metered-db.ts, keeping each
 * statement's text so the bench can say which statement cost what.
 *
 * countingQueue stands in for a Queue binding and keeps what was sent:
 * each message sent is one queue write operation.
 */
export function meteredDb(db) {
  const records = [];
  const record = (sql, meta) => records.push({ sql, rowsRead: meta?.rows_read ?? 0, rowsWritten: meta?.rows_written ?? 0 });
  const wrap = (statement, sql) => ({
    unwrap: () => statement,
    sql,
    bind: (...values) => wrap(statement.bind(...values), sql),
    async run() {
      const result = await statement.run();
      record(sql, result.meta);
      return result;
    },
    async all() {
      const result = await statement.all();
      record(sql, result.meta);
      return result;
    },
    async first(column) {
      const result = await statement.all();
      record(sql, result.meta);
      const row = result.results[0];
      if (row === undefined) return null;
      return column === undefined ? row : row[column];
    },
  });
  const metered = {
    prepare: (sql) => wrap(db.prepare(sql), sql),
    async batch(statements) {
      const results = await db.batch(statements.map((s) => s.unwrap()));
      for (const [i, result] of results.entries()) record(statements[i].sql, result.meta);
      return results;
    },
    exec: (sql) => db.exec(sql),
  };
  return { db: metered, records };
}

export function countingQueue() {
  const sent = [];
  const calls = { send: 0, sendBatch: 0 };
  return {
    sent,
    calls,
    async send(body) {
      calls.send += 1;
      sent.push(body);
    },
    async sendBatch(messages) {
      calls.sendBatch += 1;
      for (const m of messages) sent.push(m.body);
    },
  };
}
