/**
 * A fake Slack on 127.0.0.1 for the end-to-end and drain runs: the consumer's
 * SLACK_API_URL points here. It answers the Web API methods the reference app
 * calls ({ok: true}, chat.postMessage with a ts) and records when each effect
 * arrived, keyed by the message ts it names (chat.postMessage's thread_ts,
 * reactions.add's timestamp), else its text, so arrivals can be matched to the
 * requests that caused them.
 */
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";

export interface Arrival {
  readonly method: string;
  readonly key: string;
  /** performance.now() when the request arrived. */
  readonly at: number;
}

export interface FakeSlack {
  /** What SLACK_API_URL points at. */
  readonly apiUrl: string;
  readonly arrivals: readonly Arrival[];
  /** Distinct effect keys seen. */
  readonly distinct: ReadonlySet<string>;
  /** Resolves when `n` distinct keys have arrived, or false at the deadline. */
  waitForDistinct(n: number, timeoutMs: number): Promise<boolean>;
  close(): Promise<void>;
}

const MAX_BODY = 256 * 1024;

export async function startFakeSlack(): Promise<FakeSlack> {
  const arrivals: Arrival[] = [];
  const distinct = new Set<string>();
  const waiters: { n: number; resolve: (ok: boolean) => void; timer: ReturnType<typeof setTimeout> }[] = [];
  let ts = 0;

  const server = createServer(async (req, res) => {
    const at = performance.now();
    const method = (req.url ?? "").split("?")[0]?.split("/").pop() ?? "";
    let params: Record<string, unknown> = {};
    try {
      params = parse(req.headers["content-type"] ?? "", await readBody(req));
    } catch {
      res.writeHead(400).end();
      return;
    }
    // A post with no ts to name (a timer's reminder: scripts/bench/timers.ts) is known by its text.
    const key = String(params.thread_ts ?? params.timestamp ?? params.ts ?? params.text ?? "");
    arrivals.push({ method, key, at });
    if (key) distinct.add(key);
    for (const w of waiters.splice(0)) {
      if (distinct.size >= w.n) {
        // A met wait's timeout is cleared, or it would keep the process alive after the report.
        clearTimeout(w.timer);
        w.resolve(true);
      } else waiters.push(w);
    }
    const body =
      method === "chat.postMessage"
        ? { ok: true, channel: params.channel, ts: `1764509999.${String(++ts).padStart(6, "0")}` }
        : { ok: true };
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;

  return {
    apiUrl: `http://127.0.0.1:${port}/api/`,
    arrivals,
    distinct,
    waitForDistinct(n, timeoutMs) {
      if (distinct.size >= n) return Promise.resolve(true);
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          const i = waiters.indexOf(waiter);
          if (i >= 0) waiters.splice(i, 1);
          resolve(distinct.size >= n);
        }, timeoutMs);
        const waiter = { n, resolve, timer };
        waiters.push(waiter);
      });
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) throw new Error("body too large");
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

function parse(contentType: string, body: string): Record<string, unknown> {
  if (body === "") return {};
  if (contentType.includes("application/json")) return JSON.parse(body) as Record<string, unknown>;
  return Object.fromEntries(new URLSearchParams(body));
}
