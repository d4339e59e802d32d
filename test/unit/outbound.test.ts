/**
 * shared/effects/outbound.ts: what any effect's outbound HTTP may reach, how
 * it treats a redirect, and how much of an answer it reads.
 */
import { afterEach, describe, expect, it } from "vitest";
import { EffectError } from "../../shared/delivery/failure.ts";
import { guardedFetch, networkEdge, outboundAllowed, outboundRefusal, readBounded } from "../../shared/effects/outbound.ts";
import { SLACK_ANSWER_MAX_BYTES, slackWebApi } from "../../shared/slack/web-api.ts";

const HOSTS = ["hooks.slack.com", "127.0.0.1", "localhost"];

describe("outboundRefusal", () => {
  it.each([
    ["https://hooks.slack.com/commands/T1/2/x", undefined],
    ["https://HOOKS.slack.com/commands/T1/2/x", undefined],
    ["https://hooks.slack.com:443/commands/T1/2/x", undefined], // 443 is the default port: URL drops it
    ["http://hooks.slack.com/commands/T1/2/x", "http://hooks.slack.com is not https"],
    ["https://hooks.slack.com:8443/commands/T1/2/x", "https://hooks.slack.com:8443 is not on the default port"],
    ["https://user:pw@hooks.slack.com/commands", "https://hooks.slack.com carries credentials in the URL"],
    ["https://evil.example/commands", "host evil.example is not allowed"],
    ["https://hooks.slack.com.evil.example/x", "host hooks.slack.com.evil.example is not allowed"],
    ["http://127.0.0.1:9000/respond/1", undefined], // the local run's stand-in
    ["http://localhost:9000/respond/1", undefined],
    ["ftp://hooks.slack.com/x", "scheme ftp: is not https"],
    ["not a url", "not a valid URL"],
  ])("%s → %s", (url, refusal) => {
    expect(outboundRefusal(url, HOSTS)).toBe(refusal);
  });

  it("allows any https host on 443 with *, and still refuses http and other ports there", () => {
    expect(outboundAllowed("https://anything.example/x", ["*"])).toBe(true);
    expect(outboundAllowed("http://anything.example/x", ["*"])).toBe(false);
    expect(outboundAllowed("https://anything.example:444/x", ["*"])).toBe(false);
  });

  it("refuses loopback unless it is listed", () => {
    expect(outboundRefusal("http://127.0.0.1:9000/x", ["hooks.slack.com"])).toBe("host 127.0.0.1 is not allowed");
  });
});

describe("readBounded", () => {
  const stream = (...chunks: string[]) =>
    new ReadableStream<Uint8Array>({
      start(controller) {
        for (const c of chunks) controller.enqueue(new TextEncoder().encode(c));
        controller.close();
      },
    });

  it("reads a short body whole", async () => {
    const { bytes, truncated } = await readBounded(stream("ab", "cd"), 10);
    expect(new TextDecoder().decode(bytes)).toBe("abcd");
    expect(truncated).toBe(false);
  });

  it("stops at the limit and cancels an endless body", async () => {
    let cancelled = false;
    let pulls = 0;
    const endless = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulls += 1;
        controller.enqueue(new Uint8Array(1000).fill(120));
      },
      cancel() {
        cancelled = true;
      },
    });
    const { bytes, truncated } = await readBounded(endless, 2500);
    expect(bytes.byteLength).toBe(2500);
    expect(truncated).toBe(true);
    expect(cancelled).toBe(true);
    expect(pulls).toBeLessThan(10);
  });

  it("reads a body of exactly the limit as whole", async () => {
    const { bytes, truncated } = await readBounded(stream("abcd"), 4);
    expect(bytes.byteLength).toBe(4);
    expect(truncated).toBe(false);
  });
});

describe("guardedFetch", () => {
  const original = globalThis.fetch;
  const seen: RequestInit[] = [];
  afterEach(() => {
    globalThis.fetch = original;
    seen.length = 0;
  });
  const answer = (response: () => Response) => {
    globalThis.fetch = (async (_: unknown, init?: RequestInit) => {
      seen.push(init ?? {});
      return response();
    }) as typeof fetch;
  };
  const policy = { hosts: HOSTS, timeoutMs: 1000, maxBodyBytes: 8 };

  it("never follows a redirect: it asks for manual, and a 3xx is a fatal failure naming only the target's host", async () => {
    answer(() => new Response(null, { status: 302, headers: { location: "https://evil.example/steal?x=secret" } }));
    const error = await guardedFetch(policy, "response_url", networkEdge)("https://hooks.slack.com/commands/T1/2/abc").catch((e) => e);
    expect(seen[0]?.redirect).toBe("manual");
    expect(error).toBeInstanceOf(EffectError);
    expect(error.failure).toEqual({
      kind: "fatal",
      message: "response_url: answered HTTP 302, a redirect to https://evil.example; redirects are not followed",
    });
  });

  it("refuses before sending anything, and the message names the origin, never the path", async () => {
    answer(() => new Response("ok"));
    const error = await guardedFetch(
      policy,
      "response_url",
      networkEdge,
    )("http://hooks.slack.com/commands/T1/2/secret-part").catch((e) => e);
    expect(seen).toEqual([]);
    expect(error.failure.kind).toBe("fatal");
    expect(error.message).toBe("response_url: refused to call http://hooks.slack.com: http://hooks.slack.com is not https");
  });

  it("hands back at most maxBodyBytes of the answer, marked as cut", async () => {
    answer(() => new Response("0123456789abcdef"));
    const response = await guardedFetch(policy, "fetch", networkEdge)("https://hooks.slack.com/x");
    expect(await response.text()).toBe("01234567");
    expect(response.headers.get("x-ackbox-truncated")).toBe("1");
  });
});

describe("the Slack Web API client reads by the same rules", () => {
  const original = globalThis.fetch;
  afterEach(() => {
    globalThis.fetch = original;
  });

  it("does not follow a redirect: a 3xx is an HTTP failure that parks, and the redirect was asked to be manual", async () => {
    let redirect: RequestInit["redirect"];
    globalThis.fetch = (async (_: unknown, init?: RequestInit) => {
      redirect = init?.redirect;
      return new Response(null, { status: 302, headers: { location: "https://evil.example/api" } });
    }) as typeof fetch;
    const error = await slackWebApi("xoxb-t", "https://slack.test/api/", networkEdge)
      .call("chat.postMessage", { channel: "C1" }, 1000)
      .catch((e) => e);
    expect(redirect).toBe("manual");
    expect(error.failure).toEqual({ kind: "fatal", message: "chat.postMessage: HTTP 302" });
  });

  it(`reads at most ${SLACK_ANSWER_MAX_BYTES} bytes of an answer: a longer one is a transient failure, not a memory spike`, async () => {
    globalThis.fetch = (async () => new Response(`{"ok":true,"pad":"${"x".repeat(SLACK_ANSWER_MAX_BYTES)}"}`)) as typeof fetch;
    const error = await slackWebApi("xoxb-t", "https://slack.test/api/", networkEdge)
      .call("chat.postMessage", { channel: "C1" }, 1000)
      .catch((e) => e);
    expect(error.failure).toEqual({ kind: "transient", message: `chat.postMessage: an answer over ${SLACK_ANSWER_MAX_BYTES} bytes` });
  });
});
