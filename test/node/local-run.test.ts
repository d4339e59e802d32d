/**
 * `npm start`, for real: the npm script, run the way the acceptance tests and
 * a person run it (SLACK_API_URL=<fake> SLACK_SIGNING_SECRET=… npm start),
 * on a free loopback port with its own state. A signed event goes in, its
 * effect must arrive at the fake Slack, and after a Ctrl-C nothing of the run
 * may be left running. It runs with two shards (`--shards 2`), as every test
 * run does: a team on each shard, each delivered from its own local D1.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { queryEveryShard } from "../../cli/local/d1.ts";
import { PROJECT_ROOT } from "../../cli/local/pipeline.ts";
import { freePort, processesInGroup, processesMentioning, signalGroup, waitGroupGone } from "../../cli/local/processes.ts";
import { teamsOnEveryShard } from "../../cli/local/shard-teams.ts";
import { appMention, eventCallback, postSigned, slackSignature } from "../../cli/local/slack-payloads.ts";
import { copyMigratedState } from "../support/ops-local.mts";
import { REFERENCE_APP } from "./support/apps.ts";
import { type FakeSlackServer, startFakeSlack } from "./support/fake-slack-server.ts";

const SECRET = "local-run-test-secret-8f2c";

/** npm start's environment in these cases: its port, the fake Slack, the shipped reference app. */
function npmStartEnv(port: number, fake: FakeSlackServer): NodeJS.ProcessEnv {
  return {
    ...process.env,
    PORT: String(port),
    SLACK_API_URL: fake.apiUrl,
    SLACK_SIGNING_SECRET: SECRET,
    NO_COLOR: "1",
    ACKBOX_APP: REFERENCE_APP,
  };
}
/**
 * A bound against a hang, not a claim about speed: a fresh two-shard migration and both Workers' start,
 * with other test files starting theirs beside it on a loaded two-core machine, can take over a minute.
 */
const READY_WITHIN_MS = 150_000;

describe("npm start", () => {
  let fake: FakeSlackServer;
  let work: string;
  let npm: ChildProcess;
  let output = "";
  let port: number;
  let exit: Promise<number | null>;

  beforeAll(async () => {
    fake = await startFakeSlack();
    work = mkdtempSync(join(tmpdir(), "ackbox-npm-start-"));
    port = await freePort();
    // Its own process group, like a terminal's foreground job: Ctrl-C reaches npm, sh and the launcher at once.
    npm = spawn("npm", ["start", "--", "--dir", join(work, "run"), "--persist-to", join(work, "state"), "--shards", "2"], {
      cwd: PROJECT_ROOT,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: npmStartEnv(port, fake),
    });
    exit = new Promise((resolve) => npm.once("exit", (code) => resolve(code)));
    npm.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    npm.stderr?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const deadline = Date.now() + READY_WITHIN_MS;
    while (!output.includes("local run ready")) {
      if (Date.now() > deadline || npm.exitCode !== null) throw new Error(`npm start did not get ready:\n${output}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }, READY_WITHIN_MS + 10_000);

  afterAll(async () => {
    if (npm?.pid !== undefined && npm.exitCode === null) signalGroup(npm.pid, "SIGKILL");
    await fake?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("prints where to point Slack and the settings, never a secret's value", () => {
    expect(output).toContain(`Slack Request URL  http://127.0.0.1:${port}/slack/events`);
    expect(output).toMatch(/SLACK_API_URL\s+http:\/\/127\.0\.0\.1:\d+\/api\/\s+← environment/);
    expect(output).toMatch(/SLACK_SIGNING_SECRET\s+\(set, hidden\)\s+← environment/);
    expect(output).toMatch(/SLACK_BOT_TOKEN\s+\(set, hidden\)\s+← local default/);
    expect(output).not.toContain(SECRET);
    expect(output).not.toContain("stand-in http"); // SLACK_API_URL is set: no stand-in
  });

  it("with --shards 2: migrates both shards' local D1, binds both in both Workers, and delivers a team of each shard from its own", async () => {
    expect(output).toMatch(/local D1\s+.* · 2 shards \(DB ackbox, DB_1 ackbox-shard-1\) · applied 0001_/);
    expect(output).toMatch(/SHARD_COUNT\s+2\s+← environment/);
    const teams = teamsOnEveryShard(2, "T0LOCAL");
    const stamp = Math.floor(Date.now() / 1000);
    const sent = await Promise.all(
      teams.map(async (team, shard) => {
        const ts = `${stamp}.00010${shard}`;
        const eventId = `Ev0SHARD${shard}${Date.now().toString(36).toUpperCase()}`;
        const request = eventCallback(appMention({ channel: `C0SHARD${shard}`, ts, team: team.teamId }), eventId, team);
        const ack = await postSigned(`http://127.0.0.1:${port}`, SECRET, request);
        expect(ack.status).toBe(200);
        return { team: team.teamId, ts, eventId, shard };
      }),
    );
    await fake.waitFor(
      (calls) => sent.every((s) => calls.some((c) => c.method === "chat.postMessage" && c.params.thread_ts === s.ts)),
      20_000,
      "a chat.postMessage for the team of each shard",
    );
    // Each event's receipt and row are on its team's shard, and only there.
    const receipts = await queryEveryShard<{ id: string; n: number }>({
      config: join(work, "run", "ingress.wrangler.jsonc"),
      persistTo: join(work, "state"),
      shards: [
        { index: 0, databaseName: "ackbox" },
        { index: 1, databaseName: "ackbox-shard-1" },
      ],
      sql: `SELECT r.id, (SELECT COUNT(*) FROM outbox o WHERE o.receipt_id = r.id AND o.status = 'done') AS n FROM receipts r WHERE r.id IN (${sent.map((s) => `'${s.eventId}'`).join(", ")})`,
    });
    expect(receipts.sort((a, b) => a.shard - b.shard)).toEqual(sent.map((s) => ({ id: s.eventId, n: 1, shard: s.shard })));
  }, 60_000);

  it("turns the operator API on with a generated token, says where it is and how the CLI gets it, and never prints it", () => {
    const tokenFile = join(work, "run", "admin-token");
    const token = readFileSync(tokenFile, "utf8").trim();
    expect(token).toMatch(/^[0-9a-f]{64}$/);
    expect(output).toContain(
      `operator API       http://127.0.0.1:${port}/admin (dashboard) · npx ackbox reads the token from ${tokenFile} by itself`,
    );
    expect(output).toMatch(/ADMIN_TOKEN\s+\(set, hidden\)\s+← local default/);
    expect(output).not.toContain(token);
    // The line to copy into the second terminal names this run's port and folder.
    expect(output).toContain(`next               PORT=${port} ACKBOX_LOCAL_DIR=${join(work, "run")} npm run demo`);
  });

  it("a second npm start refuses before it touches the database: same folder, or same port", async () => {
    const second = (args: string[], secondPort: number) =>
      new Promise<{ code: number | null; text: string }>((resolve) => {
        const child = spawn("npm", ["start", "--", ...args], {
          cwd: PROJECT_ROOT,
          stdio: ["ignore", "pipe", "pipe"],
          env: npmStartEnv(secondPort, fake),
        });
        let text = "";
        child.stdout?.on("data", (chunk: Buffer) => {
          text += chunk.toString();
        });
        child.stderr?.on("data", (chunk: Buffer) => {
          text += chunk.toString();
        });
        child.once("exit", (code) => resolve({ code, text }));
      });
    const sameFolder = await second(["--dir", join(work, "run"), "--persist-to", join(work, "state")], await freePort());
    expect(sameFolder.code).toBe(1);
    expect(sameFolder.text).toMatch(/npm start: another local run \(pid \d+, http:\/\/127\.0\.0\.1:\d+\) is using /);
    expect(sameFolder.text).not.toContain("applying migrations");
    const samePort = await second(["--dir", join(work, "run2"), "--persist-to", join(work, "state2")], port);
    expect(samePort.code).toBe(1);
    expect(samePort.text).toContain(`npm start: port ${port} on 127.0.0.1 is already in use`);
    expect(samePort.text).not.toContain("applying migrations");
  }, 30_000);

  it("acks a signed event and its effect reaches Slack, with readable output along the way", async () => {
    const ts = `${Math.floor(Date.now() / 1000)}.000042`;
    const eventId = `Ev0NPMSTART${Date.now().toString(36).toUpperCase()}`;
    const ack = await postSigned(`http://127.0.0.1:${port}`, SECRET, eventCallback(appMention({ channel: "C0LOCAL", ts }), eventId));
    expect(ack.status).toBe(200);
    const ackedAt = Date.now();

    await fake.waitFor(
      (calls) => calls.some((c) => c.method === "chat.postMessage" && c.params.thread_ts === ts),
      20_000,
      "chat.postMessage",
    );
    const call = fake.calls.find((c) => c.params.thread_ts === ts);
    expect(call?.params.channel).toBe("C0LOCAL");
    expect(call?.authorization).toBe("Bearer xoxb-ackbox-local");
    console.info(`npm start: ack in ${ack.ms} ms, ack → effect at the fake Slack in ${(call?.at ?? 0) - ackedAt} ms`);

    const deadline = Date.now() + 10_000;
    while (
      !(output.includes(`← accepted  event ${eventId}`) && /✓ delivered #\d+ chat\.postMessage/.test(output)) &&
      Date.now() < deadline
    ) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(output).toContain(`← accepted  event ${eventId}`);
    expect(output).toMatch(/✓ delivered #\d+ chat\.postMessage \(attempt 1/);
    expect(output).not.toMatch(/"level":"info","msg":"delivered"/); // summarised, not raw JSON
  });

  it("on the wire: takes header names in any case, and refuses a dot-dot path (raw bytes through a socket)", async () => {
    // In a workerd test a Request's Headers are lowercased and its URL normalised before the
    // handler sees them; here the bytes go out exactly as written, through the real local ingress.
    const ts = `${Math.floor(Date.now() / 1000)}.000043`;
    const eventId = `Ev0RAWCASE${Date.now().toString(36).toUpperCase()}`;
    const { body } = eventCallback(appMention({ channel: "C0RAW", ts }), eventId);
    const timestamp = Math.floor(Date.now() / 1000);
    const signature = slackSignature(SECRET, timestamp, body);
    const shouting = await rawHttp(port, [
      "POST /slack/events HTTP/1.1",
      `HOST: 127.0.0.1:${port}`,
      "CONTENT-TYPE: application/json",
      `X-SLACK-REQUEST-TIMESTAMP: ${timestamp}`,
      `x-SlAcK-sIgNaTuRe: ${signature}`,
      `CONTENT-LENGTH: ${Buffer.byteLength(body)}`,
      "CONNECTION: close",
      "",
      body,
    ]);
    expect(shouting.status).toBe(200);
    await fake.waitFor((calls) => calls.some((c) => c.params.thread_ts === ts), 20_000, "chat.postMessage");

    const dotDot = await rawHttp(port, [
      "POST /slack/../slack/events/../../etc/passwd HTTP/1.1",
      `Host: 127.0.0.1:${port}`,
      "Content-Type: application/json",
      `X-Slack-Request-Timestamp: ${timestamp}`,
      `X-Slack-Signature: ${signature}`,
      `Content-Length: ${Buffer.byteLength(body)}`,
      "Connection: close",
      "",
      body,
    ]);
    expect(dotDot.status).toBe(404);
  });

  it("stops on Ctrl-C and leaves no process behind", async () => {
    const run = JSON.parse(readFileSync(join(work, "run", "run.json"), "utf8")) as { pgid: number };
    expect(processesInGroup(run.pgid).length).toBeGreaterThan(0); // wrangler, workerd, esbuild: alive until now
    const npmGroup = npm.pid as number;

    signalGroup(npmGroup, "SIGINT");
    const code = await Promise.race([exit, new Promise<"timeout">((resolve) => setTimeout(() => resolve("timeout"), 20_000))]);
    expect(code).not.toBe("timeout");
    expect(await waitGroupGone(run.pgid, 5000)).toBe(true);
    expect(await waitGroupGone(npmGroup, 5000)).toBe(true);
    expect(processesInGroup(run.pgid)).toEqual([]);
    expect(processesMentioning(work)).toEqual([]);
    expect(output).toContain("stopped; no process of the run is left");
  }, 30_000);
});

describe("npm start, when only npm is killed", () => {
  it(
    "notices and stops everything (a supervisor's or a test's child.kill() reaches npm alone)",
    async () => {
      const fake = await startFakeSlack();
      const work = mkdtempSync(join(tmpdir(), "ackbox-npm-kill-"));
      await copyMigratedState(join(work, "state")); // the first npm start above migrates a fresh state; this one needs none
      const port = await freePort();
      const npm = spawn("npm", ["start", "--", "--dir", join(work, "run"), "--persist-to", join(work, "state")], {
        cwd: PROJECT_ROOT,
        stdio: ["ignore", "pipe", "pipe"],
        env: npmStartEnv(port, fake),
      });
      let output = "";
      npm.stdout?.on("data", (chunk: Buffer) => {
        output += chunk.toString();
      });
      try {
        const deadline = Date.now() + READY_WITHIN_MS;
        while (!output.includes("local run ready")) {
          if (Date.now() > deadline || npm.exitCode !== null) throw new Error(`npm start did not get ready:\n${output}`);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        const run = JSON.parse(readFileSync(join(work, "run", "run.json"), "utf8")) as { pid: number; pgid: number };
        npm.kill("SIGKILL"); // npm only: its sh and the launcher are not signalled
        expect(await waitGroupGone(run.pgid, 15_000)).toBe(true);
        const launcherGone = Date.now() + 5000;
        while (processesMentioning(work).length > 0 && Date.now() < launcherGone) await new Promise((resolve) => setTimeout(resolve, 100));
        expect(processesMentioning(work)).toEqual([]);
        expect(output).toMatch(/npm \(pid \d+\) exited: stopping/);
      } finally {
        for (const pid of processesMentioning(work)) {
          try {
            process.kill(pid, "SIGKILL"); // only if the test failed: nothing of this run may outlive it
          } catch {}
        }
        await fake.close();
        rmSync(work, { recursive: true, force: true });
      }
    },
    READY_WITHIN_MS + 30_000,
  );
});

/** Sends the lines as one raw HTTP/1.1 request (CRLF-joined, nothing normalised) and reads the status line of the answer. */
function rawHttp(port: number, lines: readonly string[]): Promise<{ status: number; head: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let received = "";
    socket.setTimeout(20_000, () => socket.destroy(new Error("no answer within 20 s")));
    socket.on("data", (chunk: Buffer) => {
      received += chunk.toString("latin1");
    });
    socket.on("error", reject);
    socket.on("close", () => {
      const head = received.split("\r\n")[0] ?? "";
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? Number.NaN);
      resolve({ status, head });
    });
    socket.end(lines.join("\r\n"));
  });
}
