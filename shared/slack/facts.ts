/**
 * Fact identity: what happened, as opposed to the envelope it came in.
 *
 * Slack dedupes nothing for us: it retries a failed delivery under the same
 * event_id (the receipt absorbs that), and it has been seen to send one
 * message under several event_ids with no retry header (node-slack-sdk
 * 2141). A backfill (shared/ops/backfill.ts) finds the same messages again
 * with no event_id at all. An input's outbox rows are keyed by its fact
 * (shared/outbox/record.ts), so every copy lands on the same unique keys.
 *
 *   message            message:<team>:<channel>:<ts>
 *   an edit            message_changed:<team>:<channel>:<message.ts>:<ts of the edit event>
 *   a deletion         message_deleted:<team>:<channel>:<deleted_ts>
 *   app_mention        app_mention:<team>:<channel>:<ts>
 *                      (one message's message and app_mention are two facts)
 *   reaction_added     reaction_added:<team>:<item>:<user>:<event_ts>:<reaction>
 *   reaction_removed   the same, reaction_removed (item: <channel>/<ts>, or a file's id)
 *   function_executed  function_executed:<team>:<function_execution_id> (a custom step's
 *                      execution: one run of the step, whatever event_id Slack sends it under)
 *   any other event    its event_id (no natural identity)
 *   commands and interactions: their operation id (shared/slack/inputs.ts),
 *   which already names one operation.
 *
 * Every part but a reaction's name is a Slack id or a ts (no ":"); the
 * reaction, the one free-form part, comes last, so a fact names one tuple.
 * No fact equals an event_id ("Ev…", no ":") or an operation id ("command:",
 * "interaction:", "alert:").
 */
import { isObject, type JsonObject, present, type RecordableInput, type SlackEvent } from "./inputs.ts";

export interface FactOf {
  /** The fact identity: the outbox rows' key prefix. */
  readonly fact: string;
}

export function factOf(input: RecordableInput): FactOf {
  if (input.surface !== "event") return { fact: input.id };
  return { fact: naturalFact(input.teamId ?? "-", input.event) ?? input.id };
}

function naturalFact(team: string, event: SlackEvent): string | undefined {
  // Every part read by present() (inputs.ts): a part sent as "" is absent, and a fact needs every part.
  const parts = (type: string, ...rest: unknown[]): string | undefined => {
    const read = rest.map(present);
    return read.every((part) => part !== undefined) ? [type, team, ...read].join(":") : undefined;
  };
  if (event.type === "app_mention") return parts("app_mention", event.channel, event.ts);
  if (event.type === "message") {
    const subtype = present(event.subtype);
    if (subtype === "message_changed") {
      const message = isObject(event.message) ? event.message : undefined;
      return parts("message_changed", event.channel, message?.ts, event.ts);
    }
    if (subtype === "message_deleted") return parts("message_deleted", event.channel, event.deleted_ts);
    return parts("message", event.channel, event.ts);
  }
  if (event.type === "function_executed") return parts("function_executed", event.function_execution_id);
  if (event.type === "reaction_added" || event.type === "reaction_removed") {
    const item = isObject(event.item) ? event.item : undefined;
    const itemId = item ? itemOf(item) : undefined;
    return parts(event.type, itemId, event.user, event.event_ts, event.reaction);
  }
  return undefined;
}

function itemOf(item: JsonObject): string | undefined {
  const channel = present(item.channel);
  const ts = present(item.ts);
  if (channel && ts) return `${channel}/${ts}`;
  return present(item.file_comment) ?? present(item.file);
}
