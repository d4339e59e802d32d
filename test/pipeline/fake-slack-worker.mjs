// An auxiliary Worker standing in for Slack at the consumer's network edge:
// the consumer's outbound fetches are routed here (outboundService). It
// answers in Slack's shapes and keeps every call; the test reads them from
// http://control/calls through its FAKE_SLACK service binding.
const calls = [];
let next = 1;

export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.hostname === "control") {
      if (url.pathname === "/calls") return Response.json(calls);
      return new Response("unknown control path", { status: 404 });
    }
    const body = new TextDecoder().decode(await request.arrayBuffer());
    if (url.hostname === "answers.test") {
      // The example app's answer service (examples/ask/app.ts), at the same edge.
      calls.push({ host: url.host, method: "answer", params: JSON.parse(body), idempotencyKey: request.headers.get("idempotency-key") });
      return Response.json({ answer: `The answer to "${JSON.parse(body).question}".` });
    }
    const method = url.pathname.split("/").pop();
    const params = Object.fromEntries(new URLSearchParams(body));
    calls.push({ host: url.host, method, params, authorization: request.headers.get("authorization") });
    if (method === "chat.postMessage") {
      return Response.json({ ok: true, channel: params.channel, ts: `1764504999.${String(next++).padStart(6, "0")}` });
    }
    return Response.json({ ok: true });
  },
};
