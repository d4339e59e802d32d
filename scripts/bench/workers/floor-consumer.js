/**
 * The durable floor's consumer (see floor-ingress.js): each message names a
 * row, claimed with a random token and a lease in one statement, performed
 * (one Slack call: a threaded reply or a reaction), then finished only if the
 * token still holds (fenced); a failed call gives the claim back and the
 * message is retried. At most LANES rows of a batch at once, each lane a
 * row's claim → call → finish, like for like with ackbox's consumer
 * (DELIVERY_CONCURRENCY, whose reason is the platform's: six connections
 * waiting for response headers per invocation, a limit local workerd does
 * not enforce). A floor that ran a whole batch at once measured a consumer
 * ackbox is not, and would not be on the platform for its Slack calls.
 * No pacing, and no sweep: a row whose message is lost stays pending.
 * No log line.
 */
const LEASE_MS = 60_000;
const LANES = 6;

async function perform(env, { kind, channel, ts }) {
  const [method, params] =
    kind === "reply"
      ? ["chat.postMessage", { channel, thread_ts: ts, text: "on it" }]
      : ["reactions.add", { channel, timestamp: ts, name: "eyes" }];
  const response = await fetch(`${env.SLACK_API_URL}${method}`, {
    method: "POST",
    headers: { "content-type": "application/json; charset=utf-8", authorization: `Bearer ${env.SLACK_BOT_TOKEN}` },
    body: JSON.stringify(params),
  });
  const answer = await response.json();
  return answer.ok === true;
}

/** "ack" when the effect is done (here or before), else the seconds to wait before the message comes back. */
async function deliver(env, body) {
  const token = crypto.randomUUID();
  const now = Date.now();
  const row = await env.DB.prepare(
    "UPDATE floor_outbox SET claim_token = ?1, claim_expires_at = ?2 WHERE id = ?3 AND status = 'pending' AND (claim_expires_at IS NULL OR claim_expires_at < ?4) RETURNING payload",
  )
    .bind(token, now + LEASE_MS, body.id, now)
    .first();
  if (!row) {
    // Done already, or another claim holds it: come back when that lease ends.
    const held = await env.DB.prepare("SELECT status, claim_expires_at FROM floor_outbox WHERE id = ?1").bind(body.id).first();
    if (!held || held.status === "done") return "ack";
    return Math.max(1, Math.ceil(((held.claim_expires_at ?? now) - now) / 1000));
  }
  let ok = false;
  try {
    ok = await perform(env, JSON.parse(row.payload));
  } finally {
    if (!ok) {
      await env.DB.prepare("UPDATE floor_outbox SET claim_token = NULL, claim_expires_at = NULL WHERE id = ?1 AND claim_token = ?2")
        .bind(body.id, token)
        .run();
    }
  }
  if (!ok) return 1;
  await env.DB.prepare("UPDATE floor_outbox SET status = 'done', claim_token = NULL WHERE id = ?1 AND claim_token = ?2")
    .bind(body.id, token)
    .run();
  return "ack";
}

export default {
  /** No sweep: the cron the local run fires does nothing here. */
  scheduled() {},
  async queue(batch, env) {
    let next = 0;
    const lane = async () => {
      for (let message = batch.messages[next++]; message !== undefined; message = batch.messages[next++]) {
        try {
          const outcome = await deliver(env, message.body);
          if (outcome === "ack") message.ack();
          else message.retry({ delaySeconds: outcome });
        } catch {
          message.retry({ delaySeconds: 1 });
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(LANES, batch.messages.length) }, lane));
  },
};
