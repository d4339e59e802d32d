/**
 * A distributed app's effects: each row is performed with its own team's
 * installation's token, looked up when it is performed; a team without an
 * installation waits (no attempt spent, last_error says why) and resumes,
 * with nothing lost, once it is installed. The fake Slack sees each call's
 * Authorization header.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { deliverBatch, INSTALLATION_WAIT_MAX_MS, NO_INSTALLATION_WAIT_MS } from "../../shared/delivery/deliver.ts";
import { countingDb } from "../../shared/delivery/query-budget.ts";
import { networkEdge } from "../../shared/effects/outbound.ts";
import { type TokenKeys, tokenKeys } from "../../shared/installations/crypto.ts";
import { INSTALLATION_REMOVED, installationRemovedEffect, PARK_STEP, withLifecycleEffect } from "../../shared/installations/lifecycle.ts";
import { INSTALLATION_WORST_QUERIES, slackForRow } from "../../shared/installations/resolve.ts";
import { REFRESH_AHEAD_MS, REFRESH_BACKOFF_BASE_MS, refreshExpiring } from "../../shared/installations/rotation.ts";
import { singleWorkspaceSlack, tokenFingerprint } from "../../shared/installations/single-workspace.ts";
import { saveInstallation } from "../../shared/installations/store.ts";
import { recordingLog } from "../../shared/log.ts";
import { replayDead } from "../../shared/ops/replay.ts";
import { finishClaim } from "../../shared/outbox/fence.ts";
import { deliveryDeps } from "../support/consumer.ts";
import { gate, reply, useFakeSlack } from "../support/fake-slack.ts";
import { testInstallation } from "../support/installations.ts";
import { insertRow, readRow, recordingQueue, resetTables } from "../support/rows.ts";
import { TEST_SLACK_API_URL } from "../support/settings.ts";
import { NOW } from "../support/slack-requests.ts";
import { testApp } from "../support/test-app.ts";
import { waitFor } from "../support/wait.ts";

const slack = useFakeSlack();
let keys: TokenKeys;
beforeEach(async () => {
  await resetTables(env.DB);
  await env.DB.prepare("DELETE FROM installations").run();
  keys = await tokenKeys("4a".repeat(32), undefined);
});

const install = (teamId: string, botToken: string) => testInstallation(teamId, botToken);

function distributedDeps(now: number) {
  const slackFor = slackForRow({
    db: env.DB,
    keys: async () => keys,
    slackApiUrl: TEST_SLACK_API_URL,
    edge: networkEdge,
    teamless: undefined,
  });
  return deliveryDeps(now, { slackFor });
}

const post = (teamId: string, text: string) =>
  insertRow(env.DB, { status: "pending", effect: "chat.postMessage", payload: { channel: "C1", text }, teamId, nextAttemptAt: NOW });

describe("a distributed app's effects", () => {
  it("go out with their own team's token, each", async () => {
    await saveInstallation(env.DB, keys, install("T0ONE", "xoxb-one-token"), NOW);
    await saveInstallation(env.DB, keys, install("T0TWO", "xoxb-two-token"), NOW);
    const ids = [await post("T0ONE", "to one"), await post("T0TWO", "to two"), await post("T0ONE", "to one again")];
    slack.current.always("chat.postMessage", reply.ok({ ts: "1.1" }));
    await deliverBatch(distributedDeps(NOW).deps, ids);
    const byText = Object.fromEntries(slack.current.callsTo("chat.postMessage").map((c) => [c.params.text, c.authorization]));
    expect(byText).toEqual({
      "to one": "Bearer xoxb-one-token",
      "to two": "Bearer xoxb-two-token",
      "to one again": "Bearer xoxb-one-token",
    });
    for (const id of ids) expect((await readRow(env.DB, id)).status).toBe("done");
  });

  it("wait, with no attempt spent and a last_error naming the team, when their team has no installation; resume once it is installed", async () => {
    await saveInstallation(env.DB, keys, install("T0ONE", "xoxb-one-token"), NOW);
    const waiting = await post("T0NEW", "for the new team");
    const other = await post("T0ONE", "unaffected");
    slack.current.always("chat.postMessage", reply.ok({ ts: "1.1" }));
    const { deps, log } = distributedDeps(NOW);
    const actions = await deliverBatch(deps, [waiting, other]);

    const row = await readRow(env.DB, waiting);
    expect(row).toMatchObject({ status: "pending", attempts: 0, next_attempt_at: NOW + NO_INSTALLATION_WAIT_MS });
    expect(row.last_error).toBe("no installation for team T0NEW: waiting for the app to be installed there (/slack/install)");
    // Not a failure: the message is re-sent with the wait, not retried toward the dead-letter queue.
    expect(actions.get(waiting)).toEqual({ action: "resend", delaySeconds: NO_INSTALLATION_WAIT_MS / 1000 });
    expect(log.records.some((r) => r.msg === "not attempted; the row waits")).toBe(true);
    expect((await readRow(env.DB, other)).status).toBe("done");
    expect(slack.current.callsTo("chat.postMessage").map((c) => c.params.text)).toEqual(["unaffected"]);
    const audit = await env.DB.prepare("SELECT COUNT(*) AS n FROM outbox_attempts WHERE outbox_id = ?").bind(waiting).first("n");
    expect(audit).toBe(0);

    // One millisecond early it is still not due; once installed and due, it goes out with the new team's token.
    await saveInstallation(env.DB, keys, install("T0NEW", "xoxb-new-token"), NOW + 1000);
    await deliverBatch(distributedDeps(NOW + NO_INSTALLATION_WAIT_MS - 1).deps, [waiting]);
    expect((await readRow(env.DB, waiting)).status).toBe("pending");
    await deliverBatch(distributedDeps(NOW + NO_INSTALLATION_WAIT_MS).deps, [waiting]);
    expect(await readRow(env.DB, waiting)).toMatchObject({ status: "done", attempts: 1 });
    expect(slack.current.callsTo("chat.postMessage").at(-1)).toMatchObject({
      params: expect.objectContaining({ text: "for the new team" }),
      authorization: "Bearer xoxb-new-token",
    });
  });

  it("wait with a bound: the wait grows with the time waited (5 min up to 1 h), and at 7 days the row is parked dead with the reason, for a replay", async () => {
    const fresh = await post("T0GONE", "first wait");
    const young = await post("T0GONE", "waited 1 h");
    const almost = await post("T0GONE", "1 ms short of the limit");
    const over = await post("T0GONE", "at the limit");
    const since = [
      [young, NOW - 3_600_000],
      [almost, NOW - INSTALLATION_WAIT_MAX_MS + 1],
      [over, NOW - INSTALLATION_WAIT_MAX_MS],
    ] as const;
    for (const [id, at] of since) await env.DB.prepare("UPDATE outbox SET waiting_since = ? WHERE id = ?").bind(at, id).run();
    await deliverBatch(distributedDeps(NOW).deps, [fresh, young, almost, over]);
    const read = (id: number) =>
      env.DB.prepare("SELECT status, attempts, next_attempt_at, waiting_since, last_error FROM outbox WHERE id = ?").bind(id).first();
    expect(await read(fresh)).toMatchObject({
      status: "pending",
      attempts: 0,
      next_attempt_at: NOW + NO_INSTALLATION_WAIT_MS,
      waiting_since: NOW,
    });
    expect(await read(young)).toMatchObject({ status: "pending", next_attempt_at: NOW + 1_800_000, waiting_since: NOW - 3_600_000 });
    expect(await read(almost)).toMatchObject({ status: "pending", attempts: 0, next_attempt_at: NOW + 3_600_000 });
    expect(await read(over)).toMatchObject({
      status: "dead",
      last_error:
        "waited 168 h for an installation (limit 168 h): no installation for team T0GONE: waiting for the app to be installed there (/slack/install); install the app, then replay",
    });
  });

  it("a row parked after its 7-day wait and replayed starts a fresh wait: a replay while the team is still not served waits again rather than being parked at once", async () => {
    const id = await post("T0GONE", "parked, then replayed");
    await env.DB.prepare("UPDATE outbox SET waiting_since = ? WHERE id = ?")
      .bind(NOW - INSTALLATION_WAIT_MAX_MS, id)
      .run();
    await deliverBatch(distributedDeps(NOW).deps, [id]);
    expect((await readRow(env.DB, id)).status).toBe("dead");
    const later = NOW + 60_000;
    const replay = { replayMaxPerCall: 100, replayBatchSize: 100, replayStepDelayMs: 0, sweepGraceMs: 60_000 };
    // The replay's message is recorded, not sent: this case delivers the row itself, and a real delivery (the
    // test Worker's consumer, with the single-workspace token) could land after the case, on a later case's row.
    const queue = recordingQueue();
    const report = await replayDead(
      { shards: [env.DB], queue, settings: replay, log: recordingLog() },
      { selection: { by: "refs", refs: [{ shard: 0, id }] }, dryRun: false },
      later,
    );
    expect(report.replayed).toHaveLength(1);
    expect(queue.sent).toEqual([id]);
    await deliverBatch(distributedDeps(later).deps, [id]);
    const row = await env.DB.prepare("SELECT status, waiting_since, next_attempt_at FROM outbox WHERE id = ?").bind(id).first();
    expect(row).toEqual({ status: "pending", waiting_since: later, next_attempt_at: later + NO_INSTALLATION_WAIT_MS });
  });

  it("a row that waited, then reached Slack once its team was installed and was answered 429, starts a fresh wait if the installation goes away again: the 429 proves the installation served it", async () => {
    await saveInstallation(env.DB, keys, install("T0ONE", "xoxb-one-token"), NOW);
    const id = await post("T0ONE", "waited, then rate limited");
    await env.DB.prepare("UPDATE outbox SET waiting_since = ? WHERE id = ?")
      .bind(NOW - INSTALLATION_WAIT_MAX_MS + 60_000, id)
      .run();
    slack.current.script("chat.postMessage", reply.rateLimited(1));
    await deliverBatch(distributedDeps(NOW).deps, [id]);
    expect(slack.current.callsTo("chat.postMessage")).toHaveLength(1);
    await env.DB.prepare("DELETE FROM installations").run();
    const later = NOW + 120_000;
    await deliverBatch(distributedDeps(later).deps, [id]);
    const row = await env.DB.prepare("SELECT status, waiting_since FROM outbox WHERE id = ?").bind(id).first();
    expect(row).toEqual({ status: "pending", waiting_since: later });
  });

  it("wait when the installation's token cannot be opened (its encryption key is gone), and never log the token", async () => {
    await saveInstallation(env.DB, keys, install("T0ONE", "xoxb-one-token"), NOW);
    keys = await tokenKeys("5b".repeat(32), undefined);
    const id = await post("T0ONE", "x");
    const { deps, log } = distributedDeps(NOW);
    await deliverBatch(deps, [id]);
    const row = await readRow(env.DB, id);
    expect(row).toMatchObject({ status: "pending", attempts: 0 });
    expect(row.last_error).toMatch(/^installation of team T0ONE unreadable: no configured token encryption key has id [0-9a-f]{8}/);
    expect(JSON.stringify(log.records)).not.toContain("xoxb-one-token");
  });
});

describe("resolving the installation takes time out of the lease", () => {
  it("a row whose lease has less than one effect timeout left once its installation is resolved (a slow refresh) is not performed: it waits, its attempt given back, due again at once (claimable by the next worker with a whole lease)", async () => {
    await saveInstallation(env.DB, keys, install("T0ONE", "xoxb-one-token"), NOW);
    slack.current.always("chat.postMessage", reply.ok({ ts: "1.1" }));
    const attempt = async (spentMs: number) => {
      await resetTables(env.DB);
      const id = await post("T0ONE", "slowly resolved");
      const { deps, clock } = distributedDeps(NOW);
      const resolve = deps.slackFor;
      const slowly = {
        ...deps,
        slackFor: async (row: Parameters<NonNullable<typeof resolve>>[0]) => {
          clock.advance(spentMs);
          return resolve ? resolve(row) : Promise.reject(new Error("no slackFor"));
        },
      };
      const actions = await deliverBatch(slowly, [id]);
      return { action: actions.get(id), row: await readRow(env.DB, id) };
    };
    const { deps } = distributedDeps(NOW);
    const spare = deps.settings.leaseMs - deps.context.timeoutMs;
    const tooLate = await attempt(spare);
    expect(slack.current.callsTo("chat.postMessage")).toHaveLength(0);
    expect(tooLate.row).toMatchObject({ status: "pending", attempts: 0, next_attempt_at: NOW + spare });
    expect(tooLate.action).toEqual({ action: "resend", delaySeconds: 0 });
    const inTime = await attempt(spare - 1_000);
    expect(slack.current.callsTo("chat.postMessage")).toHaveLength(1);
    expect(inTime.row.status).toBe("done");
  });
});

describe("an installation whose token Slack refuses", () => {
  it.each(["invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive"])(
    "%s: the installation is blocked, every row of its team waits with no attempt spent, other teams go on; a re-install resumes them, nothing lost",
    async (code) => {
      await saveInstallation(env.DB, keys, install("T0ONE", "xoxb-one-broken"), NOW);
      await saveInstallation(env.DB, keys, install("T0TWO", "xoxb-two-token"), NOW);
      const first = await post("T0ONE", "one #1");
      const second = await post("T0ONE", "one #2");
      const two = await post("T0TWO", "two");
      slack.current.script("chat.postMessage", reply.error(code), reply.ok({ ts: "2.2" }));
      // One lane, so the order is fixed: the first row meets the refusal, the second finds the block.
      const { deps } = distributedDeps(NOW);
      for (const id of [first, second, two]) await deliverBatch(deps, [id]);

      for (const id of [first, second]) {
        const row = await readRow(env.DB, id);
        expect(row).toMatchObject({ status: "pending", attempts: 0 });
        expect(row.last_error).toMatch(/^installation of team T0ONE (blocked: Slack answered|is blocked \()/);
      }
      expect((await readRow(env.DB, two)).status).toBe("done");
      expect(slack.current.callsTo("chat.postMessage").map((c) => [c.params.text, c.authorization])).toEqual([
        ["one #1", "Bearer xoxb-one-broken"],
        ["two", "Bearer xoxb-two-token"],
      ]);
      const blocked = await env.DB.prepare("SELECT install_key, blocked_reason FROM installations WHERE blocked_reason IS NOT NULL").all();
      expect(blocked.results).toEqual([{ install_key: "T:T0ONE", blocked_reason: code }]);

      // Re-installed: the block is cleared, and both rows go out with the new token once due.
      await saveInstallation(env.DB, keys, install("T0ONE", "xoxb-one-fixed"), NOW + 1000);
      slack.current.script("chat.postMessage", reply.ok({ ts: "3.3" }), reply.ok({ ts: "3.4" }));
      await deliverBatch(distributedDeps(NOW + NO_INSTALLATION_WAIT_MS).deps, [first, second]);
      for (const id of [first, second]) expect(await readRow(env.DB, id)).toMatchObject({ status: "done", attempts: 1 });
      expect(
        slack.current
          .callsTo("chat.postMessage")
          .slice(2)
          .map((c) => c.authorization),
      ).toEqual(["Bearer xoxb-one-fixed", "Bearer xoxb-one-fixed"]);
    },
  );

  it("a refusal of a token that was replaced meanwhile does not block the new one (the block is fenced on the failing token)", async () => {
    await saveInstallation(env.DB, keys, install("T0ONE", "xoxb-old"), NOW);
    const slackFor = slackForRow({
      db: env.DB,
      keys: async () => keys,
      slackApiUrl: TEST_SLACK_API_URL,
      edge: networkEdge,
      teamless: undefined,
    });
    const resolved = await slackFor({ teamId: "T0ONE" });
    if (!resolved.ok) throw new Error(resolved.reason);
    await saveInstallation(env.DB, keys, install("T0ONE", "xoxb-new"), NOW + 1);
    await resolved.block("token_revoked", NOW + 2);
    const row = await env.DB.prepare("SELECT blocked_reason FROM installations").first("blocked_reason");
    expect(row).toBeNull();
  });
});

describe("a rotating token (12 h, single-use refresh token)", () => {
  const HOUR = 3_600_000;
  async function rotatingInstall(expiresAt: number) {
    await saveInstallation(
      env.DB,
      keys,
      { ...install("T0ROT", "xoxe.xoxb-old"), refreshToken: "xoxe-1-first", tokenExpiresAt: expiresAt },
      NOW - 11 * HOUR,
    );
  }
  function rotatingDeps(now: number) {
    let leases = 0;
    const slackFor = slackForRow({
      db: env.DB,
      keys: async () => keys,
      slackApiUrl: TEST_SLACK_API_URL,
      edge: networkEdge,
      teamless: undefined,
      rotation: { clientId: "1.2", clientSecret: "secret", newToken: () => `lease-${++leases}` },
      clock: () => now,
      // Real waits (the production 100 ms): the lanes really run at once, and a waiter re-reads while the holder works.
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    });
    return deliveryDeps(now, { slackFor });
  }
  const refreshed = reply.ok({
    access_token: "xoxe.xoxb-new",
    refresh_token: "xoxe-1-second",
    expires_in: 43_200,
    token_type: "bot",
    team: { id: "T0ROT" },
  });

  it("already expired: N concurrent effects → exactly one refresh, and every effect goes out with the fresh token", async () => {
    await rotatingInstall(NOW - 1);
    const ids: number[] = [];
    for (let i = 0; i < 12; i++) ids.push(await post("T0ROT", `m${i}`));
    slack.current.script("oauth.v2.access", refreshed);
    slack.current.always("chat.postMessage", reply.ok({ ts: "1.1" }));
    await deliverBatch(rotatingDeps(NOW).deps, ids);

    const refreshes = slack.current.callsTo("oauth.v2.access");
    expect(refreshes).toHaveLength(1);
    expect(refreshes[0]?.params).toMatchObject({ grant_type: "refresh_token", refresh_token: "xoxe-1-first", client_id: "1.2" });
    const auths = slack.current.callsTo("chat.postMessage").map((c) => c.authorization);
    expect(auths).toEqual(Array(12).fill("Bearer xoxe.xoxb-new"));
    for (const id of ids) expect((await readRow(env.DB, id)).status).toBe("done");
    const row = await env.DB.prepare("SELECT token_expires_at, refresh_claim_token, bot_token FROM installations").first();
    expect(row).toMatchObject({ token_expires_at: NOW + 43_200_000, refresh_claim_token: null });
    expect(JSON.stringify(row)).not.toContain("xox");
  });

  it("about to expire: one refresh; the others use the old token while it is still valid", async () => {
    await rotatingInstall(NOW + 60_000);
    const ids: number[] = [];
    for (let i = 0; i < 8; i++) ids.push(await post("T0ROT", `m${i}`));
    // The refresh is held until the test opens it: every row but the holder's goes out meanwhile, with the old token.
    const refreshing = gate();
    slack.current.script("oauth.v2.access", reply.held(refreshing, refreshed));
    slack.current.always("chat.postMessage", reply.ok({ ts: "1.1" }));
    const delivering = deliverBatch(rotatingDeps(NOW).deps, ids);
    const posts = () => slack.current.callsTo("chat.postMessage").map((c) => c.authorization);
    try {
      const meanwhile = await waitFor(
        async () => posts(),
        (auths) => auths.length === 7,
      );
      // The old token is valid until NOW + 60 s: nobody waits for the new one while it is.
      expect(meanwhile).toEqual(Array(7).fill("Bearer xoxe.xoxb-old"));
      expect(slack.current.callsTo("oauth.v2.access")).toHaveLength(1);
    } finally {
      refreshing.open();
    }
    await delivering;
    // The holder's own row goes out with the token it refreshed.
    expect(posts()).toEqual([...Array(7).fill("Bearer xoxe.xoxb-old"), "Bearer xoxe.xoxb-new"]);
    for (const id of ids) expect((await readRow(env.DB, id)).status).toBe("done");
  });

  it("not yet due (more than 30 min left): no refresh", async () => {
    await rotatingInstall(NOW + HOUR);
    const id = await post("T0ROT", "m");
    slack.current.script("chat.postMessage", reply.ok({ ts: "1.1" }));
    await deliverBatch(rotatingDeps(NOW).deps, [id]);
    expect(slack.current.callsTo("chat.postMessage")[0]?.authorization).toBe("Bearer xoxe.xoxb-old");
  });

  it("a refresh re-encrypts the row under the current key; the previous key still reads rows it sealed", async () => {
    const oldKeys = keys;
    await rotatingInstall(NOW - 1);
    keys = await tokenKeys("6c".repeat(32), "4a".repeat(32));
    const before = await env.DB.prepare("SELECT key_id FROM installations").first("key_id");
    expect(before).toBe(oldKeys.current.id);
    const id = await post("T0ROT", "m");
    slack.current.script("oauth.v2.access", refreshed);
    slack.current.script("chat.postMessage", reply.ok({ ts: "1.1" }));
    await deliverBatch(rotatingDeps(NOW).deps, [id]);
    expect(slack.current.callsTo("oauth.v2.access")[0]?.params.refresh_token).toBe("xoxe-1-first");
    expect(await env.DB.prepare("SELECT key_id FROM installations").first("key_id")).toBe(keys.current.id);
    expect(slack.current.callsTo("chat.postMessage")[0]?.authorization).toBe("Bearer xoxe.xoxb-new");
  });
});

describe("an expired token another worker is refreshing, and the invocation's D1 query budget", () => {
  async function heldElsewhere() {
    const sealed = { ...install("T0HELD", "xoxe.xoxb-old"), refreshToken: "xoxe-1-first", tokenExpiresAt: NOW - 1 };
    await saveInstallation(env.DB, keys, sealed, NOW - 11 * 3_600_000);
    // Another worker's refresh lease, unexpired: this worker's claim is refused (not_holder).
    await env.DB.prepare("UPDATE installations SET refresh_claim_token = 'other', refresh_claim_expires_at = ?1")
      .bind(NOW + 60_000)
      .run();
  }
  function resolver(budget: { used(): number; readonly stopClaimingAt: number } | undefined) {
    const { db, budget: counted } = countingDb(env.DB, Number.POSITIVE_INFINITY);
    let sleeps = 0;
    const slackFor = slackForRow({
      db,
      keys: async () => keys,
      slackApiUrl: TEST_SLACK_API_URL,
      edge: networkEdge,
      teamless: undefined,
      rotation: { clientId: "1.2", clientSecret: "secret", newToken: () => "lease-mine" },
      clock: () => NOW,
      sleep: async () => {
        sleeps += 1;
      },
      ...(budget ? { budget } : {}),
    });
    return { slackFor, queries: () => counted.used(), sleeps: () => sleeps };
  }

  it(`within the budget: re-reads while the holder works (50 reads, 49 waits), then the row waits`, async () => {
    await heldElsewhere();
    const { slackFor, sleeps } = resolver({ used: () => 599, stopClaimingAt: 600 });
    const answer = await slackFor({ teamId: "T0HELD" });
    expect(answer).toMatchObject({ ok: false, reason: expect.stringContaining("another worker holds the refresh") });
    expect("dueNow" in answer).toBe(false);
    expect(sleeps()).toBe(49);
  });

  it(`past the budget's stop: no re-read, at most INSTALLATION_WORST_QUERIES (${INSTALLATION_WORST_QUERIES}) statements, and the row is due again at once`, async () => {
    await heldElsewhere();
    const { slackFor, queries, sleeps } = resolver({ used: () => 600, stopClaimingAt: 600 });
    expect(await slackFor({ teamId: "T0HELD" })).toMatchObject({ ok: false, dueNow: true });
    expect(sleeps()).toBe(0);
    expect(queries()).toBeGreaterThan(0);
    expect(queries()).toBeLessThanOrEqual(INSTALLATION_WORST_QUERIES);
    expect(slack.current.callsTo("oauth.v2.access")).toEqual([]);
  });
});

describe("a refresh that fails", () => {
  const HOUR = 3_600_000;
  let sleeps = 0;
  beforeEach(() => {
    sleeps = 0;
  });
  async function rotatingInstall(expiresAt: number) {
    await saveInstallation(
      env.DB,
      keys,
      { ...install("T0ROT", "xoxe.xoxb-old"), refreshToken: "xoxe-1-first", tokenExpiresAt: expiresAt },
      NOW - 11 * HOUR,
    );
  }
  function rotatingDeps(now: number, db: D1Database = env.DB) {
    const slackFor = slackForRow({
      db,
      keys: async () => keys,
      slackApiUrl: TEST_SLACK_API_URL,
      edge: networkEdge,
      teamless: undefined,
      rotation: { clientId: "1.2", clientSecret: "secret", newToken: () => crypto.randomUUID() },
      clock: () => now,
      sleep: async () => {
        sleeps += 1;
      },
    });
    return deliveryDeps(now, { slackFor });
  }
  /** env.DB, with `before` run ahead of every run() of a statement whose SQL contains `match`. */
  function dbAround(match: string, before: () => Promise<void>): D1Database {
    const wrap = (statement: D1PreparedStatement, sql: string): D1PreparedStatement =>
      new Proxy(statement, {
        get(target, prop) {
          if (prop === "bind") return (...values: unknown[]) => wrap(target.bind(...values), sql);
          if (prop === "run" && sql.includes(match))
            return async () => {
              await before();
              return target.run();
            };
          const value = Reflect.get(target, prop);
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
    return new Proxy(env.DB, {
      get(target, prop) {
        if (prop === "prepare") return (sql: string) => wrap(target.prepare(sql), sql);
        const value = Reflect.get(target, prop);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  }
  const WRITE = "SET bot_token = ?1, refresh_token = ?2";
  const refreshedAnswer = reply.ok({
    access_token: "xoxe.xoxb-new",
    refresh_token: "xoxe-1-second",
    expires_in: 43_200,
    token_type: "bot",
  });

  it.each(["invalid_client_id", "bad_client_secret"])(
    "the app's own credentials refused (%s, a misconfigured deploy): the installation is not blocked but backs off, and once the secret is fixed the next refresh succeeds without a re-install",
    async (code) => {
      await rotatingInstall(NOW - 1);
      const id = await post("T0ROT", "a");
      slack.current.script("oauth.v2.access", reply.error(code));
      await deliverBatch(rotatingDeps(NOW).deps, [id]);
      expect(await readRow(env.DB, id)).toMatchObject({ status: "pending", attempts: 0 });
      const after = await env.DB.prepare("SELECT blocked_reason, refresh_failures FROM installations").first();
      expect(after).toEqual({ blocked_reason: null, refresh_failures: 1 });
      slack.current.script("oauth.v2.access", refreshedAnswer);
      slack.current.script("chat.postMessage", reply.ok({ ts: "1.1" }));
      const later = NOW + NO_INSTALLATION_WAIT_MS;
      await deliverBatch(rotatingDeps(later).deps, [id]);
      expect(await readRow(env.DB, id)).toMatchObject({ status: "done" });
      expect(slack.current.callsTo("chat.postMessage")[0]?.authorization).toBe("Bearer xoxe.xoxb-new");
    },
  );

  it.each(["invalid_refresh_token", "token_revoked", "invalid_auth"])(
    "refused for good (%s): the installation is blocked, its rows wait at once (no re-reads), and the cron stops trying it",
    async (code) => {
      await rotatingInstall(NOW - 1);
      const ids = [await post("T0ROT", "a"), await post("T0ROT", "b")];
      slack.current.script("oauth.v2.access", reply.error(code));
      for (const id of ids) await deliverBatch(rotatingDeps(NOW).deps, [id]);
      for (const id of ids) {
        const row = await readRow(env.DB, id);
        expect(row).toMatchObject({ status: "pending", attempts: 0 });
        expect(row.last_error).toMatch(/^installation of team T0ROT (is )?blocked/);
      }
      expect(sleeps).toBe(0);
      expect(slack.current.callsTo("oauth.v2.access")).toHaveLength(1);
      const blocked = await env.DB.prepare("SELECT blocked_reason, refresh_claim_token FROM installations").first();
      expect(blocked).toEqual({
        blocked_reason: `oauth.v2.access (refresh) answered ${code}; re-install the app`,
        refresh_claim_token: null,
      });
      const cron = {
        db: env.DB,
        keys,
        slackApiUrl: TEST_SLACK_API_URL,
        edge: networkEdge,
        clientId: "1.2",
        clientSecret: "s",
        newToken: () => "x",
        clock: () => NOW,
      };
      expect(await refreshExpiring(cron, NOW + 60 * 60_000)).toEqual({ refreshed: 0, failed: [] });
    },
  );

  it("Slack answered but the fenced write keeps failing: retried, then the installation is blocked with the reason (never silently lost)", async () => {
    await rotatingInstall(NOW - 1);
    const id = await post("T0ROT", "a");
    let writes = 0;
    const failing = dbAround(WRITE, async () => {
      writes += 1;
      throw new Error("D1_ERROR: storage operation exceeded timeout");
    });
    slack.current.script("oauth.v2.access", refreshedAnswer);
    await deliverBatch(rotatingDeps(NOW, failing).deps, [id]);
    expect(writes).toBe(4);
    const reason = await env.DB.prepare("SELECT blocked_reason FROM installations").first<string>("blocked_reason");
    expect(reason).toMatch(/^the refreshed token could not be written \(.*\); Slack spent the refresh token: re-install the app$/);
    expect(reason).not.toContain("xox");
    expect(await readRow(env.DB, id)).toMatchObject({ status: "pending", attempts: 0 });
  });

  it("a write that fails once is retried, and the new pair is kept", async () => {
    await rotatingInstall(NOW - 1);
    const id = await post("T0ROT", "a");
    let writes = 0;
    const flaky = dbAround(WRITE, async () => {
      writes += 1;
      if (writes === 1) throw new Error("D1_ERROR: network connection lost");
    });
    slack.current.script("oauth.v2.access", refreshedAnswer);
    slack.current.script("chat.postMessage", reply.ok({ ts: "1.1" }));
    await deliverBatch(rotatingDeps(NOW, flaky).deps, [id]);
    expect(writes).toBe(2);
    expect(slack.current.callsTo("chat.postMessage")[0]?.authorization).toBe("Bearer xoxe.xoxb-new");
    expect(await env.DB.prepare("SELECT blocked_reason FROM installations").first("blocked_reason")).toBeNull();
  });

  it("a refresh that lost to a re-install (the claim cleared before its write) re-reads and uses the re-installed token, not the one read before", async () => {
    await rotatingInstall(NOW + 60_000); // about to expire, still valid: the old code went on with it
    const id = await post("T0ROT", "a");
    const reinstalling = dbAround(WRITE, () => saveInstallation(env.DB, keys, install("T0ROT", "xoxb-reinstalled"), NOW).then(() => {}));
    slack.current.script("oauth.v2.access", refreshedAnswer);
    slack.current.script("chat.postMessage", reply.ok({ ts: "1.1" }));
    await deliverBatch(rotatingDeps(NOW, reinstalling).deps, [id]);
    expect(slack.current.callsTo("chat.postMessage")[0]?.authorization).toBe("Bearer xoxb-reinstalled");
    expect(await readRow(env.DB, id)).toMatchObject({ status: "done" });
  });
});

describe("an uninstall (installation.removed, recorded by the ingress)", () => {
  function lifecycleDeps(now: number) {
    const slackFor = slackForRow({
      db: env.DB,
      keys: async () => keys,
      slackApiUrl: TEST_SLACK_API_URL,
      edge: networkEdge,
      teamless: undefined,
    });
    // Follow-ups' messages recorded, not sent: these cases deliver every row themselves, and a real delivery by the
    // test Worker's consumer could claim one first (or land in a later case).
    const base = deliveryDeps(now, { slackFor, queue: recordingQueue() });
    return {
      ...base,
      deps: {
        ...base.deps,
        effects: withLifecycleEffect(
          testApp().effects,
          installationRemovedEffect(env.DB, () => now),
        ),
      },
    };
  }
  const removal = (teamId: string, key: string, at = NOW, org?: string) =>
    insertRow(env.DB, {
      key,
      status: "pending",
      effect: INSTALLATION_REMOVED,
      payload: { team_id: teamId, enterprise_id: org ?? null, org_wide: org !== undefined, reason: "app_uninstalled", at, step: 1 },
      teamId,
      nextAttemptAt: NOW,
    });

  it("deletes the installation and parks that team's pending rows with the reason; other teams untouched; a repeat changes nothing", async () => {
    await saveInstallation(env.DB, keys, install("T0ONE", "xoxb-one-token"), NOW);
    await saveInstallation(env.DB, keys, install("T0TWO", "xoxb-two-token"), NOW);
    const pendingOne = [await post("T0ONE", "a"), await post("T0ONE", "b")];
    const pendingTwo = await post("T0TWO", "c");
    const removed = await removal("T0ONE", "EvGone:installation");
    await deliverBatch(lifecycleDeps(NOW).deps, [removed]);

    expect(await readRow(env.DB, removed)).toMatchObject({ status: "done" });
    expect(JSON.parse((await readRow(env.DB, removed)).result ?? "null")).toEqual({ removed: 1, parked: 2, step: 1 });
    for (const id of pendingOne) {
      expect(await readRow(env.DB, id)).toMatchObject({
        status: "dead",
        last_error: "installation removed: app_uninstalled for team T0ONE (re-install the app there, then replay)",
      });
    }
    expect((await readRow(env.DB, pendingTwo)).status).toBe("pending");
    const left = await env.DB.prepare("SELECT install_key FROM installations").all();
    expect(left.results).toEqual([{ install_key: "T:T0TWO" }]);

    // Performed again (a repeated delivery after a crash, or a replay): nothing left to do, and it does not wait for an installation.
    const again = await removal("T0ONE", "EvGone2:installation");
    await deliverBatch(lifecycleDeps(NOW).deps, [again]);
    expect(JSON.parse((await readRow(env.DB, again)).result ?? "null")).toEqual({ removed: 0, parked: 0, step: 1 });

    // A later event's row for that team waits for a re-install rather than being performed or parked.
    const later = await post("T0ONE", "after");
    await deliverBatch(lifecycleDeps(NOW).deps, [later]);
    expect(await readRow(env.DB, later)).toMatchObject({ status: "pending", attempts: 0 });
  });

  it("parks the team's rows in flight at the removal too: the holder's fenced finish changes nothing, and a re-install cannot send them later", async () => {
    await saveInstallation(env.DB, keys, install("T0ONE", "xoxb-one-token"), NOW - 60_000);
    // Leased by a worker whose call meets Slack's token_revoked while the removal runs; one leased by another team's.
    const inFlight = await insertRow(env.DB, {
      status: "leased",
      effect: "chat.postMessage",
      payload: { channel: "C1", text: "in flight" },
      teamId: "T0ONE",
      claimToken: "holder",
      claimExpiresAt: NOW + 20_000,
      createdAt: NOW - 5_000,
    });
    const otherTeam = await insertRow(env.DB, { status: "leased", teamId: "T0TWO", claimToken: "other", createdAt: NOW - 5_000 });
    const removed = await removal("T0ONE", "EvGoneLeased:installation");
    await deliverBatch(lifecycleDeps(NOW).deps, [removed]);
    expect(await readRow(env.DB, inFlight)).toMatchObject({
      status: "dead",
      claim_token: null,
      last_error: "installation removed: app_uninstalled for team T0ONE (re-install the app there, then replay)",
    });
    expect(await readRow(env.DB, otherTeam)).toMatchObject({ status: "leased", claim_token: "other" });

    // The holder comes back with Slack's token_revoked and asks the row to wait: fenced on its token, nothing changes.
    const held = await readRow(env.DB, inFlight);
    const claimed = {
      id: inFlight,
      receiptId: held.receipt_id,
      idempotencyKey: held.idempotency_key,
      depth: 0,
      effect: held.effect,
      payload: held.payload,
      attempts: 1,
      expiresAt: null,
      createdAt: held.created_at,
      claimToken: "holder",
      claimExpiresAt: NOW + 20_000,
      rateLimitedSince: null,
      rateKey: null,
      keyHot: false,
      teamId: "T0ONE",
    };
    const outcome = await finishClaim(
      env.DB,
      claimed,
      { kind: "wait", nextAttemptAt: NOW + 300_000, error: "token_revoked" },
      NOW + 1,
      60_000,
      NOW,
    );
    expect(outcome.applied).toBe(false);
    // Re-installed: the parked row stays parked (a replay is the admin's decision), and Slack is never called for it.
    await saveInstallation(env.DB, keys, install("T0ONE", "xoxb-reinstalled"), NOW + 2);
    await deliverBatch(lifecycleDeps(NOW + 3).deps, [inFlight]);
    expect((await readRow(env.DB, inFlight)).status).toBe("dead");
    expect(slack.current.callsTo("chat.postMessage")).toHaveLength(0);
  });

  it(`parks a large backlog in bounded steps of ${PARK_STEP}: a full step asks for the next as a follow-up`, async () => {
    const statements = Array.from({ length: PARK_STEP + 1 }, (_, i) =>
      env.DB.prepare(
        `INSERT INTO outbox (idempotency_key, receipt_id, team_id, effect, payload, status, next_attempt_at, created_at, updated_at, sweep_at)
         VALUES (?, 'EvBulk', 'T0BIG', 'chat.postMessage', '{"channel":"C1","text":"x"}', 'pending', ?, ?, ?, ?)`,
      ).bind(`EvBulk:${i}`, NOW + 3_600_000, NOW, NOW, NOW + 3_600_000),
    );
    await env.DB.batch(statements);
    const removed = await removal("T0BIG", "EvBig:installation");
    await deliverBatch(lifecycleDeps(NOW).deps, [removed]);
    expect(JSON.parse((await readRow(env.DB, removed)).result ?? "null")).toEqual({ removed: 0, parked: PARK_STEP, step: 1 });
    const next = await env.DB.prepare("SELECT id, payload FROM outbox WHERE parent_id = ?")
      .bind(removed)
      .first<{ id: number; payload: string }>();
    expect(JSON.parse(next?.payload ?? "null")).toEqual({
      team_id: "T0BIG",
      enterprise_id: null,
      org_wide: false,
      reason: "app_uninstalled",
      at: NOW,
      step: 2,
    });
    await deliverBatch(lifecycleDeps(NOW).deps, [next?.id ?? 0]);
    const counts = await env.DB.prepare(
      "SELECT status, COUNT(*) AS n FROM outbox WHERE team_id = 'T0BIG' AND effect = 'chat.postMessage' GROUP BY status",
    ).all();
    expect(counts.results).toEqual([{ status: "dead", n: PARK_STEP + 1 }]);
  });
});

describe("an uninstall performed late (a backlog, a retry, the sweep's re-send, a replay)", () => {
  function lifecycleDeps(now: number) {
    const slackFor = slackForRow({
      db: env.DB,
      keys: async () => keys,
      slackApiUrl: TEST_SLACK_API_URL,
      edge: networkEdge,
      teamless: undefined,
    });
    // Follow-ups' messages recorded, not sent: these cases deliver every row themselves, and a real delivery by the
    // test Worker's consumer could claim one first (or land in a later case).
    const base = deliveryDeps(now, { slackFor, queue: recordingQueue() });
    return {
      ...base,
      deps: {
        ...base.deps,
        effects: withLifecycleEffect(
          testApp().effects,
          installationRemovedEffect(env.DB, () => now),
        ),
      },
    };
  }
  const removal = (teamId: string, key: string, at: number, org?: string) =>
    insertRow(env.DB, {
      key,
      status: "pending",
      effect: INSTALLATION_REMOVED,
      payload: { team_id: teamId, enterprise_id: org ?? null, org_wide: org !== undefined, reason: "app_uninstalled", at, step: 1 },
      teamId,
      nextAttemptAt: NOW,
    });
  const postAt = (teamId: string, text: string, createdAt: number) =>
    insertRow(env.DB, {
      status: "pending",
      effect: "chat.postMessage",
      payload: { channel: "C1", text },
      teamId,
      nextAttemptAt: NOW,
      createdAt,
    });

  it("after a re-install: the new installation stays, and the team's rows are not parked (they go out with the new token)", async () => {
    const uninstalledAt = NOW - 60_000;
    const before = await postAt("T0ONE", "recorded before the uninstall", uninstalledAt - 1);
    const after = await postAt("T0ONE", "recorded after the re-install", NOW - 1000);
    // Re-installed 1 ms after the uninstall; the removal is performed now.
    await saveInstallation(env.DB, keys, install("T0ONE", "xoxb-reinstalled"), uninstalledAt + 1);
    const removed = await removal("T0ONE", "EvLate:installation", uninstalledAt);
    await deliverBatch(lifecycleDeps(NOW).deps, [removed]);
    expect(JSON.parse((await readRow(env.DB, removed)).result ?? "null")).toEqual({ removed: 0, parked: 0, step: 1 });
    expect((await env.DB.prepare("SELECT install_key FROM installations").all()).results).toEqual([{ install_key: "T:T0ONE" }]);
    for (const id of [before, after]) expect((await readRow(env.DB, id)).status).toBe("pending");
  });

  it("an installation last written at the removal's time (the boundary) is removed; the rows recorded after the removal wait, not parked", async () => {
    const uninstalledAt = NOW - 60_000;
    await saveInstallation(env.DB, keys, install("T0ONE", "xoxb-old"), uninstalledAt);
    const before = await postAt("T0ONE", "before", uninstalledAt);
    const after = await postAt("T0ONE", "after", uninstalledAt + 1);
    const removed = await removal("T0ONE", "EvEdge:installation", uninstalledAt);
    await deliverBatch(lifecycleDeps(NOW).deps, [removed]);
    expect(JSON.parse((await readRow(env.DB, removed)).result ?? "null")).toEqual({ removed: 1, parked: 1, step: 1 });
    expect((await readRow(env.DB, before)).status).toBe("dead");
    expect((await readRow(env.DB, after)).status).toBe("pending");
  });

  it("a removal without its time is refused (dead, with the reason), deleting nothing", async () => {
    await saveInstallation(env.DB, keys, install("T0ONE", "xoxb-one"), NOW);
    const id = await insertRow(env.DB, {
      key: "EvOld:installation",
      status: "pending",
      effect: INSTALLATION_REMOVED,
      payload: { team_id: "T0ONE", reason: "app_uninstalled", step: 1 },
      teamId: "T0ONE",
      nextAttemptAt: NOW,
    });
    await deliverBatch(lifecycleDeps(NOW).deps, [id]);
    expect(await readRow(env.DB, id)).toMatchObject({ status: "dead" });
    expect((await readRow(env.DB, id)).last_error).toContain("payload has no time (at)");
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM installations").first("n")).toBe(1);
  });

  it("an org-wide uninstall removes the org's 'E:' installation and parks the org's rows; a workspace with its own install keeps it and its rows", async () => {
    await saveInstallation(
      env.DB,
      keys,
      { ...install("T0UNUSED", "xoxb-org-token"), teamId: undefined, enterpriseId: "E0ORG", isEnterpriseInstall: true },
      NOW - 10_000,
    );
    await saveInstallation(env.DB, keys, { ...install("T0OWN", "xoxb-own-token"), enterpriseId: "E0ORG" }, NOW - 10_000);
    for (const [id, team] of [
      ["EvOrgWs", "T0GRIDWS"],
      ["EvOrgOwn", "T0OWN"],
    ])
      await env.DB.prepare(
        "INSERT INTO receipts (id, kind, type, team_id, delivery_id, received_at, enterprise_id) VALUES (?, 'event', 'app_mention', ?, 'd', ?, 'E0ORG')",
      )
        .bind(id, team, NOW - 5000)
        .run();
    const row = (key: string, team: string) =>
      insertRow(env.DB, {
        key,
        status: "pending",
        effect: "chat.postMessage",
        payload: { channel: "C1", text: key },
        teamId: team,
        nextAttemptAt: NOW,
        createdAt: NOW - 5000,
      });
    const viaOrg = await row("EvOrgWs:main", "T0GRIDWS");
    const own = await row("EvOrgOwn:main", "T0OWN");
    const removed = await removal("T0GRIDWS", "EvOrgGone:installation", NOW - 1000, "E0ORG");
    await deliverBatch(lifecycleDeps(NOW).deps, [removed]);
    expect(JSON.parse((await readRow(env.DB, removed)).result ?? "null")).toEqual({ removed: 1, parked: 1, step: 1 });
    expect((await env.DB.prepare("SELECT install_key FROM installations").all()).results).toEqual([{ install_key: "T:T0OWN" }]);
    expect(await readRow(env.DB, viaOrg)).toMatchObject({
      status: "dead",
      last_error: "installation removed: app_uninstalled for org E0ORG (org-wide install) (re-install the app there, then replay)",
    });
    expect((await readRow(env.DB, own)).status).toBe("pending");
  });
});

describe("an org-wide Enterprise Grid install", () => {
  it("serves a workspace of the org that has no install of its own (the org is read from the row's receipt); a workspace install of its own wins", async () => {
    await saveInstallation(
      env.DB,
      keys,
      { ...install("T0UNUSED", "xoxb-org-token"), teamId: undefined, enterpriseId: "E0ORG", isEnterpriseInstall: true },
      NOW,
    );
    await saveInstallation(env.DB, keys, { ...install("T0OWN", "xoxb-own-token"), enterpriseId: "E0ORG" }, NOW);
    const receipt = (id: string, team: string) =>
      env.DB.prepare(
        "INSERT INTO receipts (id, kind, type, team_id, delivery_id, received_at, enterprise_id) VALUES (?, 'event', 'app_mention', ?, 'd', ?, 'E0ORG')",
      )
        .bind(id, team, NOW)
        .run();
    await receipt("EvGridWs", "T0GRIDWS");
    await receipt("EvGridOwn", "T0OWN");
    const viaOrg = await insertRow(env.DB, {
      key: "EvGridWs:main",
      status: "pending",
      effect: "chat.postMessage",
      payload: { channel: "C1", text: "org" },
      teamId: "T0GRIDWS",
      nextAttemptAt: NOW,
    });
    const own = await insertRow(env.DB, {
      key: "EvGridOwn:main",
      status: "pending",
      effect: "chat.postMessage",
      payload: { channel: "C1", text: "own" },
      teamId: "T0OWN",
      nextAttemptAt: NOW,
    });
    const outsider = await post("T0GRIDWS", "no receipt with the org");
    slack.current.always("chat.postMessage", reply.ok({ ts: "1.1" }));
    await deliverBatch(distributedDeps(NOW).deps, [viaOrg, own, outsider]);
    const byText = Object.fromEntries(slack.current.callsTo("chat.postMessage").map((c) => [c.params.text, c.authorization]));
    expect(byText).toEqual({ org: "Bearer xoxb-org-token", own: "Bearer xoxb-own-token" });
    expect(await readRow(env.DB, outsider)).toMatchObject({ status: "pending", attempts: 0 });
  });
});

describe("the cron's refresh ahead of expiry", () => {
  // The clock at each claim: the tick's own time here (a tick that ran long is test/consumer/lease-clock.test.ts).
  const deps = (at = NOW) => ({
    db: env.DB,
    keys,
    slackApiUrl: TEST_SLACK_API_URL,
    edge: networkEdge,
    clientId: "1.2",
    clientSecret: "secret",
    newToken: () => crypto.randomUUID(),
    clock: () => at,
  });
  const rotating = (teamId: string, expiresAt: number) =>
    saveInstallation(
      env.DB,
      keys,
      { ...install(teamId, `xoxe.xoxb-${teamId}`), refreshToken: `xoxe-1-${teamId}`, tokenExpiresAt: expiresAt },
      NOW - 1000,
    );

  it("refreshes the tokens due within 30 minutes (at the boundary included), not the later ones nor non-rotating ones", async () => {
    await rotating("T0DUE", NOW + REFRESH_AHEAD_MS);
    await rotating("T0LATER", NOW + REFRESH_AHEAD_MS + 1);
    await saveInstallation(env.DB, keys, install("T0PLAIN", "xoxb-plain"), NOW);
    slack.current.script(
      "oauth.v2.access",
      reply.ok({ access_token: "xoxe.xoxb-fresh", refresh_token: "xoxe-1-fresh", expires_in: 43_200 }),
    );
    expect(await refreshExpiring(deps(), NOW)).toEqual({ refreshed: 1, failed: [] });
    expect(slack.current.callsTo("oauth.v2.access")[0]?.params.refresh_token).toBe("xoxe-1-T0DUE");
    const due = await env.DB.prepare("SELECT token_expires_at FROM installations WHERE install_key = 'T:T0DUE'").first("token_expires_at");
    expect(due).toBe(NOW + 43_200_000);
  });

  it("a tick racing an effect's refresh for one installation: one refresh call between them", async () => {
    await rotating("T0RACE", NOW - 1);
    const id = await post("T0RACE", "m");
    slack.current.script(
      "oauth.v2.access",
      reply.ok({ access_token: "xoxe.xoxb-fresh", refresh_token: "xoxe-1-fresh", expires_in: 43_200 }),
    );
    slack.current.script("chat.postMessage", reply.ok({ ts: "1.1" }));
    const slackFor = slackForRow({
      db: env.DB,
      keys: async () => keys,
      slackApiUrl: TEST_SLACK_API_URL,
      edge: networkEdge,
      teamless: undefined,
      rotation: { clientId: "1.2", clientSecret: "secret", newToken: () => crypto.randomUUID() },
      clock: () => NOW,
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    });
    await Promise.all([refreshExpiring(deps(), NOW), deliverBatch(deliveryDeps(NOW, { slackFor }).deps, [id])]);
    expect(slack.current.callsTo("oauth.v2.access")).toHaveLength(1);
    expect(slack.current.callsTo("chat.postMessage")[0]?.authorization).toBe("Bearer xoxe.xoxb-fresh");
  });

  it("one installation whose refresh throws (its key is not configured) is reported, and the others due are still refreshed", async () => {
    const gone = await tokenKeys("5b".repeat(32), undefined);
    await saveInstallation(
      env.DB,
      gone,
      { ...install("T0LOSTKEY", "xoxe.xoxb-lost"), refreshToken: "xoxe-1-lost", tokenExpiresAt: NOW - 1 },
      NOW - 1000,
    );
    await rotating("T0DUE", NOW);
    slack.current.script(
      "oauth.v2.access",
      reply.ok({ access_token: "xoxe.xoxb-fresh", refresh_token: "xoxe-1-fresh", expires_in: 43_200 }),
    );
    const outcome = await refreshExpiring(deps(), NOW);
    expect(outcome.refreshed).toBe(1);
    expect(outcome.failed).toEqual([
      `T:T0LOSTKEY: no configured token encryption key has id ${gone.current.id} (set it as TOKEN_ENCRYPTION_KEY_PREVIOUS)`,
    ]);
    expect(slack.current.callsTo("oauth.v2.access").map((c) => c.params.refresh_token)).toEqual(["xoxe-1-T0DUE"]);
  });

  it("a refused refresh is reported by installation, never with a token", async () => {
    await rotating("T0BAD", NOW);
    slack.current.script("oauth.v2.access", reply.error("invalid_refresh_token"));
    const outcome = await refreshExpiring(deps(), NOW);
    expect(outcome).toEqual({
      refreshed: 0,
      failed: ["T:T0BAD: oauth.v2.access (refresh) answered invalid_refresh_token; re-install the app"],
    });
  });

  it("a refusal that comes back after the refresh lease was lost blocks nothing and is not reported as a block (its fenced write's count is read)", async () => {
    await rotating("T0LATE", NOW);
    const held = gate();
    slack.current.script("oauth.v2.access", reply.held(held, reply.error("invalid_refresh_token")));
    const refreshing = refreshExpiring(deps(), NOW);
    await waitFor(
      async () => slack.current.callsTo("oauth.v2.access").length,
      (n) => n === 1,
    );
    // Meanwhile the lease passed to another holder (it expired and was taken again).
    await env.DB.prepare("UPDATE installations SET refresh_claim_token = 'other' WHERE install_key = 'T:T0LATE'").run();
    held.open();
    expect(await refreshing).toEqual({ refreshed: 0, failed: [] });
    expect(
      await env.DB.prepare("SELECT blocked_reason FROM installations WHERE install_key = 'T:T0LATE'").first("blocked_reason"),
    ).toBeNull();
  });

  it("skips blocked, leased and backing-off installations in the SQL itself: 20 broken ones sooner due cannot starve a healthy one", async () => {
    for (let i = 0; i < 20; i++) {
      const team = `T0BROKEN${String(i).padStart(2, "0")}`;
      await rotating(team, NOW - 1000 + i);
      const column = [
        "blocked_reason = 'token_revoked', blocked_at = ?2",
        "refresh_claim_expires_at = ?2 + 1",
        "refresh_retry_at = ?2 + 1",
      ][i % 3];
      await env.DB.prepare(`UPDATE installations SET ${column} WHERE install_key = ?1`).bind(`T:${team}`, NOW).run();
    }
    // On the boundary: a lease that ran out at NOW, and a backoff that ends at NOW, are due again.
    await rotating("T0LEASEDONE", NOW + 1);
    await env.DB.prepare(
      "UPDATE installations SET refresh_claim_expires_at = ?1, refresh_claim_token = 'old' WHERE install_key = 'T:T0LEASEDONE'",
    )
      .bind(NOW)
      .run();
    await rotating("T0BACKEDOFF", NOW + 2);
    await env.DB.prepare("UPDATE installations SET refresh_retry_at = ?1, refresh_failures = 3 WHERE install_key = 'T:T0BACKEDOFF'")
      .bind(NOW)
      .run();
    await rotating("T0HEALTHY", NOW + 3);
    const fresh = (n: string) => reply.ok({ access_token: `xoxe.xoxb-${n}`, refresh_token: `xoxe-1-${n}`, expires_in: 43_200 });
    slack.current.script("oauth.v2.access", fresh("a"), fresh("b"), fresh("c"));
    expect(await refreshExpiring(deps(), NOW)).toEqual({ refreshed: 3, failed: [] });
    expect(slack.current.callsTo("oauth.v2.access").map((c) => c.params.refresh_token)).toEqual([
      "xoxe-1-T0LEASEDONE",
      "xoxe-1-T0BACKEDOFF",
      "xoxe-1-T0HEALTHY",
    ]);
    const reset = await env.DB.prepare(
      "SELECT refresh_failures, refresh_retry_at FROM installations WHERE install_key = 'T:T0BACKEDOFF'",
    ).first();
    expect(reset).toEqual({ refresh_failures: 0, refresh_retry_at: null });
  });

  it("a transient refresh failure (a 503, ratelimited) is not a block: the installation backs off, doubling, and is tried again once due", async () => {
    await rotating("T0FLAKY", NOW);
    slack.current.script("oauth.v2.access", reply.status(503));
    expect((await refreshExpiring(deps(), NOW)).failed).toHaveLength(1);
    const backoff = () => env.DB.prepare("SELECT blocked_reason, refresh_failures, refresh_retry_at FROM installations").first();
    expect(await backoff()).toEqual({ blocked_reason: null, refresh_failures: 1, refresh_retry_at: NOW + REFRESH_BACKOFF_BASE_MS });
    // Still under its lease and its backoff 1 ms early: nothing is called.
    expect(await refreshExpiring(deps(NOW + REFRESH_BACKOFF_BASE_MS - 1), NOW + REFRESH_BACKOFF_BASE_MS - 1)).toEqual({
      refreshed: 0,
      failed: [],
    });
    slack.current.script("oauth.v2.access", reply.error("ratelimited"));
    await refreshExpiring(deps(NOW + REFRESH_BACKOFF_BASE_MS), NOW + REFRESH_BACKOFF_BASE_MS);
    expect(await backoff()).toEqual({
      blocked_reason: null,
      refresh_failures: 2,
      refresh_retry_at: NOW + REFRESH_BACKOFF_BASE_MS + 2 * REFRESH_BACKOFF_BASE_MS,
    });
  });
});

describe("single-workspace mode: a refused SLACK_BOT_TOKEN", () => {
  it("makes rows wait (no attempt spent, no further Slack call in this isolate); a new token resumes them, nothing lost", async () => {
    const refused = new Map<string, string>();
    const ids = [await post("T0TEAM", "a"), await post("T0TEAM", "b")];
    slack.current.script("chat.postMessage", reply.error("token_revoked"));
    const broken = deliveryDeps(NOW, { slackFor: singleWorkspaceSlack("xoxb-broken", TEST_SLACK_API_URL, networkEdge, refused) });
    for (const id of ids) await deliverBatch(broken.deps, [id]);
    for (const id of ids) {
      const row = await readRow(env.DB, id);
      expect(row).toMatchObject({ status: "pending", attempts: 0 });
      expect(row.last_error).toBe(
        `SLACK_BOT_TOKEN (fingerprint ${await tokenFingerprint("xoxb-broken")}) was refused by Slack (token_revoked); rows wait, no attempt spent, until a new SLACK_BOT_TOKEN is deployed`,
      );
    }
    expect(slack.current.callsTo("chat.postMessage")).toHaveLength(1);
    expect(JSON.stringify(broken.log.records)).not.toContain("xoxb-broken");

    slack.current.always("chat.postMessage", reply.ok({ ts: "1.1" }));
    await deliverBatch(
      deliveryDeps(NOW + NO_INSTALLATION_WAIT_MS, {
        slackFor: singleWorkspaceSlack("xoxb-fixed", TEST_SLACK_API_URL, networkEdge, refused),
      }).deps,
      ids,
    );
    for (const id of ids) expect(await readRow(env.DB, id)).toMatchObject({ status: "done", attempts: 1 });
    expect(
      slack.current
        .callsTo("chat.postMessage")
        .slice(1)
        .map((c) => c.authorization),
    ).toEqual(["Bearer xoxb-fixed", "Bearer xoxb-fixed"]);
  });
});
