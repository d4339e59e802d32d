import { describe, expect, it } from "vitest";
import { watchAuthErrors } from "../../shared/installations/resolve.ts";
import type { SlackWebApi } from "../../shared/slack/web-api.ts";

/** A client that answers from a list and records every call's arguments. */
function recordingClient(answers: { ok: boolean; error?: string }[]) {
  const calls: { method: string; timeoutMs: number; signal: AbortSignal | undefined }[] = [];
  const client: SlackWebApi = {
    async call(method, _params, timeoutMs, signal) {
      calls.push({ method, timeoutMs, signal });
      const next = answers.shift() ?? { ok: true };
      return (next.ok ? { ok: true, body: {} } : { ok: false, error: next.error ?? "x", body: {} }) as Awaited<
        ReturnType<SlackWebApi["call"]>
      >;
    },
  };
  return { client, calls };
}

describe("watchAuthErrors", () => {
  it("hands the attempt's abort signal and timeout to the client it wraps", async () => {
    const { client, calls } = recordingClient([{ ok: true }]);
    const signal = new AbortController().signal;
    await watchAuthErrors(client).slack.call("chat.postMessage", { channel: "C1" }, 1234, signal);
    expect(calls).toEqual([{ method: "chat.postMessage", timeoutMs: 1234, signal }]);
  });

  it("notes an auth error Slack answered, and not other errors", async () => {
    const { client } = recordingClient([
      { ok: false, error: "channel_not_found" },
      { ok: false, error: "token_revoked" },
    ]);
    const watched = watchAuthErrors(client);
    await watched.slack.call("chat.postMessage", {}, 10);
    expect(watched.authFailure()).toBeUndefined();
    await watched.slack.call("chat.postMessage", {}, 10);
    expect(watched.authFailure()).toBe("token_revoked");
  });
});
