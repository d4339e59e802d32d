/**
 * `npm start` after its launcher was SIGKILLed: no handler of the launcher ran, so its wrangler — detached, in a
 * process group of its own (cli/local/processes.ts, spawnGroup) — lives on, holding the port with no cron and no
 * stand-in. The next `npm start` in the same folder finds the dead launcher and the live group in run.json, stops
 * that group (SIGTERM, then SIGKILL after a bounded wait), says so in one line, and starts: it must not refuse
 * the start because the leftover holds the port.
 *
 * A free loopback port and a folder of its own, the state copied already migrated; every wait bounded.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../cli/local/pipeline.ts";
import { freePort, processesInGroup, processesMentioning, signalGroup, waitGroupGone } from "../../cli/local/processes.ts";
import { isAlive } from "../../cli/local/run-info.ts";
import { copyMigratedState } from "../support/ops-local.mts";
import { REFERENCE_APP } from "./support/apps.ts";
import { startFakeSlack } from "./support/fake-slack-server.ts";

/** A bound against a hang, not a claim about speed (as test/node/local-run.test.ts's: a loaded two-core machine). */
const READY_WITHIN_MS = 150_000;

interface Started {
  readonly npm: ChildProcess;
  readonly output: () => string;
  readonly exited: Promise<number | null>;
}

describe("npm start after its launcher was killed outright", () => {
  it(
    "stops the wrangler the killed launcher left holding the port, says so, and starts: nothing of the old group is left",
    async () => {
      const fake = await startFakeSlack();
      const work = mkdtempSync(join(tmpdir(), "ackbox-npm-leftover-"));
      await copyMigratedState(join(work, "state"));
      const port = await freePort();
      const started: Started[] = [];
      /** Every wrangler group a run published (run.json's pgid): workerd's command line does not name the folder. */
      const wranglerGroups: number[] = [];
      /** npm start in its own process group (npm, its sh and the launcher), as a terminal's foreground job is. */
      const start = async (): Promise<Started> => {
        const npm = spawn("npm", ["start", "--", "--dir", join(work, "run"), "--persist-to", join(work, "state")], {
          cwd: PROJECT_ROOT,
          detached: true,
          stdio: ["ignore", "pipe", "pipe"],
          env: {
            ...process.env,
            PORT: String(port),
            SLACK_API_URL: fake.apiUrl,
            SLACK_SIGNING_SECRET: "leftover-test-secret-5a1e",
            NO_COLOR: "1",
            ACKBOX_APP: REFERENCE_APP,
          },
        });
        let output = "";
        const collect = (chunk: Buffer) => {
          output += chunk.toString();
        };
        npm.stdout?.on("data", collect);
        npm.stderr?.on("data", collect);
        const run = { npm, output: () => output, exited: new Promise<number | null>((resolve) => npm.once("exit", resolve)) };
        started.push(run);
        const deadline = Date.now() + READY_WITHIN_MS;
        while (!output.includes("local run ready")) {
          if (Date.now() > deadline || npm.exitCode !== null) throw new Error(`npm start did not get ready:\n${output}`);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        return run;
      };
      try {
        const first = await start();
        const left = JSON.parse(readFileSync(join(work, "run", "run.json"), "utf8")) as { pid: number; pgid: number };
        wranglerGroups.push(left.pgid);
        const firstGroup = first.npm.pid as number;
        expect(left.pgid).not.toBe(firstGroup);

        // SIGKILL to the launcher's group only (npm, sh, the launcher): wrangler's group is not signalled.
        signalGroup(firstGroup, "SIGKILL");
        expect(await waitGroupGone(firstGroup, 10_000)).toBe(true);
        expect(isAlive(left.pid)).toBe(false);
        // The leftover the next start meets: wrangler and workerd alive, the port theirs.
        expect(processesInGroup(left.pgid).length).toBeGreaterThan(0);
        expect((await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(10_000) })).status).toBe(200);

        const second = await start();
        // One line says what was stopped (SIGTERM normally; SIGKILL had it not stopped within the bounded wait).
        expect(second.output()).toMatch(
          new RegExp(
            `stopped wrangler \\(process group ${left.pgid}, SIG(TERM|KILL)\\) left running by a previous run whose launcher \\(pid ${left.pid}\\) is gone`,
          ),
        );
        expect(second.output()).not.toContain("already in use");
        expect(processesInGroup(left.pgid)).toEqual([]);
        const now = JSON.parse(readFileSync(join(work, "run", "run.json"), "utf8")) as { pid: number; pgid: number };
        wranglerGroups.push(now.pgid);
        expect(now.pgid).not.toBe(left.pgid);
        expect((await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(10_000) })).status).toBe(200);

        // Ctrl-C: the second run stops cleanly, its own group and wrangler's.
        signalGroup(second.npm.pid as number, "SIGINT");
        const code = await Promise.race([second.exited, new Promise<"timeout">((resolve) => setTimeout(() => resolve("timeout"), 20_000))]);
        expect(code).not.toBe("timeout");
        expect(await waitGroupGone(now.pgid, 5000)).toBe(true);
      } finally {
        // Only if the test failed: nothing of these runs may outlive it.
        for (const run of started) if (run.npm.pid !== undefined && run.npm.exitCode === null) signalGroup(run.npm.pid, "SIGKILL");
        for (const pgid of wranglerGroups) if (processesInGroup(pgid).length > 0) signalGroup(pgid, "SIGKILL");
        for (const pid of processesMentioning(work)) {
          try {
            process.kill(pid, "SIGKILL");
          } catch {}
        }
        await fake.close();
        rmSync(work, { recursive: true, force: true });
      }
    },
    2 * READY_WITHIN_MS + 60_000,
  );
});
