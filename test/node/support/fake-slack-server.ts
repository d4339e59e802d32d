/**
 * A fake Slack Web API on 127.0.0.1 for Node-side tests of the local run:
 * what SLACK_API_URL points at. Every call is recorded; the test decides each
 * answer (default: Slack's ok:true with a fresh ts), so it can fail calls on
 * purpose and change its mind between phases.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

export interface FakeCall {
  readonly method: string;
  readonly params: Readonly<Record<string, string>>;
  readonly authorization: string | undefined;
  /** Date.now() when it arrived. */
  readonly at: number;
  /** What it was answered; 0 for a call left hanging. */
  readonly status: number;
}

export interface Reply {
  readonly status: number;
  readonly body: unknown;
}

export interface FakeSlackServer {
  /** What SLACK_API_URL is set to: http://127.0.0.1:<port>/api/ */
  readonly apiUrl: string;
  readonly calls: FakeCall[];
  /** Decides each answer ("hang": never answer); replace it to change behaviour mid-test. */
  answer: (method: string, params: Readonly<Record<string, string>>) => Reply | "hang";
  /** Resolves when `predicate` holds for the calls so far; rejects after `timeoutMs`. */
  waitFor(predicate: (calls: readonly FakeCall[]) => boolean, timeoutMs: number, what: string): Promise<void>;
  close(): Promise<void>;
}

let ts = 0;
export const okReply = (method: string, params: Readonly<Record<string, string>>): Reply => ({
  status: 200,
  body: {
    ok: true,
    ...(method === "chat.postMessage" ? { channel: params.channel, ts: `1800000000.${String(++ts).padStart(6, "0")}` } : {}),
  },
});

export async function startFakeSlack(): Promise<FakeSlackServer> {
  const calls: FakeCall[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const method = (req.url ?? "").replace(/^\/api\//, "").split("?")[0] ?? "";
      const params = Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString("utf8")));
      const reply = fake.answer(method, params);
      calls.push({ method, params, authorization: req.headers.authorization, at: Date.now(), status: reply === "hang" ? 0 : reply.status });
      if (reply === "hang") return; // held open until the caller gives up or the server closes
      res.writeHead(reply.status, { "content-type": "application/json" });
      res.end(JSON.stringify(reply.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const fake: FakeSlackServer = {
    apiUrl: `http://127.0.0.1:${port}/api/`,
    calls,
    answer: okReply,
    async waitFor(predicate, timeoutMs, what) {
      const deadline = Date.now() + timeoutMs;
      while (!predicate(calls)) {
        if (Date.now() > deadline)
          throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; calls: ${JSON.stringify(calls.slice(-10))}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  return fake;
}
