/**
 * A finished row stops holding credentials: done rows in their own fenced
 * completion, dead rows once their deadline has passed (in the parking write,
 * or by the sweeper's scrub step at the deadline). Rows seeded on both sides
 * of the deadline; `now` is a parameter.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { deliverBatch } from "../../shared/delivery/deliver.ts";
import { recordingLog } from "../../shared/log.ts";
import { cancelUnattemptedRows } from "../../shared/outbox/cancel.ts";
import { claimRows } from "../../shared/outbox/claim.ts";
import { settleDeadLetter } from "../../shared/outbox/dead-letter.ts";
import { finishClaim } from "../../shared/outbox/fence.ts";
import { scrubDueRows } from "../../shared/outbox/scrub.ts";
import { sweep } from "../../workers/consumer/sweep.ts";
import { deliveryDeps, testSettings } from "../support/consumer.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { meteredDb } from "../support/metered-db.ts";
import { insertRow, readRow, recordingQueue, resetTables } from "../support/rows.ts";
import { NOW } from "../support/slack-requests.ts";

const slack = useFakeSlack();
beforeEach(() => resetTables(env.DB));

const MINUTE = 60_000;
const SECRET_PATH = "/commands/T0TEAM/1234/s3cr3t-capability-part";
const URL = `https://hooks.slack.com${SECRET_PATH}`;
const BODY = { response_type: "ephemeral", text: "Done" };
const REDACTED_URL = /^\[redacted https:\/\/hooks\.slack\.com #[0-9a-f]{8}\]$/;

const responseRow = (over: Parameters<typeof insertRow>[1] extends infer S ? Partial<S> : never = {}) =>
  insertRow(env.DB, {
    status: "pending",
    effect: "response_url",
    payload: { url: URL, body: BODY },
    createdAt: NOW - MINUTE,
    expiresAt: NOW + 29 * MINUTE,
    ...over,
  });
const storedPayload = async (id: number) => JSON.parse((await readRow(env.DB, id)).payload);
const dueEntries = async () =>
  (await env.DB.prepare("SELECT due_at, outbox_id FROM outbox_scrub_due ORDER BY due_at").all<{ due_at: number; outbox_id: number }>())
    .results;

describe("done rows: scrubbed in their own fenced completion", () => {
  it("drops the response_url's secret from the stored payload, keeps its host, a fingerprint and the body", async () => {
    slack.current.script(URL, reply.text(200, "ok"));
    const id = await responseRow();
    const { deps } = deliveryDeps(NOW);
    await deliverBatch(deps, [id]);
    const row = await readRow(env.DB, id);
    expect(row.status).toBe("done");
    expect(row.payload).not.toContain("s3cr3t");
    expect(JSON.parse(row.payload)).toEqual({ url: expect.stringMatching(REDACTED_URL), body: BODY });
  });

  it("costs the happy path nothing: one statement, the same rows written, and a payload without credentials is left to the byte", async () => {
    const plain = await insertRow(env.DB, { status: "pending", effect: "chat.postMessage", payload: { channel: "C1", text: "hi" } });
    const secret = await responseRow();
    const before = (await readRow(env.DB, plain)).payload;
    const { db, meter } = meteredDb(env.DB);
    const written: number[] = [];
    for (const id of [plain, secret]) {
      const [row] = await claimRows(env.DB, [id], `c-${id}`, NOW, 120_000);
      if (!row) throw new Error("not claimed");
      meter.reset();
      expect((await finishClaim(db, row, { kind: "done", result: null }, NOW + 1, 60_000, NOW)).applied).toBe(true);
      expect(meter.statements).toBe(1);
      written.push(meter.rowsWritten);
    }
    expect(written).toEqual([2, 2]);
    expect((await readRow(env.DB, plain)).payload).toBe(before);
  });

  it("leaves the payload alone when the fence rejects the completion", async () => {
    const id = await responseRow();
    const [mine] = await claimRows(env.DB, [id], "worker-a", NOW, 1000);
    await claimRows(env.DB, [id], "worker-b", NOW + 1000, 120_000);
    if (!mine) throw new Error("not claimed");
    expect((await finishClaim(env.DB, mine, { kind: "done", result: null }, NOW + 2000, 60_000, NOW)).applied).toBe(false);
    expect((await storedPayload(id)).url).toBe(URL);
  });
});

describe("dead rows: scrubbed once their deadline has passed", () => {
  it("a row parked after its deadline is scrubbed in the parking write itself, with nothing scheduled", async () => {
    const id = await responseRow({ createdAt: NOW - 31 * MINUTE, expiresAt: NOW - MINUTE });
    const { deps } = deliveryDeps(NOW);
    await deliverBatch(deps, [id]);
    expect((await readRow(env.DB, id)).status).toBe("dead");
    expect((await storedPayload(id)).url).toMatch(REDACTED_URL);
    expect(await dueEntries()).toEqual([]);
  });

  it("a row parked before its deadline keeps its URL for a replay until the deadline, then the sweep scrubs it", async () => {
    slack.current.script(URL, reply.text(404, "no_text"));
    const deadline = NOW + 29 * MINUTE;
    const id = await responseRow({ expiresAt: deadline });
    const { deps } = deliveryDeps(NOW);
    await deliverBatch(deps, [id]);
    expect((await readRow(env.DB, id)).status).toBe("dead");
    expect((await storedPayload(id)).url).toBe(URL);
    expect(await dueEntries()).toEqual([{ due_at: deadline, outbox_id: id }]);

    expect(await scrubDueRows(env.DB, deadline - 1)).toBe(0);
    expect((await storedPayload(id)).url).toBe(URL);

    const report = await sweep({ db: env.DB, queue: recordingQueue(), settings: testSettings(), log: recordingLog() }, deadline);
    expect(report.scrubbed).toBe(1);
    expect(await storedPayload(id)).toEqual({ url: expect.stringMatching(REDACTED_URL), body: BODY });
    expect(await dueEntries()).toEqual([]);
  });

  it("a row the dead-letter queue parks is scheduled too, and a row replayed since is left alone", async () => {
    const deadline = NOW + 10 * MINUTE;
    const parked = await responseRow({ status: "pending", attempts: 5, expiresAt: deadline });
    expect(await settleDeadLetter(env.DB, parked, "dead-lettered", NOW, { maxAttempts: 8, byEffect: { response_url: 5 } })).toBe("parked");
    const replayed = await responseRow({ status: "pending", expiresAt: deadline });
    await env.DB.prepare("INSERT INTO outbox_scrub_due (due_at, outbox_id) VALUES (?1, ?2)").bind(deadline, replayed).run();

    expect(await scrubDueRows(env.DB, deadline)).toBe(1);
    expect((await storedPayload(parked)).url).toMatch(REDACTED_URL);
    expect((await storedPayload(replayed)).url).toBe(URL);
    expect(await dueEntries()).toEqual([]);
  });

  it("a command's row cancelled after its 500 (shared/outbox/cancel.ts) keeps its URL until its deadline, then the sweep scrubs it", async () => {
    const deadline = NOW + 29 * MINUTE;
    const id = await responseRow({ expiresAt: deadline });
    expect(await cancelUnattemptedRows(env.DB, [id], NOW)).toBe(1);
    expect((await storedPayload(id)).url).toBe(URL);
    expect(await dueEntries()).toEqual([{ due_at: deadline, outbox_id: id }]);

    const report = await sweep({ db: env.DB, queue: recordingQueue(), settings: testSettings(), log: recordingLog() }, deadline);
    expect(report.scrubbed).toBe(1);
    expect((await storedPayload(id)).url).toMatch(REDACTED_URL);
  });

  it("handles at most its batch per tick, oldest due first", async () => {
    const ids: number[] = [];
    for (let i = 0; i < 4; i++) {
      const id = await responseRow({ status: "dead", expiresAt: NOW - 10 + i });
      ids.push(id);
      await env.DB.prepare("INSERT INTO outbox_scrub_due (due_at, outbox_id) VALUES (?1, ?2)")
        .bind(NOW - 10 + i, id)
        .run();
    }
    expect(await scrubDueRows(env.DB, NOW, 3)).toBe(3);
    expect((await dueEntries()).map((e) => e.outbox_id)).toEqual([ids[3]]);
    expect((await storedPayload(ids[3] as number)).url).toBe(URL);
  });
});
