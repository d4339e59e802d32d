/**
 * Both Workers, end to end: a signed Slack request into the real ingress
 * fetch handler, through real local D1 and Queues, to the consumer Worker
 * (an auxiliary Worker), out to a fake Slack.
 */
import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { recordingLog } from "../../shared/log.ts";
import { shardQueue } from "../../shared/shards/queue.ts";
import { sweep } from "../../workers/consumer/sweep.ts";
import { testSettings } from "../support/consumer.ts";
import { dbOf, shardOf } from "../support/rows.ts";
import { channelMessage, commandForm, eventRequest, FORM, mention, signed, uniqueId } from "../support/slack-requests.ts";
import { waitFor } from "../support/wait.ts";

interface FakeCall {
  method: string;
  params: Record<string, string>;
  authorization: string | null;
  idempotencyKey?: string | null;
}

const fakeSlack = () => env.FAKE_SLACK as Fetcher;
/** The ingress Worker under test (this project's main Worker), as the platform calls it. */
const ingress = () => (exports as unknown as { default: Fetcher }).default;

async function slackCalls(): Promise<FakeCall[]> {
  return (await fakeSlack().fetch("http://control/calls")).json();
}

/** The test requests' team (T0TEAM): its shard holds every receipt and row of these runs (shard 1 of 2). */
const TEAM = "T0TEAM";
const teamDb = () => dbOf(TEAM);

/** A further sweep of the team's shard, an hour on: it must find nothing owed once a row is done. */
const sweepLater = () =>
  sweep(
    { db: teamDb(), queue: shardQueue(env.OUTBOX_QUEUE, shardOf(TEAM)), settings: testSettings(), log: recordingLog() },
    Date.now() + 3_600_000,
  );

const rowStatus = (id: number) => teamDb().prepare("SELECT status FROM outbox WHERE id = ?").bind(id).first<string>("status");

describe("ingress → D1 → queue → consumer → Slack", () => {
  it("an app_mention ends with exactly one chat.postMessage, threaded on the mention", async () => {
    const ts = "1764504321.000123";
    const request = await eventRequest(mention({ ts, channel: "C0PIPE", text: "<@U0BOT> ping" }), {
      now: Date.now(),
      eventId: uniqueId("EvPipe"),
    });
    const started = Date.now();
    const response = await ingress().fetch(request);
    expect(response.status).toBe(200);

    const posts = await waitFor(
      async () => (await slackCalls()).filter((c) => c.method === "chat.postMessage" && c.params.channel === "C0PIPE"),
      (found) => found.length > 0,
    );
    const elapsed = Date.now() - started;
    expect(posts).toHaveLength(1);
    expect(posts[0]?.params).toMatchObject({ channel: "C0PIPE", thread_ts: ts });
    expect(posts[0]?.authorization).toBe("Bearer xoxb-test-bot-token");

    const row = await teamDb().prepare("SELECT id FROM outbox WHERE effect = 'chat.postMessage' AND payload LIKE '%C0PIPE%'").first<{
      id: number;
    }>();
    expect(
      await waitFor(
        () => rowStatus(row?.id ?? 0),
        (s) => s === "done",
      ),
    ).toBe("done");
    // Nothing else shows up afterwards, read again once the row is done and after a further sweep: one event, one message.
    expect((await sweepLater()).reenqueued).toBe(0);
    expect((await slackCalls()).filter((c) => c.method === "chat.postMessage" && c.params.channel === "C0PIPE")).toHaveLength(1);
    console.log(`ack → effect through both Workers: ${elapsed} ms`);
  });

  it("a duplicate delivery of a channel message reacts once", async () => {
    const eventId = uniqueId("EvDup");
    const event = channelMessage({ ts: "1764504321.000456", channel: "C0WATCHED" });
    const [first, second] = await Promise.all([
      ingress().fetch(await eventRequest(event, { now: Date.now(), eventId })),
      ingress().fetch(await eventRequest(event, { now: Date.now(), eventId, retryNum: 1, retryReason: "http_timeout" })),
    ]);
    expect([first.status, second.status]).toEqual([200, 200]);
    const reactionsTo = async () =>
      (await slackCalls()).filter((c) => c.method === "reactions.add" && c.params.timestamp === "1764504321.000456");
    // One receipt, one row, whichever delivery won.
    expect(await teamDb().prepare("SELECT COUNT(*) AS n FROM receipts WHERE id = ?").bind(eventId).first<number>("n")).toBe(1);
    const rows = await teamDb().prepare("SELECT id FROM outbox WHERE receipt_id = ?").bind(eventId).all<{ id: number }>();
    expect(rows.results).toHaveLength(1);
    expect(
      await waitFor(
        () => rowStatus(rows.results[0]?.id ?? 0),
        (s) => s === "done",
      ),
    ).toBe("done");
    // Read once the row is done (its one effect finished) and after a further sweep: still one reaction.
    expect((await sweepLater()).reenqueued).toBe(0);
    const reactions = await reactionsTo();
    expect(reactions).toHaveLength(1);
    expect(reactions[0]?.params).toMatchObject({ channel: "C0WATCHED", name: "eyes" });
  });

  it("the example's /ask runs its whole chain through both Workers: placeholder, answer service, update", async () => {
    const trigger = uniqueId("9.9.pipe");
    const response = await ingress().fetch(
      await signed(commandForm({ command: "/ask", text: "pipes?", channel_id: "C0ASK", trigger_id: trigger }), FORM, { now: Date.now() }),
    );
    expect(response.status).toBe(200);
    const update = await waitFor(
      async () => (await slackCalls()).find((c) => c.method === "chat.update" && c.params.channel === "C0ASK"),
      (found) => found !== undefined,
    );
    const posted = (await slackCalls()).filter((c) => c.method === "chat.postMessage" && c.params.channel === "C0ASK");
    const asked = (await slackCalls()).filter((c) => c.method === "answer" && c.params.question === "pipes?");
    expect(posted).toHaveLength(1);
    expect(asked).toHaveLength(1);
    expect(asked[0]?.idempotencyKey).toBe(`command:T0TEAM:${trigger}:ask-placeholder>ask-service`);
    expect(update?.params.text).toBe('The answer to "pipes?".');
    const rows = await waitFor(
      async () =>
        (
          await teamDb()
            .prepare("SELECT effect, status, depth FROM outbox WHERE receipt_id = ? ORDER BY depth")
            .bind(`command:T0TEAM:${trigger}`)
            .all()
        ).results,
      (found) => found.length === 3 && found.every((r) => r.status === "done"),
    );
    expect(rows.map((r) => r.effect)).toEqual(["ask-placeholder", "ask-service", "chat.update"]);
  });
});
