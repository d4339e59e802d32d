/**
 * `npm run demo` at small scale against a distributed local run (SLACK_CLIENT_ID, as `npm start --
 * --distributed`) that uses the stand-in: every built-in scenario with the installed team's own token,
 * then the installs, the second team, the rotation under load and the uninstall. The single-workspace
 * demo (plain `npm start`) runs in test/node/runbook.test.ts, against the page that quotes its table.
 * At small scale against a local run that uses the stand-in:
 * every scenario must come out as the pipeline promises, and the demo must
 * say so (exit 0, --json summary). It must also say so when it is not true:
 * an intended call that never came, and a call nobody intended (an app that
 * does more than the demo expects), each fail it with a line that says which.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { builtinScenarios, type DemoResult, type DemoScenario, effectLatencies, matchCalls, runDemo } from "../../cli/local/demo.ts";
import { appScenarios, skipReason } from "../../cli/local/demo-apps.ts";
import { assistantScenarios } from "../../cli/local/demo-assistant.ts";
import { type Pipeline, PROJECT_ROOT, startPipeline } from "../../cli/local/pipeline.ts";
import { processesInGroup } from "../../cli/local/processes.ts";
import { MODEL_KEY_FILE } from "../../cli/local/run-info.ts";
import { LOCAL_CLIENT_ID, LOCAL_MODEL_NAME } from "../../cli/local/settings.ts";
import { appMention, DEMO_TEAM, eventCallback } from "../../cli/local/slack-payloads.ts";
import {
  conversationsHistory,
  MISSING_CHANNEL,
  type SlackStandin,
  type StandinCall,
  startSlackStandin,
} from "../../cli/local/slack-standin.ts";
import { exampleApp } from "../../examples/ask/app.ts";
import { referenceApp } from "../../examples/reference/app.ts";
import { standup } from "../../examples/standup/app.ts";
import { createApp, slack } from "../../shared/app/index.ts";
import { copyMigratedState } from "../support/ops-local.mts";
import { REFERENCE_APP } from "./support/apps.ts";

const run = promisify(execFile);
const SECRET = "demo-test-secret-41d0";

let runDir = "";

async function demo(args: string[], timeoutMs = 60_000): Promise<{ code: number; result: DemoResult; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [join(PROJECT_ROOT, "cli/project/demo.ts"), "--json", ...args], {
      cwd: PROJECT_ROOT,
      // The run folder, as every local command takes it: the demo reads the run's token there to find the failure's dead row.
      env: { ...process.env, SLACK_SIGNING_SECRET: SECRET, ACKBOX_LOCAL_DIR: runDir, ACKBOX_ADMIN_TOKEN: "", ACKBOX_APP: REFERENCE_APP },
      timeout: timeoutMs,
    });
    return { code: 0, result: JSON.parse(stdout), stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    if (typeof failed.code !== "number" || !failed.stdout) throw error;
    return { code: failed.code, result: JSON.parse(failed.stdout), stderr: failed.stderr ?? "" };
  }
}

describe("npm run demo", () => {
  let pipeline: Pipeline;
  let work: string;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "ackbox-demo-"));
    await copyMigratedState(join(work, "state")); // migrated once for the whole run (test/support/d1-template.mts)
    pipeline = await startPipeline({
      app: REFERENCE_APP,
      port: 0,
      env: { SLACK_SIGNING_SECRET: SECRET, SLACK_CLIENT_ID: LOCAL_CLIENT_ID },
      devVarsFile: null,
      dir: join(work, "run"),
      persistTo: join(work, "state"),
      // The sweep backs the queue up, as in production; not every second, or the cron's own refresh (it renews a
      // token 30 min ahead) would nearly always win the race the rotation scenario puts the consumer's rows in.
      cronIntervalMs: 20_000,
    });
    runDir = pipeline.dir;
  }, 150_000); // past the pipeline's own readiness bound (90 s), so its error, naming what did not start, is the one seen

  afterAll(async () => {
    await pipeline?.stop();
    if (pipeline) expect(processesInGroup(pipeline.pgid)).toEqual([]);
    if (work) rmSync(work, { recursive: true, force: true });
  }, 30_000);

  it("drives every scenario through the pipeline and sees every effect exactly as intended", async () => {
    const standin = pipeline.standin as SlackStandin;
    expect(standin).toBeDefined();
    const { code, result, stderr } = await demo([
      "--url",
      pipeline.url,
      "--standin",
      standin.url,
      "--channel",
      "C0DEMO",
      "--mentions",
      "2",
      "--messages",
      "2",
      "--duplicates",
      "4",
    ]);
    expect(result.scenarios.filter((s) => !s.ok)).toEqual([]);
    expect(code).toBe(0);
    expect(result.ok).toBe(true);
    expect(result.mode).toBe("distributed");
    // 2 mentions + 2 messages + 1 bot + 4 duplicates + 2 (event and its retry) + 1 command + 1 click
    // + the example app's /ask, Home tab and menu + 1 forged + 1 failure
    // + the outage's 5 messages (3 of them refused 401)
    // + the custom steps: ackbox_echo and its retry, ackbox_approval and its click
    // + the assistant: a thread started and its 2 questions; a question and its stop (agent_session_stopped)
    // + 6 concurrent mentions in the second team + its revoked mention and app_uninstalled
    expect(result.sent).toBe(40);
    expect(result.acked).toBe(36);
    expect(result.rejected).toBe(4);
    expect(result.deduplicated).toBe(4); // 3 of the 4 concurrent deliveries, and the retry
    expect(result.ignored).toBe(1);
    // The example's chain is 3 calls (placeholder, answer service, update); its Home tab 1; its menu none.
    // The distributed part: 2 installs (authorize + code each), exactly 1 refresh, 6 replies in the second team
    // and its one call refused token_revoked. The outage: 5 :eyes: (3 backfilled), 3 history pages, each after an auth.test,
    // and one conversations.info (the channel's kind, once a run). The custom steps: one completion each, the approval
    // asked and then updated. The assistant: the thread's prompts; for each of its 3 questions the status line, one
    // model call and one stream; the 2 answered whole stopped by the app, the stopped one's status cleared (its
    // appends, and its own stop if it sent one, are checked by the scenario, not counted here).
    const byMethod = {
      "chat.postMessage": 14,
      "reactions.add": 7,
      "auth.test": 3,
      "conversations.history": 3,
      "conversations.info": 1,
      response_url: 1,
      "chat.update": 3,
      "functions.completeSuccess": 2,
      "example.answer": 1,
      "views.publish": 1,
      "oauth.authorize": 2,
      "oauth.v2.access": 3,
      "assistant.threads.setSuggestedPrompts": 1,
      "assistant.threads.setStatus": 4,
      "model.chat.completions": 3,
      "chat.startStream": 3,
      "chat.stopStream": 2,
    };
    expect(result.effects).toEqual({ expected: 54, received: 54, byMethod, unexpected: [] });
    expect(stderr).toMatch(/effects received by the stand-in: 54\/54/);
    for (const name of [
      "OAuth install",
      "outage, then backfill",
      "custom step",
      "custom step by click",
      "rotation under load",
      "uninstall",
      "assistant thread",
      "assistant stop",
    ])
      expect(result.scenarios.find((s) => s.name === name)).toMatchObject({ ok: true, problems: [] });
    // The outage: 5 messages, 2 acked and 3 refused; each of the 5 one :eyes: (2 live, 3 by the backfill), 3 pages read.
    expect(result.scenarios.find((s) => s.name === "outage, then backfill")).toMatchObject({
      sent: 5,
      acked: 2,
      expectedEffects: 12,
      receivedEffects: 12,
    });

    // The labelled failure: refused by the stand-in, and the ids the runbook needs are in the summary.
    const failure = result.scenarios.find((s) => s.name === "labelled failure");
    expect(failure).toMatchObject({ ok: true, sent: 1, acked: 1, expectedEffects: 1, receivedEffects: 1 });
    expect(result.runbook.failedEvent).toMatch(/^Ev0DEMO[0-9A-Z]+F0$/);
    expect(failure?.ids).toEqual([result.runbook.failedEvent]);
    expect(result.runbook.commandOperation).toMatch(/^command:T0DEMO:[0-9A-Z]+\.1\.trigger$/);
    expect(result.runbook.interactionOperation).toMatch(/^interaction:T0DEMO:[0-9A-Z]+\.2\.trigger$/);
    // Read back with the run's generated token (found in its folder): the failure's row, parked dead.
    const trail = await fetch(`${pipeline.url}/admin/events/${result.runbook.failedEvent}`, {
      headers: { authorization: `Bearer ${readFileSync(join(runDir, "admin-token"), "utf8").trim()}` },
    }).then((r) => r.json() as Promise<{ rows: { id: number; status: string; lastError: string }[] }>);
    expect(trail.rows).toMatchObject([{ id: result.runbook.failedRow, status: "dead", lastError: "chat.postMessage: channel_not_found" }]);

    // The stand-in's own record agrees with the demo's summary: beside it, only the answers' appends, and the
    // stopped answer's own stop if it sent one (Slack had stopped the stream: refused).
    const snapshot = standin.snapshot();
    const { "chat.appendStream": appends, "chat.stopStream": stops, ...rest } = snapshot.counts;
    expect({ ...rest, "chat.stopStream": byMethod["chat.stopStream"] }).toEqual(byMethod);
    expect(appends).toBeGreaterThanOrEqual(3); // each answer took at least one before its stop (the stopped one: before the stop)
    expect([2, 3]).toContain(stops);
    // The assistant's answers, as the stand-in's Slack holds them: one message per question, complete or (stopped) cut.
    const assistant = snapshot.calls.filter((c) => c.method === "chat.startStream").map((c) => c.params.channel);
    expect(new Set(assistant).size).toBe(1); // one DM, the user's with the app
    const thread = result.scenarios.find((s) => s.name === "assistant thread");
    expect(thread).toMatchObject({ sent: 3, acked: 3, expectedEffects: 9, receivedEffects: 9 });
    const modelCalls = snapshot.calls.filter((c) => c.method === "model.chat.completions");
    expect(modelCalls.map((c) => [c.model?.authorized, (c.json as { model?: string }).model])).toEqual([
      [true, LOCAL_MODEL_NAME],
      [true, LOCAL_MODEL_NAME],
      [true, LOCAL_MODEL_NAME],
    ]);
    // The run's model key: in its run folder (owner-only) and run.json names it; never printed, kept or shipped.
    const key = readFileSync(join(runDir, MODEL_KEY_FILE), "utf8").trim();
    expect(statSync(join(runDir, MODEL_KEY_FILE)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(join(runDir, "run.json"), "utf8")).modelKeyFile).toBe(join(runDir, MODEL_KEY_FILE));
    expect(pipeline.settings.values.MODEL_URL).toBe(`${standin.url}/model/v1`);
    for (const text of [JSON.stringify(snapshot), JSON.stringify(result), stderr, ...pipeline.recentOutput()])
      expect(text).not.toContain(key);
    for (const config of [pipeline.configs.ingress, pipeline.configs.consumer]) expect(readFileSync(config, "utf8")).not.toContain(key);
    // A custom step's completion, and the request its step posted, carried the execution's own workflow token.
    const byWorkflow = snapshot.calls.filter((c) => c.token?.issuedTo.startsWith("workflow "));
    expect(byWorkflow.map((c) => c.method).sort()).toEqual(["chat.postMessage", "functions.completeSuccess", "functions.completeSuccess"]);
    // Each team's other calls carried its own team's token, and none a token the stand-in did not issue (no SLACK_BOT_TOKEN).
    const api = snapshot.calls.filter((c) => c.kind === "api" && !c.method.startsWith("oauth.") && !byWorkflow.includes(c));
    expect(new Set(api.map((c) => c.token?.issuedTo))).toEqual(new Set(["T0DEMO", "T0DEMOB"]));
    for (const c of api) expect(c.token?.issuedTo).toBe(c.params.channel?.startsWith("C0DEMOB") ? "T0DEMOB" : "T0DEMO");
    const refreshes = snapshot.calls.filter((c) => c.method === "oauth.v2.access" && c.params.grant_type === "refresh_token");
    expect(refreshes).toHaveLength(1);
    // Never a token in what the stand-in keeps (or what the demo printed).
    expect(JSON.stringify(snapshot)).not.toMatch(/xox[a-z]-local|xoxe|xwfp-local/);
    expect(JSON.stringify(result)).not.toMatch(/xox[a-z]-local|xoxe|xwfp-local/);
    // The second team: its installation gone, its waiting row parked with the reason.
    const admin = { authorization: `Bearer ${readFileSync(join(runDir, "admin-token"), "utf8").trim()}` };
    const installs = (await fetch(`${pipeline.url}/admin/installations`, { headers: admin }).then((r) => r.json())) as {
      installations: { installKey: string }[];
    };
    expect(installs.installations.map((i) => i.installKey)).toEqual(["T:T0DEMO"]);
    const uninstall = result.scenarios.find((s) => s.name === "uninstall");
    const parked = (await fetch(`${pipeline.url}/admin/events/${uninstall?.ids[0]}`, { headers: admin }).then((r) => r.json())) as {
      rows: { status: string; lastError: string; attempts: number }[];
    };
    expect(parked.rows).toMatchObject([
      { status: "dead", lastError: expect.stringMatching(/^installation removed: app_uninstalled for team T0DEMOB/) },
    ]);
    const refused = snapshot.calls.filter((c) => (c.answer.body as { error?: string }).error === "channel_not_found");
    expect(refused.map((c) => c.params.channel)).toEqual([MISSING_CHANNEL]); // refused once: a fatal error is not retried
  }, 60_000);

  it("--kill: a run of its own beside it, SIGKILLed while the answer streams and started again, ends with one complete answer", async () => {
    const standin = pipeline.standin as SlackStandin;
    const since = standin.snapshot().total;
    const { code, result, stderr } = await demo(["--url", pipeline.url, "--standin", standin.url, "--kill"], 170_000);
    expect(result.scenarios.map((s) => [s.name, s.problems])).toEqual([["assistant killed", []]]);
    expect(code).toBe(0);
    // Two attempts' status lines and the clearing, the model twice (cut by the kill, then whole), one start, the
    // stop and the update that make that same message whole.
    expect(result.effects).toEqual({
      expected: 8,
      received: 8,
      byMethod: {
        "assistant.threads.setStatus": 3,
        "model.chat.completions": 2,
        "chat.startStream": 1,
        "chat.stopStream": 1,
        "chat.update": 1,
      },
      unexpected: [],
    });
    expect(stderr).toMatch(/SIGKILL to every process of that run while \S+ streamed; starting it again/);
    const calls = standin.snapshot(since).calls;
    expect(calls.filter((c) => c.method === "model.chat.completions").map((c) => c.model?.outcome)).toEqual(["aborted", "stop"]);
    const [started] = calls.filter((c) => c.method === "chat.startStream");
    const message = standin.streams.message(started?.params.channel ?? "", String((started?.answer.body as { ts?: string })?.ts));
    expect(message).toMatchObject({ streaming: false, leftStreaming: false, ended: "stopStream" });
    expect(message?.text).toMatch(
      /^You asked: "What happens to this answer if the run is killed now\?"\. .* It was asked with 0 earlier messages/,
    );
  }, 180_000);

  it("fails, and names the call, when the stand-in receives one nobody intended", async () => {
    // An app that does more than the demo expects: this scenario's mention gets a reply, but it intends none.
    const doesMore: DemoScenario = {
      name: "an app that does more",
      note: "intends nothing",
      async send(ctx) {
        const ts = ctx.nextTs();
        const posted = [await ctx.post(eventCallback(appMention({ channel: ctx.channel, ts }), ctx.eventId("Z", 0)))];
        return { posted, problems: [], intended: [], ids: [ctx.eventId("Z", 0)] };
      },
    };
    const standin = pipeline.standin as SlackStandin;
    const result = await runDemo({
      url: pipeline.url,
      secret: SECRET,
      adminToken: readFileSync(join(runDir, "admin-token"), "utf8").trim(),
      standinUrl: standin.url,
      mentions: 1,
      messages: 0,
      duplicates: 2,
      // The assistant's stop is noticed at the answer's next write, a heartbeat at most 30 s away when nothing is
      // being appended: a shorter wait fails that scenario on a loaded machine, which is not what this test is about.
      timeoutMs: 45_000,
      extraScenarios: [doesMore],
    });
    expect(result.ok).toBe(false);
    expect(result.scenarios.filter((s) => !s.ok)).toEqual([]); // every intended call came…
    expect(result.effects.unexpected).toHaveLength(1); // …and one more, which fails the demo by itself
    expect(result.effects.unexpected[0]).toMatch(
      /^nobody intended: #\d+ chat\.postMessage channel=C0DEMO thread_ts=\S+ text="Hi <@U0DEMOUSER>, ackbox heard you\." \[token #\d+ of T0DEMO\] → ok/,
    );
  }, 180_000);

  it("against an app that answers none of the shipped apps' traffic: skips their scenarios, says why, and still passes", async () => {
    const result = await runDemo({
      url: pipeline.url,
      secret: SECRET,
      adminToken: readFileSync(join(runDir, "admin-token"), "utf8").trim(),
      standinUrl: (pipeline.standin as SlackStandin).url,
      timeoutMs: 20_000,
      app: standup,
    });
    expect(result.scenarios.map((s) => s.name)).toEqual(["OAuth install", "bot message", "forged request"]);
    expect(result.ok).toBe(true);
    expect(result.skipped).toContainEqual({
      name: "app mentions",
      reason: "the app does not reply in the thread of an app_mention (chat.postMessage)",
    });
    expect(result.skipped.map((s) => s.name)).toEqual(
      expect.arrayContaining(["outage, then backfill", "rotation under load", "uninstall"]),
    );
  }, 60_000);

  it("fails, and says which effects are missing, when they do not arrive", async () => {
    // A stand-in the pipeline does not send to: nothing this demo causes can arrive there.
    const elsewhere = await startSlackStandin();
    try {
      const { code, result } = await demo([
        "--url",
        pipeline.url,
        "--standin",
        elsewhere.url,
        "--mentions",
        "1",
        "--messages",
        "0",
        "--timeout",
        "2",
      ]);
      expect(code).toBe(1);
      expect(result.ok).toBe(false);
      const mentions = result.scenarios.find((s) => s.name === "app mentions");
      expect(mentions?.ok).toBe(false);
      expect(mentions?.problems.join()).toMatch(/reply in thread \S+ \(with T0DEMO's token\): 0 call\(s\) at the stand-in, want 1/);
      expect(result.scenarios.find((s) => s.name === "bot message")?.ok).toBe(true); // "nothing" is still nothing
    } finally {
      await elsewhere.close();
    }
  }, 60_000);
});

describe("which scenarios the running app gets: those whose traffic it answers as they intend", () => {
  const scenarios = builtinScenarios({ mentions: 1, messages: 1, duplicates: 2 });
  const skips = (app: Parameters<typeof skipReason>[0]) =>
    Object.fromEntries(scenarios.flatMap((s) => (s.needs ? [[s.name, skipReason(app, s.needs)]] : [])).filter(([, r]) => r !== undefined));

  it("the starter app (the /ask example before the reference app) gets every one", () => {
    expect(skips(referenceApp(exampleApp(createApp())))).toEqual({});
  });

  it("the reference app alone: the example's three are skipped, each with why", () => {
    expect(skips(referenceApp(createApp()))).toEqual({
      "example /ask chain": "the app does not answer /ask with the example's chain (ask-placeholder)",
      "example home tab": "the app does not publish the Home tab when it is opened (views.publish)",
      "example options": "the app does not answer the example's topic menu inline",
    });
  });

  it("a team's own app (/standup): every one is skipped but the forged request (any app) and the bot message (it ignores bots too)", () => {
    const skipped = skips(standup);
    expect(scenarios.filter((s) => !(s.name in skipped)).map((s) => s.name)).toEqual(["bot message", "forged request"]);
  });

  it("the assistant's: the reference app gets both; an app without an assistant skips them, each with why", () => {
    const assistant = assistantScenarios({ url: "http://127.0.0.1:9", standinUrl: "http://127.0.0.1:9", team: DEMO_TEAM, timeoutMs: 1 });
    expect(assistant.map((s) => [s.name, skipReason(referenceApp(createApp()), s.needs ?? [])])).toEqual([
      ["assistant thread", undefined],
      ["assistant stop", undefined],
    ]);
    expect(assistant.map((s) => skipReason(standup, s.needs ?? []))).toEqual([
      "the app does not offer suggested prompts when an assistant thread starts (assistant.threads.setSuggestedPrompts)",
      "the app does not answer a question in an assistant thread with the model (thread.answer())",
    ]);
  });

  it("an app that records an effect for a bot's message is not held to the bot message's nothing", () => {
    const loud = createApp()
      .uses("reactions.add")
      .event("message", ({ payload }) => [
        slack("reactions.add", { channel: payload.channel ?? "", timestamp: payload.ts ?? "", name: "x" }),
      ]);
    expect(skips(loud)["bot message"]).toBe("the app does not ignore a bot's message (it records an effect for it)");
  });
});

describe("an app's own scenarios: app/demo.ts", () => {
  const dirWith = (source?: string) => {
    const dir = mkdtempSync(join(tmpdir(), "ackbox-app-demo-"));
    if (source !== undefined) writeFileSync(join(dir, "demo.ts"), source);
    return dir;
  };

  it("are the scenarios it exports, none without the file, and a wrong export is refused with what it must be", async () => {
    const dirs = [
      dirWith(),
      dirWith(
        `export const scenarios = [{ name: "standup", note: "→ the standup posted", async send() { return { posted: [], problems: [], intended: [], ids: [] }; } }];`,
      ),
      dirWith(`export const scenarios = [{ name: "no send" }];`),
    ];
    try {
      expect(await appScenarios(dirs[0] ?? "")).toEqual([]);
      expect((await appScenarios(dirs[1] ?? "")).map((s) => s.name)).toEqual(["standup"]);
      await expect(appScenarios(dirs[2] ?? "")).rejects.toThrow("demo.ts must export scenarios: an array of DemoScenario");
    } finally {
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("effect latency: from the send of the request that caused it", () => {
  const at = (ms: number) => ({ at: new Date(ms).toISOString() });
  const intended = (n: number) => Array.from({ length: n }, (_, i) => ({ label: String(i), count: 1, matches: () => false }));
  const posted = (...sentAt: number[]) => sentAt.map((t) => ({ sentAt: t, status: 200, body: "", ms: 0, headers: new Headers() }));

  it("is never negative: an effect that arrives before its scenario's last ack counts from its own request's send", () => {
    // Two requests sent at 1000 and 1100; the first's effect arrives at 1050, before the second is even sent.
    expect(effectLatencies([{ posted: posted(1000, 1100), intended: intended(2) }], [at(1050), at(1180)])).toEqual([50, 80]);
  });

  it("counts each scenario's calls from its own sends, and leaves out intended calls that never came", () => {
    const runs = [
      { posted: posted(1000), intended: intended(1) },
      { posted: posted(5000), intended: intended(2) },
    ];
    expect(effectLatencies(runs, [at(1020), undefined, at(5007)])).toEqual([7, 20]);
  });
});

describe("matchCalls: every call to exactly one intended call", () => {
  const call = (seq: number, method: string, params: Record<string, string>): StandinCall => ({
    seq,
    at: new Date(0).toISOString(),
    kind: "api",
    method,
    path: `/api/${method}`,
    params,
    answer: { status: 200, body: { ok: true } },
  });
  const reply = (ts: string) => ({
    label: `reply in ${ts}`,
    count: 1,
    matches: (c: StandinCall) => c.method === "chat.postMessage" && c.params.thread_ts === ts,
  });

  it("matches each call once, and counts a second call for one intention as an extra", () => {
    const match = matchCalls(
      [reply("1.1"), reply("1.2")],
      [
        call(1, "chat.postMessage", { thread_ts: "1.2" }),
        call(2, "chat.postMessage", { thread_ts: "1.1" }),
        call(3, "chat.postMessage", { thread_ts: "1.1" }),
      ],
    );
    expect(match.got).toEqual([2, 1]);
    expect(match.unexpected).toEqual([]);
    expect(match.first.map((c) => c?.seq)).toEqual([2, 1]);
  });

  it("takes any number of calls for an uncounted intention (upTo), counts none of them, and reports how many came", () => {
    const appends = {
      label: "appends to 9.1",
      count: 0,
      upTo: 2,
      matches: (c: StandinCall) => c.method === "chat.appendStream" && c.params.ts === "9.1",
    };
    const match = matchCalls(
      [reply("1.1"), appends],
      [
        call(1, "chat.appendStream", { ts: "9.1" }),
        call(2, "chat.postMessage", { thread_ts: "1.1" }),
        call(3, "chat.appendStream", { ts: "9.1" }),
        call(4, "chat.appendStream", { ts: "9.1" }),
      ],
    );
    expect(match.got).toEqual([1, 3]); // 3 > upTo: the demo names it
    expect(match.uncounted.map((c) => c.seq)).toEqual([1, 3, 4]);
    expect(match.first.map((c) => c?.seq)).toEqual([2, undefined]);
    expect(match.unexpected).toEqual([]);
  });

  it("names what nobody intended, and what hit a must-never-happen", () => {
    const never = { label: "nothing for the bot's 1.9", count: 0, matches: (c: StandinCall) => c.params.timestamp === "1.9" };
    const match = matchCalls(
      [reply("1.1"), never],
      [
        call(1, "reactions.add", { channel: "C1", timestamp: "1.1", name: "eyes" }),
        call(2, "reactions.add", { channel: "C1", timestamp: "1.9", name: "eyes" }),
      ],
    );
    expect(match.got).toEqual([0, 0]);
    expect(match.unexpected).toEqual([
      "nobody intended: #1 reactions.add :eyes: on channel=C1 ts=1.1 → ok",
      "nothing for the bot's 1.9, yet: #2 reactions.add :eyes: on channel=C1 ts=1.9 → ok",
    ]);
  });
});

describe("the stand-in's conversations.history: the window, newest first, paged as Slack pages it", () => {
  const messages = ["100.000001", "100.000002", "100.000003", "100.000004", "100.000005"].map((ts) => ({ type: "message", ts }));
  const tssOf = (answer: { body: unknown }) => (answer.body as { messages: { ts: string }[] }).messages.map((m) => m.ts);
  const cursorOf = (answer: { body: unknown }) =>
    (answer.body as { response_metadata: { next_cursor: string } }).response_metadata.next_cursor;

  it("answers the window's messages newest first, its bounds only when inclusive", () => {
    const window = { channel: "C1", oldest: "100.000002", latest: "100.000004" };
    expect(tssOf(conversationsHistory(messages, window, 0))).toEqual(["100.000003"]);
    expect(tssOf(conversationsHistory(messages, { ...window, inclusive: "true" }, 0))).toEqual(["100.000004", "100.000003", "100.000002"]);
    // No latest: up to now, 100.000004 s here (a message after now is not history yet).
    expect(tssOf(conversationsHistory(messages, { channel: "C1", oldest: "100.000002" }, 100_000.004))).toEqual(["100.000003"]);
  });

  it("pages with has_more and next_cursor until the last page, whose cursor is empty; a cursor it did not give is refused", () => {
    const ask = { channel: "C1", oldest: "100.000001", latest: "100.000005", inclusive: "true", limit: "2" };
    const pages: string[][] = [];
    let cursor = "";
    for (let i = 0; i < 5; i++) {
      const answer = conversationsHistory(messages, cursor ? { ...ask, cursor } : ask, 0);
      pages.push(tssOf(answer));
      expect((answer.body as { has_more: boolean }).has_more).toBe(cursorOf(answer) !== "");
      cursor = cursorOf(answer);
      if (cursor === "") break;
    }
    expect(pages).toEqual([["100.000005", "100.000004"], ["100.000003", "100.000002"], ["100.000001"]]);
    expect(conversationsHistory(messages, { ...ask, cursor: "bm9wZQ==" }, 0).body).toEqual({ ok: false, error: "invalid_cursor" });
  });
});
