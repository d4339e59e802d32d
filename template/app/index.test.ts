/**
 * The app through the whole path: a signed request into the ingress Worker, the effects it caused read at the
 * fake Slack (ackbox/testing), on this project's real local D1 (test/setup.ts applies the engine's migrations).
 */
import { env } from "cloudflare:workers";
import { wholePath } from "ackbox/testing";
import { describe, expect, it } from "vitest";
import { app } from "./index.ts";

const path = wholePath(app, env);

describe("the app, request in, Slack calls out", () => {
  it("answers a mention in its thread", async () => {
    const { response, calls } = await path.event({ type: "app_mention", user: "U1", text: "<@UBOT> hi", channel: "C1", ts: "1.1" });
    expect(response.status).toBe(200);
    expect(calls).toEqual([{ method: "chat.postMessage", params: { channel: "C1", thread_ts: "1.1", text: "Hi <@U1>!" } }]);
  });

  it("acks /ackbox at once and posts the result to its response_url", async () => {
    const { body, calls } = await path.command("/ackbox", { text: "status" });
    expect(body).toEqual({ response_type: "ephemeral", text: "Working on `status`…" });
    expect(calls).toMatchObject([{ method: "response_url", params: { text: "Done: `status`" } }]);
  });

  it("ignores a bot's message: acked, no call", async () => {
    const { response, calls } = await path.event({ type: "message", bot_id: "B1", text: "beep", channel: "C1", ts: "1.2" });
    expect(response.status).toBe(200);
    expect(calls).toEqual([]);
  });
});
