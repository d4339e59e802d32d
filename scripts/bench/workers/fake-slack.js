/**
 * A Slack stand-in inside the runtime, for Workers whose outbound fetches the
 * bench routes here (the slack-edge peer, the cost probe): every Web API
 * method answers {ok: true}, chat.postMessage with a fresh ts. It keeps a
 * count only, so it costs the same whatever the run length.
 */
let calls = 0;

export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname.endsWith("/__calls")) return Response.json({ calls });
    await request.arrayBuffer();
    calls += 1;
    const method = url.pathname.split("/").pop();
    if (method === "chat.postMessage")
      return Response.json({ ok: true, channel: "C0", ts: `1764504999.${String(calls).padStart(6, "0")}` });
    return Response.json({ ok: true });
  },
};
