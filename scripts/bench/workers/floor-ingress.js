/**
 * The pipeline section's durable floor: the least an outbox design pays on
 * its happy path. Verify Slack's signature; one statement that is both the
 * receipt and the row (UNIQUE on event_id absorbs a redelivery), committed
 * before the 200; the row's id sent to the queue after it, and
 * floor-consumer.js claims, performs and finishes it fenced. No recovery
 * path: no sweep, so a row whose queue send fails (swallowed below) or whose
 * message is lost stays pending. No log line, no settings, no app.
 *
 * Run with the product's own wrangler configs (cli/local/pipeline.ts,
 * its bundles option), so the gap to ackbox is ackbox's own.
 */
const encoder = new TextEncoder();
let keyFor;
let schema;

async function signingKey(secret) {
  if (keyFor?.secret !== secret) {
    keyFor = {
      secret,
      key: await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["verify"]),
    };
  }
  return keyFor.key;
}

function hexBytes(hex) {
  if (!/^[0-9a-f]{64}$/.test(hex)) return undefined;
  const bytes = new Uint8Array(32);
  for (let i = 0; i < 32; i++) bytes[i] = Number.parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return bytes;
}

/** The durable floor's one table, made once per isolate (bench-only; the product's tables come from migrations). */
function ensureSchema(db) {
  schema ??= db
    .exec(
      "CREATE TABLE IF NOT EXISTS floor_outbox (id INTEGER PRIMARY KEY, event_id TEXT NOT NULL UNIQUE, payload TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending', claim_token TEXT, claim_expires_at INTEGER, created_at INTEGER NOT NULL)",
    )
    .catch((error) => {
      schema = undefined;
      throw error;
    });
  return schema;
}

export default {
  async fetch(request, env, ctx) {
    const { pathname } = new URL(request.url);
    if (pathname === "/healthz") return Response.json({ ok: true, service: "floor-ingress" });
    if (pathname !== "/slack/events" || request.method !== "POST") return new Response("not found", { status: 404 });
    const body = await request.text();
    const timestamp = request.headers.get("x-slack-request-timestamp") ?? "";
    const signature = hexBytes((request.headers.get("x-slack-signature") ?? "").replace(/^v0=/, ""));
    const age = Math.abs(Date.now() / 1000 - Number(timestamp));
    if (!signature || !Number.isFinite(age) || age > 300) return new Response("bad signature", { status: 401 });
    const key = await signingKey(env.SLACK_SIGNING_SECRET);
    if (!(await crypto.subtle.verify("HMAC", key, signature, encoder.encode(`v0:${timestamp}:${body}`)))) {
      return new Response("bad signature", { status: 401 });
    }
    const payload = JSON.parse(body);
    if (payload.type === "url_verification") return Response.json({ challenge: payload.challenge });
    const event = payload.event ?? {};
    const kind = event.type === "app_mention" ? "reply" : event.type === "message" ? "react" : undefined;
    if (!kind) return new Response(null, { status: 200 });
    const effect = { kind, channel: event.channel, ts: event.ts };
    await ensureSchema(env.DB);
    const row = await env.DB.prepare(
      "INSERT INTO floor_outbox (event_id, payload, created_at) VALUES (?1, ?2, ?3) ON CONFLICT (event_id) DO NOTHING RETURNING id",
    )
      .bind(payload.event_id, JSON.stringify(effect), Date.now())
      .first();
    if (row) ctx.waitUntil(env.OUTBOX_QUEUE.send({ id: row.id }, { contentType: "json" }).catch(() => {}));
    return new Response(null, { status: 200 });
  },
};
