/**
 * Restart recovery, end to end on the local pipeline (invariant 3: nothing
 * pending is forgotten). The local queue holds its messages in memory, so a
 * crash of the local process loses every message in flight; the rows are in
 * D1, and the sweep must find and deliver all of them after the restart.
 *
 * Phase 1: Slack is failing (503) for most events and hangs on one, so at the
 * moment of the crash N rows are pending with a retry message waiting in the
 * queue, and one row is leased by a consumer that is mid-call. SIGKILL to the
 * whole run. Phase 2: Slack works again; the run starts on the same state.
 * Two shards, the events alternating between a team of each: the restarted
 * sweep must find the rows left on both.
 *
 * A custom step is killed mid-run too: the reference app's ackbox_echo, its
 * completion (functions.completeSuccess) hanging at Slack when the process
 * dies. After the restart it is completed exactly once, with the execution's
 * own workflow token (sealed in D1 under the run's TOKEN_ENCRYPTION_KEY, which
 * the run folder keeps across the restart), and the token is scrubbed then.
 *
 * Nothing here depends on the kill landing within a second or two: the hung
 * call's timeout (5 s) outlasts any plausible delay between the call and the
 * kill, and the state at the crash is read from D1 after it, not assumed (a
 * failing row caught mid-retry is leased too; that is allowed). The lease is
 * a setting, as short as that timeout allows (twice it), so phase 2 does not
 * wait out a production-length lease.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { queryEveryShard } from "../../cli/local/d1.ts";
import { type Pipeline, startPipeline } from "../../cli/local/pipeline.ts";
import type { WorkerRecord } from "../../cli/local/pretty.ts";
import { processesInGroup } from "../../cli/local/processes.ts";
import { teamsOnEveryShard } from "../../cli/local/shard-teams.ts";
import { appMention, eventCallback, functionExecuted, postSigned, type Team } from "../../cli/local/slack-payloads.ts";
import { copyMigratedState } from "../support/ops-local.mts";
import { REFERENCE_APP } from "./support/apps.ts";
import { okReply, startFakeSlack } from "./support/fake-slack-server.ts";

const SECRET = "restart-test-secret-77aa";
const FAILING = 5;

describe("restart recovery", () => {
  const work = mkdtempSync(join(tmpdir(), "ackbox-restart-"));
  const runs: Pipeline[] = [];
  afterAll(async () => {
    for (const run of runs) await run.stop();
    rmSync(work, { recursive: true, force: true });
  }, 30_000);

  it("delivers every row left pending or leased by a crash once the run starts again", async () => {
    const fake = await startFakeSlack();
    const second = Math.floor(Date.now() / 1000);
    const failingTs = Array.from({ length: FAILING }, (_, i) => `${second}.00010${i}`);
    const hangingTs = `${second}.000200`;
    const allTs = [...failingTs, hangingTs];
    const teams = teamsOnEveryShard(2, "T0RESTART");
    // The custom step: an execution of ackbox_echo whose completion hangs at the crash.
    const execution = { id: `Fx0RESTART${second}`, token: `xwfp-restart-${second}-0123456789abcdef`, text: `echo ${second}` };
    // Slack completes an execution once; a second completion is answered execution_not_in_running_state.
    let completedOk = 0;
    const completion = (params: Readonly<Record<string, string>>) => {
      if (params.function_execution_id !== execution.id) return { status: 200, body: { ok: false, error: "function_execution_not_found" } };
      if (completedOk > 0) return { status: 200, body: { ok: false, error: "execution_not_in_running_state" } };
      completedOk += 1;
      return { status: 200, body: { ok: true } };
    };
    const start = (records: WorkerRecord[], cronIntervalMs: number) =>
      startPipeline({
        app: REFERENCE_APP,
        port: 0,
        env: {
          SLACK_API_URL: fake.apiUrl,
          SLACK_SIGNING_SECRET: SECRET,
          // The hung call gives up after 5 s, far longer than the kill takes to follow it, and its
          // lease (at least twice the timeout) runs out 10 s after its claim; a failed row's retry is due
          // 1-2 s later and it is stale 5 s after that.
          LEASE_SECONDS: "10",
          EFFECT_TIMEOUT_SECONDS: "5",
          BACKOFF_BASE_SECONDS: "1",
          SWEEP_GRACE_SECONDS: "5",
          SHARD_COUNT: "2",
        },
        devVarsFile: null,
        dir: join(work, "run"),
        persistTo: join(work, "state"),
        cronIntervalMs,
        onRecord: (record) => records.push(record),
      });
    await copyMigratedState(join(work, "state")); // both shards migrated: the start's own apply finds nothing to do
    try {
      // Phase 1: Slack fails or hangs; crash while rows are pending and one is mid-call.
      fake.answer = (method, params) =>
        params.thread_ts === hangingTs || method === "functions.completeSuccess"
          ? "hang"
          : { status: 503, body: `${method}: service unavailable (test)` };
      const phase1: WorkerRecord[] = [];
      // The cron runs in phase 1 too: should an enqueue fail, the sweep is what sends the rows, as in production.
      const first = await start(phase1, 1000);
      runs.push(first);
      for (const [i, ts] of allTs.entries()) {
        const team = teams[i % 2] as Team; // even events on shard 0, odd on shard 1
        const mention = appMention({ channel: "C0RESTART", ts, team: team.teamId });
        const ack = await postSigned(first.url, SECRET, eventCallback(mention, `Ev0RESTART${second}${i}`, team));
        expect(ack.status).toBe(200);
      }
      const step = functionExecuted({
        callbackId: "ackbox_echo",
        executionId: execution.id,
        token: execution.token,
        inputs: { text: execution.text },
      });
      const stepAck = await postSigned(first.url, SECRET, eventCallback(step, `Ev0RESTART${second}S`, teams[0] as Team));
      expect(stepAck.status).toBe(200);
      await fake
        .waitFor(
          (calls) =>
            allTs.every((ts) => calls.some((c) => c.params.thread_ts === ts)) &&
            calls.some((c) => c.method === "functions.completeSuccess") &&
            phase1.filter((r) => r.msg === "will retry").length >= FAILING,
          30_000,
          "every row attempted once (failing ones scheduled for a retry, one call hanging)",
        )
        .catch((error: Error) => {
          const said = phase1.map((r) => `${r.level} ${r.msg} ${JSON.stringify(r.fields)}`).join("\n");
          throw new Error(`${error.message}\nWorker records:\n${said}\nwrangler:\n${first.recentOutput().slice(-30).join("\n")}`);
        });
      const hungAt = fake.calls.find((c) => c.params.thread_ts === hangingTs)?.at ?? 0;
      await first.kill();
      const killedAfterMs = Date.now() - hungAt;
      expect(processesInGroup(first.pgid)).toEqual([]);

      // The state at the crash, observed: every row owed (pending or leased), none done or dead, and the
      // hung call's row still leased to the consumer that died mid-call.
      const all = await queryEveryShard<{ ts: string | null; status: string; effect: string }>({
        config: first.configs.ingress,
        persistTo: first.persistTo,
        shards: first.configs.shards,
        sql: "SELECT json_extract(payload, '$.thread_ts') AS ts, status, effect FROM outbox ORDER BY id",
      });
      const before = all.filter((r) => r.effect !== "functions.completeSuccess");
      // The step's completion, mid-call (its first attempt hung) or waiting for its retry: owed either way.
      expect(
        all.filter((r) => r.effect === "functions.completeSuccess").map((r) => [r.status === "pending" || r.status === "leased", r.shard]),
      ).toEqual([[true, 0]]);
      expect(before.map((r) => r.ts).sort()).toEqual([...allTs].sort());
      // Each row on its team's shard: both shards owe rows at the crash.
      expect(before.map((r) => [r.ts, r.shard])).toEqual(expect.arrayContaining(allTs.map((ts, i) => [ts, i % 2])));
      expect(before.filter((r) => r.status !== "pending" && r.status !== "leased")).toEqual([]);
      expect(
        before.find((r) => r.ts === hangingTs)?.status,
        `the hung call's row, killed ${killedAfterMs} ms after the call began (its timeout is 5 s)`,
      ).toBe("leased");

      // Phase 2: Slack is back; the queue messages are gone with the process; only the sweep knows these rows.
      fake.answer = (method, params) => (method === "functions.completeSuccess" ? completion(params) : okReply(method, params));
      const callsBeforeRestart = fake.calls.length;
      const phase2: WorkerRecord[] = [];
      const restarted = await start(phase2, 1000);
      runs.push(restarted);
      await fake.waitFor(
        (calls) => allTs.every((ts) => calls.some((c) => c.params.thread_ts === ts && c.status === 200)) && completedOk === 1,
        60_000,
        "every row delivered after the restart, the step completed",
      );
      // The effect happens first, its completion is written after: wait for the fenced writes too.
      const recorded = Date.now() + 15_000;
      while (phase2.filter((r) => r.msg === "delivered").length < FAILING + 2 && Date.now() < recorded) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await restarted.stop();
      expect(processesInGroup(restarted.pgid)).toEqual([]);

      const reenqueued = phase2.filter((r) => r.msg === "sweep").reduce((sum, r) => sum + Number(r.fields.reenqueued ?? 0), 0);
      expect(reenqueued).toBeGreaterThanOrEqual(FAILING + 2);
      expect(phase2.filter((r) => r.msg === "delivered")).toHaveLength(FAILING + 2);
      const after = await queryEveryShard<{ status: string; n: number }>({
        config: restarted.configs.ingress,
        persistTo: restarted.persistTo,
        shards: restarted.configs.shards,
        sql: "SELECT status, count(*) AS n FROM outbox GROUP BY status",
      });
      expect(after).toEqual([
        { status: "done", n: Math.ceil((FAILING + 1) / 2) + 1, shard: 0 },
        { status: "done", n: Math.floor((FAILING + 1) / 2), shard: 1 },
      ]);
      // The step: completed once (Slack answered ok once, and was never asked again), with its own workflow token,
      // which the engine no longer holds.
      const completions = fake.calls.filter((c) => c.method === "functions.completeSuccess");
      expect(completions.every((c) => c.authorization === `Bearer ${execution.token}`)).toBe(true);
      expect(completedOk).toBe(1);
      expect(fake.calls.slice(callsBeforeRestart).filter((c) => c.method === "functions.completeSuccess")).toHaveLength(1);
      expect(completions.at(-1)?.params).toEqual({
        function_execution_id: execution.id,
        outputs: JSON.stringify({ text: execution.text }),
      });
      const executions = await queryEveryShard<{ held: number; end_reason: string | null }>({
        config: restarted.configs.ingress,
        persistTo: restarted.persistTo,
        shards: restarted.configs.shards,
        sql: "SELECT token IS NOT NULL AS held, end_reason FROM step_executions",
      });
      expect(executions).toEqual([{ held: 0, end_reason: "completed", shard: 0 }]);
    } finally {
      await fake.close();
    }
  }, 180_000);
});
