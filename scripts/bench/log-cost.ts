/**
 * What one Worker log line costs the local run, all processes counted:
 * `node scripts/bench/log-cost.ts [port] [lines] [lines per request]`. Runs
 * workers/log-lines.js under the product's configs with npm start's own
 * launcher and pretty printer (cli/local/pipeline.ts), asks it for
 * `lines` lines of each shape (100 a request unless given), alternated with
 * as many requests logging none, and prints the tree's CPU per line net of
 * the empty requests. A measurement for docs/benchmarks.md's account of the
 * pipeline's CPU, not a bench section.
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import { startPipeline } from "../../cli/local/pipeline.ts";
import { processesInGroup } from "../../cli/local/processes.ts";
import { ROOT, WORK_DIR } from "./build.ts";
import { cpuOf, selfCpuMs } from "./cpu.ts";

const port = Number(process.argv[2] ?? 8816);
const lines = Number(process.argv[3] ?? 20_000);
const PER_REQUEST = Number(process.argv[4] ?? 100);
const dir = join(WORK_DIR, "log-cost");
const worker = join(ROOT, "scripts/bench/workers/log-lines.js");
let printed = 0;
const run = await startPipeline({
  port,
  dir,
  persistTo: join(dir, "state"),
  devVarsFile: null,
  cronIntervalMs: 0,
  env: { SLACK_SIGNING_SECRET: "log-cost", SLACK_BOT_TOKEN: "xoxb-log-cost" },
  bundles: { ingress: worker, consumer: join(ROOT, "scripts/bench/workers/floor-consumer.js") },
  print: () => {
    printed++;
  },
});
try {
  const get = async (path: string) => (await fetch(`${run.url}${path}`)).arrayBuffer();
  const measure = async (path: string, requests: number) => {
    // This process runs the printer (as cli/project/start.ts does): its CPU counts too.
    const before = cpuOf(processesInGroup(run.pgid)) + selfCpuMs();
    for (let i = 0; i < requests; i++) await get(path);
    // The lines are relayed after the answers: until the printer has them all (bounded).
    const deadline = performance.now() + 60_000;
    while (performance.now() < deadline && printed < expected) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 500));
    return cpuOf(processesInGroup(run.pgid)) + selfCpuMs() - before;
  };
  let expected = 0;
  await measure(`/log?n=${PER_REQUEST}`, 10); // warm-up
  expected = printed + 10 * PER_REQUEST;
  const requests = lines / PER_REQUEST;
  for (const shape of ["delivered", "ack"]) {
    const empty = await measure("/log?n=0", requests);
    expected = printed + lines;
    const full = await measure(`/log?n=${PER_REQUEST}&shape=${shape}`, requests);
    console.log(
      `${shape}: ${lines} lines, tree CPU ${Math.round(full)} ms against ${Math.round(empty)} ms for the same requests logging none: ${((full - empty) / lines).toFixed(3)} ms a line`,
    );
  }
} finally {
  await run.stop();
  rmSync(dir, { recursive: true, force: true });
}
