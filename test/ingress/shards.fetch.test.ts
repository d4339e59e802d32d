/**
 * Routing at the ingress, through the real Worker wiring (handleHttp) over the
 * test deployment's two local D1s (SHARD_COUNT = 2): an input's receipt and
 * rows are written to its team's shard — the enterprise's for an org-wide
 * install, shard 0 for an input without a team — and to no other, and the
 * queue messages name that shard.
 */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { networkEdge } from "../../shared/effects/outbound.ts";
import { recordingLog } from "../../shared/log.ts";
import type { OutboxMessage } from "../../shared/outbox/model.ts";
import { handleHttp } from "../../workers/ingress/http.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { resetTables, shardDbs, shardOf, tally } from "../support/rows.ts";
import { blockActions, eventEnvelope, FORM, interactionForm, JSON_TYPE, mention, signed, uniqueId } from "../support/slack-requests.ts";
import { testApp } from "../support/test-app.ts";

const slack = useFakeSlack();
beforeEach(async () => {
  for (const db of shardDbs()) await resetTables(db);
  // The first attempt performs the rows at the ack, on the shard they were written to.
  slack.current.always("chat.postMessage", reply.ok({ ts: "1764504000.000900" }));
  slack.current.always("chat.update", reply.ok({ ts: "1764504000.000300" }));
});

/** The first candidate that lands on `shard` (found with the ingress's own hash, not hard-coded). */
function teamOn(shard: number, prefix = "T0SHARD"): string {
  for (let i = 0; i < 1000; i++) if (shardOf(`${prefix}${i}`) === shard) return `${prefix}${i}`;
  throw new Error(`no candidate team lands on shard ${shard}`);
}

function orgOn(shard: number): string {
  for (let i = 0; i < 1000; i++) if (shardOf({ enterpriseId: `E0ORG${i}`, isEnterpriseInstall: true }) === shard) return `E0ORG${i}`;
  throw new Error(`no candidate org lands on shard ${shard}`);
}

/** handleHttp with a queue that records what it is sent (and a log), the rest of the env as deployed in the tests. */
async function post(request: Request, over: Record<string, unknown> = {}) {
  const sent: OutboxMessage[] = [];
  const queue = {
    sendBatch: async (messages: Iterable<MessageSendRequest<OutboxMessage>>) => {
      for (const message of messages) sent.push(message.body);
    },
    send: async (body: OutboxMessage) => {
      sent.push(body);
    },
  };
  const log = recordingLog();
  const ctx = createExecutionContext();
  const response = await handleHttp(
    request,
    { ...env, OUTBOX_QUEUE: queue, ...over } as unknown as typeof env,
    ctx,
    Date.now(),
    log,
    testApp(),
    networkEdge,
  );
  await waitOnExecutionContext(ctx);
  return { response, sent, log, line: log.records.find((r) => r.msg === "slack request") };
}

const eventFor = (team: string, envelope: Record<string, unknown> = {}) =>
  signed(JSON.stringify({ ...eventEnvelope(mention(), uniqueId("Ev"), team), ...envelope }), JSON_TYPE, { now: Date.now() });

async function receiptTeams(db: D1Database): Promise<(string | null)[]> {
  const { results } = await db.prepare("SELECT team_id FROM receipts ORDER BY team_id").all<{ team_id: string | null }>();
  return results.map((r) => r.team_id);
}

describe("the ingress writes an input to its team's shard and to no other", () => {
  it("two teams on two shards: each receipt and row on its own D1, none on the other; the messages name the shard", async () => {
    const [db0, db1] = shardDbs() as [D1Database, D1Database];
    const home = teamOn(0);
    const other = teamOn(1);

    const first = await post(await eventFor(home));
    const second = await post(await eventFor(other));
    expect([first.response.status, second.response.status]).toEqual([200, 200]);
    expect(first.line?.fields).toMatchObject({ verdict: "accepted", shard: 0 });
    expect(second.line?.fields).toMatchObject({ verdict: "accepted", shard: 1 });

    expect(await receiptTeams(db0)).toEqual([home]);
    expect(await receiptTeams(db1)).toEqual([other]);
    // Performed by the first attempt against the shard they live on: done there (a success records no attempt row).
    expect(await tally(db0)).toEqual({ receipts: 1, outbox: 1, attempts: 0 });
    expect(await tally(db1)).toEqual({ receipts: 1, outbox: 1, attempts: 0 });
    for (const db of [db0, db1]) expect(await db.prepare("SELECT status FROM outbox").first("status")).toBe("done");

    // Performed at the ack, they sent the queue nothing. Rows sent there (here with the first attempt off) name
    // their shard: shard 0's messages are what they were before sharding ({ id }); shard 1's name it.
    expect([...first.sent, ...second.sent]).toEqual([]);
    const queued0 = await post(await eventFor(home), { FIRST_ATTEMPT: "off" });
    const queued1 = await post(await eventFor(other), { FIRST_ATTEMPT: "off" });
    expect(queued0.sent).toEqual([{ id: expect.any(Number) }]);
    expect(queued1.sent).toEqual([{ id: expect.any(Number), shard: 1 }]);
  });

  it("the same team lands on the same shard every time", async () => {
    const team = teamOn(1);
    for (let i = 0; i < 3; i++) expect((await post(await eventFor(team))).line?.fields.shard).toBe(1);
    expect(await tally(shardDbs()[1] as D1Database)).toMatchObject({ receipts: 3, outbox: 3 });
    expect(await tally(shardDbs()[0] as D1Database)).toMatchObject({ receipts: 0, outbox: 0 });
  });

  it("a redelivery of a shard-1 team's event is recognised on its shard: duplicate, nothing new anywhere", async () => {
    const team = teamOn(1);
    const body = JSON.stringify(eventEnvelope(mention(), uniqueId("Ev"), team));
    const first = await post(await signed(body, JSON_TYPE, { now: Date.now() }));
    const again = await post(await signed(body, JSON_TYPE, { now: Date.now(), headers: { "x-slack-retry-num": "1" } }));
    expect(first.line?.fields).toMatchObject({ verdict: "accepted", shard: 1 });
    expect(again.line?.fields).toMatchObject({ verdict: "duplicate", shard: 1 });
    expect(await tally(shardDbs()[1] as D1Database)).toMatchObject({ receipts: 1, outbox: 1 });
    expect(await tally(shardDbs()[0] as D1Database)).toMatchObject({ receipts: 0, outbox: 0 });
    expect(again.sent).toEqual([]);
  });

  it("an org-wide install: the org's shard, not the workspace's", async () => {
    const org = orgOn(1);
    const team = teamOn(0);
    const orgWide = await post(
      await eventFor(team, {
        enterprise_id: org,
        authorizations: [{ enterprise_id: org, team_id: null, user_id: "U0BOT", is_bot: true, is_enterprise_install: true }],
      }),
    );
    expect(orgWide.line?.fields).toMatchObject({ verdict: "accepted", shard: 1 });
    expect(await receiptTeams(shardDbs()[1] as D1Database)).toEqual([team]);
    expect(await tally(shardDbs()[0] as D1Database)).toMatchObject({ receipts: 0, outbox: 0 });

    // The same workspace through a workspace install (is_enterprise_install false) is the team's shard.
    const workspace = await post(
      await eventFor(team, {
        enterprise_id: org,
        authorizations: [{ enterprise_id: org, team_id: team, user_id: "U0BOT", is_bot: true, is_enterprise_install: false }],
      }),
    );
    expect(workspace.line?.fields).toMatchObject({ verdict: "accepted", shard: 0 });
  });

  it("an input without a team: shard 0, the home shard — recorded, not lost and not scattered", async () => {
    const teamless = await post(
      await signed(interactionForm(blockActions({ team: null, user: { id: "U0HUMAN" } })), FORM, { now: Date.now() }),
    );
    expect(teamless.line?.fields).toMatchObject({ verdict: "accepted", shard: 0 });
    expect(await receiptTeams(shardDbs()[0] as D1Database)).toEqual([null]);
    expect(await tally(shardDbs()[1] as D1Database)).toMatchObject({ receipts: 0, outbox: 0 });
  });

  it("a shard binding missing for SHARD_COUNT: 500, a log line naming it, nothing written anywhere", async () => {
    const missing = await post(await eventFor(teamOn(0)), { DB_1: undefined });
    expect(missing.response.status).toBe(500);
    expect(missing.log.records.find((r) => r.msg === "ingress misconfigured; answering 500")?.fields.error).toContain("DB_1");
    for (const db of shardDbs()) expect(await tally(db)).toMatchObject({ receipts: 0, outbox: 0 });
    expect(missing.sent).toEqual([]);
  });
});
