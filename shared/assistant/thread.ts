/**
 * What an assistant's thread is made of, for the app's side (shared/app/assistant.ts) and the engine's
 * (store.ts, records.ts, answer.ts) alike: pure, no D1, so the app's module graph stays the app's.
 */
import type { JsonObject } from "../slack/inputs.ts";

/** The answer's row effect: an engine effect (no dot, so no Slack method; reserved, so no app effect takes it). */
export const ANSWER_EFFECT = "assistant_answer";

export interface ThreadKey {
  readonly teamId: string;
  readonly channelId: string;
  readonly threadTs: string;
}

export interface TurnKey extends ThreadKey {
  /** The user's message the turn answers. */
  readonly messageTs: string;
}

/**
 * What the ack writes for an assistant's inputs, in its one batch beside the receipt (records.ts): a thread's
 * context, a question's turn beside its answer row, a stop the user asked for.
 */
export type ThreadRecord =
  | {
      readonly kind: "context";
      readonly thread: ThreadKey;
      readonly userId: string | undefined;
      readonly context: JsonObject | undefined;
      readonly eventTs: string;
    }
  | {
      readonly kind: "turn";
      readonly turn: TurnKey;
      readonly userId: string | undefined;
      readonly question: string;
      /** The answer intent's key: its row's idempotency key is the input's (workers/ingress/write.ts resolves it). */
      readonly answerKey: string;
    }
  /** The user's stop (agent_session_stopped), at its event_ts: the answers at work of questions asked before it. */
  | { readonly kind: "stop"; readonly thread: ThreadKey; readonly eventTs: string };
