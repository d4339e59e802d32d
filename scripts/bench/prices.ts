/**
 * Cloudflare list prices (Workers Paid, Standard usage model), as published
 * on the pages cited here, looked up for this bench on 2026-11-30. Marginal
 * prices only: the $5/month plan fee and the included allowances (25 billion
 * rows read, 50 million rows written, 1 million queue operations, 10 million
 * requests and 30 million CPU-ms a month) are left out, so the figures are
 * what each additional million events costs once those are used up.
 */
export const PRICES = {
  d1RowsReadPerMillion: 0.001,
  d1RowsWrittenPerMillion: 1.0,
  queueOperationsPerMillion: 0.4,
  workersRequestsPerMillion: 0.3,
  workersCpuMsPerMillion: 0.02,
} as const;

export const PRICE_SOURCES = [
  { what: "D1 rows read $0.001 / million, rows written $1.00 / million", url: "https://developers.cloudflare.com/d1/platform/pricing/" },
  {
    what: "Queues $0.40 / million operations; one per 64 KB written, read or deleted; a delivered message is 3 (write, read, delete); each retry adds a read",
    url: "https://developers.cloudflare.com/queues/platform/pricing/",
  },
  {
    what: "Workers Standard: requests $0.30 / million, CPU $0.02 / million CPU-ms",
    url: "https://developers.cloudflare.com/workers/platform/pricing/",
  },
] as const;

export interface PerEvent {
  readonly rowsRead: number;
  readonly rowsWritten: number;
  readonly queueOps: number;
  readonly requests: number;
  readonly cpuMs: number;
}

export interface Dollars {
  readonly d1Read: number;
  readonly d1Write: number;
  readonly queue: number;
  readonly requests: number;
  readonly cpu: number;
  readonly total: number;
}

/** Dollars per million events for the given per-event usage. */
export function dollarsPerMillion(u: PerEvent): Dollars {
  const d1Read = u.rowsRead * PRICES.d1RowsReadPerMillion;
  const d1Write = u.rowsWritten * PRICES.d1RowsWrittenPerMillion;
  const queue = u.queueOps * PRICES.queueOperationsPerMillion;
  const requests = u.requests * PRICES.workersRequestsPerMillion;
  const cpu = u.cpuMs * PRICES.workersCpuMsPerMillion;
  return { d1Read, d1Write, queue, requests, cpu, total: d1Read + d1Write + queue + requests + cpu };
}

/** A cron that fires every minute: ticks in a 30-day month. */
export const TICKS_PER_MONTH = 60 * 24 * 30;
