/**
 * Forwards a Worker's outbound Slack calls to the bench's fake Slack in Node
 * (scripts/bench/fake-slack.ts), which timestamps each arrival on the same
 * clock as the load generator's acks: the slack-edge peer calls
 * https://slack.com/api/<method>, the bench routes its fetches here, and the
 * call goes on to TARGET/<method> unchanged.
 */
export default {
  async fetch(request, env) {
    const method = new URL(request.url).pathname.split("/").pop();
    return fetch(`${env.TARGET}${method}`, { method: request.method, headers: request.headers, body: await request.arrayBuffer() });
  },
};
