/**
 * Custom steps through the ack (workers/ingress/ack.ts) and the consumer's
 * real claim → perform → fenced finish over local D1, Slack faked at the
 * network edge: one completion per execution whatever Slack redelivers, the
 * execution's rows performed with its workflow token (kept sealed, scrubbed
 * when the execution completes, never anywhere else), a step that waits for a
 * click completed from it, and what Slack's answers to a completion mean.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { createApp } from "../../shared/app/app.ts";
import { slack } from "../../shared/app/intents.ts";
import { deliverBatch } from "../../shared/delivery/deliver.ts";
import { slackForOf } from "../../shared/effects/context.ts";
import { networkEdge } from "../../shared/effects/outbound.ts";
import { measureBacklog } from "../../shared/ops/backlog.ts";
import { namedKey } from "../../shared/outbox/model.ts";
import type { Settings } from "../../shared/settings.ts";
import { DEADLINE_MARGIN_MS, WORKFLOW_TOKEN_LIFETIME_MS } from "../../shared/steps/execution.ts";
import { handleSlackRequest } from "../../workers/ingress/ack.ts";
import { deliveryDeps, testSettings } from "../support/consumer.ts";
import { reply, useFakeSlack } from "../support/fake-slack.ts";
import { ingressDeps } from "../support/ingress.ts";
import { adminDeps, callAdmin, messageQueue } from "../support/ops.ts";
import { allRows, readRow, resetTables, tally } from "../support/rows.ts";
import { TEST_BOT_TOKEN } from "../support/settings.ts";
import { blockActions, eventEnvelope, FORM, interactionForm, JSON_TYPE, NOW, signed, uniqueId } from "../support/slack-requests.ts";

const slackFake = useFakeSlack();
beforeEach(() => resetTables(env.DB));

const KEY = "5eed".repeat(16);
const settings = (over: Partial<Settings> = {}) => testSettings({ tokenKey: { current: KEY, previous: undefined }, ...over });

const app = createApp()
  .uses("chat.postMessage")
  .function(
    "echo",
    { title: "Echo", inputs: { text: { type: "string", required: true } }, outputs: { text: { type: "string", required: true } } },
    ({ inputs }, { step }) => [step.complete({ text: inputs.text })],
  )
  .function("wait", { title: "Wait for a click", waitMinutes: 5 }, () => [
    slack("chat.postMessage", { channel: "C0WATCHED", text: "Click Done" }, { key: "ask" }),
  ])
  .view("step_form", () => undefined)
  .action("done", (_, { step }) =>
    step ? [step.complete({}), slack("chat.postMessage", { channel: "C0WATCHED", text: "Thanks" }, { key: "thanks" })] : undefined,
  );

let executions = 0;
/** A fresh execution: its id and its workflow token (a test token in Slack's shape). */
function execution() {
  executions += 1;
  return { id: `Fx0STEP${executions}${Date.now().toString(36).toUpperCase()}`, token: `xwfp-test-${executions}-0123456789abcdef` };
}

const executed = (callbackId: string, x: { id: string; token: string }, inputs: Record<string, unknown> = {}) => ({
  type: "function_executed",
  function: { id: "Fn0STEP", callback_id: callbackId, title: callbackId, type: "app", input_parameters: [], output_parameters: [] },
  inputs,
  function_execution_id: x.id,
  workflow_execution_id: "Wx0STEP",
  event_ts: "1764504000.000100",
  bot_access_token: x.token,
});

/** The ack of one request, at `now`, with the steps' settings (or others). */
async function ack(
  body: string,
  contentType: string,
  options: { now?: number; settings?: Settings; headers?: Record<string, string> } = {},
) {
  const queue = messageQueue();
  const harness = ingressDeps({ app, queue, settings: options.settings ?? settings() });
  const response = await handleSlackRequest(
    await signed(body, contentType, { headers: options.headers ?? {} }),
    harness.deps,
    options.now ?? NOW,
  );
  await harness.settled();
  const line = harness.log.records.find((r) => r.msg === "slack request")?.fields ?? {};
  return { status: response.status, body: await response.text(), line, queue, log: harness.log };
}
const event = (e: Record<string, unknown>, eventId = uniqueId("Ev"), headers: Record<string, string> = {}) =>
  ack(JSON.stringify(eventEnvelope(e, eventId)), JSON_TYPE, { headers });

/** A click on the wait step's Done button, inside its execution (function_data and the workflow token). */
const click = (x: { id: string; token: string }) =>
  ack(
    interactionForm(
      blockActions({
        actions: [{ action_id: "done", block_id: "b1", type: "button", action_ts: "1764504001.000000" }],
        function_data: { execution_id: x.id, function: { callback_id: "wait" }, inputs: {} },
        bot_access_token: x.token,
      }),
    ),
    FORM,
  );

/** The consumer's delivery of `ids` at `now`, each row with the token the engine chooses for it. */
async function deliver(ids: readonly number[], now = NOW + 1_000) {
  const s = settings();
  const clock = () => now;
  const { deps, log } = deliveryDeps(now, {
    effects: app.effects,
    settings: s,
    slackFor: slackForOf(env.DB, s, env.DB, { edge: networkEdge, refresh: false, clock }),
  });
  await deliverBatch(deps, ids);
  return log;
}

const executionRow = (id: string) =>
  env.DB.prepare(
    "SELECT execution_id, team_id, callback_id, key_id, token, issued_at, expires_at, ended_at, end_reason FROM step_executions WHERE execution_id = ?1",
  )
    .bind(id)
    .first<{ token: string | null; key_id: string | null; end_reason: string | null; issued_at: number; expires_at: number }>();

describe("a step completed in its own step", () => {
  it("is recorded once through Slack's retry and a copy under another event_id, and completed once, with its workflow token", async () => {
    const x = execution();
    const first = await event(executed("echo", x, { text: "hi" }), "Ev0STEPA");
    const retry = await event(executed("echo", x, { text: "hi" }), "Ev0STEPA", {
      "x-slack-retry-num": "1",
      "x-slack-retry-reason": "http_timeout",
    });
    const copy = await event(executed("echo", x, { text: "hi" }), "Ev0STEPB");
    expect([first.status, retry.status, copy.status]).toEqual([200, 200, 200]);
    expect([first.line.verdict, retry.line.verdict, copy.line.verdict]).toEqual(["accepted", "duplicate", "accepted"]);

    const rows = await allRows(env.DB);
    expect(rows.map((r) => [r.idempotency_key, r.effect, JSON.parse(r.payload)])).toEqual([
      [namedKey("T0TEAM", `step.${x.id}`), "functions.completeSuccess", { function_execution_id: x.id, outputs: { text: "hi" } }],
    ]);
    expect((await tally(env.DB)).receipts).toBe(2);

    slackFake.current.script("functions.completeSuccess", reply.ok());
    await deliver(rows.map((r) => r.id));
    const [call] = slackFake.current.callsTo("functions.completeSuccess");
    expect(call?.authorization).toBe(`Bearer ${x.token}`);
    expect(call?.params).toEqual({ function_execution_id: x.id, outputs: JSON.stringify({ text: "hi" }) });
    expect((await readRow(env.DB, rows[0]?.id as number)).status).toBe("done");
  });

  it("keeps its workflow token sealed beside the receipt, and scrubs it when Slack answers the completion", async () => {
    const x = execution();
    const acked = await event(executed("echo", x, { text: "sealed" }));
    const kept = await executionRow(x.id);
    expect(kept).toMatchObject({ team_id: "T0TEAM", callback_id: "echo", end_reason: null, issued_at: NOW });
    expect(kept?.expires_at).toBe(NOW + WORKFLOW_TOKEN_LIFETIME_MS);
    expect(kept?.token).toMatch(/^[0-9a-f]{24}\.[0-9a-f]+$/);
    expect(kept?.token).not.toContain(x.token);

    slackFake.current.script("functions.completeSuccess", reply.ok());
    const consumerLog = await deliver((await allRows(env.DB)).map((r) => r.id));
    expect(await executionRow(x.id)).toMatchObject({ token: null, key_id: null, end_reason: "completed" });

    // Nowhere else, ever: not the rows, the receipts, the attempts, the queue's messages or a log line.
    const everything = JSON.stringify([
      await env.DB.prepare("SELECT * FROM outbox").all(),
      await env.DB.prepare("SELECT * FROM receipts").all(),
      await env.DB.prepare("SELECT * FROM outbox_attempts").all(),
      await env.DB.prepare("SELECT * FROM step_executions").all(),
      acked.queue.messages,
      acked.log.records,
      consumerLog.records,
    ]);
    expect(everything).not.toContain(x.token);
    expect(everything).not.toContain("xwfp-");
  });

  it("without TOKEN_ENCRYPTION_KEY is refused: 500, nothing written, and the log says which setting", async () => {
    const x = execution();
    const refused = await ack(JSON.stringify(eventEnvelope(executed("echo", x, { text: "no key" }))), JSON_TYPE, {
      settings: testSettings({ tokenKey: undefined }),
    });
    expect(refused.status).toBe(500);
    expect(refused.line).toMatchObject({ verdict: "refused", reason: expect.stringContaining("TOKEN_ENCRYPTION_KEY is not set") });
    expect(await tally(env.DB)).toEqual({ receipts: 0, outbox: 0, attempts: 0 });
    expect(await executionRow(x.id)).toBeNull();
  });
});

describe("a step that waits for a click", () => {
  it("posts with its workflow token, and is completed from the click, once, with the token of its execution", async () => {
    const x = execution();
    await event(executed("wait", x));
    // Slack's copy of the execution under another event_id: the same fact (the execution), no second request posted.
    const copy = await event(executed("wait", x));
    expect(copy.line).toMatchObject({ verdict: "accepted", repeated: 2, fact: `function_executed:T0TEAM:${x.id}` });
    const asked = (await allRows(env.DB)).filter((r) => r.effect === "chat.postMessage");
    expect(asked).toHaveLength(1);
    slackFake.current.script("chat.postMessage", reply.ok({ channel: "C0WATCHED", ts: "1764504000.000300" }));
    await deliver(asked.map((r) => r.id));
    expect(slackFake.current.callsTo("chat.postMessage")[0]?.authorization).toBe(`Bearer ${x.token}`);

    const clicked = await click(x);
    expect(clicked.status).toBe(200);
    const again = await click(x); // a second click: its completion is the same named row
    expect(again.line.repeated).toBe(1);
    const completions = (await allRows(env.DB)).filter((r) => r.effect === "functions.completeSuccess");
    expect(completions.map((r) => r.idempotency_key)).toEqual([namedKey("T0TEAM", `step.${x.id}`)]);

    // The click's other row goes with the installation's token, even before the completion is performed: the
    // completion is recorded, and Slack revokes the workflow token when the step completes, at any moment now.
    const [thanks] = (await allRows(env.DB)).filter((r) => r.idempotency_key.endsWith(":thanks"));
    slackFake.current.script("chat.postMessage", reply.ok({ channel: "C0WATCHED", ts: "1764504000.000400" }));
    await deliver([thanks?.id as number]);
    expect(slackFake.current.callsTo("chat.postMessage").map((c) => c.authorization)).toEqual([
      `Bearer ${x.token}`,
      `Bearer ${TEST_BOT_TOKEN}`,
    ]);

    slackFake.current.script("functions.completeSuccess", reply.ok());
    await deliver(completions.map((r) => r.id));
    expect(slackFake.current.callsTo("functions.completeSuccess").map((c) => c.authorization)).toEqual([`Bearer ${x.token}`]);
    expect(await executionRow(x.id)).toMatchObject({ token: null, end_reason: "completed" });
  });
});

describe("a waiting step's deadline", () => {
  const WAIT = 5 * 60_000;
  const deadlineOf = async (x: { id: string }) => {
    const row = (await allRows(env.DB)).find((r) => r.idempotency_key === namedKey("T0TEAM", `step.${x.id}.deadline`));
    if (!row) throw new Error("no deadline row");
    return row;
  };

  it("is a timer due its wait after the token was issued, its message delayed to it, well before the token dies", async () => {
    const x = execution();
    const acked = await event(executed("wait", x));
    const deadline = await deadlineOf(x);
    expect([deadline.effect, JSON.parse(deadline.payload)]).toEqual([
      "functions.completeError",
      { function_execution_id: x.id, error: "Nobody answered within 5 minutes." },
    ]);
    expect(deadline.next_attempt_at).toBe(NOW + WAIT);
    expect(NOW + WAIT).toBeLessThan(NOW + WORKFLOW_TOKEN_LIFETIME_MS);
    expect(acked.queue.messages.find((m) => m.body.id === deadline.id)?.delaySeconds).toBe(WAIT / 1000);
  });

  it("fires at its time, not a millisecond before, and completes the execution with an error, with the workflow token", async () => {
    const x = execution();
    await event(executed("wait", x));
    const deadline = await deadlineOf(x);
    await deliver([deadline.id], NOW + WAIT - 1); // not due: nothing is called, the row waits
    expect(await readRow(env.DB, deadline.id)).toMatchObject({ status: "pending", attempts: 0 });
    slackFake.current.script("functions.completeError", reply.ok());
    await deliver([deadline.id], NOW + WAIT);
    const [failed] = slackFake.current.callsTo("functions.completeError");
    expect(failed?.authorization).toBe(`Bearer ${x.token}`);
    expect(failed?.params).toEqual({ function_execution_id: x.id, error: "Nobody answered within 5 minutes." });
    expect((await readRow(env.DB, deadline.id)).status).toBe("done");
    expect(await executionRow(x.id)).toMatchObject({ token: null, end_reason: "completed" });
  });

  it("is cancelled by the click's completion, in the click's batch: at its time nothing is called", async () => {
    const x = execution();
    await event(executed("wait", x));
    const clicked = await click(x);
    expect(clicked.line.cancels).toEqual([`step.${x.id}.deadline: cancelled`]);
    const deadline = await deadlineOf(x);
    expect(deadline).toMatchObject({ status: "done", cancelled_by: expect.any(String) });
    await deliver([deadline.id], NOW + WAIT);
    expect(slackFake.current.calls).toEqual([]);
  });

  it("a click after the deadline fired is too late to cancel it: the execution has its completion, and the click's is done without a call", async () => {
    const x = execution();
    await event(executed("wait", x));
    const deadline = await deadlineOf(x);
    slackFake.current.script("functions.completeError", reply.ok());
    await deliver([deadline.id], NOW + WAIT);
    const clicked = await click(x);
    expect(clicked.line.cancels).toEqual([`step.${x.id}.deadline: too_late (done)`]);
    const [completion] = (await allRows(env.DB)).filter((r) => r.effect === "functions.completeSuccess");
    // The execution completed (its token scrubbed): the engine knows, and calls Slack no more.
    await deliver([completion?.id as number], NOW + WAIT + 1_000);
    const done = await readRow(env.DB, completion?.id as number);
    expect([done.status, JSON.parse(done.result ?? "null")]).toEqual(["done", { already: "completed", execution: x.id }]);
    expect(slackFake.current.callsTo("functions.completeSuccess")).toEqual([]);
  });
});

describe("Slack's answers to a completion", () => {
  async function completionOf(text: string) {
    const x = execution();
    await event(executed("echo", x, { text }));
    const [row] = await allRows(env.DB);
    return { x, row: row as NonNullable<typeof row> };
  }

  it("'no longer running' and 'cannot be found' are success: done, the token scrubbed", async () => {
    for (const answer of ["execution_not_in_running_state", "function_execution_not_found"]) {
      await resetTables(env.DB);
      const { x, row } = await completionOf(answer);
      slackFake.current.script("functions.completeSuccess", reply.error(answer));
      await deliver([row.id]);
      const done = await readRow(env.DB, row.id);
      expect([done.status, JSON.parse(done.result ?? "null")]).toEqual(["done", { already: answer }]);
      expect(await executionRow(x.id)).toMatchObject({ token: null, end_reason: "completed" });
    }
  });

  it("parameter_validation_failed parks with the reason and the outputs it sent, the execution completed with an error first", async () => {
    const { x, row } = await completionOf("not what the step declares");
    slackFake.current
      .script("functions.completeSuccess", reply.error("parameter_validation_failed"))
      .script("functions.completeError", reply.ok());
    await deliver([row.id]);
    const parked = await readRow(env.DB, row.id);
    expect(parked.status).toBe("dead");
    expect(parked.last_error).toBe(
      'functions.completeSuccess: parameter_validation_failed; outputs sent: {"text":"not what the step declares"}; the execution was completed with an error instead',
    );
    const [failed] = slackFake.current.callsTo("functions.completeError");
    expect(failed?.authorization).toBe(`Bearer ${x.token}`);
    expect(failed?.params.function_execution_id).toBe(x.id);
    expect(await executionRow(x.id)).toMatchObject({ token: null, end_reason: "completed" });
  });

  it("a completion that cannot be made before the token expires is parked with that reason, and the installation's own token completes it with an error", async () => {
    const { x, row } = await completionOf("too late");
    // One millisecond before the expiry the workflow token is used; at it, it is not.
    slackFake.current.script("functions.completeError", reply.ok());
    await deliver([row.id], NOW + WORKFLOW_TOKEN_LIFETIME_MS);
    const parked = await readRow(env.DB, row.id);
    expect(parked.status).toBe("dead");
    expect(parked.last_error).toBe(
      `functions.completeSuccess: the workflow token of execution ${x.id} cannot complete it (expired at ${new Date(NOW + WORKFLOW_TOKEN_LIFETIME_MS).toISOString()}); it was completed with an error by the installation's own token`,
    );
    const [failed] = slackFake.current.callsTo("functions.completeError");
    expect(failed?.authorization).toBe(`Bearer ${TEST_BOT_TOKEN}`);
    expect(slackFake.current.callsTo("functions.completeSuccess")).toEqual([]);
    // Completed, so ended as such then: its expired token scrubbed now, not held until the cron's tick.
    expect(await executionRow(x.id)).toMatchObject({
      token: null,
      key_id: null,
      ended_at: NOW + WORKFLOW_TOKEN_LIFETIME_MS,
      end_reason: "completed",
    });
  });

  it("one millisecond before the expiry, the completion goes with the workflow token", async () => {
    const { x, row } = await completionOf("just in time");
    slackFake.current.script("functions.completeSuccess", reply.ok());
    await deliver([row.id], NOW + WORKFLOW_TOKEN_LIFETIME_MS - 1);
    expect(slackFake.current.callsTo("functions.completeSuccess")[0]?.authorization).toBe(`Bearer ${x.token}`);
    expect((await readRow(env.DB, row.id)).status).toBe("done");
  });

  it("where Slack refuses the installation's own token too, the park says so", async () => {
    const { x, row } = await completionOf("refused twice");
    slackFake.current.script("functions.completeError", reply.error("access_denied"));
    await deliver([row.id], NOW + WORKFLOW_TOKEN_LIFETIME_MS + 60_000);
    expect((await readRow(env.DB, row.id)).last_error).toContain(`execution ${x.id} cannot complete it (expired at`);
    expect((await readRow(env.DB, row.id)).last_error).toContain(
      "completing it with an error by the installation's own token was refused (access_denied)",
    );
    // Not completed: the execution is not ended as completed (its token goes at the cron's scrub, as expired).
    expect(await executionRow(x.id)).toMatchObject({ end_reason: null, ended_at: null });
  });

  it("a refused workflow token ends its token without blocking the installation: retried without it, and 'no longer running' to the installation's own token is done", async () => {
    const { x, row } = await completionOf("revoked");
    slackFake.current.script("functions.completeSuccess", reply.error("token_revoked"));
    await deliver([row.id]);
    const retried = await readRow(env.DB, row.id);
    expect(retried.status).toBe("pending");
    expect(retried.last_error).toContain(`Slack refused the workflow token of execution ${x.id} (token_revoked)`);
    expect(await executionRow(x.id)).toMatchObject({ token: null, end_reason: "refused: token_revoked" });
    // SLACK_BOT_TOKEN was not blocked: the retry asks Slack with it at once, and Slack says the execution is over.
    slackFake.current.script("functions.completeError", reply.error("execution_not_in_running_state"));
    await deliver([row.id], NOW + 60_000);
    expect(slackFake.current.callsTo("functions.completeError")[0]?.authorization).toBe(`Bearer ${TEST_BOT_TOKEN}`);
    const after = await readRow(env.DB, row.id);
    expect([after.status, JSON.parse(after.result ?? "null")]).toEqual([
      "done",
      { already: "execution_not_in_running_state", execution: x.id },
    ]);
    // Slack says it is over: ended as completed, replacing the refusal learnt before.
    expect(await executionRow(x.id)).toMatchObject({ token: null, ended_at: NOW + 60_000, end_reason: "completed" });
  });
});

describe("what operators see of an execution", () => {
  const steps = async (now: number) => (await measureBacklog(env.DB, now, { windowsMs: [60_000], cap: 100 })).steps;

  it("events show <execution id>: every row of it, whichever input recorded them, its completion and deadline, never its token", async () => {
    const x = execution();
    const executedAck = await event(executed("wait", x), "Ev0STEPSHOW");
    expect(executedAck.status).toBe(200);
    await click(x);
    const rows = await allRows(env.DB);
    slackFake.current
      .script(
        "chat.postMessage",
        reply.ok({ channel: "C0WATCHED", ts: "1764504000.000300" }),
        reply.ok({ channel: "C0WATCHED", ts: "1764504000.000301" }),
      )
      .script("functions.completeSuccess", reply.ok());
    await deliver(rows.filter((r) => r.status === "pending").map((r) => r.id));

    const admin = adminDeps().deps;
    const { status, body } = await callAdmin(admin, `/admin/events/${x.id}`, NOW + 2_000);
    expect(status).toBe(200);
    expect(body).toMatchObject({
      id: x.id,
      receipt: null,
      complete: true,
      execution: {
        id: x.id,
        teamId: "T0TEAM",
        callbackId: "wait",
        receiptId: "Ev0STEPSHOW",
        workflowToken: "completed",
        tokenIssuedAt: new Date(NOW).toISOString(),
        tokenExpiresAt: new Date(NOW + WORKFLOW_TOKEN_LIFETIME_MS).toISOString(),
        completion: { effect: "functions.completeSuccess", status: "done" },
        deadline: { status: "cancelled", dueAt: new Date(NOW + 5 * 60_000).toISOString() },
      },
    });
    const listed = (body.rows as { effect: string; status: string }[]).map((r) => [r.effect, r.status]);
    expect(listed).toEqual([
      ["chat.postMessage", "done"],
      ["functions.completeError", "cancelled"],
      ["functions.completeSuccess", "done"],
      ["chat.postMessage", "done"],
    ]);
    // The function_executed input's own trail names its execution too.
    const ofInput = await callAdmin(admin, "/admin/events/Ev0STEPSHOW", NOW + 2_000);
    expect(ofInput.body).toMatchObject({ execution: { id: x.id, completion: { status: "done" } } });
    expect(JSON.stringify([body, ofInput.body])).not.toContain(x.token);
  });

  it("the backlog counts executions waiting for a user, and those near their token's expiry, on both sides of the line", async () => {
    const x = execution();
    await event(executed("wait", x));
    const expiry = NOW + WORKFLOW_TOKEN_LIFETIME_MS;
    expect(await steps(NOW + 1_000)).toEqual({ live: 1, waitingForUser: 1, nearExpiry: 0, nextExpiryAt: expiry });
    expect((await steps(expiry - DEADLINE_MARGIN_MS - 1)).nearExpiry).toBe(0);
    expect((await steps(expiry - DEADLINE_MARGIN_MS)).nearExpiry).toBe(1);
    expect((await steps(expiry)).live).toBe(0); // its token has died: no longer in flight
    await click(x); // its completion is recorded: not waiting any more, in flight until Slack answers it
    expect(await steps(NOW + 2_000)).toEqual({ live: 1, waitingForUser: 0, nearExpiry: 0, nextExpiryAt: expiry });
  });
});

describe("a view submission inside a step", () => {
  it("is answered response_action clear, as Slack requires, though its handler answered nothing", async () => {
    const x = execution();
    const submitted = await ack(
      interactionForm({
        type: "view_submission",
        team: { id: "T0TEAM" },
        user: { id: "U0HUMAN" },
        trigger_id: uniqueId("trg."),
        view: { id: "V0STEP", callback_id: "step_form", hash: "h1", state: { values: {} } },
        function_data: { execution_id: x.id, function: { callback_id: "wait" }, inputs: {} },
        bot_access_token: x.token,
      }),
      FORM,
    );
    expect(submitted.status).toBe(200);
    expect(JSON.parse(submitted.body)).toEqual({ response_action: "clear" });
    expect(submitted.line.verdict).toBe("answered");
  });
});
