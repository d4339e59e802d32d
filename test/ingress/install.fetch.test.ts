import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { networkEdge } from "../../shared/effects/outbound.ts";
import { tokenKeys } from "../../shared/installations/crypto.ts";
import { STATE_COOKIE, STATE_TTL_MS } from "../../shared/installations/install-flow.ts";
import { issueState, stateKeys } from "../../shared/installations/oauth-state.ts";
import { saveInstallation } from "../../shared/installations/store.ts";
import { wakeWaitingRows } from "../../shared/installations/wake.ts";
import { recordingLog } from "../../shared/log.ts";
import { placementsOn } from "../../shared/shards/placement.ts";
import { handleHttp } from "../../workers/ingress/http.ts";
import { capturingDb, queryPlan } from "../support/captured-sql.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { testInstallation } from "../support/installations.ts";
import { dbOf, insertRow, readRow, recordingQueue, resetAllShards, shardDbs, shardOf } from "../support/rows.ts";
import { commandForm, eventRequest, FORM, mention, NOW as REQUEST_NOW, signed } from "../support/slack-requests.ts";
import { testApp } from "../support/test-app.ts";

const BASE = "https://ackbox.test";
const OAUTH_ENV = {
  ...env,
  SLACK_CLIENT_ID: "1111.2222",
  SLACK_CLIENT_SECRET: "client-secret-for-tests",
  SLACK_SCOPES: "chat:write,reactions:write",
  SLACK_REDIRECT_URL: `${BASE}/slack/oauth_redirect`,
  TOKEN_ENCRYPTION_KEY: "0f".repeat(32),
};
const BOT_TOKEN = "xoxb-team-one-installed-token";
const NOW = 1_800_000_000_000;

const slack = useFakeSlack();

async function get(path: string, now: number, cookie?: string, environment: object = OAUTH_ENV) {
  const log = recordingLog();
  const headers: Record<string, string> = cookie ? { cookie: `${STATE_COOKIE}=${cookie}` } : {};
  const response = await handleHttp(
    new Request(`${BASE}${path}`, { headers }),
    environment as typeof env,
    createExecutionContext(),
    now,
    log,
    testApp(),
    networkEdge,
  );
  return { response, log, text: await response.text() };
}

/** Starts an install and returns the state Slack would carry back (and the browser holds in its cookie). */
async function started(now = NOW): Promise<string> {
  const { response } = await get("/slack/install", now);
  const location = new URL(response.headers.get("location") ?? "");
  return location.searchParams.get("state") ?? "";
}

/** Every shard's installations, each with the shard it was found on. */
const installations = async () => {
  const found: Record<string, unknown>[] = [];
  for (const [shard, db] of shardDbs().entries()) {
    const { results } = await db.prepare("SELECT * FROM installations").all<Record<string, unknown>>();
    found.push(...results.map((row) => ({ ...row, shard })));
  }
  return found;
};
const states = () =>
  env.DB.prepare("SELECT COUNT(*) AS n FROM oauth_states")
    .first<{ n: number }>()
    .then((r) => r?.n);

const accessOk = (fields: Record<string, unknown> = {}) =>
  reply.ok({
    access_token: BOT_TOKEN,
    token_type: "bot",
    scope: "chat:write,reactions:write",
    bot_user_id: "U0BOT",
    app_id: "A0APP",
    team: { id: "T0ONE", name: "One" },
    enterprise: null,
    is_enterprise_install: false,
    authed_user: { id: "U0INSTALLER" },
    ...fields,
  });

beforeEach(async () => {
  await env.DB.prepare("DELETE FROM oauth_states").run();
  for (const db of shardDbs()) await db.prepare("DELETE FROM installations").run();
});

describe("the install routes' methods", () => {
  it("answer 405 to anything but GET (HEAD included: a prefetch must not start an install or spend a state), writing nothing", async () => {
    const state = await started();
    for (const method of ["HEAD", "POST"]) {
      for (const path of ["/slack/install", `/slack/oauth_redirect?code=c&state=${state}`]) {
        const log = recordingLog();
        const response = await handleHttp(
          new Request(`${BASE}${path}`, { method, headers: { cookie: `${STATE_COOKIE}=${state}` } }),
          OAUTH_ENV as typeof env,
          createExecutionContext(),
          NOW,
          log,
          testApp(),
          networkEdge,
        );
        expect(response.status).toBe(405);
        expect(response.headers.get("allow")).toBe("GET");
      }
    }
    expect(await states()).toBe(0);
    expect(slack.current.callsTo("oauth.v2.access")).toHaveLength(0);
    // Not spent by the refused methods: the GET still finishes.
    slack.current.script("oauth.v2.access", accessOk());
    expect((await get(`/slack/oauth_redirect?code=c&state=${state}`, NOW, state)).response.status).toBe(200);
  });
});

describe("GET /slack/install", () => {
  it("redirects to Slack's authorize page with the client id, the scopes, a signed state and the redirect URL, sets the state in a cookie, and writes nothing", async () => {
    const { response } = await get("/slack/install", NOW);
    expect(response.status).toBe(302);
    const location = new URL(response.headers.get("location") ?? "");
    expect(`${location.origin}${location.pathname}`).toBe("https://slack.test/oauth/v2/authorize");
    expect(location.searchParams.get("client_id")).toBe("1111.2222");
    expect(location.searchParams.get("scope")).toBe("chat:write,reactions:write");
    expect(location.searchParams.get("redirect_uri")).toBe(`${BASE}/slack/oauth_redirect`);
    const state = location.searchParams.get("state") ?? "";
    expect(state).toMatch(new RegExp(`^${NOW + STATE_TTL_MS}\\.[0-9a-f]{32}\\.[0-9a-f]{64}$`));
    expect(response.headers.get("set-cookie")).toContain(`${STATE_COOKIE}=${state};`);
    expect(response.headers.get("set-cookie")).toContain("HttpOnly");
    expect(await states()).toBe(0);
  });

  it("a flood of starts writes nothing and refuses no one: an install begun after 1 200 of them finishes", async () => {
    // The DoS a stored state had: a global bound on rows that an unauthenticated loop could fill.
    for (let batch = 0; batch < 12; batch++) {
      const answers = await Promise.all(Array.from({ length: 100 }, () => get("/slack/install", NOW)));
      expect(answers.every((a) => a.response.status === 302)).toBe(true);
    }
    expect(await states()).toBe(0);
    const state = await started();
    slack.current.script("oauth.v2.access", accessOk());
    expect((await get(`/slack/oauth_redirect?code=c&state=${state}`, NOW, state)).response.status).toBe(200);
  });

  it("answers 404 in single-workspace mode (no SLACK_CLIENT_ID), both paths", async () => {
    for (const path of ["/slack/install", "/slack/oauth_redirect?code=c&state=s"]) {
      const { response, log } = await get(path, NOW, undefined, env);
      expect(response.status).toBe(404);
      expect(log.records.map((r) => r.msg)).toContain("install asked for, but SLACK_CLIENT_ID is not set (single-workspace mode)");
    }
    expect(await states()).toBe(0);
  });
});

describe("GET /slack/oauth_redirect", () => {
  it("with a good state: trades the code at oauth.v2.access, stores the installation with its token encrypted, and spends the state", async () => {
    const state = await started();
    slack.current.script("oauth.v2.access", accessOk());
    const { response, text, log } = await get(`/slack/oauth_redirect?code=the-code&state=${state}`, NOW + 1000, state);
    expect(response.status).toBe(200);
    expect(text).toContain("Installed in workspace T0ONE");
    const [call] = slack.current.callsTo("oauth.v2.access");
    expect(call?.params).toEqual({
      client_id: "1111.2222",
      client_secret: "client-secret-for-tests",
      code: "the-code",
      redirect_uri: `${BASE}/slack/oauth_redirect`,
    });
    const rows = await installations();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      // Stored on shard 0, where every installation lives (docs/scaling.md), whatever the team's shard.
      shard: 0,
      install_key: "T:T0ONE",
      team_id: "T0ONE",
      enterprise_id: null,
      is_enterprise_install: 0,
      bot_user_id: "U0BOT",
      scopes: "chat:write,reactions:write",
      installer_user_id: "U0INSTALLER",
      installed_at: NOW + 1000,
      token_expires_at: null,
    });
    // At rest: no token text anywhere in the row.
    expect(JSON.stringify(rows)).not.toContain("xoxb-");
    expect(await states()).toBe(1);
    expect(JSON.stringify(log.records)).not.toMatch(/xoxb-|the-code|client-secret|[0-9a-f]{64}/);
  });

  it("keys an org-wide Enterprise Grid install by its enterprise (Slack sends no team)", async () => {
    const state = await started();
    slack.current.script("oauth.v2.access", accessOk({ team: null, enterprise: { id: "E0ORG" }, is_enterprise_install: true }));
    const { response, text } = await get(`/slack/oauth_redirect?code=c&state=${state}`, NOW, state);
    expect(response.status).toBe(200);
    expect(text).toContain("every workspace of E0ORG");
    expect(await installations()).toEqual([
      expect.objectContaining({
        // Shard 0, as every installation.
        shard: 0,
        install_key: "E:E0ORG",
        enterprise_id: "E0ORG",
        team_id: null,
        is_enterprise_install: 1,
      }),
    ]);
  });

  it("refuses a replayed state: the second use finds nothing, and the installation is the first one's", async () => {
    const state = await started();
    slack.current.script("oauth.v2.access", accessOk());
    expect((await get(`/slack/oauth_redirect?code=c1&state=${state}`, NOW, state)).response.status).toBe(200);
    const again = await get(`/slack/oauth_redirect?code=c2&state=${state}`, NOW, state);
    expect(again.response.status).toBe(400);
    expect(again.log.records.map((r) => r.msg)).toContain("install refused: the state was already used");
    expect(slack.current.callsTo("oauth.v2.access")).toHaveLength(1);
    expect(await installations()).toHaveLength(1);
  });

  it("refuses two concurrent redirects with one state but once: one INSERT … ON CONFLICT DO NOTHING decides", async () => {
    const state = await started();
    slack.current.script("oauth.v2.access", accessOk());
    const both = await Promise.all([1, 2].map((n) => get(`/slack/oauth_redirect?code=c${n}&state=${state}`, NOW, state)));
    expect(both.map((b) => b.response.status).sort()).toEqual([200, 400]);
    expect(slack.current.callsTo("oauth.v2.access")).toHaveLength(1);
  });

  it("refuses an expired state (10 minutes is the limit: one millisecond before is fine, at it is not) before touching D1, and the browser forgets it", async () => {
    const late = await started(NOW);
    const result = await get(`/slack/oauth_redirect?code=c&state=${late}`, NOW + STATE_TTL_MS, late);
    expect(result.response.status).toBe(400);
    expect(result.log.records.map((r) => r.msg)).toContain("install refused: the state expired (an install must finish within 10 minutes)");
    expect(result.response.headers.get("set-cookie")).toContain(`${STATE_COOKIE}=; Max-Age=0`);
    expect(await states()).toBe(0);
    expect(slack.current.callsTo("oauth.v2.access")).toHaveLength(0);

    const inTime = await started(NOW);
    slack.current.script("oauth.v2.access", accessOk());
    expect((await get(`/slack/oauth_redirect?code=c&state=${inTime}`, NOW + STATE_TTL_MS - 1, inTime)).response.status).toBe(200);
    expect(await installations()).toHaveLength(1);
  });

  it("removes expired spent states as it spends a new one, and keeps live ones", async () => {
    await env.DB.batch([
      env.DB.prepare("INSERT INTO oauth_states VALUES ('old', ?)").bind(NOW - 1),
      env.DB.prepare("INSERT INTO oauth_states VALUES ('edge', ?)").bind(NOW),
      env.DB.prepare("INSERT INTO oauth_states VALUES ('live', ?)").bind(NOW + 1),
    ]);
    const state = await started();
    slack.current.script("oauth.v2.access", accessOk());
    expect((await get(`/slack/oauth_redirect?code=c&state=${state}`, NOW, state)).response.status).toBe(200);
    const left = await env.DB.prepare("SELECT state FROM oauth_states ORDER BY state").all<{ state: string }>();
    expect(left.results.map((r) => r.state).sort()).toEqual([state, "live"].sort());
  });

  it("refuses a state this app did not sign (tampered expiry, another key, not a state at all) without spending it or calling Slack", async () => {
    const real = await started();
    const [expires, nonce, mac] = real.split(".");
    const tampered = `${Number(expires) + STATE_TTL_MS}.${nonce}.${mac}`;
    const otherKey = await issueState(await stateKeys("a1".repeat(32), undefined), NOW + STATE_TTL_MS);
    for (const forged of [tampered, otherKey, "0123456789abcdef", `${expires}.${nonce}`]) {
      const result = await get(`/slack/oauth_redirect?code=c&state=${encodeURIComponent(forged)}`, NOW, forged);
      expect(result.response.status).toBe(400);
      expect(result.log.records.map((r) => r.msg)).toContain("install refused: the state was not issued by this app");
      expect(result.response.headers.get("set-cookie")).toBeNull();
    }
    expect(await states()).toBe(0);
    expect(slack.current.callsTo("oauth.v2.access")).toHaveLength(0);
  });

  it("accepts a state signed under TOKEN_ENCRYPTION_KEY_PREVIOUS, so an install under way survives a key rotation", async () => {
    const before = await started();
    const rotated = { ...OAUTH_ENV, TOKEN_ENCRYPTION_KEY: "2b".repeat(32), TOKEN_ENCRYPTION_KEY_PREVIOUS: OAUTH_ENV.TOKEN_ENCRYPTION_KEY };
    slack.current.script("oauth.v2.access", accessOk());
    expect((await get(`/slack/oauth_redirect?code=c&state=${before}`, NOW, before, rotated)).response.status).toBe(200);
    // Without the previous key it is not this app's any more.
    const another = await started();
    const dropped = { ...OAUTH_ENV, TOKEN_ENCRYPTION_KEY: "2b".repeat(32) };
    expect((await get(`/slack/oauth_redirect?code=c&state=${another}`, NOW, another, dropped)).response.status).toBe(400);
  });

  it("refuses a state from another flow (not this browser's cookie) without consuming it, so the real flow still finishes", async () => {
    const mine = await started();
    const theirs = await started();
    const forged = await get(`/slack/oauth_redirect?code=attacker-code&state=${theirs}`, NOW, mine);
    expect(forged.response.status).toBe(400);
    const noCookie = await get(`/slack/oauth_redirect?code=attacker-code&state=${theirs}`, NOW);
    expect(noCookie.response.status).toBe(400);
    expect(forged.log.records.map((r) => r.msg)).toContain(
      "install refused: the state belongs to another browser's install (or the cookie expired)",
    );
    expect(await states()).toBe(0);
    slack.current.script("oauth.v2.access", accessOk());
    expect((await get(`/slack/oauth_redirect?code=c&state=${theirs}`, NOW, theirs)).response.status).toBe(200);
  });

  it("leaves the browser's state cookie alone when it refuses before consuming a state, so a forged link cannot end this browser's install", async () => {
    const mine = await started();
    const theirs = await started();
    for (const forgedPath of [
      `/slack/oauth_redirect?code=attacker-code&state=${theirs}`,
      `/slack/oauth_redirect?error=access_denied&state=${theirs}`,
      `/slack/oauth_redirect?state=${mine}`,
    ]) {
      const forged = await get(forgedPath, NOW, mine);
      expect(forged.response.status).toBe(400);
      expect(forged.response.headers.get("set-cookie")).toBeNull();
    }
    slack.current.script("oauth.v2.access", accessOk());
    const finished = await get(`/slack/oauth_redirect?code=c&state=${mine}`, NOW, mine);
    expect(finished.response.status).toBe(200);
    // Spent now: the browser forgets it, and a replay (state already used) clears it too.
    expect(finished.response.headers.get("set-cookie")).toContain(`${STATE_COOKIE}=; Max-Age=0`);
    const replay = await get(`/slack/oauth_redirect?code=c&state=${mine}`, NOW, mine);
    expect(replay.response.status).toBe(400);
    expect(replay.response.headers.get("set-cookie")).toContain(`${STATE_COOKIE}=; Max-Age=0`);
  });

  it("stores nothing when Slack answers ok:false, and says why", async () => {
    const state = await started();
    slack.current.script("oauth.v2.access", reply.error("invalid_code"));
    const result = await get(`/slack/oauth_redirect?code=c&state=${state}`, NOW, state);
    expect(result.response.status).toBe(400);
    expect(result.text).toContain("Slack refused the code (invalid_code)");
    expect(await installations()).toEqual([]);
  });

  it("bounds Slack's ok:false error in the page and the log line (a hostile answer cannot fill either)", async () => {
    const state = await started();
    slack.current.script("oauth.v2.access", reply.error(`invalid_code${"<x>".repeat(10_000)}`));
    const result = await get(`/slack/oauth_redirect?code=c&state=${state}`, NOW, state);
    expect(result.response.status).toBe(400);
    expect(result.text.length).toBeLessThan(1000);
    expect(result.text).not.toContain("<x>");
    expect(JSON.stringify(result.log.records).length).toBeLessThan(1000);
  });

  it("stores nothing when oauth.v2.access does not answer, or answers without a token", async () => {
    const first = await started();
    const second = await started();
    slack.current.script("oauth.v2.access", reply.status(503), accessOk({ access_token: undefined }));
    expect((await get(`/slack/oauth_redirect?code=c&state=${first}`, NOW, first)).response.status).toBe(502);
    const noToken = await get(`/slack/oauth_redirect?code=c&state=${second}`, NOW, second);
    expect(noToken.response.status).toBe(502);
    expect(noToken.text).toContain("oauth.v2.access answered no access_token");
    expect(await installations()).toEqual([]);
  });

  it("refuses a redirect without a code (or with Slack's error=access_denied) before touching the state", async () => {
    const state = await started();
    const noCode = await get(`/slack/oauth_redirect?state=${state}`, NOW, state);
    expect(noCode.response.status).toBe(400);
    expect(noCode.log.records.map((r) => r.msg)).toContain("install refused: the redirect carried no code");
    const denied = await get(`/slack/oauth_redirect?error=access_denied&state=${state}`, NOW, state);
    expect(denied.response.status).toBe(400);
    expect(denied.text).toContain("access_denied");
    expect(await installations()).toEqual([]);
    // Not spent: the real redirect still finishes.
    slack.current.script("oauth.v2.access", accessOk());
    expect((await get(`/slack/oauth_redirect?code=c&state=${state}`, NOW, state)).response.status).toBe(200);
  });

  it("a re-install replaces the token and keeps installed_at", async () => {
    for (const [at, token] of [
      [NOW, "xoxb-first"],
      [NOW + 5000, "xoxb-second"],
    ] as const) {
      const state = await started(at);
      slack.current.script("oauth.v2.access", accessOk({ access_token: token }));
      expect((await get(`/slack/oauth_redirect?code=c&state=${state}`, at, state)).response.status).toBe(200);
    }
    expect(await installations()).toEqual([expect.objectContaining({ installed_at: NOW, updated_at: NOW + 5000 })]);
  });
});

describe("an install serves the rows that waited for it", () => {
  const WAITED = NOW - 60_000;
  /** A row that waits for its team's installation, as deliver.ts leaves it: pending, due 5 minutes on, waiting_since set. */
  const waitingRow = async (teamId: string, db: D1Database = dbOf(teamId), key?: string) => {
    const id = await insertRow(db, {
      status: "pending",
      teamId,
      createdAt: WAITED,
      nextAttemptAt: WAITED + 5 * 60_000,
      sweepAt: WAITED + 5 * 60_000 + 30_000,
      lastError: `no installation for team ${teamId}`,
      ...(key ? { key } : {}),
    });
    await db.prepare("UPDATE outbox SET waiting_since = ?2 WHERE id = ?1").bind(id, WAITED).run();
    return id;
  };
  /** The outbox queue, recording each message it is sent (its body names the shard). */
  const recordingOutbox = (fail = false) => {
    const sent: unknown[] = [];
    return {
      sent,
      async sendBatch(messages: Iterable<MessageSendRequest<unknown>>) {
        if (fail) throw new Error("Queue send failed: simulated");
        for (const m of messages) sent.push(m.body);
      },
    };
  };
  const finish = async (queue: ReturnType<typeof recordingOutbox>, at = NOW, fields: Record<string, unknown> = {}) => {
    const state = await started(at);
    slack.current.script("oauth.v2.access", accessOk(fields));
    return get(`/slack/oauth_redirect?code=c&state=${state}`, at, state, { ...OAUTH_ENV, OUTBOX_QUEUE: queue });
  };

  beforeEach(resetAllShards);

  it("makes its team's waiting rows due now on the team's shard and enqueues them there; other teams', unwaiting and claimed rows are untouched", async () => {
    expect(shardOf("T0ONE")).toBe(1);
    const waiting = await waitingRow("T0ONE");
    const otherTeam = await waitingRow("T0OTHER");
    // A retry's backoff (no installation wait) and a claimed row of the same team keep their times.
    const backoff = await insertRow(dbOf("T0ONE"), { status: "pending", teamId: "T0ONE", createdAt: WAITED, nextAttemptAt: NOW + 30_000 });
    const claimed = await insertRow(dbOf("T0ONE"), { status: "leased", teamId: "T0ONE", createdAt: WAITED });
    await dbOf("T0ONE").prepare("UPDATE outbox SET waiting_since = ?2 WHERE id = ?1").bind(claimed, WAITED).run();
    const untouched = await Promise.all([otherTeam, backoff, claimed].map((id) => readRow(dbOf("T0ONE"), id)));
    const queue = recordingOutbox();

    const { response, log } = await finish(queue, NOW);

    expect(response.status).toBe(200);
    expect(await readRow(dbOf("T0ONE"), waiting)).toMatchObject({
      status: "pending",
      next_attempt_at: NOW,
      enqueued_at: NOW,
      sweep_at: NOW + Number(env.SWEEP_GRACE_SECONDS) * 1000,
    });
    expect(queue.sent).toEqual([{ id: waiting, shard: 1 }]);
    expect(await Promise.all([otherTeam, backoff, claimed].map((id) => readRow(dbOf("T0ONE"), id)))).toEqual(untouched);
    expect(log.records).toContainEqual(
      expect.objectContaining({
        msg: "install: rows that waited for it are due now",
        fields: expect.objectContaining({ rows: 1, shard: 1 }),
      }),
    );
  });

  it("a row not yet due at the install's time is woken; one already due is left to the queue message it has", async () => {
    const due = await waitingRow("T0ONE");
    await dbOf("T0ONE").prepare("UPDATE outbox SET next_attempt_at = ?2 WHERE id = ?1").bind(due, NOW).run();
    const later = await waitingRow("T0ONE");
    await dbOf("T0ONE")
      .prepare("UPDATE outbox SET next_attempt_at = ?2 WHERE id = ?1")
      .bind(later, NOW + 1)
      .run();
    const queue = recordingOutbox();
    expect((await finish(queue, NOW)).response.status).toBe(200);
    expect(queue.sent).toEqual([{ id: later, shard: 1 }]);
  });

  it("after a shard is added, a workspace seen before it is woken on its one home, not where the rule now puts it", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    const team = "T0EARLY3";
    expect(shardOf(team)).toBe(1);
    // First seen while the deployment had one shard: placed on shard 0, where its rows wait.
    expect(await placementsOn(env.DB, 1).place(`T:${team}`, WAITED)).toBe(0);
    const home = await waitingRow(team, db0);
    const elsewhere = await waitingRow(team, db1);
    const queue = recordingOutbox();
    expect((await finish(queue, NOW, { team: { id: team } })).response.status).toBe(200);
    expect(queue.sent).toEqual([{ id: home }]);
    expect((await readRow(db1, elsewhere)).next_attempt_at).toBe(WAITED + 5 * 60_000);
  });

  it("an org-wide install wakes, on its org's one home, the waiting rows whose receipt names its enterprise", async () => {
    const org = { enterpriseId: "E0ORG", isEnterpriseInstall: true };
    const home = dbOf(org);
    const inOrg = await waitingRow("T0TWO", home, "EvORG1:main");
    await home
      .prepare(
        "INSERT INTO receipts (id, kind, type, team_id, delivery_id, received_at, enterprise_id) VALUES ('EvORG1', 'event', 'app_mention', 'T0TWO', 'd', ?1, 'E0ORG')",
      )
      .bind(WAITED)
      .run();
    const outside = await waitingRow("T0OTHER", home);
    const queue = recordingOutbox();
    expect((await finish(queue, NOW, { team: null, enterprise: { id: "E0ORG" }, is_enterprise_install: true })).response.status).toBe(200);
    expect(queue.sent).toEqual([shardOf(org) === 0 ? { id: inOrg } : { id: inOrg, shard: shardOf(org) }]);
    expect((await readRow(home, outside)).next_attempt_at).toBe(WAITED + 5 * 60_000);
  });

  it("reads through the waiting rows' index (migration 0012), not the pending backlog: a workspace's by team, an org's bounded", async () => {
    const { db, statements } = capturingDb(env.DB);
    await wakeWaitingRows(
      [{ index: 0, db, queue: recordingQueue() }],
      { teamId: "T0ONE", enterpriseId: undefined, isEnterpriseInstall: false },
      NOW,
      60_000,
      recordingLog(),
    );
    await wakeWaitingRows(
      [{ index: 0, db, queue: recordingQueue() }],
      { teamId: undefined, enterpriseId: "E0ORG", isEnterpriseInstall: true },
      NOW,
      60_000,
      recordingLog(),
    );
    expect(statements).toHaveLength(2);
    for (const statement of statements) {
      const plan = await queryPlan(env.DB, statement);
      expect(plan).toContain("outbox_waiting_by_team");
      expect(plan).not.toContain("outbox_pending_by_age");
    }
  });

  it("a queue that refuses leaves the woken rows to the next sweep (sweep_at now), and the install stands", async () => {
    const waiting = await waitingRow("T0ONE");
    const { response } = await finish(recordingOutbox(true), NOW);
    expect(response.status).toBe(200);
    expect(await readRow(dbOf("T0ONE"), waiting)).toMatchObject({ next_attempt_at: NOW, enqueued_at: null, sweep_at: NOW });
    expect(await installations()).toEqual([expect.objectContaining({ install_key: "T:T0ONE" })]);
  });

  it("a shard that cannot be written leaves the rows their wait, logs why, and the install stands", async () => {
    const waiting = await waitingRow("T0ONE");
    const outage = () => {
      throw new Error("D1_ERROR: simulated outage");
    };
    const broken = { prepare: outage, batch: outage };
    const state = await started();
    slack.current.script("oauth.v2.access", accessOk());
    const { response, log } = await get(`/slack/oauth_redirect?code=c&state=${state}`, NOW, state, { ...OAUTH_ENV, DB_1: broken });
    expect(response.status).toBe(200);
    expect(await installations()).toEqual([expect.objectContaining({ install_key: "T:T0ONE" })]);
    expect((await readRow(dbOf("T0ONE"), waiting)).next_attempt_at).toBe(WAITED + 5 * 60_000);
    expect(log.records).toContainEqual(
      expect.objectContaining({ level: "warn", msg: "installed, but its waiting rows were not made due; they keep their wait" }),
    );
  });
});

describe("a slash command that opens a modal, in a distributed app", () => {
  it("opens it with the command's team's installation token (no SLACK_BOT_TOKEN needed)", async () => {
    const keys = await tokenKeys(OAUTH_ENV.TOKEN_ENCRYPTION_KEY, undefined);
    await saveInstallation(env.DB, keys, testInstallation("T0TEAM", "xoxb-team-token", { scopes: "commands" }), REQUEST_NOW);
    slack.current.script("views.open", reply.ok({ view: { id: "V1" } }));
    const request = await signed(commandForm({ text: "modal" }), FORM, { now: REQUEST_NOW });
    const ctx = createExecutionContext();
    const response = await handleHttp(
      request,
      { ...OAUTH_ENV, SLACK_BOT_TOKEN: "" } as typeof env,
      ctx,
      REQUEST_NOW,
      recordingLog(),
      testApp(),
      networkEdge,
    );
    await waitOnExecutionContext(ctx);
    expect(response.status).toBe(200);
    expect(slack.current.callsTo("views.open")[0]?.authorization).toBe("Bearer xoxb-team-token");
  });

  // The ingress never spends a refresh token (Slack's is single-use): an answer it gave up on at the ack's
  // budget would lose the only valid pair. The consumer and the cron refresh; the ingress uses what is valid.
  const rotating = async (expiresAt: number) => {
    const keys = await tokenKeys(OAUTH_ENV.TOKEN_ENCRYPTION_KEY, undefined);
    await saveInstallation(
      env.DB,
      keys,
      testInstallation("T0TEAM", "xoxe.xoxb-current", { scopes: "commands", refreshToken: "xoxe-1-refresh", tokenExpiresAt: expiresAt }),
      REQUEST_NOW - 43_200_000,
    );
  };
  const post = async (request: Request, log = recordingLog(), now = REQUEST_NOW) => {
    const ctx = createExecutionContext();
    const response = await handleHttp(request, { ...OAUTH_ENV, SLACK_BOT_TOKEN: "" } as typeof env, ctx, now, log, testApp(), networkEdge);
    await waitOnExecutionContext(ctx);
    return response;
  };
  const installation = () =>
    env.DB.prepare("SELECT refresh_token, token_expires_at, blocked_reason, refresh_claim_token FROM installations").first();

  it("a modal for an installation inside its refresh window opens with the current token: the ingress makes no oauth.v2.access call", async () => {
    await rotating(REQUEST_NOW + 10 * 60_000);
    const before = await installation();
    slack.current.script("views.open", reply.ok({ view: { id: "V1" } }));
    const log0 = recordingLog();
    const response = await post(await signed(commandForm({ text: "modal" }), FORM, { now: REQUEST_NOW }), log0);
    expect(response.status).toBe(200);
    expect(slack.current.callsTo("views.open").map((c) => c.authorization)).toEqual(["Bearer xoxe.xoxb-current"]);
    expect(slack.current.callsTo("oauth.v2.access")).toHaveLength(0);
    expect(await installation()).toEqual(before);
  });

  it("the first attempt at the ack, for an installation inside its refresh window, goes out with the current token and refreshes nothing", async () => {
    // The first attempt reads the installation on Date.now, as the consumer does.
    const now = Date.now();
    await rotating(now + 10 * 60_000);
    const before = await installation();
    slack.current.script("chat.postMessage", reply.ok({ ts: "1.9" }));
    const response = await post(await eventRequest(mention(), { now }), recordingLog(), now);
    expect(response.status).toBe(200);
    expect(slack.current.callsTo("chat.postMessage").map((c) => c.authorization)).toEqual(["Bearer xoxe.xoxb-current"]);
    expect(slack.current.callsTo("oauth.v2.access")).toHaveLength(0);
    expect(await installation()).toEqual(before);
  });

  it("the first attempt with an expired token calls nothing and hands the row to the consumer at once, not after an installation's wait", async () => {
    const now = Date.now();
    await rotating(now - 1);
    const before = await installation();
    const log = recordingLog();
    const response = await post(await eventRequest(mention(), { now }), log, now);
    expect(response.status).toBe(200);
    expect(slack.current.calls).toEqual([]);
    expect(await installation()).toEqual(before);
    const acked = log.records.find((r) => r.msg === "slack request")?.fields as { shard?: number; outbox_ids: number[] };
    const db = shardDbs()[acked.shard ?? 0] as D1Database;
    const row = await db
      .prepare("SELECT status, attempts, next_attempt_at, last_error FROM outbox WHERE id = ?")
      .bind(acked.outbox_ids[0])
      .first<{ status: string; attempts: number; next_attempt_at: number; last_error: string }>();
    expect(row).toMatchObject({ status: "pending", attempts: 0 });
    expect(row?.last_error).toContain("expired and is not refreshed here");
    // Due within the request's own second, not NO_INSTALLATION_WAIT_MS (5 min) later; re-sent to the queue undelayed.
    expect(row?.next_attempt_at).toBeLessThan(now + 60_000);
    const resent = log.records.find((r) => r.msg === "first attempt left rows to the queue");
    expect(resent?.fields.actions).toEqual(["resend"]);
  });

  it("an expired token: no modal, no refresh and no block; the row waits for the consumer, which refreshes", async () => {
    await rotating(REQUEST_NOW - 1);
    const before = await installation();
    const log = recordingLog();
    const response = await post(await signed(commandForm({ text: "modal" }), FORM, { now: REQUEST_NOW }), log);
    expect(response.status).toBe(200);
    expect(slack.current.calls).toEqual([]);
    expect(await installation()).toEqual(before);
    expect(log.records.find((r) => r.msg === "views.open failed (best effort)")?.fields.error).toContain("expired");
  });
});
