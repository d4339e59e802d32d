/**
 * An open-loop load at an even pace: request i is sent at start + i / rate,
 * whatever the answers before it did, over a keep-alive pool of at most
 * `connections` sockets (a request that finds every socket busy waits for
 * one, and that wait counts in its latency).
 *
 * Why not autocannon's `overallRate`: it gives each connection its own
 * one-second budget and spends it at full speed, so "200/s" arrives as a
 * rush at the top of every second and then nothing — saturation for part of
 * each second, not a steady 200/s. This is the steady load; load.ts keeps
 * autocannon's shape for closed-loop runs and for the per-second rushes the
 * latency section also reports.
 */
import http from "node:http";
import type { LoadResult } from "./load.ts";
import type { PreparedRequest } from "./signed-events.ts";

export interface PacedLoadOptions {
  readonly url: string;
  readonly count: number;
  readonly requests: readonly PreparedRequest[];
  /** Requests per second, evenly spaced. */
  readonly rate: number;
  /** Sockets at most (keep-alive). */
  readonly connections: number;
  /** Per-request timeout, s. */
  readonly timeoutSeconds?: number;
  /** Hard ceiling on the run's wall time, s: unsent requests are dropped there, in-flight ones abandoned. */
  readonly maxSeconds?: number;
}

export function runPacedLoad(options: PacedLoadOptions): Promise<LoadResult> {
  const { count, requests, rate } = options;
  if (!(rate > 0)) throw new Error(`rate must be positive, got ${rate}`);
  if (requests.length < count) throw new Error(`need ${count} prepared requests, got ${requests.length}`);
  const url = new URL(options.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: Math.max(1, options.connections) });
  const timeoutMs = (options.timeoutSeconds ?? 10) * 1000;
  const latenciesMs: number[] = [];
  const statuses: Record<string, number> = {};
  const completions: { index: number; status: number; at: number; sentAt: number }[] = [];
  let errors = 0;
  let timeouts = 0;
  let sent = 0;
  let settled = 0;

  return new Promise((resolve) => {
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const finish = () => {
      clearTimeout(timer);
      clearTimeout(ceiling);
      agent.destroy();
      const last = completions.length > 0 ? Math.max(...completions.map((c) => c.at)) : performance.now();
      resolve({ responses: latenciesMs.length, statuses, errors, timeouts, durationMs: last - started, latenciesMs, completions });
    };
    const ceiling = setTimeout(finish, (options.maxSeconds ?? 300) * 1000);
    const settle = () => {
      settled += 1;
      if (settled === count) finish();
    };
    const send = (index: number) => {
      const prepared = requests[index] as PreparedRequest;
      const sentAt = performance.now();
      // Each request settles once: a response read to its end, or a failure (on the request or mid-response).
      let settledThis = false;
      const failed = () => {
        if (settledThis) return;
        settledThis = true;
        errors += 1;
        settle();
      };
      const request = http.request(
        {
          agent,
          host: url.hostname,
          port: url.port,
          method: prepared.method,
          path: prepared.path,
          headers: { ...prepared.headers, "content-length": Buffer.byteLength(prepared.body) },
          timeout: timeoutMs,
        },
        (response) => {
          response.resume();
          response.on("end", () => {
            if (settledThis) return;
            settledThis = true;
            const at = performance.now();
            const status = response.statusCode ?? 0;
            latenciesMs.push(at - sentAt);
            statuses[status] = (statuses[status] ?? 0) + 1;
            completions.push({ index, status, at, sentAt });
            settle();
          });
          response.on("error", failed);
          response.on("aborted", failed);
          response.on("close", () => {
            if (!response.complete) failed();
          });
        },
      );
      request.on("timeout", () => {
        timeouts += 1;
        request.destroy(new Error("timeout"));
      });
      request.on("error", failed);
      request.end(prepared.body);
    };
    // Each tick sends every request whose time has come (a late timer catches up), then sleeps until the next one's.
    const tick = () => {
      const elapsed = performance.now() - started;
      while (sent < count && (sent * 1000) / rate <= elapsed) send(sent++);
      if (sent < count) timer = setTimeout(tick, Math.max(0, (sent * 1000) / rate - (performance.now() - started)));
    };
    if (count === 0) return finish();
    tick();
  });
}
