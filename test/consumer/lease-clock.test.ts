/**
 * The clock rule (docs/reliability.md, glossary: "lease"): a statement that
 * takes a lease binds the time read just before it, never a time captured
 * earlier (a cron tick's scheduledTime, a request's start). One test per
 * lease-taking statement: the outbox claim, the inline claim in the ack's
 * write, the refresh lease (the cron's and an effect's), and the sweep's
 * take (its sweep_at is when the row is looked at again). Each runs on a
 * clock that has moved on, between the earlier reading and the write, by
 * at least a lease, so a lease timed from the earlier reading has ended (or
 * ends that very moment) by the time it is written.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { deliverBatch } from "../../shared/delivery/deliver.ts";
import { networkEdge } from "../../shared/effects/outbound.ts";
import { type TokenKeys, tokenKeys } from "../../shared/installations/crypto.ts";
import { slackForRow } from "../../shared/installations/resolve.ts";
import { REFRESH_AHEAD_MS, REFRESH_LEASE_MS, refreshExpiring } from "../../shared/installations/rotation.ts";
import { saveInstallation } from "../../shared/installations/store.ts";
import { recordingLog } from "../../shared/log.ts";
import { recordIntent } from "../../shared/outbox/record.ts";
import { sweep } from "../../workers/consumer/sweep.ts";
import { deliveryDeps, testSettings } from "../support/consumer.ts";
import { gate, reply, useFakeSlack } from "../support/fake-slack.ts";
import { testInstallation } from "../support/installations.ts";
import { insertRow, readRow, resetTables } from "../support/rows.ts";
import { TEST_SLACK_API_URL } from "../support/settings.ts";
import { NOW } from "../support/slack-requests.ts";
import { waitFor } from "../support/wait.ts";

const slack = useFakeSlack();
let keys: TokenKeys;

beforeEach(async () => {
  await resetTables(env.DB);
  await env.DB.prepare("DELETE FROM installations").run();
  keys = await tokenKeys("4a".repeat(32), undefined);
});

/** A clock that moves on by `step` at every read; `peek` says where it is without moving it. */
function steppingClock(start: number, step: number) {
  let t = start;
  const clock = () => {
    t += step;
    return t;
  };
  return { clock, peek: () => t, set: (to: number) => (t = to) };
}

/**
 * `db`, noting in `seen` where the clock is (peeked) when a statement whose SQL matches is sent — alone or in a
 * batch: the clock at the write.
 */
function clockAtWrite(db: D1Database, match: RegExp, peek: () => number, seen: number[]): D1Database {
  const real = new WeakMap<object, D1PreparedStatement>();
  const wrap = (statement: D1PreparedStatement): D1PreparedStatement => {
    const proxy = new Proxy(statement, {
      get(inner, prop) {
        if (prop === "bind") return (...values: unknown[]) => wrap(inner.bind(...values));
        if (prop === "first" || prop === "run" || prop === "all" || prop === "raw") {
          return (...args: unknown[]) => {
            seen.push(peek());
            return (inner[prop] as (...a: unknown[]) => unknown).apply(inner, args);
          };
        }
        const value = Reflect.get(inner, prop);
        return typeof value === "function" ? value.bind(inner) : value;
      },
    });
    real.set(proxy, statement);
    return proxy;
  };
  return new Proxy(db, {
    get(inner, prop) {
      if (prop === "prepare") return (sql: string) => (match.test(sql) ? wrap(inner.prepare(sql)) : inner.prepare(sql));
      if (prop === "batch") {
        return (statements: D1PreparedStatement[]) => {
          if (statements.some((s) => real.has(s))) seen.push(peek());
          return inner.batch(statements.map((s) => real.get(s) ?? s));
        };
      }
      const value = Reflect.get(inner, prop);
      return typeof value === "function" ? value.bind(inner) : value;
    },
  });
}

const OUTBOX_CLAIM = /SET status = 'leased'/;
const REFRESH_CLAIM = /SET refresh_claim_token = \?1, refresh_claim_expires_at/;

describe("the outbox claim (shared/outbox/claim.ts, by the consumer's lanes)", () => {
  it("leases until after the clock at the claim, however long the batch ran before it", async () => {
    const leaseMs = deliveryDeps(NOW).deps.settings.leaseMs;
    // A tenth of a lease at every read (a whole one would leave no lease to perform under).
    const time = steppingClock(NOW, leaseMs / 10);
    const seen: number[] = [];
    const id = await insertRow(env.DB, {
      status: "pending",
      effect: "chat.postMessage",
      payload: { channel: "C1", text: "x" },
      nextAttemptAt: NOW,
    });
    const held = gate();
    slack.current.script("chat.postMessage", reply.held(held, reply.ok({ ts: "1.1" })));
    const { deps } = deliveryDeps(NOW, { db: clockAtWrite(env.DB, OUTBOX_CLAIM, time.peek, seen), clock: time.clock });
    const delivering = deliverBatch(deps, [id]);
    const leased = await waitFor(
      () => readRow(env.DB, id),
      (row) => row.status === "leased",
    );
    held.open();
    await delivering;
    expect(seen).toHaveLength(1);
    expect(Number(leased.claim_expires_at)).toBeGreaterThan(seen[0] as number);
  });
});

describe("the inline claim in the ack's write (shared/outbox/record.ts, the first attempt)", () => {
  it("leases until after the clock at the write, not from the request's start (the ack may have spent its budget before it)", async () => {
    const leaseMs = 5_000;
    const time = steppingClock(NOW, leaseMs);
    const seen: number[] = [];
    // The request began at NOW; by the write the clock is ten leases on.
    time.set(NOW + 10 * leaseMs);
    const verdict = await recordIntent(
      clockAtWrite(env.DB, OUTBOX_CLAIM, time.peek, seen),
      { id: "EvLEASE", kind: "event", type: "app_mention", teamId: "T0ONE" },
      [{ key: "reply", effect: "chat.postMessage", payload: { channel: "C1", text: "x" } }],
      NOW,
      60_000,
      "delivery-1",
      { token: "inline-1", leaseMs, clock: time.clock, indexes: [0] },
    );
    expect(verdict.firstDelivery && verdict.claimed.map((row) => row.id)).toHaveLength(1);
    const claimed = verdict.firstDelivery ? verdict.claimed[0] : undefined;
    expect(seen).toHaveLength(1);
    expect(claimed?.claimExpiresAt).toBeGreaterThan(seen[0] as number);
  });
});

describe("the refresh lease (shared/installations/rotation.ts)", () => {
  const fresh = reply.ok({ access_token: "xoxe.xoxb-new", refresh_token: "xoxe-1-next", expires_in: 43_200, token_type: "bot" });
  const rotating = (expiresAt: number) =>
    saveInstallation(
      env.DB,
      keys,
      testInstallation("T0ROT", "xoxe.xoxb-old", { refreshToken: "xoxe-1-first", tokenExpiresAt: expiresAt }),
      NOW - 1000,
    );
  const rotationDeps = (db: D1Database, clock: () => number) => ({
    db,
    keys,
    slackApiUrl: TEST_SLACK_API_URL,
    edge: networkEdge,
    clientId: "1.2",
    clientSecret: "secret",
    newToken: () => crypto.randomUUID(),
    clock,
  });
  const consumerSlackFor = (clock: () => number) =>
    slackForRow({
      db: env.DB,
      keys: async () => keys,
      slackApiUrl: TEST_SLACK_API_URL,
      edge: networkEdge,
      teamless: undefined,
      rotation: { clientId: "1.2", clientSecret: "secret", newToken: () => crypto.randomUUID() },
      clock,
      sleep: async () => undefined,
    });

  it("a cron tick that ran past the refresh lease leases from the clock at its claim, not scheduledTime: a consumer meeting the token meanwhile cannot take the same refresh (one oauth.v2.access, the installation not blocked)", async () => {
    // Due (inside REFRESH_AHEAD_MS) but still valid at the tick's start.
    await rotating(NOW + REFRESH_AHEAD_MS);
    // The tick was scheduled at NOW; by the time it reaches this installation, ten refresh leases have passed.
    const late = NOW + 10 * REFRESH_LEASE_MS;
    const seen: number[] = [];
    const held = gate();
    slack.current.script("oauth.v2.access", reply.held(held, fresh));
    // No second answer: a second refresh call would be unscripted, and the fake Slack fails the test on it.
    slack.current.always("chat.postMessage", reply.ok({ ts: "1.1" }));
    const cron = refreshExpiring(
      rotationDeps(
        clockAtWrite(env.DB, REFRESH_CLAIM, () => late, seen),
        () => late,
      ),
      NOW,
    );
    const lease = await waitFor(
      () => env.DB.prepare("SELECT refresh_claim_expires_at AS at FROM installations").first<number | null>("at"),
      (at) => at !== null,
    );
    expect(seen).toEqual([late]);
    expect(lease).toBeGreaterThan(late);
    // A consumer row of the team, a second after the cron's claim: the lease is live, so it uses the current token.
    const id = await insertRow(env.DB, {
      status: "pending",
      effect: "chat.postMessage",
      payload: { channel: "C1", text: "meanwhile" },
      teamId: "T0ROT",
      nextAttemptAt: NOW,
    });
    await deliverBatch(deliveryDeps(late + 1000, { slackFor: consumerSlackFor(() => late + 1000) }).deps, [id]);
    held.open();
    expect(await cron).toEqual({ refreshed: 1, failed: [] });
    expect(slack.current.callsTo("oauth.v2.access")).toHaveLength(1);
    expect(slack.current.callsTo("chat.postMessage").map((c) => c.authorization)).toEqual(["Bearer xoxe.xoxb-old"]);
    expect(await env.DB.prepare("SELECT blocked_reason FROM installations").first("blocked_reason")).toBeNull();
  });

  it("an effect's refresh leases from the clock at its claim, not from the read that found the token expiring", async () => {
    await rotating(NOW - 1);
    const time = steppingClock(NOW, REFRESH_LEASE_MS);
    const seen: number[] = [];
    const held = gate();
    slack.current.script("oauth.v2.access", reply.held(held, fresh));
    slack.current.always("chat.postMessage", reply.ok({ ts: "1.1" }));
    const slackFor = slackForRow({
      db: clockAtWrite(env.DB, REFRESH_CLAIM, time.peek, seen),
      keys: async () => keys,
      slackApiUrl: TEST_SLACK_API_URL,
      edge: networkEdge,
      teamless: undefined,
      rotation: { clientId: "1.2", clientSecret: "secret", newToken: () => crypto.randomUUID() },
      clock: time.clock,
      sleep: async () => undefined,
    });
    const resolving = slackFor({ teamId: "T0ROT" });
    const lease = await waitFor(
      () => env.DB.prepare("SELECT refresh_claim_expires_at AS at FROM installations").first<number | null>("at"),
      (at) => at !== null,
    );
    held.open();
    expect((await resolving).ok).toBe(true);
    expect(seen).toHaveLength(1);
    expect(lease).toBeGreaterThan(seen[0] as number);
  });
});

describe("the sweep's take (shared/outbox/sweep.ts, by the cron)", () => {
  it("looks at a re-sent row again one grace after the clock at its take, not after the tick's scheduledTime", async () => {
    const settings = testSettings();
    const late = NOW + 3 * settings.sweepGraceMs; // the tick's rotation and earlier shards ran long
    const id = await insertRow(env.DB, {
      status: "pending",
      effect: "chat.postMessage",
      payload: { channel: "C1", text: "x" },
      nextAttemptAt: NOW,
    });
    await env.DB.prepare("UPDATE outbox SET sweep_at = ?1 WHERE id = ?2")
      .bind(NOW - 1, id)
      .run();
    const sent: unknown[] = [];
    const queue = { send: async (body: unknown) => void sent.push(body), sendBatch: async (m: Iterable<unknown>) => void sent.push(...m) };
    const report = await sweep({ db: env.DB, queue: queue as never, settings, log: recordingLog(), clock: () => late }, NOW);
    expect(report.reenqueued).toBe(1);
    const row = await readRow(env.DB, id);
    expect(Number(row.sweep_at)).toBe(late + settings.sweepGraceMs);
    expect(Number(row.enqueued_at)).toBe(late);
  });
});
