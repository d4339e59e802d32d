import { beforeEach, describe, expect, it } from "vitest";
import { gapAnswerOf } from "../../shared/ops/backfill-gaps.ts";
import type { BacklogAnswer } from "../../shared/ops/backlog-answer.ts";
import { SLACK_RETRY_WINDOW_MS } from "../../shared/outbox/record.ts";
import { handleSlackRequest } from "../../workers/ingress/ack.ts";
import { ingressDeps } from "../support/ingress.ts";
import { meteredDb } from "../support/metered-db.ts";
import { adminDeps, callAdmin } from "../support/ops.ts";
import { dbOf, resetAllShards, shardDbs } from "../support/rows.ts";
import { channelMessage, eventRequest, NOW } from "../support/slack-requests.ts";

beforeEach(async () => {
  await resetAllShards();
  for (const db of shardDbs()) await db.batch([db.prepare("DELETE FROM channel_activity"), db.prepare("DELETE FROM delivery_gaps")]);
});

const MINUTE = 60_000;

async function deliverAt(now: number, channel: string, db = dbOf("T0TEAM")) {
  const harness = ingressDeps({ db });
  const response = await handleSlackRequest(await eventRequest(channelMessage({ channel }), { now }), harness.deps, now);
  await harness.settled();
  expect(response.status).toBe(200);
}

const gaps = async () =>
  (await dbOf("T0TEAM").prepare("SELECT channel, gap_from, gap_until FROM delivery_gaps ORDER BY gap_until").all()).results;

describe("know when to backfill: silences in a channel's deliveries longer than Slack's retry window", () => {
  it("a silence of exactly the retry window is no gap; a millisecond longer is, from the last event to the one that ended it", async () => {
    await deliverAt(NOW, "C0WATCHED");
    await deliverAt(NOW + SLACK_RETRY_WINDOW_MS, "C0WATCHED");
    expect(await gaps()).toEqual([]);
    await deliverAt(NOW + 2 * SLACK_RETRY_WINDOW_MS + 1, "C0WATCHED");
    expect(await gaps()).toEqual([
      { channel: "C0WATCHED", gap_from: NOW + SLACK_RETRY_WINDOW_MS, gap_until: NOW + 2 * SLACK_RETRY_WINDOW_MS + 1 },
    ]);
    const seen = await dbOf("T0TEAM").prepare("SELECT last_seen_at FROM channel_activity WHERE channel = 'C0WATCHED'").first();
    expect(seen).toEqual({ last_seen_at: NOW + 2 * SLACK_RETRY_WINDOW_MS + 1 });
  });

  it("each channel keeps its own time: a busy channel does not hide another's silence", async () => {
    await deliverAt(NOW, "C0WATCHED");
    await deliverAt(NOW, "C0ALSO");
    for (let m = 1; m <= 30; m += 3) await deliverAt(NOW + m * MINUTE, "C0WATCHED");
    await deliverAt(NOW + 30 * MINUTE, "C0ALSO");
    expect(await gaps()).toEqual([{ channel: "C0ALSO", gap_from: NOW, gap_until: NOW + 30 * MINUTE }]);
  });

  it("GET /admin/backlog shows the newest gaps, each with the backfill that recovers it", async () => {
    await deliverAt(NOW, "C0WATCHED");
    await deliverAt(NOW + 90 * MINUTE, "C0WATCHED");
    const { status, body } = await callAdmin<BacklogAnswer>(adminDeps().deps, "/admin/backlog", NOW + 91 * MINUTE);
    expect(status).toBe(200);
    expect(body.deliveryGaps).toEqual([
      {
        teamId: "T0TEAM",
        channel: "C0WATCHED",
        from: new Date(NOW).toISOString(),
        until: new Date(NOW + 90 * MINUTE).toISOString(),
        seconds: 90 * 60,
        backfill: `npx ackbox backfill --channel C0WATCHED --since ${new Date(NOW - SLACK_RETRY_WINDOW_MS).toISOString().replace(".000Z", "Z")} --until ${new Date(NOW + 90 * MINUTE).toISOString().replace(".000Z", "Z")}`,
      },
    ]);
    // Older than the 7 days shown: gone from the answer.
    const later = await callAdmin<BacklogAnswer>(adminDeps().deps, "/admin/backlog", NOW + 90 * MINUTE + 7 * 24 * 60 * MINUTE + 1);
    expect(later.body.deliveryGaps).toEqual([]);
  });

  it("costs the ack 1 row written per recorded event (the channel's last-seen), and 1 more only for an event that ends a gap", async () => {
    const { db, meter } = meteredDb(dbOf("T0TEAM"));
    await deliverAt(NOW, "C0WATCHED", db);
    const first = meter.rowsWritten;
    meter.reset();
    await deliverAt(NOW + MINUTE, "C0WATCHED", db);
    const steady = meter.rowsWritten;
    meter.reset();
    await deliverAt(NOW + 60 * MINUTE, "C0WATCHED", db);
    const afterGap = meter.rowsWritten;
    // receipt 2 + outbox row 4 (the table, its unique key, outbox_sweepable, outbox_pending_by_age) + channel_activity 1.
    expect({ first, steady, afterGap }).toEqual({ first: 7, steady: 7, afterGap: 8 });
  });
});

describe("a gap's suggested backfill never starts before what a backfill accepts", () => {
  const gap = { teamId: "T0TEAM", channel: "C0LOST", from: NOW - 3_600_000, until: NOW };
  it("starts Slack's retry window before the silence, or at the earliest accepted time if that is later", () => {
    const since = (earliestMs?: number) => /--since (\S+)/.exec(gapAnswerOf(gap, false, earliestMs).backfill)?.[1];
    expect(since()).toBe(new Date(gap.from - SLACK_RETRY_WINDOW_MS).toISOString().replace(/\.\d{3}Z$/, "Z"));
    expect(since(gap.from - SLACK_RETRY_WINDOW_MS - 1000)).toBe(since());
    expect(since(gap.from)).toBe(new Date(gap.from).toISOString().replace(/\.\d{3}Z$/, "Z"));
  });
});
