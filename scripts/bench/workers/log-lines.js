/**
 * scripts/bench/log-cost.ts's Worker: GET /log?n=<n>&shape=<delivered|ack>
 * logs n lines shaped like ackbox's (shared/log.ts: one JSON object per
 * line, console.log) and answers 204; GET /healthz answers. Nothing else
 * (the floor's consumer stands beside it).
 */
const SHAPES = {
  delivered: (i) => ({ level: "info", msg: "delivered", outbox_id: 1000 + i, effect: "chat.postMessage", attempt: 1, ms: 41 }),
  ack: (i) => ({
    level: "info",
    msg: "slack request",
    verdict: "accepted",
    status: 200,
    surface: "event",
    id: `Ev${String(1e9 + i)}`,
    handler: "watched channel",
    outbox_ids: [1000 + i],
    first_attempt: "inline",
    retry_num: null,
    retry_reason: null,
    ms: 4.2,
  }),
};

export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === "/healthz") return Response.json({ ok: true });
    if (url.pathname !== "/log") return new Response("not found", { status: 404 });
    const n = Math.min(10_000, Number(url.searchParams.get("n") ?? 0));
    const shape = SHAPES[url.searchParams.get("shape") ?? "delivered"] ?? SHAPES.delivered;
    for (let i = 0; i < n; i++) console.log(JSON.stringify(shape(i)));
    return new Response(null, { status: 204 });
  },
};
