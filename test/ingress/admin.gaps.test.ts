/**
 * Know when to backfill: silences in what the ingress saw of a workspace longer than Slack's retry window
 * (shared/ops/activity.ts). Every request it answers counts — recorded, duplicate, ignored — per team, not per
 * channel and not only those that record rows; requests refused by their signature during a silence say it was
 * an outage. Written after the answer, at most once per team and minute per isolate, on shard 0: nothing in the
 * ack's batch.
 */
import { beforeEach, describe, expect, it } from "vitest";
import { createApp } from "../../shared/app/app.ts";
import { slack } from "../../shared/app/intents.ts";
import { recordingLog } from "../../shared/log.ts";
import { ActivityMeter, RESOLUTION_MS, recordActivity, type Seen, SLACK_RETRY_WINDOW_MS } from "../../shared/ops/activity.ts";
import { gapAnswerOf } from "../../shared/ops/backfill-gaps.ts";
import type { BacklogAnswer } from "../../shared/ops/backlog-answer.ts";
import { handleSlackRequest } from "../../workers/ingress/ack.ts";
import { ingressDeps } from "../support/ingress.ts";
import { meteredDb } from "../support/metered-db.ts";
import { adminDeps, callAdmin } from "../support/ops.ts";
import { dbOf, resetAllShards, shardDbs } from "../support/rows.ts";
import { channelMessage, eventEnvelope, eventRequest, JSON_TYPE, mention, NOW, signed, uniqueId } from "../support/slack-requests.ts";

const home = () => shardDbs()[0] as D1Database;
beforeEach(async () => {
  await resetAllShards();
  for (const db of shardDbs()) await db.batch([db.prepare("DELETE FROM team_activity"), db.prepare("DELETE FROM delivery_gaps")]);
});

const MINUTE = 60_000;
/** A distributed app's settings, for the suggestion's --team (the values are never read here). */
const OAUTH = {
  clientId: "1.2",
  clientSecret: "s",
  scopes: [],
  redirectUrl: "https://ackbox.test/slack/oauth_redirect",
  tokenKey: "4a".repeat(32),
  previousTokenKey: undefined,
};
/** The longest silence that is no gap: the retry window, and the minute an isolate's first-of-the-minute write may lag by. */
const LONGEST_QUIET = SLACK_RETRY_WINDOW_MS + RESOLUTION_MS;

/** One isolate of the ingress: its meter, and the activity it writes on shard 0 (as http.ts builds it). */
function isolate(
  app = createApp()
    .uses("reactions.add")
    .message(undefined, ({ payload: m }) => eyes(m)),
) {
  const meter = new ActivityMeter();
  const writes: number[] = [];
  const log = recordingLog();
  const activity = {
    meter,
    write: async (kind: "seen" | "refused", who: Seen, at: number) => {
      writes.push(at);
      await recordActivity(home(), kind, who, at, log);
    },
  };
  const send = async (request: Request | Promise<Request>, now: number, db = dbOf("T0TEAM")) => {
    const harness = ingressDeps({ db, app, activity });
    const response = await handleSlackRequest(await request, harness.deps, now);
    await harness.settled();
    return response.status;
  };
  return { send, writes, log };
}
const eyes = (m: { channel?: string; ts?: string }) => [
  slack("reactions.add", { channel: m.channel, timestamp: m.ts, name: "eyes" }, { key: "eyes" }),
];
const message = (now: number, channel = "C0WATCHED") => eventRequest(channelMessage({ channel }), { now });

const gaps = async () =>
  (await home().prepare("SELECT team_id, gap_from, gap_until, refused_from FROM delivery_gaps ORDER BY gap_until").all()).results;

describe("know when to backfill: a workspace silent longer than Slack's retry window", () => {
  it("a silence of the retry window and the minute's resolution is no gap; a millisecond longer is, from the last request seen to the one that ended it", async () => {
    const ingress = isolate();
    expect(await ingress.send(message(NOW), NOW)).toBe(200);
    expect(await ingress.send(message(NOW + LONGEST_QUIET), NOW + LONGEST_QUIET)).toBe(200);
    expect(await gaps()).toEqual([]);
    const ended = NOW + 2 * LONGEST_QUIET + 1;
    expect(await ingress.send(message(ended), ended)).toBe(200);
    expect(await gaps()).toEqual([{ team_id: "T0TEAM", gap_from: NOW + LONGEST_QUIET, gap_until: ended, refused_from: null }]);
    expect(await home().prepare("SELECT seen_at FROM team_activity WHERE team_id = 'T0TEAM'").first("seen_at")).toBe(ended);
  });

  it("every request the ingress answers counts, not only those that record rows: two mentions ten minutes apart, messages the app ignores every two minutes between, are no gap", async () => {
    // An app that answers mentions only: the messages between are ignored (200, nothing written).
    const mentionsOnly = createApp()
      .uses("chat.postMessage")
      .event("app_mention", ({ payload: e }) => [slack("chat.postMessage", { channel: e.channel, text: "hi" }, { key: "reply" })]);
    const ingress = isolate(mentionsOnly);
    // Ten minutes is longer than the longest quiet: counted from the mentions alone, this would be a gap.
    const apart = 10 * MINUTE;
    expect(apart).toBeGreaterThan(LONGEST_QUIET);
    expect(await ingress.send(eventRequest(mention(), { now: NOW }), NOW)).toBe(200);
    for (const m of [2, 4, 6, 8]) expect(await ingress.send(message(NOW + m * MINUTE), NOW + m * MINUTE)).toBe(200);
    expect(await ingress.send(eventRequest(mention(), { now: NOW + apart }), NOW + apart)).toBe(200);
    expect(await gaps()).toEqual([]);
    // Each ignored message was noted as seen (the first of its minute: one write each).
    expect(ingress.writes).toEqual([0, 2, 4, 6, 8, 10].map((m) => NOW + m * MINUTE));
  });

  it("per workspace, not per channel: a channel quiet for half an hour while another of the team is busy is no gap", async () => {
    const ingress = isolate();
    await ingress.send(message(NOW, "C0ALSO"), NOW);
    for (let m = 0; m <= 30; m += 3) await ingress.send(message(NOW + m * MINUTE), NOW + m * MINUTE);
    await ingress.send(message(NOW + 30 * MINUTE, "C0ALSO"), NOW + 30 * MINUTE);
    expect(await gaps()).toEqual([]);
  });

  it("requests naming the team refused by their signature during the silence: the gap says from when (an outage, not a quiet time)", async () => {
    const ingress = isolate();
    await ingress.send(message(NOW), NOW);
    for (const m of [2, 3, 9]) {
      const refused = eventRequest(channelMessage(), { now: NOW + m * MINUTE, secret: "a-rotated-signing-secret-0000000000" });
      expect(await ingress.send(refused, NOW + m * MINUTE)).toBe(401);
    }
    await ingress.send(message(NOW + 30 * MINUTE), NOW + 30 * MINUTE);
    expect(await gaps()).toEqual([{ team_id: "T0TEAM", gap_from: NOW, gap_until: NOW + 30 * MINUTE, refused_from: NOW + 2 * MINUTE }]);
    // The next silence starts clean: the refusals were of the one before.
    await ingress.send(message(NOW + 60 * MINUTE), NOW + 60 * MINUTE);
    expect((await gaps()).at(-1)).toMatchObject({ gap_from: NOW + 30 * MINUTE, refused_from: null });
  });

  it("a refusal naming a team never seen, or nothing shaped like a team, writes nothing", async () => {
    const ingress = isolate();
    const stranger = eventRequest(channelMessage(), { now: NOW, secret: "a-rotated-signing-secret-0000000000" });
    expect(await ingress.send(stranger, NOW)).toBe(401);
    const garbled = new Request("https://ackbox.test/slack/events", {
      method: "POST",
      headers: { "content-type": "application/json", "x-slack-request-timestamp": String(NOW / 1000), "x-slack-signature": "v0=00" },
      body: '{"type":"event_callback","team_id":"not a team"}',
    });
    expect(await ingress.send(garbled, NOW)).toBe(401);
    expect(await home().prepare("SELECT COUNT(*) AS n FROM team_activity").first("n")).toBe(0);
  });
});

describe("what measuring costs: nothing in the ack's batch, at most one write per team and minute per isolate", () => {
  it("a recorded event's batch writes what it records and nothing more: 6 rows (receipt 2, outbox row 4)", async () => {
    const { db, meter } = meteredDb(dbOf("T0TEAM"));
    const ingress = isolate();
    for (const [i, at] of [NOW, NOW + MINUTE, NOW + 60 * MINUTE].entries()) {
      meter.reset();
      expect(await ingress.send(message(at), at, db)).toBe(200);
      // receipt 2 + outbox row 4 (the table, its unique key, outbox_sweepable, outbox_pending_by_age); no activity.
      expect([i, meter.rowsWritten]).toEqual([i, 6]);
    }
  });

  it("many requests of one team in a minute, in one isolate, are one write; the next minute another; two isolates, two", async () => {
    const one = isolate();
    const other = isolate();
    for (let s = 0; s < 50; s += 5) await one.send(message(NOW + s * 1000), NOW + s * 1000);
    expect(one.writes).toEqual([NOW]);
    await one.send(message(NOW + MINUTE), NOW + MINUTE);
    await other.send(message(NOW + MINUTE + 1), NOW + MINUTE + 1);
    await other.send(message(NOW + MINUTE + 2), NOW + MINUTE + 2);
    expect(one.writes).toEqual([NOW, NOW + MINUTE]);
    expect(other.writes).toEqual([NOW + MINUTE + 1]);
  });

  it("a seen write is one batch of two statements on shard 0: 1 row written, 2 when it ends a gap", async () => {
    const metered = meteredDb(home());
    const log = recordingLog();
    await recordActivity(metered.db, "seen", { teamId: "T0TEAM" }, NOW, log);
    metered.meter.reset();
    await recordActivity(metered.db, "seen", { teamId: "T0TEAM" }, NOW + MINUTE, log);
    expect({ statements: metered.meter.statements, written: metered.meter.rowsWritten }).toEqual({ statements: 2, written: 1 });
    metered.meter.reset();
    await recordActivity(metered.db, "seen", { teamId: "T0TEAM" }, NOW + 60 * MINUTE, log);
    expect(metered.meter.rowsWritten).toBe(2);
  });
});

describe("GET /admin/backlog: the newest gaps, each with the backfill that recovers it", () => {
  it("over every conversation the bot is in, from the retry window before the silence; --team in a distributed app", async () => {
    const ingress = isolate();
    await ingress.send(message(NOW), NOW);
    await ingress.send(message(NOW + 90 * MINUTE), NOW + 90 * MINUTE);
    const { status, body } = await callAdmin<BacklogAnswer>(adminDeps().deps, "/admin/backlog", NOW + 91 * MINUTE);
    expect(status).toBe(200);
    const iso = (ms: number) => new Date(ms).toISOString().replace(".000Z", "Z");
    expect(body.deliveryGaps).toEqual([
      {
        teamId: "T0TEAM",
        from: new Date(NOW).toISOString(),
        until: new Date(NOW + 90 * MINUTE).toISOString(),
        seconds: 90 * 60,
        refusedFrom: null,
        backfill: `npx ackbox backfill --all-channels --since ${iso(NOW - SLACK_RETRY_WINDOW_MS)} --until ${iso(NOW + 90 * MINUTE)}`,
      },
    ]);
    // Older than the 7 days shown: gone from the answer.
    const later = await callAdmin<BacklogAnswer>(adminDeps().deps, "/admin/backlog", NOW + 90 * MINUTE + 7 * 24 * 60 * MINUTE + 1);
    expect(later.body.deliveryGaps).toEqual([]);
  });
});

describe("a gap of a workspace an org-wide install serves: its backfill names the org", () => {
  it("the org of the install its requests reached is kept with the gap, and the suggestion gives --team and --enterprise", async () => {
    const ingress = isolate();
    const orgWide = (now: number) =>
      signed(
        JSON.stringify({
          ...eventEnvelope(channelMessage(), uniqueId("Ev"), "T0GRIDWS"),
          enterprise_id: "E0ORG",
          is_enterprise_install: true,
        }),
        JSON_TYPE,
        { now },
      );
    expect(await ingress.send(orgWide(NOW), NOW, shardDbs()[0])).toBe(200);
    expect(await ingress.send(orgWide(NOW + 90 * MINUTE), NOW + 90 * MINUTE, shardDbs()[0])).toBe(200);
    const { body } = await callAdmin<BacklogAnswer>(adminDeps({ settings: { oauth: OAUTH } }).deps, "/admin/backlog", NOW + 91 * MINUTE);
    expect(body.deliveryGaps?.map((g) => [g.teamId, g.backfill])).toEqual([
      [
        "T0GRIDWS",
        expect.stringMatching(/^npx ackbox backfill --all-channels --since \S+ --until \S+ --team T0GRIDWS --enterprise E0ORG$/),
      ],
    ]);
  });
});

describe("a gap's suggested backfill never starts before what a backfill accepts", () => {
  const gap = { teamId: "T0TEAM", from: NOW - 3_600_000, until: NOW, refusedFrom: null };
  it("starts Slack's retry window before the silence, or at the earliest accepted time if that is later; names the team when distributed", () => {
    const since = (earliestMs?: number) => /--since (\S+)/.exec(gapAnswerOf(gap, false, earliestMs).backfill)?.[1];
    expect(since()).toBe(new Date(gap.from - SLACK_RETRY_WINDOW_MS).toISOString().replace(/\.\d{3}Z$/, "Z"));
    expect(since(gap.from - SLACK_RETRY_WINDOW_MS - 1000)).toBe(since());
    expect(since(gap.from)).toBe(new Date(gap.from).toISOString().replace(/\.\d{3}Z$/, "Z"));
    expect(gapAnswerOf(gap, true).backfill).toMatch(/ --team T0TEAM$/);
  });
});
