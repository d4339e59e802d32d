import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { createApp, type SlackApp } from "../../shared/app/app.ts";
import { cancel, slack as intent, MAX_CANCELS, MAX_INTENTS } from "../../shared/app/intents.ts";
import { NO_APP_SETTINGS } from "../../shared/app/settings.ts";
import { countingDb, D1_QUERIES_PER_INVOCATION } from "../../shared/delivery/query-budget.ts";
import { networkEdge } from "../../shared/effects/outbound.ts";
import { tokenKeys } from "../../shared/installations/crypto.ts";
import { INSTALLATION_WORST_QUERIES } from "../../shared/installations/resolve.ts";
import { saveInstallation } from "../../shared/installations/store.ts";
import {
  BACKFILL_PAGE_MAX,
  backfillPage,
  channelTypeOf,
  eventsOf,
  PAGE_QUERY_BUDGET,
  pageWorstQueries,
} from "../../shared/ops/backfill.ts";
import { RETENTION_MARGIN_MS } from "../../shared/ops/backfill-gaps.ts";
import { namedKey } from "../../shared/outbox/model.ts";
import { parseSettings } from "../../shared/settings.ts";
import { handleSlackRequest } from "../../workers/ingress/ack.ts";
import { backfillForOf } from "../../workers/ingress/admin/backfill.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { ingressDeps } from "../support/ingress.ts";
import { testInstallation } from "../support/installations.ts";
import { adminDeps, callAdmin, postJson } from "../support/ops.ts";
import { allRows, dbOf, insertRow, readRow, resetAllShards, shardDbs, shardOf, tallyAll } from "../support/rows.ts";
import { channelMessage, eventEnvelope, eventRequest, JSON_TYPE, mention, signed, uniqueId } from "../support/slack-requests.ts";
import { testApp } from "../support/test-app.ts";

const slack = useFakeSlack();
beforeEach(() => resetAllShards());

const CHANNEL = "C0WATCHED";
const msg = (ts: string, text: string, over: Record<string, unknown> = {}) => ({ type: "message", user: "U0HUMAN", text, ts, ...over });
// Five messages of an outage window, oldest first: M1 and M4 mention the bot, M5 is the bot's own.
const M1 = msg("1764504001.000100", "<@U0BOT> are you there?");
const M2 = msg("1764504002.000100", "lunch?");
const M3 = msg("1764504003.000100", "deploy is red");
const M4 = msg("1764504004.000100", "<@U0BOT> status please");
/** The test clock: just after the window (a backfill must start inside row retention). */
const AT = Date.UTC(2025, 10, 30, 13, 0, 0);
const M5 = msg("1764504005.000100", "Hi <@U0HUMAN>, ackbox heard you.", { subtype: "bot_message", bot_id: "B0BOT" });
const HISTORY = [M1, M2, M3, M4, M5];

interface Page {
  channelType?: string;
  read: number;
  alreadyHandled: number;
  recorded: number;
  ignored: number;
  refused: unknown[];
  nextCursor: string | null;
  error?: string;
  slackError?: string;
  retryAfterSeconds?: number;
}

function backfillDeps(app: SlackApp = testApp()) {
  const parsed = parseSettings(env);
  if (!parsed.ok) throw new Error(parsed.errors.join("; "));
  const admin = adminDeps();
  const deps = {
    ...admin.deps,
    backfillFor: backfillForOf(
      parsed.settings,
      app,
      { ok: true, settings: NO_APP_SETTINGS },
      shardDbs(),
      admin.queue,
      admin.log,
      networkEdge,
    ),
  };
  return { deps, queue: admin.queue };
}

/** Every page of the window, as the CLI walks it (the channel's type the first page answered passed on); the tallies summed. */
async function backfillAll(body: Record<string, unknown>, maxPages = 10) {
  const { deps, queue } = backfillDeps();
  const sum = { pages: 0, read: 0, alreadyHandled: 0, recorded: 0, ignored: 0 };
  let cursor: string | undefined;
  let channelType: string | undefined;
  do {
    const { status, body: page } = await callAdmin<Page>(
      deps,
      "/admin/backfill",
      AT,
      postJson({ ...body, ...(cursor ? { cursor } : {}), ...(channelType ? { channelType } : {}) }),
    );
    expect(status, JSON.stringify(page)).toBe(200);
    channelType = page.channelType;
    sum.pages += 1;
    sum.read += page.read;
    sum.alreadyHandled += page.alreadyHandled;
    sum.recorded += page.recorded;
    sum.ignored += page.ignored;
    cursor = page.nextCursor ?? undefined;
  } while (cursor && sum.pages < maxPages);
  return { sum, queued: queue.ids() };
}

/** What was delivered live before the outage's messages were lost: M1's app_mention and M2's message. */
async function deliverLive() {
  const harness = ingressDeps({ db: dbOf("T0TEAM") });
  for (const event of [mention({ ts: M1.ts, text: M1.text }), channelMessage({ ts: M2.ts, text: M2.text })]) {
    const response = await handleSlackRequest(await eventRequest(event, { eventId: uniqueId("Ev"), now: AT }), harness.deps, AT);
    expect(response.status).toBe(200);
  }
  await harness.settled();
}

/** conversations.info of a public channel, as Slack answers it. */
const conversation = (over: Record<string, unknown>) =>
  reply.ok({ channel: { id: CHANNEL, is_channel: true, is_group: false, is_im: false, is_mpim: false, is_private: false, ...over } });
const PUBLIC = conversation({});

const rowsByKey = async () => (await allRows(dbOf("T0TEAM"))).map((r) => r.idempotency_key).sort();
const window = { channel: CHANNEL, oldest: "1764504000", latest: "1764504010", limit: 2 };

describe("POST /admin/backfill", () => {
  beforeEach(() => {
    slack.current.always("auth.test", reply.ok({ user_id: "U0BOT", team_id: "T0TEAM", bot_id: "B0BOT" }));
    slack.current.always("conversations.info", PUBLIC);
    slack.current.always("conversations.history", reply.history(HISTORY));
  });

  it("over a window where some messages were delivered and some not, handles each once: the delivered are skipped", async () => {
    await deliverLive();
    const before = await rowsByKey();
    expect(before).toHaveLength(2);
    const { sum, queued } = await backfillAll(window);
    // Seven events from five messages (M1 and M4 are a message and a mention each); M5 is the bot's (ignored).
    expect(sum).toEqual({ pages: 3, read: 5, alreadyHandled: 2, recorded: 4, ignored: 1 });
    const after = await rowsByKey();
    expect(after).toEqual(
      [
        ...before,
        `message:T0TEAM:${CHANNEL}:${M1.ts}:eyes`,
        `message:T0TEAM:${CHANNEL}:${M3.ts}:eyes`,
        `message:T0TEAM:${CHANNEL}:${M4.ts}:eyes`,
        `app_mention:T0TEAM:${CHANNEL}:${M4.ts}:reply`,
      ].sort(),
    );
    expect(queued).toHaveLength(4);
    // The pages were read within the window, newest first, two at a time, each after the previous page's cursor.
    const calls = slack.current.callsTo("conversations.history");
    expect(calls.map((c) => [c.params.channel, c.params.oldest, c.params.latest, c.params.limit, c.params.inclusive])).toEqual(
      Array(3).fill([CHANNEL, "1764504000", "1764504010", "2", "true"]),
    );
    expect(calls.map((c) => c.params.cursor === undefined)).toEqual([true, false, false]);
    expect(calls[0]?.authorization).toBe("Bearer xoxb-test-bot-token");
  });

  it("--dry-run reads and reports what it would do, and writes nothing", async () => {
    await deliverLive();
    const before = await tallyAll();
    const { sum, queued } = await backfillAll({ ...window, dryRun: true });
    expect(sum).toEqual({ pages: 3, read: 5, alreadyHandled: 2, recorded: 4, ignored: 1 });
    expect(await tallyAll()).toEqual(before);
    expect(queued).toEqual([]);
  });

  it("interrupted after its first page and run again from the start: nothing is recorded twice", async () => {
    await deliverLive();
    const { deps } = backfillDeps();
    const first = await callAdmin<Page>(deps, "/admin/backfill", AT, postJson(window));
    expect(first.body).toMatchObject({ read: 2, recorded: 2, ignored: 1, nextCursor: expect.any(String) });
    const rerun = await backfillAll(window);
    expect(rerun.sum).toEqual({ pages: 3, read: 5, alreadyHandled: 4, recorded: 2, ignored: 1 });
    const again = await backfillAll(window);
    expect(again.sum).toEqual({ pages: 3, read: 5, alreadyHandled: 6, recorded: 0, ignored: 1 });
    expect(await rowsByKey()).toHaveLength(6);
    expect(new Set(await rowsByKey()).size).toBe(6);
  });

  it("a message delivered live after its backfill is a copy of a fact already handled: no second reply", async () => {
    await backfillAll(window);
    const harness = ingressDeps({ db: dbOf("T0TEAM") });
    await handleSlackRequest(await eventRequest(mention({ ts: M4.ts, text: M4.text }), { now: AT }), harness.deps, AT);
    await harness.settled();
    expect((await rowsByKey()).filter((k) => k.startsWith("app_mention:"))).toEqual([
      `app_mention:T0TEAM:${CHANNEL}:${M1.ts}:reply`,
      `app_mention:T0TEAM:${CHANNEL}:${M4.ts}:reply`,
    ]);
  });
});

describe("POST /admin/backfill beside live deliveries", () => {
  beforeEach(() => {
    slack.current.always("auth.test", reply.ok({ user_id: "U0BOT", team_id: "T0TEAM" }));
    slack.current.always("conversations.info", PUBLIC);
    slack.current.always("conversations.history", reply.history([M4]));
  });

  it("a backfill and live copies of the same mention at once record one reply and one reaction", async () => {
    const harness = ingressDeps({ db: dbOf("T0TEAM") });
    const live = await Promise.all(
      Array.from({ length: 3 }, () => eventRequest(mention({ ts: M4.ts, text: M4.text }), { eventId: uniqueId("Ev"), now: AT })),
    );
    const { deps } = backfillDeps();
    const [page] = await Promise.all([
      callAdmin<Page>(deps, "/admin/backfill", AT, postJson(window)),
      ...live.map((request) => handleSlackRequest(request, harness.deps, AT)),
    ]);
    await harness.settled();
    expect(page.status).toBe(200);
    expect(await rowsByKey()).toEqual([`app_mention:T0TEAM:${CHANNEL}:${M4.ts}:reply`, `message:T0TEAM:${CHANNEL}:${M4.ts}:eyes`]);
  });
});

describe("POST /admin/backfill when Slack says no", () => {
  beforeEach(() => {
    slack.current.always("auth.test", reply.ok({ user_id: "U0BOT", team_id: "T0TEAM" }));
    slack.current.always("conversations.info", PUBLIC);
  });

  it("a 429 on the history is answered with Slack's Retry-After and nothing read or written; the same page then succeeds", async () => {
    slack.current.script("conversations.history", reply.rateLimited(30)).always("conversations.history", reply.history(HISTORY));
    const { deps } = backfillDeps();
    const limited = await callAdmin<Page>(deps, "/admin/backfill", AT, postJson(window));
    expect(limited.status).toBe(200);
    expect(limited.body).toEqual({ channel: CHANNEL, dryRun: false, retryAfterSeconds: 30 });
    expect(await tallyAll()).toEqual({ receipts: 0, outbox: 0, attempts: 0 });
    const retried = await callAdmin<Page>(deps, "/admin/backfill", AT, postJson(window));
    expect(retried.body).toMatchObject({ read: 2, recorded: 2 });
  });

  it("a channel the bot is not in: refused (400, not_in_channel), saying to invite the bot", async () => {
    slack.current.script("conversations.history", reply.error("not_in_channel"));
    const { status, body } = await callAdmin<Page>(backfillDeps().deps, "/admin/backfill", AT, postJson(window));
    expect(status).toBe(400);
    expect(body).toMatchObject({ slackError: "not_in_channel", error: expect.stringMatching(/not a member of C0WATCHED: invite it/) });
  });

  it("a channel that does not exist (or that it cannot see): refused (400, channel_not_found)", async () => {
    slack.current.script("conversations.history", reply.error("channel_not_found"));
    const { status, body } = await callAdmin<Page>(backfillDeps().deps, "/admin/backfill", AT, postJson({ ...window, channel: "C0GONE" }));
    expect(status).toBe(400);
    expect(body).toMatchObject({ slackError: "channel_not_found", error: expect.stringContaining("C0GONE") });
  });

  it("with the app's settings unusable: 409 naming them, nothing read or written (the rest of /admin stays up)", async () => {
    slack.current.restore();
    const parsed = parseSettings(env);
    if (!parsed.ok) throw new Error(parsed.errors.join("; "));
    const admin = adminDeps();
    const broken = { ok: false as const, errors: ["GREETING is required: What the bot says"] };
    const deps = {
      ...admin.deps,
      backfillFor: backfillForOf(parsed.settings, testApp(), broken, shardDbs(), admin.queue, admin.log, networkEdge),
    };
    const { status, body } = await callAdmin<{ error: string }>(deps, "/admin/backfill", AT, postJson(window));
    expect(status).toBe(409);
    expect(body.error).toBe("the app's settings are not usable: GREETING is required: What the bot says");
    expect(await tallyAll()).toEqual({ receipts: 0, outbox: 0, attempts: 0 });
    expect((await callAdmin(deps, "/admin/backlog", AT)).status).toBe(200);
  });

  it("refuses a body that is not a backfill before calling Slack", async () => {
    slack.current.restore();
    const { deps } = backfillDeps();
    for (const bad of [
      { channel: "general", oldest: "1" },
      { channel: CHANNEL },
      { channel: CHANNEL, oldest: "1", limit: 500 },
      { ...window, extra: 1 },
    ]) {
      expect((await callAdmin(deps, "/admin/backfill", AT, postJson(bad))).status).toBe(400);
    }
  });

  it.each([
    ["a body over 4 KiB", { method: "POST", body: JSON.stringify({ ...window, channel: "C".repeat(5000) }) }, 413, "4096-byte limit"],
    ["a body that is not JSON", { method: "POST", body: "channel=C0123" }, 400, "want JSON"],
    ["a JSON array", postJson([window]), 400, "want a JSON object"],
    ["an unknown field", postJson({ ...window, extra: 1 }), 400, "unknown field(s) extra"],
  ])("refuses %s with %i, writing nothing and calling no Slack method", async (_, init, status, error) => {
    const { deps } = backfillDeps();
    const answer = await callAdmin<{ error: string }>(deps, "/admin/backfill", AT, init as RequestInit);
    expect([answer.status, answer.body.error]).toEqual([status, expect.stringContaining(error)]);
    expect(await rowsByKey()).toEqual([]);
    expect(slack.current.calls).toEqual([]);
  });

  it("refuses an oldest past row retention (less 1 h), so a backfill never re-does a message whose done row was pruned", async () => {
    const { deps } = backfillDeps();
    const earliest = AT - Math.min(deps.settings.doneRetentionMs, deps.settings.receiptRetentionMs) + RETENTION_MARGIN_MS;
    const at = (ms: number) => ({ channel: CHANNEL, oldest: String(ms / 1000), latest: String(AT / 1000), limit: 1 });
    const refused = await callAdmin<{ error: string }>(deps, "/admin/backfill", AT, postJson(at(earliest - 1000)));
    expect(refused.status).toBe(400);
    expect(refused.body.error).toContain("DONE_RETENTION_HOURS");
    expect(refused.body.error).toContain(new Date(earliest).toISOString());
    expect(await rowsByKey()).toEqual([]);
    expect(slack.current.calls).toEqual([]); // refused before reading anything
    slack.current.always("conversations.history", reply.history([]));
    expect((await callAdmin(deps, "/admin/backfill", AT, postJson(at(earliest + 1000)))).status).toBe(200);
  });
});

describe("eventsOf: the events a history message rebuilds", () => {
  const types = (message: Record<string, unknown>) =>
    eventsOf({ ts: "1764504009.000100", ...message }, "C0CHAN", "channel", "U0BOT").map((e) => e.type);

  it("rebuilds a mention on a file_share, thread_broadcast or me_message as app_mention, so it is not lost", () => {
    for (const subtype of ["file_share", "thread_broadcast", "me_message"]) {
      expect(types({ subtype, text: "look <@U0BOT>" })).toEqual(["message", "app_mention"]);
    }
  });

  it("matches a mention written with a label (<@U…|name>)", () => {
    expect(types({ text: "hey <@U0BOT|ackbox>" })).toEqual(["message", "app_mention"]);
  });

  it("never rebuilds app_mention from an edit, delete or join", () => {
    for (const subtype of ["message_changed", "message_deleted", "channel_join", "bot_message"]) {
      expect(types({ subtype, text: "<@U0BOT>" })).toEqual(["message"]);
    }
  });

  it("keeps the message's real subtype so the app's filters apply as live", () => {
    const [message] = eventsOf({ ts: "1764504009.000100", subtype: "file_share", text: "<@U0BOT>" }, "C0CHAN", "channel", "U0BOT");
    expect(message?.subtype).toBe("file_share");
  });
});

describe("eventsOf and channelTypeOf: channel_type, as Slack says the channel is", () => {
  it("carries the channel's type as Slack answered it, whatever the id's prefix or the history message says", () => {
    const channelTypes = (message: Record<string, unknown>) =>
      eventsOf({ ts: "1764504009.000100", text: "<@U0BOT>", ...message }, "C0PRIV", "group", "U0BOT").map((e) => e.channel_type);
    expect(channelTypes({})).toEqual(["group", "group"]);
    expect(channelTypes({ channel_type: "" })).toEqual(["group", "group"]);
    expect(channelTypes({ channel_type: "channel" })).toEqual(["group", "group"]);
  });

  it("reads conversations.info's flags as live events' channel_type: im, mpim (old-style too), private (either way), public", () => {
    const none = { is_channel: false, is_group: false, is_im: false, is_mpim: false, is_private: false };
    expect(channelTypeOf({ ...none, is_im: true, is_private: true })).toBe("im");
    expect(channelTypeOf({ ...none, is_mpim: true, is_private: true })).toBe("mpim");
    expect(channelTypeOf({ ...none, is_mpim: true, is_group: true })).toBe("mpim");
    expect(channelTypeOf({ ...none, is_channel: true, is_private: true })).toBe("group");
    expect(channelTypeOf({ ...none, is_group: true })).toBe("group");
    expect(channelTypeOf({ ...none, is_channel: true })).toBe("channel");
    expect(channelTypeOf(none)).toBeUndefined();
    expect(channelTypeOf({})).toBeUndefined();
  });
});

describe("backfillPage: a hostile or broken answer at SLACK_API_URL does no unbounded or misplaced work", () => {
  /** A Slack whose auth.test and conversations.history answer as given. */
  const stub = (team: unknown, messages: unknown[]) => ({
    call: async (method: string) => ({
      ok: true as const,
      body:
        method === "auth.test"
          ? { ok: true, team_id: team, user_id: "U0BOT" }
          : method === "conversations.info"
            ? { ok: true, channel: { id: CHANNEL, is_channel: true } }
            : { ok: true, messages, has_more: false },
    }),
  });
  const page = (slack: ReturnType<typeof stub>, teamId?: string) => {
    const { deps, queue } = adminDeps();
    return backfillPage(
      {
        app: testApp(),
        settings: deps.settings as never,
        appSettings: NO_APP_SETTINGS,
        slack: slack as never,
        teamId,
        shardOf: async () => ({ db: env.DB, queue }),
        log: deps.log,
      },
      { channel: CHANNEL, oldest: "1764504001.000000", latest: "1764504004.999999", limit: 3, dryRun: false },
      AT,
    );
  };

  it("refuses an auth.test naming another workspace than the token's (or none), writing nothing", async () => {
    expect(await page(stub("T0OTHER", [M1]), "T0TEAM")).toMatchObject({ ok: false, status: 502, slackError: "team_mismatch" });
    expect(await page(stub(undefined, [M1]), "T0TEAM")).toMatchObject({ ok: false, slackError: "team_mismatch" });
    expect(await allRows(env.DB)).toEqual([]);
  });

  it("refuses a page longer than the limit asked for; one at the limit is handled", async () => {
    expect(await page(stub("T0TEAM", [M1, M2, M3, M4]))).toMatchObject({ ok: false, status: 502, slackError: "page_too_long" });
    expect(await allRows(env.DB)).toEqual([]);
    expect(await page(stub("T0TEAM", [M1, M2, M3]))).toMatchObject({ ok: true, page: { read: 3 } });
  });

  it("handles no message with a malformed ts or outside the window asked for", async () => {
    const odd = [
      msg("1.2:x", "<@U0BOT> forged"),
      msg("1764504000.000100", "<@U0BOT> before the window"),
      msg("1764505000.000100", "after"),
    ];
    expect(await page(stub("T0TEAM", [...odd]))).toMatchObject({ ok: true, page: { read: 0, recorded: 0 } });
    expect(await allRows(env.DB)).toEqual([]);
  });
});

describe("POST /admin/backfill for a workspace of an org-wide install (Enterprise Grid)", () => {
  const ORG = "E0GRIDORG";
  const WORKSPACE = "T0GRIDWS";
  const TOKEN_KEY = "3c".repeat(32);
  const OAUTH = {
    SLACK_CLIENT_ID: "1111.2222",
    SLACK_CLIENT_SECRET: "client-secret-for-tests",
    SLACK_REDIRECT_URL: "https://ackbox.test/slack/oauth_redirect",
    TOKEN_ENCRYPTION_KEY: TOKEN_KEY,
    SLACK_BOT_TOKEN: "",
  };
  // The org's rows live where its routing key E:<org> is placed, which is not where T:<workspace> would be.
  const orgHome = shardOf({ enterpriseId: ORG, isEnterpriseInstall: true });

  function orgBackfillDeps() {
    const parsed = parseSettings({ ...env, ...OAUTH });
    if (!parsed.ok) throw new Error(parsed.errors.join("; "));
    const admin = adminDeps();
    const backfillFor = backfillForOf(
      parsed.settings,
      testApp(),
      { ok: true, settings: NO_APP_SETTINGS },
      shardDbs(),
      admin.queue,
      admin.log,
      networkEdge,
    );
    return { deps: { ...admin.deps, settings: parsed.settings, backfillFor }, queue: admin.queue };
  }

  beforeEach(async () => {
    for (const db of shardDbs()) await db.prepare("DELETE FROM installations").run();
    await saveInstallation(
      env.DB,
      await tokenKeys(TOKEN_KEY, undefined),
      testInstallation("", "xoxb-org-wide", { teamId: undefined, enterpriseId: ORG, isEnterpriseInstall: true }),
      AT - 3_600_000,
    );
    slack.current.always("auth.test", reply.ok({ user_id: "U0BOT", team_id: WORKSPACE, enterprise_id: ORG, is_enterprise_install: true }));
    slack.current.always("conversations.info", PUBLIC);
    slack.current.always("conversations.history", reply.history([M1, M2]));
  });

  it("is read with the org's token and recorded where the org's live events are (E:<org>), each message once: no 409", async () => {
    expect(orgHome).not.toBe(shardOf(WORKSPACE));
    // M1's mention delivered live, as an org-wide install's events come: routed by the org, its receipt naming it.
    const live = JSON.stringify({
      ...eventEnvelope(mention({ ts: M1.ts, text: M1.text }), uniqueId("Ev"), WORKSPACE),
      enterprise_id: ORG,
      is_enterprise_install: true,
    });
    const harness = ingressDeps({ db: shardDbs()[orgHome] as D1Database });
    expect((await handleSlackRequest(await signed(live, JSON_TYPE, { now: AT }), harness.deps, AT)).status).toBe(200);

    const { deps, queue } = orgBackfillDeps();
    const { status, body } = await callAdmin<Page>(
      deps,
      "/admin/backfill",
      AT,
      postJson({ ...window, limit: 10, team: WORKSPACE, enterprise: ORG }),
    );
    expect([status, body]).toEqual([200, expect.objectContaining({ read: 2, alreadyHandled: 1, recorded: 2 })]);
    expect(slack.current.callsTo("conversations.history").map((c) => c.authorization)).toEqual(["Bearer xoxb-org-wide"]);
    const home = shardDbs()[orgHome] as D1Database;
    const other = shardDbs()[1 - orgHome] as D1Database;
    expect((await allRows(home)).map((r) => r.idempotency_key).sort()).toEqual(
      [
        `app_mention:${WORKSPACE}:${CHANNEL}:${M1.ts}:reply`,
        `message:${WORKSPACE}:${CHANNEL}:${M1.ts}:eyes`,
        `message:${WORKSPACE}:${CHANNEL}:${M2.ts}:eyes`,
      ].sort(),
    );
    expect(await allRows(other)).toEqual([]);
    // The backfill's receipts (one per event read) name the org, so the consumer finds the org-wide installation.
    const { results } = await home
      .prepare("SELECT enterprise_id FROM receipts WHERE id LIKE 'backfill:%'")
      .all<{ enterprise_id: string | null }>();
    expect(results.map((r) => r.enterprise_id)).toEqual([ORG, ORG, ORG]);
    expect(queue.ids()).toHaveLength(2);
  });

  it("without the org, the workspace has no installation of its own: 409, saying to give the org", async () => {
    const { deps } = orgBackfillDeps();
    const { status, body } = await callAdmin<{ error: string }>(deps, "/admin/backfill", AT, postJson({ ...window, team: WORKSPACE }));
    expect(status).toBe(409);
    expect(body.error).toContain("--enterprise E…");
    expect(await tallyAll()).toEqual({ receipts: 0, outbox: 0, attempts: 0 });
  });

  it("an auth.test naming another org than the one asked for is refused, writing nothing", async () => {
    slack.current.always(
      "auth.test",
      reply.ok({ user_id: "U0BOT", team_id: WORKSPACE, enterprise_id: "E0OTHER", is_enterprise_install: true }),
    );
    const { deps } = orgBackfillDeps();
    const { status, body } = await callAdmin<Page>(deps, "/admin/backfill", AT, postJson({ ...window, team: WORKSPACE, enterprise: ORG }));
    expect([status, body.slackError]).toEqual([502, "team_mismatch"]);
    expect(await tallyAll()).toEqual({ receipts: 0, outbox: 0, attempts: 0 });
  });

  it("an org without its workspace is refused before Slack is called", async () => {
    slack.current.restore();
    const { deps } = orgBackfillDeps();
    const { status, body } = await callAdmin<{ error: string }>(deps, "/admin/backfill", AT, postJson({ ...window, enterprise: ORG }));
    expect([status, body.error]).toEqual([400, expect.stringContaining("give the workspace too")]);
  });
});

describe("POST /admin/backfill routes each message as the kind of conversation Slack says its channel is (conversations.info)", () => {
  /** Hears private channels only, and public ones only: which one hears a backfilled message says how it was routed. */
  const byKind = createApp()
    .uses("reactions.add")
    .message(
      undefined,
      ({ payload: m }) => [intent("reactions.add", { channel: m.channel, timestamp: m.ts, name: "lock" }, { key: "private" })],
      {
        channelTypes: ["groups"],
      },
    )
    .message(
      undefined,
      ({ payload: m }) => [intent("reactions.add", { channel: m.channel, timestamp: m.ts, name: "eyes" }, { key: "public" })],
      {
        channelTypes: ["channels"],
      },
    );
  const kindDeps = () => backfillDeps(byKind).deps;
  beforeEach(() => {
    slack.current.always("auth.test", reply.ok({ user_id: "U0BOT", team_id: "T0TEAM" }));
    slack.current.always("conversations.history", reply.history([M2, M3]));
  });

  it("a private channel with a C id (created since 2021) is routed as private: the private channels' handler hears it, the public one does not", async () => {
    slack.current.script("conversations.info", conversation({ is_private: true }));
    const { status, body } = await callAdmin<Page>(kindDeps(), "/admin/backfill", AT, postJson({ ...window, limit: 5 }));
    expect(status).toBe(200);
    expect(body).toMatchObject({ read: 2, recorded: 2, channelType: "group" });
    expect((await rowsByKey()).map((k) => k.slice(k.lastIndexOf(":") + 1))).toEqual(["private", "private"]);
    expect(slack.current.callsTo("conversations.info").map((c) => c.params)).toEqual([{ channel: CHANNEL }]);
  });

  it("asks once a run: the first page asks Slack and answers the type; the next pages, given it, ask nothing", async () => {
    slack.current.script("conversations.info", conversation({ is_private: true }));
    slack.current.always("conversations.history", reply.history(HISTORY));
    const { sum } = await backfillAll(window);
    expect(sum.pages).toBe(3);
    expect(slack.current.callsTo("conversations.info")).toHaveLength(1);
    expect(slack.current.callsTo("conversations.history")).toHaveLength(3);
  });

  it("a conversation whose kind Slack does not say is refused for that channel (502), nothing read or routed: never a guess", async () => {
    slack.current.script("conversations.info", reply.ok({ channel: { id: CHANNEL } }));
    slack.current.always("conversations.history", reply.history([]));
    const { status, body } = await callAdmin<Page>(kindDeps(), "/admin/backfill", AT, postJson(window));
    expect(status).toBe(502);
    expect(body).toMatchObject({ slackError: "channel_type_unknown", error: expect.stringContaining(CHANNEL) });
    expect(slack.current.callsTo("conversations.history")).toEqual([]);
    expect(await tallyAll()).toEqual({ receipts: 0, outbox: 0, attempts: 0 });
  });

  it("conversations.info refused for a missing scope: 400 naming the :read scopes; a 429 on it: wait and ask the same page again", async () => {
    slack.current.script("conversations.info", reply.error("missing_scope"), reply.rateLimited(12));
    slack.current.always("conversations.history", reply.history([]));
    const refused = await callAdmin<Page>(kindDeps(), "/admin/backfill", AT, postJson(window));
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ slackError: "missing_scope", error: expect.stringContaining("channels:read, groups:read") });
    const limited = await callAdmin<Page>(kindDeps(), "/admin/backfill", AT, postJson(window));
    expect(limited.body).toEqual({ channel: CHANNEL, dryRun: false, retryAfterSeconds: 12 });
    expect(slack.current.callsTo("conversations.history")).toEqual([]);
  });

  it("refuses a channelType that is not one of Slack's four before calling Slack", async () => {
    slack.current.restore();
    for (const channelType of ["public", "", 3]) {
      const { status, body } = await callAdmin<{ error: string }>(kindDeps(), "/admin/backfill", AT, postJson({ ...window, channelType }));
      expect([status, body.error]).toEqual([400, expect.stringContaining("channelType")]);
    }
  });
});

describe("POST /admin/backfill's dry run: already handled only when every row the events would record is there", () => {
  const twice = createApp()
    .uses("reactions.add")
    .message(undefined, ({ payload: m }) => [
      intent("reactions.add", { channel: m.channel, timestamp: m.ts, name: "eyes" }, { key: "eyes" }),
      intent("reactions.add", { channel: m.channel, timestamp: m.ts, name: "white_check_mark" }, { key: "seen" }),
    ]);

  it("a message one of whose two rows exists would be recorded (the other is missing); one with both is already handled", async () => {
    slack.current.always("auth.test", reply.ok({ user_id: "U0BOT", team_id: "T0TEAM" }));
    slack.current.always("conversations.info", PUBLIC);
    slack.current.always("conversations.history", reply.history([M2, M3]));
    const db = dbOf("T0TEAM");
    await insertRow(db, { status: "done", key: `message:T0TEAM:${CHANNEL}:${M2.ts}:eyes` });
    await insertRow(db, { status: "done", key: `message:T0TEAM:${CHANNEL}:${M3.ts}:eyes` });
    await insertRow(db, { status: "done", key: `message:T0TEAM:${CHANNEL}:${M3.ts}:seen` });
    const { deps } = backfillDeps(twice);
    const before = await tallyAll();
    const { body } = await callAdmin<Page>(deps, "/admin/backfill", AT, postJson({ ...window, limit: 5, dryRun: true }));
    expect(body).toMatchObject({ read: 2, alreadyHandled: 1, recorded: 1 });
    expect(await tallyAll()).toEqual(before);
  });
});

describe("one backfill page's D1 work: bounded by D1's 1 000 queries per invocation, counted as query-budget.ts counts", () => {
  /** Every message and every mention asks for the most intents a handler may (MAX_INTENTS): the worst page. */
  const most = (label: string, m: { channel?: string; ts?: string }) =>
    Array.from({ length: MAX_INTENTS }, (_, i) =>
      intent("reactions.add", { channel: m.channel, timestamp: m.ts, name: `${label}${i}` }, { key: `${label}${i}` }),
    );
  const greedy = createApp()
    .uses("reactions.add")
    .event("app_mention", ({ payload }) => most("m", payload))
    .message(undefined, ({ payload }) => most("r", payload));

  it(`a page of BACKFILL_PAGE_MAX (${BACKFILL_PAGE_MAX}) messages, each a message and a mention of ${MAX_INTENTS} intents each, stays under ${D1_QUERIES_PER_INVOCATION}`, async () => {
    const messages = Array.from({ length: BACKFILL_PAGE_MAX }, (_, i) =>
      msg(`1764504001.${String(100 + i).padStart(6, "0")}`, `<@U0BOT> number ${i}`),
    );
    const counted = countingDb(dbOf("T0TEAM"));
    const { deps, queue } = adminDeps();
    const outcome = await backfillPage(
      {
        app: greedy,
        settings: deps.settings,
        appSettings: NO_APP_SETTINGS,
        slack: {
          call: async (method: string) => ({
            ok: true as const,
            body:
              method === "auth.test"
                ? { ok: true, team_id: "T0TEAM", user_id: "U0BOT" }
                : method === "conversations.info"
                  ? { ok: true, channel: { id: CHANNEL, is_channel: true } }
                  : { ok: true, messages, has_more: false },
          }),
        },
        shardOf: async () => ({ db: counted.db, queue }),
        log: deps.log,
      },
      { channel: CHANNEL, oldest: "1764504000", latest: "1764504010", limit: BACKFILL_PAGE_MAX, dryRun: false },
      AT,
    );
    expect(outcome).toMatchObject({ ok: true, page: { read: BACKFILL_PAGE_MAX, recorded: 2 * BACKFILL_PAGE_MAX } });
    console.log(`D1 statements of the worst backfill page (${BACKFILL_PAGE_MAX} messages): ${counted.budget.used()}`);
    expect(counted.budget.used()).toBeLessThanOrEqual(pageWorstQueries(BACKFILL_PAGE_MAX));
    expect(counted.budget.used()).toBeLessThan(D1_QUERIES_PER_INVOCATION);
    expect(queue.ids()).toHaveLength(2 * BACKFILL_PAGE_MAX * MAX_INTENTS);
  });

  it("BACKFILL_PAGE_MAX is the most messages whose worst case fits the page's budget (D1's limit less a margin)", () => {
    expect(pageWorstQueries(BACKFILL_PAGE_MAX)).toBeLessThanOrEqual(PAGE_QUERY_BUDGET);
    expect(pageWorstQueries(BACKFILL_PAGE_MAX + 1)).toBeGreaterThan(PAGE_QUERY_BUDGET);
  });

  it("a limit above BACKFILL_PAGE_MAX is refused before calling Slack", async () => {
    slack.current.restore();
    const { status, body } = await callAdmin<{ error: string }>(
      backfillDeps().deps,
      "/admin/backfill",
      AT,
      postJson({ ...window, limit: BACKFILL_PAGE_MAX + 1 }),
    );
    expect([status, body.error]).toEqual([400, `limit: want 1 to ${BACKFILL_PAGE_MAX}`]);
  });
});

describe("POST /admin/backfill/channels: the conversations a backfill of every channel walks", () => {
  const conversations = (list: Record<string, unknown>[], next = "") =>
    reply.ok({ channels: list, response_metadata: { next_cursor: next } });

  it("one page of the bot's conversations, each with the channel_type its messages carry; one Slack does not type is named, not guessed", async () => {
    slack.current.always("auth.test", reply.ok({ user_id: "U0BOT", team_id: "T0TEAM" }));
    slack.current.script(
      "users.conversations",
      conversations(
        [
          { id: "C0PUB", is_channel: true, is_private: false },
          { id: "C0PRIV", is_channel: true, is_private: true },
          { id: "D0DM", is_im: true },
          { id: "G0MPIM", is_group: true, is_mpim: true },
          { id: "C0ODD" },
          { id: "not an id", is_channel: true },
        ],
        "page2",
      ),
    );
    const { status, body } = await callAdmin(backfillDeps().deps, "/admin/backfill/channels", AT, postJson({}));
    expect(status).toBe(200);
    expect(body).toEqual({
      channels: [
        { id: "C0PUB", channelType: "channel" },
        { id: "C0PRIV", channelType: "group" },
        { id: "D0DM", channelType: "im" },
        { id: "G0MPIM", channelType: "mpim" },
      ],
      unknown: ["C0ODD"],
      nextCursor: "page2",
    });
    expect(slack.current.callsTo("users.conversations")[0]?.params).toMatchObject({
      types: "public_channel,private_channel,mpim,im",
      exclude_archived: "true",
      limit: "200",
    });
  });

  it("a 429 is a wait; a missing scope is a 400 naming the :read scopes; a body that is not a listing is refused before Slack", async () => {
    slack.current.always("auth.test", reply.ok({ user_id: "U0BOT", team_id: "T0TEAM" }));
    slack.current.script("users.conversations", reply.rateLimited(7), reply.error("missing_scope"));
    const { deps } = backfillDeps();
    expect((await callAdmin(deps, "/admin/backfill/channels", AT, postJson({}))).body).toEqual({ retryAfterSeconds: 7 });
    const refused = await callAdmin<{ error: string }>(deps, "/admin/backfill/channels", AT, postJson({ cursor: "x" }));
    expect([refused.status, refused.body.error]).toEqual([400, expect.stringContaining("channels:read, groups:read")]);
    for (const bad of [{ team: "nope" }, { cursor: "" }, { channel: "C0" }]) {
      expect((await callAdmin(deps, "/admin/backfill/channels", AT, postJson(bad))).status).toBe(400);
    }
    expect(slack.current.callsTo("users.conversations")).toHaveLength(2);
  });
});

describe("POST /admin/backfill of messages whose handler cancels (cancel(name)): handled, not ignored", () => {
  /** A message cancels the reminder named for it, and records nothing else: the "done" of a reminder. */
  const reminderOf = (m: { ts?: string }) => `remind.${m.ts}`;
  const cancelling = createApp()
    .uses("chat.postMessage")
    .message(undefined, ({ payload: m }) => [cancel(reminderOf(m))]);
  const sentAt = (m: { ts: string }) => Math.floor(Number(m.ts) * 1000);
  const reminder = (m: { ts: string }, createdAt: number) =>
    insertRow(dbOf("T0TEAM"), {
      status: "pending",
      key: namedKey("T0TEAM", reminderOf(m)),
      effect: "chat.postMessage",
      teamId: "T0TEAM",
      createdAt,
    });
  beforeEach(() => {
    slack.current.always("auth.test", reply.ok({ user_id: "U0BOT", team_id: "T0TEAM" }));
    slack.current.always("conversations.info", PUBLIC);
    slack.current.always("conversations.history", reply.history([M2, M3]));
  });

  it("a message that only cancels ends the row it names if it was recorded before the message was sent; one recorded since by another input stays", async () => {
    const before = await reminder(M2, sentAt(M2) - 60_000);
    // Recorded after M3 was sent: a live M3 would have found nothing to cancel, so its backfill must not end it.
    const since = await reminder(M3, sentAt(M3) + 1_000);
    const { deps } = backfillDeps(cancelling);
    const dry = await callAdmin<Page>(deps, "/admin/backfill", AT, postJson({ ...window, limit: 5, dryRun: true }));
    expect(dry.body).toMatchObject({ read: 2, recorded: 2, ignored: 0, alreadyHandled: 0 });

    const { status, body } = await callAdmin<Page>(deps, "/admin/backfill", AT, postJson({ ...window, limit: 5 }));
    expect(status).toBe(200);
    expect(body).toMatchObject({ read: 2, recorded: 2, ignored: 0, alreadyHandled: 0 });
    const factOf = (m: { ts: string }) => `message:T0TEAM:${CHANNEL}:${m.ts}`;
    expect(await readRow(dbOf("T0TEAM"), before)).toMatchObject({ status: "done", cancelled_by: `backfill:${factOf(M2)}` });
    expect(await readRow(dbOf("T0TEAM"), since)).toMatchObject({ status: "pending", cancelled_by: null });

    // The same window again: each message already handled (its receipt), nothing cancelled again; the dry run says so.
    const dryAgain = await callAdmin<Page>(deps, "/admin/backfill", AT + 1, postJson({ ...window, limit: 5, dryRun: true }));
    expect(dryAgain.body).toMatchObject({ read: 2, recorded: 0, alreadyHandled: 2 });
    const again = await callAdmin<Page>(deps, "/admin/backfill", AT + 1, postJson({ ...window, limit: 5 }));
    expect(again.body).toMatchObject({ read: 2, recorded: 0, alreadyHandled: 2 });
    expect(await readRow(dbOf("T0TEAM"), since)).toMatchObject({ status: "pending" });
  });

  it("a page whose cancels would pass D1's limit (a cancel is three statements) is refused before anything is written, naming the limit that fits", async () => {
    // The most an event may ask: MAX_CANCELS cancels (three statements each) and the rest of MAX_INTENTS rows.
    const mostOf = (m: { channel: string; ts: string }, kind: string) => [
      ...Array.from({ length: MAX_CANCELS }, (_, i) => cancel(`${reminderOf(m)}.${kind}.${i}`)),
      ...Array.from({ length: MAX_INTENTS - MAX_CANCELS }, (_, i) =>
        intent("chat.postMessage", { channel: m.channel, text: `${i}` }, { key: `${kind}${i}` }),
      ),
    ];
    const most = createApp()
      .uses("chat.postMessage")
      .message(undefined, ({ payload: m }) => mostOf(m, "m"))
      .event("app_mention", ({ payload: m }) => mostOf(m, "a"));
    // Two events a message (each mentions the bot): 2 + (MAX_INTENTS - MAX_CANCELS) + 3 × MAX_CANCELS statements each.
    const perMessage = 2 * (2 + (MAX_INTENTS - MAX_CANCELS) + 3 * MAX_CANCELS);
    const fits = Math.floor((PAGE_QUERY_BUDGET - INSTALLATION_WORST_QUERIES) / perMessage);
    expect(fits).toBeLessThan(BACKFILL_PAGE_MAX);
    const messages = (n: number) =>
      Array.from({ length: n }, (_, i) => msg(`1764504001.${String(100 + i).padStart(6, "0")}`, `<@U0BOT> done ${i}`));
    slack.current.always("conversations.history", reply.history(messages(BACKFILL_PAGE_MAX)));
    const { deps } = backfillDeps(most);
    const refused = await callAdmin<{ error: string; slackError: string }>(
      deps,
      "/admin/backfill",
      AT,
      postJson({ ...window, limit: BACKFILL_PAGE_MAX }),
    );
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ slackError: "page_too_costly", error: expect.stringContaining(`--limit ${fits}`) });
    expect(await tallyAll()).toEqual({ receipts: 0, outbox: 0, attempts: 0 });

    // At that limit the page is handled, within the budget.
    slack.current.always("conversations.history", reply.history(messages(fits)));
    const counted = countingDb(dbOf("T0TEAM"));
    const outcome = await backfillPage(
      {
        app: most,
        settings: deps.settings,
        appSettings: NO_APP_SETTINGS,
        slack: {
          call: async (method: string) => ({
            ok: true as const,
            body:
              method === "auth.test"
                ? { ok: true, team_id: "T0TEAM", user_id: "U0BOT" }
                : method === "conversations.info"
                  ? { ok: true, channel: { id: CHANNEL, is_channel: true } }
                  : { ok: true, messages: messages(fits), has_more: false },
          }),
        },
        shardOf: async () => ({ db: counted.db, queue: backfillDeps().queue }),
        log: deps.log,
      },
      { channel: CHANNEL, oldest: "1764504000", latest: "1764504010", limit: fits, dryRun: false },
      AT,
    );
    expect(outcome).toMatchObject({ ok: true, page: { read: fits, recorded: 2 * fits } });
    expect(counted.budget.used()).toBeLessThanOrEqual(PAGE_QUERY_BUDGET);
  });
});

describe("POST /admin/backfill's dry run of named rows (name:): a row is found under its name's key, as the write keys it", () => {
  const named = createApp()
    .uses("reactions.add")
    .message(undefined, ({ payload: m }) => [
      intent("reactions.add", { channel: m.channel, timestamp: m.ts, name: "eyes" }, { key: "eyes", name: `seen.${m.ts}` }),
    ]);

  it("a message whose named row the workspace has is already handled, as the real run finds it; one without would be recorded", async () => {
    slack.current.always("auth.test", reply.ok({ user_id: "U0BOT", team_id: "T0TEAM" }));
    slack.current.always("conversations.info", PUBLIC);
    slack.current.always("conversations.history", reply.history([M2, M3]));
    await insertRow(dbOf("T0TEAM"), { status: "done", key: namedKey("T0TEAM", `seen.${M2.ts}`), teamId: "T0TEAM" });
    const { deps } = backfillDeps(named);
    const dry = await callAdmin<Page>(deps, "/admin/backfill", AT, postJson({ ...window, limit: 5, dryRun: true }));
    expect(dry.body).toMatchObject({ read: 2, alreadyHandled: 1, recorded: 1 });
    const real = await callAdmin<Page>(deps, "/admin/backfill", AT, postJson({ ...window, limit: 5 }));
    expect(real.body).toMatchObject({ read: 2, alreadyHandled: 1, recorded: 1 });
  });
});
