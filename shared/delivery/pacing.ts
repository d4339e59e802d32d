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

/**
 * Calls one key may make at once before pacing starts: Slack lets "short
 * bursts" through (its docs give no figure; 3 is a conservative reading, and
 * the benchmark's fake Slack allows exactly that).
 */
export const BURST = 3;

/**
 * In-batch spacing: the lanes of one consumer invocation start at most BURST
 * calls on one key at once, then one per pace (a token bucket per key). Each
 * call reserves its start time before it waits, so lanes queue up in claim
 * order. Returns how long the caller must wait before calling (0: at once).
 */
export class BatchPacer {
  /** Per key: the time at which the bucket would be full again (one pace per call taken). */
  readonly #fullAt = new Map<string, number>();

  reserve(key: string | null, now: number): number {
    if (key === null) return 0;
    const pace = paceMsOf(key);
    const fullAt = Math.max(now, this.#fullAt.get(key) ?? now);
    // The call may start once the bucket holds a token: when fullAt is at most BURST − 1 paces ahead.
    const startAt = Math.max(now, fullAt - (BURST - 1) * pace);
    this.#fullAt.set(key, fullAt + pace);
    return startAt - now;
  }
}
