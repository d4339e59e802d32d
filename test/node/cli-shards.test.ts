/**
 * `npx ackbox` over a deployment with several shards, in process, against a
 * stand-in operator API answering what the Worker answers (its types are the
 * Worker's own contracts, shared/ops/*-answer.ts; test/ingress/admin.shards.test.ts
 * proves the real answers): the dead list shows each row's ref and shard, replay
 * sends refs as given and reports per shard, a plain id with several shards is
 * the API's 400, the backlog shows its per-shard table, and --json passes
 * every answer through as it came.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { Backlog, DeadPage, ReplayAnswer } from "../../cli/api.ts";
import { runCli } from "./support/cli-in-process.ts";

const AT = "2027-01-15T12:00:00.000Z";

const deadPage: DeadPage = {
  shardCount: 2,
  rows: [
    {
      ref: "1:7",
      shard: 1,
      id: 7,
      receiptId: "EvONE",
      teamId: "T0TEAM",
      effect: "chat.postMessage",
      attempts: 1,
      lastError: "chat.postMessage: channel_not_found",
      createdAt: AT,
      diedAt: AT,
      expiresAt: null,
      maybePerformed: false,
      payload: {},
    },
    {
      ref: "0:7",
      shard: 0,
      id: 7,
      receiptId: "EvZERO",
      teamId: "T0ZERO",
      effect: "reactions.add",
      attempts: 8,
      lastError: "attempts exhausted (8 of 8): reactions.add: HTTP 503",
      createdAt: AT,
      diedAt: "2027-01-15T11:59:00.000Z",
      expiresAt: null,
      maybePerformed: false,
      payload: {},
    },
  ],
  nextCursor: "1768478340000.0.7",
  scanned: null,
};

const replayAnswer: ReplayAnswer = {
  dryRun: false,
  shardCount: 2,
  replayed: [
    {
      ref: "1:7",
      shard: 1,
      id: 7,
      receiptId: "EvONE",
      effect: "chat.postMessage",
      lastError: "x",
      maybePerformed: false,
      step: 0,
      delaySeconds: 0,
    },
  ],
  count: 1,
  skipped: [{ ref: "0:9", shard: 0, id: 9, reason: "missing" }],
  perShard: [
    { shard: 0, replayed: 0, skipped: 1 },
    { shard: 1, replayed: 1, skipped: 0 },
  ],
  enqueue: { sent: 1, failed: 0 },
  steps: 1,
  maxPerCall: 500,
  more: false,
  nextCursor: null,
};

const backlog: Backlog = {
  at: AT,
  healthy: true,
  health: [],
  outbox: {
    pending: 4,
    leased: 1,
    dead: 3,
    byEffect: {},
    oldestPendingAgeSeconds: 1200,
    oldestPendingDueAt: "2027-01-15T11:40:00.000Z",
    waitingForTime: 0,
    nextTimerAt: null,
    staleLeases: 0,
    neverEnqueued: 0,
    overdue: 0,
    countCap: 10_000,
    capped: false,
  },
  blockedTeams: [],
  lastAlertPost: { id: 3, status: "dead", error: "channel_not_found", channel: "C0GONE" },
  windows: [],
  queue: { available: false, reason: "local" },
  alerts: [],
  shards: [
    {
      shard: 0,
      pending: 3,
      leased: 0,
      dead: 1,
      oldestPendingAgeSeconds: 300,
      staleLeases: 0,
      neverEnqueued: 0,
      overdue: 0,
      capped: false,
      window: { seconds: 900, done: 1, failedAttempts: 0, parkedDead: 1 },
    },
    {
      shard: 1,
      pending: 1,
      leased: 1,
      dead: 2,
      oldestPendingAgeSeconds: 1200,
      staleLeases: 0,
      neverEnqueued: 0,
      overdue: 0,
      capped: false,
      window: { seconds: 900, done: 9, failedAttempts: 0, parkedDead: 2 },
    },
  ],
};

/** What the stand-in API was asked: method, path and body. */
const requests: { method: string; path: string; body: string }[] = [];
let url = "";
let close: () => Promise<void> = async () => {};

beforeAll(async () => {
  const server = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => {
      body += chunk;
    });
    request.on("end", () => {
      const path = request.url ?? "";
      requests.push({ method: request.method ?? "", path, body });
      const send = (status: number, answer: unknown) =>
        response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(answer));
      if (path.startsWith("/admin/dead")) return send(200, deadPage);
      if (path.startsWith("/admin/backlog")) return send(200, backlog);
      if (path === "/admin/replay") {
        const ids = (JSON.parse(body) as { ids?: unknown[] }).ids ?? [];
        // As the Worker answers a plain id with two shards (shared/ops/row-ref.ts).
        const plain = ids.find((id) => typeof id === "number");
        if (plain !== undefined) {
          return send(400, {
            error: `ids: row ref "${plain}": with 2 shards a row id is ambiguous; name the row as <shard>:<id> (e.g. 0:${plain} or 1:${plain}; the dead list's "ref")`,
          });
        }
        return send(200, replayAnswer);
      }
      return send(404, { error: "no such endpoint" });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  close = () => new Promise<void>((resolve) => server.close(() => resolve()));
});
afterAll(() => close());
beforeEach(() => {
  requests.length = 0;
});

const cli = (...argv: string[]) =>
  runCli({ argv: [...argv, "--url", url], env: { ACKBOX_ADMIN_TOKEN: "cli-shards-token-0123456789abcdef" }, isTty: false });

describe("dead list with several shards", () => {
  it("shows each row's ref and shard, and the cursor to go on", async () => {
    const { code, out } = await cli("dead", "list");
    expect(code).toBe(0);
    const [header, first, second] = out.split("\n");
    expect(header).toMatch(/^ref\s+shard\s+died \(UTC\)\s+effect/);
    expect(first).toMatch(/^1:7\s+1\s+2027-01-15 12:00:00\s+chat\.postMessage\s+T0TEAM/);
    expect(second).toMatch(/^0:7\s+0\s+/);
    expect(out).toContain("more: npx ackbox dead list --cursor 1768478340000.0.7");
  });

  it("--json passes the answer through as it came, refs and shards included", async () => {
    const { code, out } = await cli("dead", "list", "--json");
    expect(code).toBe(0);
    expect(JSON.parse(out)).toEqual(deadPage);
  });
});

describe("dead replay with several shards", () => {
  it("sends the refs as given and reports the rows by ref, and per shard", async () => {
    const { code, out } = await cli("dead", "replay", "--id", "1:7,0:9");
    expect(code).toBe(0);
    expect(requests.map((r) => [r.method, r.path, JSON.parse(r.body)])).toEqual([
      ["POST", "/admin/replay", { ids: ["1:7", "0:9"], dryRun: false }],
    ]);
    expect(out).toContain("replayed 1 dead row(s)");
    expect(out).toMatch(/^ref\s+effect/m);
    expect(out).toMatch(/^1:7\s+chat\.postMessage/m);
    expect(out).toContain("skipped (not dead, untouched): 0:9 (missing)");
    expect(out).toContain("per shard: shard 0 replayed 0, skipped 1; shard 1 replayed 1, skipped 0");
  });

  it("--json passes the replay's answer through", async () => {
    const { out } = await cli("dead", "replay", "--id", "1:7", "--json");
    expect(JSON.parse(out)).toEqual(replayAnswer);
  });

  it("a plain id goes as a number, and the API's 400 (ambiguous with two shards) is what the operator reads", async () => {
    const { code, err } = await cli("dead", "replay", "--id", "7");
    expect(requests.map((r) => JSON.parse(r.body))).toEqual([{ ids: [7], dryRun: false }]);
    expect(code).not.toBe(0);
    expect(err).toContain("with 2 shards a row id is ambiguous; name the row as <shard>:<id> (e.g. 0:7 or 1:7");
  });

  it.each([["x:3"], ["1:"], ["1:0"], ["0"], ["1:2:3"]])("refuses --id %s before asking the API (exit 2)", async (ref) => {
    const { code, err } = await cli("dead", "replay", "--id", ref);
    expect(code).toBe(2);
    expect(err).toContain("--id wants a row ref: <shard>:<id>");
    expect(requests).toEqual([]);
  });
});

describe("backlog with several shards", () => {
  it("shows the sums, a table by shard, and the dead alert post's ref on shard 0", async () => {
    const { code, out } = await cli("backlog");
    expect(code).toBe(0);
    expect(out).toMatch(/^ {2}by shard\s+pending\s+leased\s+dead\s+oldest pending/m);
    expect(out).toMatch(/^ {2}\s*0\s+3\s+0\s+1\s+5 min 0 s/m);
    expect(out).toMatch(/^ {2}\s*1\s+1\s+1\s+2\s+20 min 0 s/m);
    expect(out).toContain("npx ackbox dead replay --id 0:3");
  });

  it("--json passes the per-shard breakdown through", async () => {
    const { out } = await cli("backlog", "--json");
    expect(JSON.parse(out)).toEqual(backlog);
  });
});
