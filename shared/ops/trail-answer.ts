/**
 * GET /admin/events/<id>'s answer: the one contract between the Worker
 * (workers/ingress/admin/events.ts builds exactly this) and the CLI. Plain
 * types, no Workers runtime types. Times are ISO 8601 strings.
 *
 * An event lives on its team's shard; an id alone does not name a team, so
 * the API looks on every shard (or on ?team='s shard) and says where it found
 * the trail: `shards`, and each row's `shard` and `ref` ("<shard>:<id>" with
 * more than one shard, the id with one).
 */

export interface TrailAnswer {
  id: string;
  /** The shards the receipt or its rows were found on (one, normally). */
  shards: number[];
  receipt: {
    shard: number;
    id: string;
    kind: string;
    type: string;
    teamId: string | null;
    retryNum: number | null;
    receivedAt: string | null;
    /** The fact it was (shared/slack/facts.ts); its rows are the fact's, recorded by the first copy to arrive. Absent from an older Worker. */
    fact?: string;
  } | null;
  complete: boolean;
  rows: TrailRowAnswer[];
  /**
   * What the input's cancels (cancel(name)) found, at the ack (byRow null) or in a completion of one of its rows:
   * cancelled, too_late (the row was claimed, attempted, done or dead: rowStatus), already_cancelled, or
   * nothing_to_cancel. Absent from an older Worker.
   */
  cancels?: TrailCancelAnswer[];
  /**
   * The custom step execution the input belongs to, or the one the id names (its trail: every row of it).
   * Absent for any other input, and from an older Worker.
   */
  execution?: TrailExecutionAnswer;
  /** The assistant answers among the rows (shared/assistant/answer.ts), as their turns tell them. Absent from an older Worker. */
  answers?: TrailAssistantAnswer[];
}

/** An assistant's answer: where it stands, its one message, what Slack confirmed and how often the model was asked (never the text). */
export interface TrailAssistantAnswer {
  rowRef: string;
  channel: string;
  threadTs: string;
  /** The question's ts. */
  messageTs: string;
  /** asked, starting, streaming, generated, delivered, stopped, failed. */
  state: string;
  /** The answer's one message, once Slack made it. */
  streamTs: string | null;
  sentChars: number;
  answerChars: number | null;
  modelCalls: number;
  stopRequestedAt: string | null;
}

export interface TrailExecutionAnswer {
  shard: number;
  id: string;
  teamId: string;
  callbackId: string;
  /** The input that brought its workflow token. */
  receiptId: string;
  /** When Slack issued its workflow token, and when the token dies (15 minutes later). */
  tokenIssuedAt: string | null;
  tokenExpiresAt: string | null;
  /** "held" while the engine keeps the token (never the token itself), else why it is gone: completed, expired, refused: <error>. */
  workflowToken: string;
  endedAt: string | null;
  /** Its one completion's row, once recorded: complete() or fail(). Null: none yet (a step waiting for a user). */
  completion: { rowRef: string; effect: string; status: string } | null;
  /** A waiting step's deadline row, when there is one. */
  deadline: { rowRef: string; status: string; dueAt: string | null } | null;
}

export interface TrailCancelAnswer {
  name: string;
  byRow: number | null;
  outcome: string;
  /** The named row's ref, when there is one. */
  rowRef: string | null;
  rowStatus: string | null;
  at: string | null;
}

export interface TrailRowAnswer {
  ref: string;
  shard: number;
  id: number;
  key: string;
  /** The receipt that recorded the row: another event_id's when this one repeated a fact already recorded. Absent from an older Worker. */
  receiptId?: string;
  effect: string;
  /** The row whose effect asked for this one (a follow-up, same shard); null for a row the ingress recorded. */
  parentId: number | null;
  depth: number;
  /** pending, leased, done, dead, or cancelled (ended by a cancel before it was attempted: never performed). */
  status: string;
  /** The row's name in its workspace (IntentOptions.name); null when unnamed. Absent from an older Worker. */
  name?: string | null;
  /** The input whose cancel ended the row (a receipt id), when it is cancelled. Absent from an older Worker. */
  cancelledBy?: string | null;
  attempts: number;
  lastError: string | null;
  payload: unknown;
  result: unknown;
  createdAt: string | null;
  enqueuedAt: string | null;
  nextAttemptAt: string | null;
  /** A timer's time, as the app asked (at / after); null for a row due when it was recorded. Absent from an older Worker. */
  dueAt?: string | null;
  leaseExpiresAt: string | null;
  deadline: string | null;
  completedAt: string | null;
  sweeps: number;
  history: { attempt: number; outcome: string; error: string | null; startedAt: string | null; finishedAt: string | null }[];
}
