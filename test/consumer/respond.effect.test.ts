/**
 * The response_url effect through the consumer, against a faked endpoint:
 * Slack's limits (30 minutes, 5 uses) and its answers.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { deliverBatch } from "../../shared/delivery/deliver.ts";
import { deliveryDeps } from "../support/consumer.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { insertRow, readRow, resetTables } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";

const slack = useFakeSlack();
beforeEach(() => resetTables(env.DB));

const URL = "https://hooks.slack.com/commands/T0TEAM/1234/abcd";
const MINUTE = 60_000;
const payload = { url: URL, body: { response_type: "ephemeral", text: "Done" } };
const row = (over: Parameters<typeof insertRow>[1] extends infer S ? Partial<S> : never = {}) =>
  insertRow(env.DB, {
    status: "pending",
    effect: "response_url",
    payload,
    createdAt: NOW - MINUTE,
    expiresAt: NOW - MINUTE + 30 * MINUTE,
    ...over,
  });

describe("response_url", () => {
  it("POSTs the message as JSON, and completes on Slack's 200", async () => {
    slack.current.script(URL, reply.text(200, "ok"));
    const id = await row();
    const { deps } = deliveryDeps(NOW);
    await deliverBatch(deps, [id]);
    expect(slack.current.callsTo(URL)[0]?.json).toEqual({ response_type: "ephemeral", text: "Done" });
    expect(slack.current.callsTo(URL)[0]?.authorization).toBeNull();
    expect((await readRow(env.DB, id)).status).toBe("done");
  });

  it("parks on an expired or used-up URL (404), and retries a 5xx", async () => {
    slack.current.script(URL, reply.text(404, "expired_url"), reply.status(503));
    const expired = await row();
    const flaky = await row();
    const { deps } = deliveryDeps(NOW);
    await deliverBatch(deps, [expired]);
    await deliverBatch(deps, [flaky]);
    expect(await readRow(env.DB, expired)).toMatchObject({ status: "dead", last_error: "response_url: HTTP 404 expired_url" });
    expect(await readRow(env.DB, flaky)).toMatchObject({ status: "pending", last_error: "response_url: HTTP 503" });
  });

  it("reads a 200 that carries ok:false as the refusal it is: retry a temporary one, park a final one", async () => {
    slack.current.script(URL, reply.error("internal_error"), reply.error("invalid_blocks"));
    const temporary = await row();
    const final = await row();
    const { deps } = deliveryDeps(NOW);
    await deliverBatch(deps, [temporary]);
    await deliverBatch(deps, [final]);
    expect(await readRow(env.DB, temporary)).toMatchObject({ status: "pending", last_error: "response_url: internal_error" });
    expect(await readRow(env.DB, final)).toMatchObject({ status: "dead", last_error: "response_url: invalid_blocks" });
  });

  it("honours a 429's Retry-After (jitter pinned to 0), and spends no attempt: the URL was not used", async () => {
    slack.current.script(URL, reply.rateLimited(9));
    const id = await row();
    const { deps } = deliveryDeps(NOW, { random: () => 0 });
    expect((await deliverBatch(deps, [id])).get(id)).toEqual({ action: "resend", delaySeconds: 9 });
    expect(await readRow(env.DB, id)).toMatchObject({ status: "pending", attempts: 0, next_attempt_at: NOW + 9000 });
  });

  it("gives up after 5 attempts, because each may have used the URL once", async () => {
    slack.current.script(URL, reply.status(500));
    const id = await row({ attempts: 4 });
    const { deps } = deliveryDeps(NOW, { settings: { maxAttempts: 8 } });
    await deliverBatch(deps, [id]);
    expect(await readRow(env.DB, id)).toMatchObject({
      status: "dead",
      attempts: 5,
      last_error: "attempts exhausted (5 of 5): response_url: HTTP 500",
    });
  });

  it("parks a retry that would land after the 30 minutes, and retries one that lands before", async () => {
    slack.current.script(URL, reply.rateLimited(61), reply.rateLimited(59));
    const late = await row({ createdAt: NOW - 29 * MINUTE, expiresAt: NOW + MINUTE });
    const inTime = await row({ createdAt: NOW - 29 * MINUTE, expiresAt: NOW + MINUTE });
    const { deps } = deliveryDeps(NOW);
    await deliverBatch(deps, [late]);
    await deliverBatch(deps, [inTime]);
    expect(await readRow(env.DB, late)).toMatchObject({
      status: "dead",
      last_error: "deadline passed before the next attempt could run: response_url: HTTP 429 rate limited",
    });
    expect((await readRow(env.DB, inTime)).status).toBe("pending");
  });

  it("does not even try once the 30 minutes are over", async () => {
    const id = await row({ createdAt: NOW - 31 * MINUTE, expiresAt: NOW - MINUTE });
    const { deps } = deliveryDeps(NOW);
    await deliverBatch(deps, [id]);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "dead", last_error: "deadline passed before the effect could run" });
    expect(slack.current.calls).toEqual([]);
  });

  it("refuses a host outside RESPONSE_URL_HOSTS without calling it", async () => {
    const id = await row({ payload: { url: "https://attacker.example/steal", body: { text: "x" } } });
    const { deps } = deliveryDeps(NOW);
    await deliverBatch(deps, [id]);
    expect(await readRow(env.DB, id)).toMatchObject({
      status: "dead",
      last_error: "response_url: refused to call https://attacker.example: host attacker.example is not allowed",
    });
    expect(slack.current.calls).toEqual([]);
  });

  it.each([
    ["plain http", "http://hooks.slack.com/commands/T0TEAM/1234/abcd", "http://hooks.slack.com is not https"],
    ["another port", "https://hooks.slack.com:8443/commands/T0TEAM/1234/abcd", "https://hooks.slack.com:8443 is not on the default port"],
  ])("refuses an allowed host over %s without calling it", async (_, url, reason) => {
    const id = await row({ payload: { url, body: { text: "x" } } });
    const { deps } = deliveryDeps(NOW);
    await deliverBatch(deps, [id]);
    const stored = await readRow(env.DB, id);
    expect(stored.status).toBe("dead");
    expect(stored.last_error).toContain(reason);
    expect(stored.last_error).not.toContain("abcd"); // the URL's secret path is never in an error
    expect(slack.current.calls).toEqual([]);
  });

  it("does not follow a redirect: one call, parked with the reason and only the target's origin", async () => {
    slack.current.script(URL, { kind: "http", status: 307, body: "", headers: { location: "https://attacker.example/collect?u=1" } });
    const id = await row();
    const { deps } = deliveryDeps(NOW);
    await deliverBatch(deps, [id]);
    expect(await readRow(env.DB, id)).toMatchObject({
      status: "dead",
      last_error: "response_url: answered HTTP 307, a redirect to https://attacker.example; redirects are not followed",
    });
    expect(slack.current.calls.map((c) => c.target)).toEqual([URL]);
  });

  it("reads only a bounded prefix of an answer that never ends, and moves on", async () => {
    const chunks = { pulled: 0 };
    slack.current.script(URL, reply.endless(400, chunks));
    const id = await row();
    const { deps } = deliveryDeps(NOW);
    await deliverBatch(deps, [id]);
    const stored = await readRow(env.DB, id);
    expect(stored.status).toBe("dead");
    expect(stored.last_error).toBe(`response_url: HTTP 400 ${"x".repeat(200)}`);
    // 4 KiB read, then the stream cancelled (a chunk or two of read-ahead at most).
    expect(chunks.pulled).toBeLessThanOrEqual(8);
  });

  it("times out a hanging endpoint and retries", async () => {
    slack.current.script(URL, reply.hang());
    const id = await row();
    const { deps } = deliveryDeps(NOW, { context: { ...deliveryDeps(NOW).deps.context, timeoutMs: 30 } });
    expect((await deliverBatch(deps, [id])).get(id)).toMatchObject({ action: "retry" });
    expect((await readRow(env.DB, id)).last_error).toBe("response_url: no answer within 30 ms");
  });
});
