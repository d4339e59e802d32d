/**
 * The floors' consumer (see naive-ingress.js): each message is one Slack call
 * (a threaded reply or a reaction), acked on Slack's ok, retried otherwise.
 * With DURABLE=1 the message names a row: claimed with a random token and a
 * lease in one statement, performed, then finished only if the token still
 * holds (fenced). No log line.
 */
const LEASE_MS = 60_000;

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

async function deliver(env, body) {
  if (env.DURABLE !== "1") return perform(env, body);
  const token = crypto.randomUUID();
  const now = Date.now();
  const row = await env.DB.prepare(
    "UPDATE floor_outbox SET claim_token = ?1, claim_expires_at = ?2 WHERE id = ?3 AND status = 'pending' AND (claim_expires_at IS NULL OR claim_expires_at < ?4) RETURNING payload",
  )
    .bind(token, now + LEASE_MS, body.id, now)
    .first();
  if (!row) return true; // done, or another claim holds it
  if (!(await perform(env, JSON.parse(row.payload)))) return false;
  await env.DB.prepare("UPDATE floor_outbox SET status = 'done', claim_token = NULL WHERE id = ?1 AND claim_token = ?2")
    .bind(body.id, token)
    .run();
  return true;
}

export default {
  async queue(batch, env) {
    await Promise.all(
      batch.messages.map(async (message) => {
        try {
          if (await deliver(env, message.body)) message.ack();
          else message.retry();
        } catch {
          message.retry();
        }
      }),
    );
  },
};
