/**
 * The cost probe's host: one local workerd running scripts/bench/workers/probe.js
 * (which runs the product's Worker entries over a metered D1) and a fake
 * Slack, with two databases: ackbox's schema (the migrations) and the design
 * note's. Each call returns what the probe measured plus the runtime CPU the
 * call took.
 */
import { bundle } from "./build.ts";
import { cpuOf } from "./cpu.ts";
import { consumerConfig, ingressConfig, migrationStatements, type Runtime, startRuntime } from "./runtime.ts";
import { BENCH_BOT_TOKEN, BENCH_SIGNING_SECRET } from "./signed-events.ts";
import { SCHEMA } from "./workers/design-note.js";

export interface StatementRecord {
  readonly sql: string;
  readonly rowsRead: number;
  readonly rowsWritten: number;
}

export interface Probe {
  call<T extends object>(path: string, body?: Record<string, unknown>): Promise<T & { cpuMs: number; ms: number }>;
  close(): Promise<void>;
}

export async function startProbe(label: string): Promise<Probe> {
  const [probe, fakeSlack] = await Promise.all([bundle("probe"), bundle("fakeSlack")]);

  const runtime: Runtime = await startRuntime(
    [
      {
        name: "probe",
        scriptPath: probe,
        listen: true,
        bindings: {
          ...consumerConfig().bindings,
          ...ingressConfig().bindings,
          SLACK_SIGNING_SECRET: BENCH_SIGNING_SECRET,
          SLACK_BOT_TOKEN: BENCH_BOT_TOKEN,
        },
        d1Databases: { DB: `probe-ackbox-${label}`, NOTE_DB: `probe-note-${label}`, SCRATCH_DB: `probe-scratch-${label}` },
        outboundService: "fake-slack",
      },
      { name: "fake-slack", scriptPath: fakeSlack },
    ],
    `probe-${label}`,
  );
  const url = runtime.url("probe");
  const call = async <T extends object>(path: string, body: Record<string, unknown> = {}) => {
    const cpu0 = cpuOf(runtime.pids);
    const t0 = performance.now();
    const response = await fetch(new URL(path, url), { method: "POST", body: JSON.stringify(body) });
    const ms = performance.now() - t0;
    const cpuMs = cpuOf(runtime.pids) - cpu0;
    const json = (await response.json()) as T & { error?: string };
    if (response.status !== 200 || json.error) throw new Error(`probe ${path}: ${json.error ?? response.status}`);
    return { ...json, cpuMs, ms };
  };
  try {
    await call("/schema", { db: "ackbox", statements: migrationStatements() });
    await call("/schema", { db: "note", statements: [...SCHEMA] });
  } catch (error) {
    await runtime.close();
    throw error;
  }
  return { call, close: () => runtime.close() };
}
