import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { networkEdge } from "../../shared/effects/outbound.ts";
import { recordingLog } from "../../shared/log.ts";
import { bearerToken } from "../../workers/ingress/admin/auth.ts";
import { authThrottle, FAILURE_LIMIT, WINDOW_MS } from "../../workers/ingress/admin/throttle.ts";
import { handleHttp } from "../../workers/ingress/http.ts";
import { ADMIN_URL } from "../support/ops.ts";
import { insertRow, resetTables } from "../support/rows.ts";
import { TEST_ADMIN_TOKEN } from "../support/settings.ts";
import { NOW } from "../support/slack-requests.ts";
import { testApp } from "../support/test-app.ts";

beforeEach(() => resetTables(env.DB));
afterEach(() => vi.restoreAllMocks());

/** The whole ingress path dispatch, as the Worker runs it, with `env` overridable. */
async function call(path: string, init: RequestInit & { token?: string | null } = {}, over: Record<string, unknown> = {}) {
  const headers = new Headers(init.headers);
  if (init.token !== undefined && init.token !== null) headers.set("authorization", `Bearer ${init.token}`);
  const log = recordingLog();
  const response = await handleHttp(
    new Request(`${ADMIN_URL}${path}`, { ...init, headers }),
    { ...env, ...over } as typeof env,
    createExecutionContext(),
    NOW,
    log,
    testApp(),
    networkEdge,
  );
  return { status: response.status, text: await response.text(), headers: Object.fromEntries(response.headers), log };
}

const WRONG_SAME_LENGTH = TEST_ADMIN_TOKEN.replace(/.$/, (c) => (c === "a" ? "b" : "a"));

describe("401: no valid bearer token, nothing disclosed", () => {
  const refusals: [string, RequestInit & { token?: string | null }][] = [
    ["no Authorization header", {}],
    ["a wrong token of the same length", { token: WRONG_SAME_LENGTH }],
    ["a shorter token (a prefix of the real one)", { token: TEST_ADMIN_TOKEN.slice(0, 5) }],
    ["a longer token (the real one plus more)", { token: `${TEST_ADMIN_TOKEN}x` }],
    ["the token under another scheme", { headers: { authorization: `Basic ${TEST_ADMIN_TOKEN}` } }],
    ["an empty bearer", { headers: { authorization: "Bearer " } }],
  ];

  it.each(refusals)("refuses %s with the one identical 401", async (_, init) => {
    await insertRow(env.DB, { status: "dead", lastError: "chat.postMessage: channel_not_found" });
    const { status, text, headers, log } = await call("/admin/backlog", init);
    expect(status).toBe(401);
    expect(text).toBe("unauthorized\n");
    expect(headers).toEqual({
      "cache-control": "no-store",
      "content-type": "text/plain; charset=utf-8",
      "www-authenticate": 'Bearer realm="ackbox-admin"',
    });
    expect(JSON.stringify(log.records)).not.toContain(TEST_ADMIN_TOKEN);
  });

  it("answers every path under /admin alike, so a caller cannot learn which exist", async () => {
    const answers = await Promise.all(
      ["/admin/backlog", "/admin/dead", "/admin/events/Ev1", "/admin/no-such-thing", "/admin/metrics"].map((p) =>
        call(p, { token: WRONG_SAME_LENGTH }),
      ),
    );
    expect(new Set(answers.map((a) => `${a.status} ${a.text}`))).toEqual(new Set(["401 unauthorized\n"]));
    const replay = await call("/admin/replay", { method: "POST", body: "{}" });
    expect(replay.status).toBe(401);
  });

  it("compares HMAC digests of equal length in constant time, whatever the presented length", async () => {
    const spy = vi.spyOn(crypto.subtle, "timingSafeEqual");
    for (const token of [WRONG_SAME_LENGTH, "x", `${TEST_ADMIN_TOKEN}${"y".repeat(100)}`, null]) {
      spy.mockClear();
      await call("/admin/backlog", { token });
      expect(spy).toHaveBeenCalledTimes(1);
      const [a, b] = spy.mock.calls[0] as [Uint8Array, Uint8Array];
      expect([a.byteLength, b.byteLength]).toEqual([32, 32]);
    }
  });

  it("logs why it refused, never the token", async () => {
    const missing = await call("/admin/backlog");
    const wrong = await call("/admin/backlog", { token: WRONG_SAME_LENGTH });
    expect(missing.log.records.find((r) => r.msg === "admin request refused")?.fields.reason).toBe("missing bearer token");
    expect(wrong.log.records.find((r) => r.msg === "admin request refused")?.fields.reason).toBe("token mismatch");
    expect(JSON.stringify(wrong.log.records)).not.toContain(WRONG_SAME_LENGTH);
  });
});

describe("200 with the token", () => {
  it("accepts the token, with the scheme in any case", async () => {
    expect((await call("/admin/backlog", { token: TEST_ADMIN_TOKEN })).status).toBe(200);
    expect((await call("/admin/backlog", { headers: { authorization: `bearer ${TEST_ADMIN_TOKEN}` } })).status).toBe(200);
  });

  it("reads a bearer header strictly", () => {
    expect(bearerToken(`Bearer ${TEST_ADMIN_TOKEN}`)).toBe(TEST_ADMIN_TOKEN);
    expect(bearerToken(`Bearer  ${TEST_ADMIN_TOKEN} `)).toBe(TEST_ADMIN_TOKEN);
    expect(bearerToken(`Bearer a b`)).toBeNull();
    expect(bearerToken(`Token ${TEST_ADMIN_TOKEN}`)).toBeNull();
    expect(bearerToken(null)).toBeNull();
  });

  it("answers an unknown endpoint with 404 and a wrong method with 405, after the token check", async () => {
    const unknown = await call("/admin/no-such-thing", { token: TEST_ADMIN_TOKEN });
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.text).error).toBe("no such endpoint");
    const post = await call("/admin/backlog", { method: "POST", token: TEST_ADMIN_TOKEN });
    expect([post.status, post.headers.allow]).toEqual([405, "GET, HEAD"]);
    const get = await call("/admin/replay", { token: TEST_ADMIN_TOKEN });
    expect([get.status, get.headers.allow]).toEqual([405, "POST"]);
  });
});

describe("404: ADMIN_TOKEN unset turns the operator API off", () => {
  it.each([
    ["/admin", null],
    ["/admin/", null],
    ["/admin/backlog", null],
    ["/admin/backlog", TEST_ADMIN_TOKEN],
    ["/admin/dead", "anything"],
    ["/admin/events/Ev1", TEST_ADMIN_TOKEN],
    ["/admin/metrics", null],
  ])("answers %s (token %s) exactly as an unknown path", async (path, token) => {
    const off = { ADMIN_TOKEN: "" };
    const answer = await call(path, { token }, off);
    const unknownPath = await call("/no-such-path", {}, off);
    expect(answer.status).toBe(404);
    expect({ text: answer.text, headers: answer.headers }).toEqual({ text: unknownPath.text, headers: unknownPath.headers });
  });

  it("is off for a token of only whitespace too", async () => {
    expect((await call("/admin/backlog", { token: "x" }, { ADMIN_TOKEN: "   " })).status).toBe(404);
  });
});

describe("GET /admin, the page", () => {
  it("serves a static shell without the token: no data in it, a strict CSP with a fresh nonce", async () => {
    await insertRow(env.DB, { status: "dead", lastError: "SECRET-LOOKING-ERROR-TEXT" });
    const first = await call("/admin");
    const second = await call("/admin");
    expect(first.status).toBe(200);
    expect(first.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(first.text).not.toContain("SECRET-LOOKING-ERROR-TEXT");
    expect(first.text).not.toContain(TEST_ADMIN_TOKEN);
    const csp = first.headers["content-security-policy"] ?? "";
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    const nonce = /script-src 'nonce-([0-9a-f]+)'/.exec(csp)?.[1];
    expect(nonce).toMatch(/^[0-9a-f]{32}$/);
    expect(first.text).toContain(`<script nonce="${nonce}">`);
    expect(second.headers["content-security-policy"]).not.toBe(csp);
    expect(first.text).not.toMatch(/(src|href)=["']?(https?:|\/\/)/); // no external assets
  });
});

describe("a weak ADMIN_TOKEN is refused at settings time", () => {
  it("does not unlock the API with ADMIN_TOKEN=a: the ingress reports the setting, never the value", async () => {
    const { status, log } = await call("/admin/backlog", { token: "a" }, { ADMIN_TOKEN: "a" });
    expect(status).toBe(500);
    const errors = log.records.find((r) => r.msg.startsWith("ingress misconfigured"))?.fields.errors;
    expect(errors).toEqual(["ADMIN_TOKEN is too short (1 characters; want at least 32): generate one with `openssl rand -hex 32`"]);
  });
});

describe("429: repeated failures from one address are throttled, in memory", () => {
  const from = (address: string, token: string | null, now = NOW) => {
    const headers = new Headers({ "cf-connecting-ip": address });
    if (token !== null) headers.set("authorization", `Bearer ${token}`);
    const log = recordingLog();
    return handleHttp(
      new Request(`${ADMIN_URL}/admin/backlog`, { headers }),
      env,
      createExecutionContext(),
      now,
      log,
      testApp(),
      networkEdge,
    ).then(async (response) => ({ status: response.status, retryAfter: response.headers.get("retry-after"), log }));
  };

  it(`refuses an address after ${FAILURE_LIMIT} failures in a window, even with the right token, and lets it back after the window`, async () => {
    const address = "203.0.113.7";
    for (let i = 1; i <= FAILURE_LIMIT; i++) {
      const refused = await from(address, WRONG_SAME_LENGTH, NOW + i);
      expect(refused.status).toBe(401);
      expect(refused.log.records.find((r) => r.msg === "admin request refused")?.fields).toMatchObject({ address, failures: i });
    }
    const throttled = await from(address, TEST_ADMIN_TOKEN, NOW + 20_000);
    expect(throttled.status).toBe(429);
    expect(throttled.retryAfter).toBe("41"); // the window opened at NOW + 1 and lasts 60 s
    expect(throttled.log.records.map((r) => r.msg)).toEqual(["admin request throttled: too many failed attempts from this address"]);
    // Another address is not affected.
    expect((await from("198.51.100.9", TEST_ADMIN_TOKEN, NOW + 20_000)).status).toBe(200);
    // The window over (at its edge, exactly), the address may try again.
    expect((await from(address, TEST_ADMIN_TOKEN, NOW + 1 + WINDOW_MS - 1)).status).toBe(429);
    expect((await from(address, TEST_ADMIN_TOKEN, NOW + 1 + WINDOW_MS)).status).toBe(200);
  });

  it(`still answers the ${FAILURE_LIMIT}th failure with 401, and successes never count`, async () => {
    const address = "203.0.113.8";
    for (let i = 0; i < 20; i++) expect((await from(address, TEST_ADMIN_TOKEN, NOW)).status).toBe(200);
    for (let i = 0; i < FAILURE_LIMIT - 1; i++) await from(address, null, NOW);
    expect((await from(address, TEST_ADMIN_TOKEN, NOW)).status).toBe(200);
    expect((await from(address, null, NOW)).status).toBe(401);
    expect((await from(address, TEST_ADMIN_TOKEN, NOW)).status).toBe(429);
  });

  it("keeps at most its bound of addresses, dropping the oldest", () => {
    const throttle = authThrottle(2, WINDOW_MS, 3);
    for (const a of ["a1", "a2", "a3", "a4"]) throttle.recordFailure(a, NOW);
    throttle.recordFailure("a4", NOW);
    expect(throttle.size).toBe(3);
    expect(throttle.blockedFor("a4", NOW)).toBe(WINDOW_MS);
    expect(throttle.blockedFor("a1", NOW)).toBe(0); // evicted: the stated limit of an in-memory map
  });
});
