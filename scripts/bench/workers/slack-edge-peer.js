/**
 * The non-durable peer: a minimal slack-edge app, the closest framework on
 * Workers. It verifies the signature (slack-edge's own check, same signing
 * secret as the ingress), acks, and runs the work in waitUntil (slack-edge's
 * "lazy" listener) with no durable record: the app_mention gets its threaded
 * chat.postMessage and a channel message its reactions.add, as in the
 * reference app; the calls go to an in-runtime fake Slack (the bench routes
 * this Worker's outbound fetches there).
 *
 * authorize is static: slack-edge's default (singleTeamAuthorize) calls
 * auth.test on every request, a Slack round trip before the ack. An app that
 * cares about its ack would not do that, and ackbox's ack path makes no
 * Slack call either, so the peer does not.
 */
import { SlackApp } from "slack-edge";

let app;

function appFor(env) {
  if (app) return app;
  app = new SlackApp({
    env: { SLACK_SIGNING_SECRET: env.SLACK_SIGNING_SECRET, SLACK_BOT_TOKEN: env.SLACK_BOT_TOKEN, SLACK_LOGGING_LEVEL: "ERROR" },
    authorize: async () => ({
      botToken: env.SLACK_BOT_TOKEN,
      botId: "B0PEER",
      botUserId: "U0PEERBOT",
      teamId: "T0TEAM",
      botScopes: ["chat:write", "reactions:write"],
      userToken: undefined,
      userScopes: undefined,
    }),
  });
  app.event("app_mention", async ({ context, payload }) => {
    await context.client.chat.postMessage({ channel: payload.channel, thread_ts: payload.ts, text: "on it" });
  });
  app.anyMessage(async ({ context, payload }) => {
    if (payload.subtype || !("ts" in payload)) return;
    await context.client.reactions.add({ channel: payload.channel, timestamp: payload.ts, name: "eyes" });
  });
  return app;
}

export default {
  async fetch(request, env, ctx) {
    return appFor(env).run(request, ctx);
  },
};
