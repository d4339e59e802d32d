/**
 * Section 3, cost per event: what one delivered event costs in D1 rows,
 * queue operations, Workers requests and CPU, and so in dollars, for ackbox
 * and for the design note's schema and statements, both measured by the same
 * probe (scripts/bench/workers/probe.js) against real local D1.
 */

import { type Dollars, dollarsPerMillion, type PerEvent, PRICE_SOURCES } from "./prices.ts";
import { type Probe, type StatementRecord, startProbe } from "./probe-host.ts";
import { byStatement, type Schema, type StatementCost, totals } from "./statements.ts";
import { round } from "./stats.ts";

export interface CostOptions {
  /** Events through the happy path. */
  readonly events: number;
  /** Events whose queue message is lost, delivered by the sweep instead. */
  readonly lostEvents: number;
  /** The consumer's max_batch_size (messages per queue() invocation). */
  readonly batchSize: number;
}

export interface Phase {
  readonly name: string;
  readonly perEvent: boolean;
  readonly statements: readonly StatementCost[];
  readonly rowsRead: number;
  readonly rowsWritten: number;
  readonly d1Statements: number;
  readonly cpuMs: number;
}

export interface DesignCost {
  readonly design: string;
  readonly events: number;
  readonly phases: readonly Phase[];
  readonly perEvent: PerEvent & {
    readonly queue: { readonly writes: number; readonly reads: number; readonly deletes: number; readonly retries: number };
  };
  readonly dollarsPerMillionEvents: Dollars;
  /** A cron tick with nothing to do: the fixed cost per tick, whatever the traffic. */
  readonly idleTick: { readonly rowsRead: number; readonly rowsWritten: number; readonly statements: number };
  readonly notes: readonly string[];
}

export interface CostResult {
  readonly config: CostOptions;
  readonly designs: readonly DesignCost[];
  /** Only when messages are lost: what recovering one event through the sweep adds. */
  readonly recovery: {
    readonly events: number;
    readonly phases: readonly Phase[];
    readonly perEvent: { readonly rowsRead: number; readonly rowsWritten: number; readonly queueWrites: number };
    readonly slackCalls: number;
  };
  readonly prices: typeof PRICE_SOURCES;
  /** How local D1 counts rows written, measured on a scratch table (so the explanations above rest on a measurement). */
  readonly accounting: readonly { readonly what: string; readonly sql: string; readonly rowsRead: number; readonly rowsWritten: number }[];
}

function phase(name: string, records: readonly StatementRecord[], schema: Schema, cpuMs: number, perEvent = true): Phase {
  const t = totals(records);
  return {
    name,
    perEvent,
    statements: byStatement(records, schema),
    rowsRead: t.rowsRead,
    rowsWritten: t.rowsWritten,
    d1Statements: t.statements,
    cpuMs,
  };
}

interface Records {
  records: StatementRecord[];
}

export async function benchCost(options: CostOptions, progress: (line: string) => void): Promise<CostResult> {
  const probe = await startProbe("cost");
  try {
    const ackbox = await costOfAckbox(probe, options, progress);
    const recovery = await costOfRecovery(probe, options, progress);
    const note = await costOfNote(probe, options, progress);
    const accounting = await probe.call<{ steps: CostResult["accounting"] }>("/accounting");
    return { config: options, designs: [ackbox, note], recovery, prices: PRICE_SOURCES, accounting: accounting.steps };
  } finally {
    await probe.close();
  }
}

async function costOfAckbox(probe: Probe, options: CostOptions, progress: (line: string) => void): Promise<DesignCost> {
  const n = options.events;
  progress(`cost: ackbox, ${n} events through ingress.fetch → consumer.queue (batches of ${options.batchSize})`);
  const ingest = await probe.call<Records & { statuses: Record<string, number>; queueWrites: number }>("/ackbox/ingest", {
    events: n,
    dropSends: false,
  });
  if ((ingest.statuses["200"] ?? 0) !== n)
    throw new Error(`cost: the ingress answered ${JSON.stringify(ingest.statuses)} to ${n} signed events`);
  const deliver = await probe.call<
    Records & { ops: { reads: number; acks: number; retries: number; batches: number }; slackCalls: number }
  >("/ackbox/deliver", { batchSize: options.batchSize });
  if (deliver.slackCalls < n) throw new Error(`cost: only ${deliver.slackCalls} of ${n} effects reached the fake Slack`);
  // Two ticks with nothing stale: the first also creates the alert state rows; the second is the steady state.
  await probe.call<Records>("/ackbox/tick", { at: Date.now() - 60_000 });
  const idle = await probe.call<Records>("/ackbox/tick", { at: Date.now() });
  const phases = [
    phase("ack (ingress)", ingest.records, "ackbox", ingest.cpuMs),
    phase("deliver (consumer)", deliver.records, "ackbox", deliver.cpuMs),
    phase("cron tick, nothing stale", idle.records, "ackbox", idle.cpuMs, false),
  ];
  const ack = phases[0] as Phase;
  const del = phases[1] as Phase;
  const queue = {
    writes: ingest.queueWrites / n,
    reads: deliver.ops.reads / n,
    deletes: deliver.ops.acks / n,
    retries: deliver.ops.retries / n,
  };
  const perEvent = {
    rowsRead: (ack.rowsRead + del.rowsRead) / n,
    rowsWritten: (ack.rowsWritten + del.rowsWritten) / n,
    queueOps: queue.writes + queue.reads + queue.deletes + queue.retries,
    // The ingress request, plus one consumer invocation per batch.
    requests: 1 + deliver.ops.batches / n,
    cpuMs: (ack.cpuMs + del.cpuMs) / n,
    queue,
  };
  const t = totals(idle.records);
  return {
    design: "ackbox",
    events: n,
    phases,
    perEvent: roundUsage(perEvent),
    dollarsPerMillionEvents: roundDollars(dollarsPerMillion(perEvent)),
    idleTick: { rowsRead: t.rowsRead, rowsWritten: t.rowsWritten, statements: t.statements },
    notes: [
      `requests per event: 1 ingress request + 1 consumer invocation per batch (${options.batchSize} messages here; at low traffic a batch may hold one message, up to 2 requests per event)`,
      "CPU per event is the whole local workerd process (the Workers, local D1's SQLite, the queue plumbing): an upper bound on billed CPU",
    ],
  };
}

async function costOfRecovery(probe: Probe, options: CostOptions, progress: (line: string) => void): Promise<CostResult["recovery"]> {
  const n = options.lostEvents;
  progress(`cost: ${n} events whose queue message is lost, recovered by a sweep tick`);
  const ingest = await probe.call<Records>("/ackbox/ingest", { events: n, dropSends: true });
  // The sweep owes a row once its sweep_at (enqueue time + SWEEP_GRACE_SECONDS) has passed; tick just after.
  const grace = 60_000;
  const tick = await probe.call<Records & { queueWrites: number }>("/ackbox/tick", { at: Date.now() + grace + 1000 });
  const deliver = await probe.call<Records & { slackCalls: number }>("/ackbox/deliver", { batchSize: options.batchSize });
  const phases = [
    phase("ack (message lost)", ingest.records, "ackbox", ingest.cpuMs),
    phase("sweep tick re-enqueues", tick.records, "ackbox", tick.cpuMs),
    phase("deliver (after the sweep)", deliver.records, "ackbox", deliver.cpuMs),
  ];
  const sweep = phases[1] as Phase;
  return {
    events: n,
    phases,
    perEvent: {
      rowsRead: round(sweep.rowsRead / n, 2),
      rowsWritten: round(sweep.rowsWritten / n, 2),
      queueWrites: round(tick.queueWrites / n, 2),
    },
    slackCalls: deliver.slackCalls,
  };
}

async function costOfNote(probe: Probe, options: CostOptions, progress: (line: string) => void): Promise<DesignCost> {
  const n = options.events;
  progress(`cost: the design note's statements, ${n} events (recordIntent, then sweepOutbox in waitUntil as the note does)`);
  const ingest = await probe.call<Records & { delivered: number }>("/note/ingest", { events: n });
  if (ingest.delivered !== n) throw new Error(`cost: the design note's loop delivered ${ingest.delivered} of ${n}`);
  const idle = await probe.call<Records>("/note/tick");
  const phases = [
    phase("ack + immediate delivery (one request)", ingest.records, "note", ingest.cpuMs),
    phase("cron tick, nothing pending", idle.records, "note", idle.cpuMs, false),
  ];
  const ack = phases[0] as Phase;
  const perEvent = {
    rowsRead: ack.rowsRead / n,
    rowsWritten: ack.rowsWritten / n,
    queueOps: 0,
    requests: 1,
    cpuMs: ack.cpuMs / n,
    queue: { writes: 0, reads: 0, deletes: 0, retries: 0 },
  };
  const t = totals(idle.records);
  return {
    design: "design note",
    events: n,
    phases,
    perEvent: roundUsage(perEvent),
    dollarsPerMillionEvents: roundDollars(dollarsPerMillion(perEvent)),
    idleTick: { rowsRead: t.rowsRead, rowsWritten: t.rowsWritten, statements: t.statements },
    notes: [
      "no queue: the ingress's own waitUntil claims and delivers, so one request per event and no queue operations",
      `rows read per event grow with the table: claimBatch's SELECT … WHERE claim_token = ? has no index and scans every outbox row (${n} events into an empty table here; see the flat-cost section)`,
    ],
  };
}

function roundUsage<T extends PerEvent>(u: T): T {
  return {
    ...u,
    rowsRead: round(u.rowsRead, 2),
    rowsWritten: round(u.rowsWritten, 2),
    queueOps: round(u.queueOps, 2),
    requests: round(u.requests, 2),
    cpuMs: round(u.cpuMs, 2),
  };
}

function roundDollars(d: Dollars): Dollars {
  const r = (x: number) => round(x, 4);
  return { d1Read: r(d.d1Read), d1Write: r(d.d1Write), queue: r(d.queue), requests: r(d.requests), cpu: r(d.cpu), total: r(d.total) };
}
