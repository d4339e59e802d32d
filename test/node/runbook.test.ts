/**
 * The first hour, as the docs write it: a local run (the launcher npm start
 * uses, on a free port with its own folder and state), then `npm run demo`
 * exactly as docs/running-locally.md writes it, then every command in
 * docs/operating.md's `sh` blocks, in order, as written, against that run
 * and the demo's data: no --url, no ACKBOX_ADMIN_TOKEN (the CLI finds the
 * local run's token by itself), only PORT and ACKBOX_LOCAL_DIR, as every
 * local command honours them.
 *
 * The one thing changed in the commands: the example ids, which came from one
 * demo run, are replaced by the ones this run's demo printed (and the curl
 * line gets this run's folder and port). The test checks first that the page
 * really uses those example ids, so the replacement cannot silently be empty.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Pipeline, startPipeline } from "../../cli/local/pipeline.ts";
import { processesInGroup } from "../../cli/local/processes.ts";
import { copyMigratedState, offlineEnv, ROOT, run } from "../support/ops-local.mts";
import { REFERENCE_APP } from "./support/apps.ts";

const SECRET = "runbook-test-secret-5e07";
const PATH = `${join(ROOT, "node_modules/.bin")}:${process.env.PATH ?? ""}`;
const read = (path: string) => readFileSync(join(ROOT, path), "utf8");

/** The ids docs/operating.md's examples use (from one demo run; its intro names them). */
const EXAMPLE = {
  failedEvent: "Ev0DEMOMX3T29JJM6F0",
  failedRow: "11",
  doneEvent: "Ev0DEMOMX3T29JJM6M0",
  commandOperation: "command:T0DEMO:MX3T29JJM6.1.trigger",
  commandRow: "9",
  runId: "MX3T29JJM6",
} as const;

/** Every line of every ```sh block, in order, blank lines left out. */
function shLines(markdown: string): string[] {
  return [...markdown.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) => (m[1] ?? "").split("\n")).filter((l) => l.trim() !== "");
}

describe("the first hour: docs/running-locally.md, then docs/operating.md, as written", { timeout: 300_000 }, () => {
  let pipeline: Pipeline;
  let work: string;
  let env: NodeJS.ProcessEnv;
  let demoOutput = "";
  const real: Record<keyof typeof EXAMPLE, string> = { ...EXAMPLE };

  // A command's bound: `npm run demo` is the longest (its assistant scenarios stream whole answers, one of them
  // stopped by the user), about 40 s on a quiet machine and past 90 s on a loaded one.
  const shell = (command: string) => run("bash", ["-o", "pipefail", "-c", command], { env, timeoutMs: 180_000 });

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "ackbox-runbook-"));
    await copyMigratedState(join(work, "state")); // migrated once for the whole run (test/support/d1-template.mts)
    pipeline = await startPipeline({
      app: REFERENCE_APP,
      port: 0,
      env: { SLACK_SIGNING_SECRET: SECRET }, // no ADMIN_TOKEN: the run generates its own
      devVarsFile: null,
      dir: join(work, "run"),
      persistTo: join(work, "state"),
      cronIntervalMs: 5000,
    });
    // What a second terminal holds after `PORT=… ACKBOX_APP=… npm start`: the port, the run folder and the app, nothing else.
    env = offlineEnv({
      PATH,
      PORT: String(pipeline.port),
      ACKBOX_LOCAL_DIR: pipeline.dir,
      ACKBOX_APP: REFERENCE_APP,
      SLACK_SIGNING_SECRET: SECRET,
    });
  }, 150_000); // past the pipeline's own readiness bound (90 s), so its error, naming what did not start, is the one seen

  afterAll(async () => {
    await pipeline?.stop();
    if (pipeline) expect(processesInGroup(pipeline.pgid)).toEqual([]);
    if (work) rmSync(work, { recursive: true, force: true });
  }, 30_000);

  it("npm run demo, as running-locally.md writes it: exit 0, the page's table, and the ids it sent", async () => {
    const page = read("docs/running-locally.md");
    const command = shLines(page)
      .map((line) => line.replace(/#.*$/, "").trim())
      .find((line) => line.startsWith("npm run demo"));
    expect(command).toBe("npm run demo");
    const result = await shell(command ?? "");
    demoOutput = result.stdout;
    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0);

    real.runId = /command:T0DEMO:(\w+)\.1\.trigger/.exec(demoOutput)?.[1] ?? "";
    real.failedEvent = /^ {2}labelled failure\s+(Ev\S+)$/m.exec(demoOutput)?.[1] ?? "";
    real.doneEvent = /^ {2}app mentions\s+(Ev\S+)/m.exec(demoOutput)?.[1] ?? "";
    real.commandOperation = /^ {2}slash command\s+(command:\S+)$/m.exec(demoOutput)?.[1] ?? "";
    real.failedRow = /npx ackbox dead replay --id (\d+) --dry-run$/m.exec(demoOutput)?.[1] ?? "";
    expect(real.runId).toMatch(/^[0-9A-Z]+$/);
    expect(real.failedEvent).toBe(`Ev0DEMO${real.runId}F0`);
    expect(real.doneEvent).toBe(`Ev0DEMO${real.runId}M0`);
    expect(real.failedRow).toMatch(/^\d+$/);

    // The page's sample table and summary are the demo's real ones (the run id aside; no timings are quoted).
    const rows = (text: string) => text.split("\n").filter((l) => /^[✓✗] /.test(l) || /^sent \d+ · /.test(l));
    const pageBlock = page.slice(page.indexOf("scenario                sent  acked"));
    const pageRows = rows(pageBlock.slice(0, pageBlock.indexOf("```"))).map((l) => l.replaceAll(EXAMPLE.runId, real.runId));
    expect(rows(demoOutput)).toEqual(pageRows);
    expect(demoOutput).toContain("0 unexpected");
    // The commands it prints for the runbook carry the run's PORT and folder, so they work when copied.
    expect(demoOutput).toContain(`PORT=${pipeline.port} ACKBOX_LOCAL_DIR=${pipeline.dir} npx ackbox events show ${real.failedEvent}`);
  }, 200_000);

  it("every command in docs/operating.md runs, in order, with the exit code the page states", async () => {
    expect(demoOutput, "the demo ran first").not.toBe("");
    const trail = await shell(`npx ackbox events show ${real.commandOperation} --json`);
    expect(trail.code, trail.stderr).toBe(0);
    real.commandRow = String((JSON.parse(trail.stdout) as { rows: { id: number }[] }).rows[0]?.id);

    const page = read("docs/operating.md");
    for (const id of [
      EXAMPLE.failedEvent,
      EXAMPLE.doneEvent,
      EXAMPLE.commandOperation,
      `--id ${EXAMPLE.failedRow} --id ${EXAMPLE.commandRow}`,
    ])
      expect(page, `the page uses the example ${id}`).toContain(id);
    const commands = shLines(page);
    expect(commands.filter((c) => c.includes("npx ackbox")).length).toBeGreaterThanOrEqual(15);

    const results: { command: string; code: number | null; expected: number; out: string }[] = [];
    for (const command of commands) {
      const expected = Number(/#.*\bexit (\d+)\b/.exec(command)?.[1] ?? 0);
      const ours = command
        .replaceAll(EXAMPLE.failedEvent, real.failedEvent)
        .replaceAll(EXAMPLE.doneEvent, real.doneEvent)
        .replaceAll(EXAMPLE.commandOperation, real.commandOperation)
        .replace(
          /--id (\d+)/g,
          (_, id: string) => `--id ${id === EXAMPLE.failedRow ? real.failedRow : id === EXAMPLE.commandRow ? real.commandRow : id}`,
        )
        .replaceAll(".ackbox/local/", `${pipeline.dir}/`)
        .replaceAll("http://127.0.0.1:8787", pipeline.url);
      expect(ours, "nothing else of the command changes: no --url is added").not.toMatch(/--url/);
      const result = await shell(ours);
      results.push({ command, code: result.code, expected, out: `${result.stdout}${result.stderr}`.slice(0, 3_000) });
    }
    const wrong = results.filter((r) => r.code !== r.expected);
    expect(wrong, JSON.stringify(wrong, null, 2)).toEqual([]);

    // What the page says each command shows, it shows.
    const out = (prefix: string) => results.filter((r) => r.command.startsWith(prefix)).map((r) => r.out);
    expect(out("npx ackbox dead list")[0]).toMatch(new RegExp(`${real.failedEvent}\\s+chat\\.postMessage: channel_not_found`));
    expect(out(`npx ackbox events show ${EXAMPLE.failedEvent}`)[0]).toContain(`row ${real.failedRow}  chat.postMessage  DEAD`);
    expect(out(`npx ackbox events show ${EXAMPLE.doneEvent} --json`)[0]).toContain('"complete":true');
    expect(out(`npx ackbox events show ${EXAMPLE.commandOperation}`)[0]).toContain("response_url  DONE");
    expect(out("npx ackbox dead replay --error channel_not_found --dry-run")[0]).toContain("dry run: would replay 1 dead row(s)");
    const byId = out("npx ackbox dead replay --id")[0];
    expect(byId).toContain("replayed 1 dead row(s)");
    expect(byId).toContain(`skipped (not dead, untouched): ${real.commandRow} (done)`);
    // The trail after the replay: the replay entry, with the error the row died of.
    expect(out(`npx ackbox events show ${EXAMPLE.failedEvent}`)[1]).toMatch(/\s+1\s+replay\s+chat\.postMessage: channel_not_found/);
    expect(out("npx ackbox backlog --check")[0]).toContain("UNHEALTHY (new_dead)");
    expect(out("curl")[0]).toMatch(/^# TYPE ackbox_outbox_rows gauge$/m);
    expect(out("ACKBOX_ADMIN_TOKEN=not-the-token")[0]).toContain("unauthorized (401)"); // a token you set wins over the local one
  }, 240_000);
});
