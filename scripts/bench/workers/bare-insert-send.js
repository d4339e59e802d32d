/**
 * Profiling baseline: the durable floor plus the fast path's queue hop. One
 * bare D1 INSERT, 200 after the commit, then one queue send of the new row's
 * id in waitUntil, which is the least any "record, ack, then enqueue" design
 * pays. The gap between this and bare-insert is the queue send; the gap
 * between this and the ingress is everything else the ingress does.
 */
export default {
  async fetch(request, env, ctx) {
    const body = await request.text();
    const { meta } = await env.DB.prepare("INSERT INTO bare_events (body, received_at) VALUES (?1, ?2)").bind(body, Date.now()).run();
    ctx.waitUntil(env.OUTBOX_QUEUE.sendBatch([{ body: { id: meta.last_row_id }, contentType: "json" }]).catch(() => {}));
    return new Response(null, { status: 200 });
  },
};
