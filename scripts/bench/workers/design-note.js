/**
 * The design note's schema and statements, exactly as the note writes them
 * (/work/shared/seed, "Three-Second Ack": slack_event_receipts, outbox,
 * outbox_claimable; recordIntent, claimBatch, completeClaimed, sweepOutbox),
 * so the bench can price them beside ackbox's. The SQL strings are the
 * note's, character for character in what they do; only `env` is the caller's.
 */
export const SCHEMA = [
  `CREATE TABLE slack_event_receipts (
  event_id    TEXT PRIMARY KEY,
  event_type  TEXT NOT NULL,
  received_at INTEGER NOT NULL
)`,
  `CREATE TABLE outbox (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  idempotency_key  TEXT NOT NULL UNIQUE,
  effect           TEXT NOT NULL,
  payload          TEXT NOT NULL,
  status           TEXT NOT NULL DEFAULT 'pending',
  attempts         INTEGER NOT NULL DEFAULT 0,
  claim_token      TEXT,
  claim_expires_at INTEGER,
  created_at       INTEGER NOT NULL,
  completed_at     INTEGER
)`,
  "CREATE INDEX outbox_claimable ON outbox (status, claim_expires_at, id)",
];

export async function recordIntent(payload, env) {
  const now = Date.now();
  const batch = await env.DB.batch([
    env.DB.prepare(
      `INSERT INTO slack_event_receipts (event_id, event_type, received_at)
       VALUES (?, ?, ?)
       ON CONFLICT (event_id) DO NOTHING`,
    ).bind(payload.event_id, payload.event.type, now),

    // Must sit immediately after the receipt insert to report its row count.
    env.DB.prepare("SELECT changes() AS changes"),

    // Unconditional and idempotent: on a redelivery the UNIQUE key absorbs it.
    env.DB.prepare(
      `INSERT INTO outbox (idempotency_key, effect, payload, created_at)
       VALUES (?, ?, ?, ?)
       ON CONFLICT (idempotency_key) DO NOTHING`,
    ).bind(`${payload.event_id}:notify`, "notify", JSON.stringify(payload.event), now),
  ]);

  return batch[1].results[0].changes === 1;
}

const LEASE_MS = 10 * 60 * 1000;

export async function claimBatch(env, token, limit) {
  const now = Date.now();

  await env.DB.prepare(
    `UPDATE outbox
        SET claim_token = ?, claim_expires_at = ?
      WHERE id IN (
        SELECT id FROM outbox
         WHERE status = 'pending'
           AND (claim_expires_at IS NULL
                OR claim_expires_at < ?
                OR claim_token = ?)
         ORDER BY id
         LIMIT ?
      )`,
  )
    .bind(token, now + LEASE_MS, now, token, limit)
    .run();

  const { results } = await env.DB.prepare("SELECT id, effect, payload, attempts FROM outbox WHERE claim_token = ? ORDER BY id")
    .bind(token)
    .all();

  return results;
}

export async function completeClaimed(env, id, token) {
  const batch = await env.DB.batch([
    env.DB.prepare(
      `UPDATE outbox
          SET status = 'done', claim_token = NULL, claim_expires_at = NULL, completed_at = ?
        WHERE id = ? AND claim_token = ?`,
    ).bind(Date.now(), id, token),
    env.DB.prepare("SELECT changes() AS changes"),
  ]);

  return batch[1].results[0].changes === 1;
}

/** The note's loop: claim 25, perform each, complete each. performEffect is the caller's (a Slack call). */
export async function sweepOutbox(env, performEffect) {
  const token = crypto.randomUUID();
  let completed = 0;
  for (const row of await claimBatch(env, token, 25)) {
    await performEffect(row, env);
    if (await completeClaimed(env, row.id, token)) completed += 1;
  }
  return completed;
}
