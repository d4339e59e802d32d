/**
 * The durable floor: reads the POST body, writes it to D1 with one bare
 * INSERT (one row, no index, no signature check, no dedupe) and answers 200
 * once the write has committed. Any durable ack pays at least this.
 *
 * The table is created by the bench before the run (scripts/bench/ack.ts).
 */
export default {
  async fetch(request, env) {
    const body = await request.text();
    await env.DB.prepare("INSERT INTO bare_events (body, received_at) VALUES (?1, ?2)").bind(body, Date.now()).run();
    return new Response(null, { status: 200 });
  },
};
