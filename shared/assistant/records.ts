/**
 * What the ack writes for an assistant's inputs, in its one batch beside the receipt (workers/ingress/write.ts):
 * a thread's context (assistant_thread_started, assistant_thread_context_changed), a question's turn beside its
 * answer row, a stop the user asked for (agent_session_stopped). The app's routing says which
 * (shared/app/assistant.ts); store.ts has the statements.
 */
import { contextStatement, stopStatement, turnStatements } from "./store.ts";
import type { ThreadRecord } from "./thread.ts";

/** The records' statements; `rowKeyOf` gives the idempotency key of the input's row of an intent key. */
export function threadStatements(
  db: D1Database,
  records: readonly ThreadRecord[],
  rowKeyOf: (intentKey: string) => string,
  now: number,
): D1PreparedStatement[] {
  return records.flatMap((record) => {
    if (record.kind === "context") {
      return [contextStatement(db, { ...record.thread, userId: record.userId, context: record.context, eventTs: record.eventTs }, now)];
    }
    if (record.kind === "turn") {
      const turn = { ...record.turn, userId: record.userId, question: record.question, answerKey: rowKeyOf(record.answerKey) };
      return turnStatements(db, turn, now);
    }
    return [stopStatement(db, record.thread, record.eventTs, now)];
  });
}
