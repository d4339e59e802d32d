/**
 * shared/effects/slack-method.ts: the built-in effect for any Slack method
 * keeps web-api.ts's invariant — the attempt's signal ends the call.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { AttemptContext } from "../../shared/effects/effect.ts";
import { networkEdge } from "../../shared/effects/outbound.ts";
import { slackMethodEffect } from "../../shared/effects/slack-method.ts";
import { slackWebApi } from "../../shared/slack/web-api.ts";

describe("slackMethodEffect", () => {
  const original = globalThis.fetch;
  afterEach(() => {
    globalThis.fetch = original;
  });

  it("an aborted attempt aborts its Slack call, so a call started late does not outlive the attempt", async () => {
    let sent: AbortSignal | undefined;
    // Slack that never answers: only the request's signal ends it, as a real fetch's does.
    globalThis.fetch = ((_: unknown, init?: RequestInit) => {
      const signal = init?.signal ?? undefined;
      sent = signal;
      return new Promise((_, reject) => signal?.addEventListener("abort", () => reject(signal.reason)));
    }) as typeof fetch;
    const attempt = new AbortController();
    const context: AttemptContext = {
      slack: slackWebApi("xoxb-t", "https://slack.test/api/", networkEdge),
      responseUrlHosts: [],
      timeoutMs: 60_000,
      fetch: globalThis.fetch,
      edge: networkEdge,
      idempotencyKey: "k",
      attempt: 1,
      signal: attempt.signal,
    };
    const performing = slackMethodEffect("chat.postMessage").perform({ channel: "C1", text: "hi" }, context);
    performing.catch(() => {});
    attempt.abort(new Error("the attempt's timeout ran out"));
    expect(sent?.aborted).toBe(true);
    const error: unknown = await performing.catch((e: unknown) => e);
    expect(error).toMatchObject({ failure: { kind: "transient" } });
  });
});
