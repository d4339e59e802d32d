/**
 * The shards benchmark's simulation, one run at one shard count: the
 * product's own Worker entries in this process — the ingress's `fetch`
 * (workers/ingress/index.ts: handleHttp builds the ack's deps, shardOf
 * included, then handleSlackRequest verifies the real signature, routes the
 * team to its shard and writes the ack's batch there) and the consumer's
 * `queue` (workers/consumer/index.ts: groupByShard, then deliverBatch against
 * each shard's D1) — over N databases, each a single writer
 * (single-writer-d1.ts around sqlite-d1.ts). Only the bindings are the
 * bench's: the D1s, a model of Cloudflare Queues, and the settings; Slack is
 * the fake in the bench process, reached over loopback HTTP.
 *
 * The queue model (not measured): a batch goes to a consumer invocation as
 * soon as `maxBatchSize` messages are waiting, or when the oldest has waited
 * `maxBatchTimeoutMs` (the consumer's wrangler.toml: 100 and 1 s); at most
 * `maxConcurrency` invocations at once; message.retry() comes back after its
 * delay; no cron runs (nothing is stale within a run).
 *
 * Checked with the Workers' types (the root tsconfig), like the code it runs.
 */

import type { OutboxMessage } from "../../shared/outbox/model.ts";
import { shardBindingName } from "../../shared/shards/bindings.ts";
import consumer from "../../workers/consumer/index.ts";
import ingress from "../../workers/ingress/index.ts";
import { singleWriter, type WriterStats } from "./single-writer-d1.ts";

export interface ShardRunInput {
  /** One inner D1 per shard (sqlite-d1.ts, every migration applied). */
  readonly databases: readonly unknown[];
  readonly holdMs: number;
  /** The Workers' settings, as [vars] and secrets. */
  readonly vars: Readonly<Record<string, string>>;
  readonly requests: readonly { readonly path: string; readonly headers: Readonly<Record<string, string>>; readonly body: string }[];
  readonly connections: number;
  readonly maxSeconds: number;
  readonly queue: { readonly maxBatchSize: number; readonly maxBatchTimeoutMs: number; readonly maxConcurrency: number };
}

export interface ShardRunHandle {
  /** Every ack's latency, ms, in completion order. */
  readonly ackMs: readonly number[];
  readonly statuses: Readonly<Record<string, number>>;
  /** performance.now() of the first request and of the last answer. */
  readonly firstRequestAt: number;
  readonly lastAnswerAt: number;
  /** Per shard. */
  readonly writers: readonly WriterStats[];
  readonly queue: { readonly invocations: number; readonly retried: number; readonly failedInvocations: number };
  /** Resolves once no consumer invocation, queued message or waitUntil is left (false at the deadline). */
  idle(timeoutMs: number): Promise<boolean>;
  stop(): void;
}

interface Queued {
  readonly body: OutboxMessage;
  visibleAt: number;
  attempts: number;
}

class QueueModel {
  readonly #waiting: Queued[] = [];
  readonly #options: ShardRunInput["queue"];
  readonly #invoke: (messages: Queued[]) => Promise<void>;
  #running = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stopped = false;
  invocations = 0;

  constructor(options: ShardRunInput["queue"], invoke: (messages: Queued[]) => Promise<void>) {
    this.#options = options;
    this.#invoke = invoke;
  }

  get busy(): boolean {
    return this.#running > 0 || this.#waiting.length > 0;
  }

  add(body: OutboxMessage, delayMs: number, attempts: number): void {
    this.#waiting.push({ body, visibleAt: performance.now() + delayMs, attempts });
    this.#pump();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
  }

  #pump(): void {
    if (this.#stopped) return;
    const now = performance.now();
    while (this.#running < this.#options.maxConcurrency) {
      const visible = this.#waiting.filter((m) => m.visibleAt <= now);
      if (visible.length === 0) break;
      const oldest = Math.min(...visible.map((m) => m.visibleAt));
      if (visible.length < this.#options.maxBatchSize && oldest + this.#options.maxBatchTimeoutMs > now) break;
      const batch = visible.slice(0, this.#options.maxBatchSize);
      for (const m of batch) this.#waiting.splice(this.#waiting.indexOf(m), 1);
      this.#running += 1;
      this.invocations += 1;
      void this.#invoke(batch).finally(() => {
        this.#running -= 1;
        this.#pump();
      });
    }
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#waiting.length === 0) return;
    // Wake when the oldest visible message's timeout is up, or when a delayed one becomes visible.
    const next = Math.min(...this.#waiting.map((m) => (m.visibleAt <= now ? m.visibleAt + this.#options.maxBatchTimeoutMs : m.visibleAt)));
    this.#timer = setTimeout(() => this.#pump(), Math.max(1, next - now));
  }
}

export async function runShards(input: ShardRunInput): Promise<ShardRunHandle> {
  const writers = input.databases.map((d) => singleWriter(d as D1Database, input.holdMs));
  const pending = new Set<Promise<unknown>>();
  const ctx = {
    waitUntil(work: Promise<unknown>) {
      const tracked = work.catch(() => undefined).finally(() => pending.delete(tracked));
      pending.add(tracked);
    },
    passThroughOnException() {},
    props: {},
  } as unknown as ExecutionContext;
  let retried = 0;
  let failedInvocations = 0;
  let sequence = 0;
  const queue: QueueModel = new QueueModel(input.queue, async (messages) => {
    const answers = new Map<Queued, { retry: boolean; delayMs: number }>();
    const batch = {
      queue: "ackbox-outbox",
      messages: messages.map((m) => ({
        id: `m${++sequence}`,
        timestamp: new Date(),
        body: m.body,
        attempts: m.attempts,
        ack: () => answers.set(m, { retry: false, delayMs: 0 }),
        retry: (options?: { delaySeconds?: number }) => answers.set(m, { retry: true, delayMs: (options?.delaySeconds ?? 0) * 1000 }),
      })),
      ackAll: () => {
        for (const m of messages) answers.set(m, { retry: false, delayMs: 0 });
      },
      retryAll: (options?: { delaySeconds?: number }) => {
        for (const m of messages) answers.set(m, { retry: true, delayMs: (options?.delaySeconds ?? 0) * 1000 });
      },
    } as unknown as MessageBatch<OutboxMessage>;
    try {
      await consumer.queue(batch, env, ctx);
    } catch {
      failedInvocations += 1;
      for (const m of messages) if (!answers.has(m)) answers.set(m, { retry: true, delayMs: 0 });
    }
    for (const m of messages) {
      const answer = answers.get(m);
      if (answer?.retry) {
        retried += 1;
        queue.add(m.body, answer.delayMs, m.attempts + 1);
      }
    }
  });
  const outbox = {
    async sendBatch(messages: Iterable<MessageSendRequest<OutboxMessage>>) {
      for (const m of messages) queue.add(m.body, (m.delaySeconds ?? 0) * 1000, 1);
    },
    async send(body: OutboxMessage, options?: { delaySeconds?: number }) {
      queue.add(body, (options?.delaySeconds ?? 0) * 1000, 1);
    },
  };
  const env = {
    ...input.vars,
    SHARD_COUNT: String(writers.length),
    OUTBOX_QUEUE: outbox,
    ...Object.fromEntries(writers.map((w, i) => [shardBindingName(i), w.db])),
  } as unknown as Parameters<NonNullable<typeof ingress.fetch>>[1];

  // The load: `connections` senders, each sending its next event when the previous one is answered.
  const ackMs: number[] = [];
  const statuses: Record<string, number> = {};
  let next = 0;
  const firstRequestAt = performance.now();
  const deadline = firstRequestAt + input.maxSeconds * 1000;
  const lane = async () => {
    while (next < input.requests.length && performance.now() < deadline) {
      const r = input.requests[next++];
      if (!r) break;
      const started = performance.now();
      const request = new Request(`http://ackbox.bench${r.path}`, { method: "POST", headers: r.headers, body: r.body });
      const response = await ingress.fetch?.(request as Parameters<NonNullable<typeof ingress.fetch>>[0], env, ctx);
      await response?.arrayBuffer();
      ackMs.push(performance.now() - started);
      const status = String(response?.status ?? "none");
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: input.connections }, lane));
  const lastAnswerAt = performance.now();

  return {
    ackMs,
    statuses,
    firstRequestAt,
    lastAnswerAt,
    writers: writers.map((w) => w.stats),
    get queue() {
      return { invocations: queue.invocations, retried, failedInvocations };
    },
    async idle(timeoutMs) {
      const until = performance.now() + timeoutMs;
      while (performance.now() < until) {
        if (!queue.busy && pending.size === 0) return true;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return false;
    },
    stop() {
      queue.stop();
    },
  };
}
