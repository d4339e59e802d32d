/**
 * One JSON object per line, so Workers Logs (and `npm start`'s pretty printer)
 * can filter on fields. Domain code takes a `Log` as a dependency: the Worker
 * entries pass `consoleLog`, tests pass a recorder and assert on what was said.
 *
 * Nothing secret is ever a field: callers log reasons and ids, never signing
 * secrets, tokens or signatures (the bad-input corpus greps for them).
 */

export type Level = "debug" | "info" | "warn" | "error";
export type Fields = Readonly<Record<string, unknown>>;
export type Log = (level: Level, msg: string, fields?: Fields) => void;

export const consoleLog: Log = (level, msg, fields) => {
  const line = JSON.stringify({ level, msg, ...fields });
  if (level === "error") console.error(line);
  else if (level === "warn") console.warn(line);
  else console.log(line);
};

export interface LogRecord {
  readonly level: Level;
  readonly msg: string;
  readonly fields: Fields;
}

/** A `Log` that keeps what it is told, for tests and for the local runner. */
export function recordingLog(): Log & { records: LogRecord[] } {
  const records: LogRecord[] = [];
  const log = ((level, msg, fields = {}) => {
    records.push({ level, msg, fields });
  }) as Log & { records: LogRecord[] };
  log.records = records;
  return log;
}

/** An error as a short loggable string, without stack frames. */
export function describeError(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}
