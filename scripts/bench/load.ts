/**
 * One bounded load run with autocannon: a fixed list of prepared requests
 * (each used once, in order), a fixed number of connections, one request in
 * flight per connection. Latencies come from autocannon's own per-response
 * timing; every response is kept, so runs can be merged exactly.
 */
import autocannon from "autocannon";
import type { PreparedRequest } from "./signed-events.ts";

export interface LoadResult {
  /** Responses received. */
  readonly responses: number;
  /** Responses by status code. */
  readonly statuses: Readonly<Record<string, number>>;
  readonly errors: number;
  readonly timeouts: number;
  /**
   * Wall time of the run: from the start to the last response. (autocannon's
   * own duration is counted on a 1 s ticker, far too coarse for short runs.)
   */
  readonly durationMs: number;
  /** One per response, in ms. */
  readonly latenciesMs: readonly number[];
  /** Per response that carried a prepared request: its index and when it completed (performance.now()). */
  /**
   * One per response: the prepared request's index, its status, when the
   * response was read (`at`) and when the request was handed to the socket
   * (`sentAt`), both on this process's performance.now() clock.
   */
  readonly completions: readonly { readonly index: number; readonly status: number; readonly at: number; readonly sentAt: number }[];
}

export interface LoadOptions {
  readonly url: string;
  readonly connections: number;
  /** How many requests to send; `requests` must hold at least count + connections (autocannon prepares one ahead per connection). */
  readonly count: number;
  readonly requests: readonly PreparedRequest[];
  /** Per-request timeout, s. */
  readonly timeoutSeconds?: number;
  /** Hard ceiling on the run's wall time, s: the run is stopped there. */
  readonly maxSeconds?: number;
  /** Offered load, requests per second across all connections (default: as fast as the server answers). */
  readonly rate?: number;
}

export function runLoad(options: LoadOptions): Promise<LoadResult> {
  const { requests, count, connections } = options;
  if (count < connections) throw new Error(`count (${count}) must be at least connections (${connections})`);
  if (requests.length < count + connections) throw new Error(`need ${count + connections} prepared requests, got ${requests.length}`);
  let next = 0;
  const latenciesMs: number[] = [];
  const statuses: Record<string, number> = {};
  const completions: { index: number; status: number; at: number; sentAt: number }[] = [];
  const sentAt = new Map<number, number>();

  return new Promise((resolve, reject) => {
    const started = performance.now();
    const instance = autocannon(
      {
        url: options.url,
        connections,
        pipelining: 1,
        amount: count,
        ...(options.rate === undefined ? {} : { overallRate: options.rate }),
        timeout: options.timeoutSeconds ?? 10,
        requests: [
          {
            setupRequest(request, context) {
              const prepared = requests[next];
              if (!prepared) return undefined;
              context.index = next++;
              sentAt.set(Number(context.index), performance.now());
              return { ...request, method: prepared.method, path: prepared.path, headers: { ...prepared.headers }, body: prepared.body };
            },
            onResponse(status, _body, context) {
              const index = Number(context.index);
              completions.push({ index, status, at: performance.now(), sentAt: sentAt.get(index) ?? Number.NaN });
            },
          },
        ],
      },
      (error, result) => {
        clearTimeout(ceiling);
        if (error) return reject(error);
        resolve({
          responses: latenciesMs.length,
          statuses,
          errors: result.errors,
          timeouts: result.timeouts,
          durationMs: (completions.length > 0 ? Math.max(...completions.map((c) => c.at)) : performance.now()) - started,
          latenciesMs,
          completions,
        });
      },
    );
    instance.on("response", (_client: unknown, statusCode: number, _bytes: number, responseTime: number) => {
      latenciesMs.push(responseTime);
      statuses[statusCode] = (statuses[statusCode] ?? 0) + 1;
    });
    const ceiling = setTimeout(() => instance.stop(), (options.maxSeconds ?? 300) * 1000);
  });
}
