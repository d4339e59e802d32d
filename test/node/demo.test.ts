/**
 * `npm run demo` at small scale against a local run that uses the stand-in:
 * every scenario must come out as the pipeline promises, and the demo must
 * say so (exit 0, --json summary). It must also say so when it is not true.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DemoResult } from "../../scripts/local/demo.ts";
import { type Pipeline, PROJECT_ROOT, startPipeline } from "../../scripts/local/pipeline.ts";
import { processesInGroup } from "../../scripts/local/processes.ts";
import { type SlackStandin, startSlackStandin } from "../../scripts/local/slack-standin.ts";

const run = promisify(execFile);
const SECRET = "demo-test-secret-41d0";

async function demo(args: string[]): Promise<{ code: number; result: DemoResult; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [join(PROJECT_ROOT, "scripts/demo.ts"), "--json", ...args], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, SLACK_SIGNING_SECRET: SECRET },
      timeout: 60_000,
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
    pipeline = await startPipeline({
      port: 0,
      env: { SLACK_SIGNING_SECRET: SECRET },
      devVarsFile: null,
      dir: join(work, "run"),
      persistTo: join(work, "state"),
      cronIntervalMs: 1000, // the sweep backs the queue up, as in production
    });
  }, 90_000);

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
    // 2 mentions + 2 messages + 1 bot + 4 duplicates + 2 (event and its retry) + 1 command + 1 click
    // + the example app's /ask, Home tab and menu + 1 forged
    expect(result.sent).toBe(17);
    expect(result.acked).toBe(16);
    expect(result.rejected).toBe(1);
    expect(result.deduplicated).toBe(4); // 3 of the 4 concurrent deliveries, and the retry
    expect(result.ignored).toBe(1);
    // The example's chain is 3 effects (placeholder, answer service, update); its Home tab 1; its menu none.
    const byMethod = {
      "chat.postMessage": 5,
      "reactions.add": 2,
      response_url: 1,
      "chat.update": 2,
      "example.answer": 1,
      "views.publish": 1,
    };
    expect(result.effects).toEqual({ expected: 12, received: 12, byMethod });
    expect(stderr).toMatch(/effects received by the stand-in: 12\/12/);

    // The stand-in's own record agrees with the demo's summary.
    const counts = standin.snapshot().counts;
    expect(counts).toEqual(byMethod);
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
      expect(mentions?.problems.join()).toMatch(/0 effect\(s\), want 1/);
      expect(result.scenarios.find((s) => s.name === "bot message")?.ok).toBe(true); // "nothing" is still nothing
    } finally {
      await elsewhere.close();
    }
  }, 60_000);
});
