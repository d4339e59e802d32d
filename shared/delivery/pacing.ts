/**
 * PACING: how ackbox spaces its calls to Slack, so a busy channel drains at
 * Slack's rate instead of being answered 429.
 *
 * Slack limits calls "per API method per app per workspace" (Tier 1–4: 1+, 20+,
 * 50+, 100+ per minute), and chat.postMessage, besides, to "one message per
 * second per channel" with short bursts allowed
 * (https://docs.slack.dev/apis/web-api/rate-limits). A 429 does not say which
 * limit it was, so ackbox keys its pacing the way a row is most narrowly
 * limited:
 *
 * - a call with a `channel` argument (chat.postMessage, reactions.add,
 *   chat.update, …): the key (team, channel), paced at one call a second;
 * - any other Web API method: the key (team, method), paced at Tier 3's
 *   50 a minute;
 * - a response_url post has no key: its URL is its own limit, and a 429 on it
 *   only delays that row.
 *
 * The key is derived from the row itself (team_id, effect = the method's name,
 * payload = its arguments), in SQL, by rateKeySql below: the claim reads it,
 * the 429 writes it, and it is the one definition (shared/outbox/cooldown.ts).
 */

/** Slack's documented per-channel rate: one message per second per channel. */
export const CHANNEL_PACE_MS = 1000;

/** Tier 3 (50+ per minute), the tier of reactions.add and the common tier of the methods an app calls per event. */
export const METHOD_PACE_MS = 1200;

/** The effect whose payload is a response_url post, not a Web API call: it has no rate key. */
export const RESPONSE_URL_EFFECT = "response_url";

/**
 * The rate key of an outbox row, as an SQL expression over `table`'s columns
 * (team_id, effect, payload). NULL: the row is not paced. json_valid guards
 * json_extract, which raises on malformed JSON: such a row is parked by the
 * consumer, and must not make its claim fail first.
 */
export function rateKeySql(table: string): string {
  return `(CASE
    WHEN ${table}.effect = '${RESPONSE_URL_EFFECT}' THEN NULL
    WHEN json_valid(${table}.payload) AND json_type(${table}.payload, '$.channel') = 'text'
      THEN coalesce(${table}.team_id, '') || '/channel/' || json_extract(${table}.payload, '$.channel')
    ELSE coalesce(${table}.team_id, '') || '/method/' || ${table}.effect
  END)`;
}

/** The pace of a key made by rateKeySql, as an SQL expression over the key. */
export function paceMsSql(key: string): string {
  return `(CASE WHEN instr(${key}, '/channel/') > 0 THEN ${CHANNEL_PACE_MS} ELSE ${METHOD_PACE_MS} END)`;
}

/** The pace of a key made by rateKeySql (the same rule as paceMsSql, for the consumer's in-batch spacing). */
export function paceMsOf(key: string): number {
  return key.includes("/channel/") ? CHANNEL_PACE_MS : METHOD_PACE_MS;
}

/** What the in-batch pacer says about a claimed row. */
export type PaceVerdict = { readonly kind: "go"; readonly waitMs: number } | { readonly kind: "busy" };

/**
 * In-batch pacing: within one consumer invocation, two calls on one key do not
 * start closer than its pace (Slack's "one message per second per channel").
 *
 * - A row without a key, or the first row of a key in the batch: go now.
 * - A later row of a key that is not hot: with PACE_AHEAD on, "busy": the
 *   lane does not sleep on it (other invocations cannot see this batch's
 *   spacing), the key is marked busy in D1 and the row takes a release slot
 *   shared by everyone (shared/outbox/cooldown.ts) — a write, only when one
 *   batch holds two rows for one key. With PACE_AHEAD off (the default), go:
 *   nothing is paced or written until Slack has answered 429 for the key.
 * - A later row of a hot key (its rows are coming back through slots, and
 *   Queues may hand two slots' messages over in one batch): go, a pace after
 *   the previous call on the key — if that is at most one pace away; a longer
 *   wait in memory would overlap the slots D1 hands out meanwhile (measured:
 *   a lane slept a minute and its calls met 429s), so it is "busy" too.
 *
 * Each call reserves its start time before it waits, so lanes queue up in
 * claim order.
 */
export class BatchPacer {
  readonly #next = new Map<string, number>();
  readonly #ahead: boolean;

  constructor(paceAhead: boolean) {
    this.#ahead = paceAhead;
  }

  reserve(key: string | null, hot: boolean, now: number): PaceVerdict {
    if (key === null) return { kind: "go", waitMs: 0 };
    const pace = paceMsOf(key);
    const next = this.#next.get(key);
    if (next !== undefined && !hot) return this.#ahead ? { kind: "busy" } : { kind: "go", waitMs: 0 };
    const at = Math.max(now, next ?? now);
    if (next !== undefined && at - now > pace) return { kind: "busy" };
    this.#next.set(key, at + pace);
    return { kind: "go", waitMs: at - now };
  }
}
