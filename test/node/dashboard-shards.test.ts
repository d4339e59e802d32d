/**
 * The dashboard (GET /admin) over a deployment with two shards, in a real
 * headless Chromium, against a stand-in operator API: the page is the
 * Worker's own (dashboardResponse, its CSP and nonce included) and the JSON it
 * reads is typed by the Worker's own contracts (shared/ops/*-answer.ts), as
 * test/ingress/admin.shards.test.ts proves the real answers. It shows the
 * per-shard table under the summed tiles, names dead rows by ref, reads a
 * row's trail from its shard, replays by ref and counts per shard. (The
 * dashboard against a real one-shard instance: dashboard.test.ts.)
 */
import { execFileSync } from "node:child_process";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BacklogAnswer } from "../../shared/ops/backlog-answer.ts";
import type { DeadPageAnswer, ReplayAnswer } from "../../shared/ops/dead-answer.ts";
import { dashboardResponse } from "../../workers/ingress/admin/dashboard.ts";
import { ROOT } from "../support/ops-local.mts";

const TOKEN = "dashboard-shards-token-5f0e2a9c7b13d846";
const CHROMIUM = "/usr/bin/chromium";
const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
const AT = "2027-01-15T12:00:00.000Z";

const shard = (n: number, pending: number, dead: number, age: number): NonNullable<BacklogAnswer["shards"]>[number] => ({
  shard: n,
  pending,
  leased: 0,
  dead,
  oldestPendingAgeSeconds: age,
  staleLeases: 0,
  neverEnqueued: 0,
  overdue: 0,
  capped: false,
  window: { seconds: 900, done: 0, failedAttempts: 0, parkedDead: 0 },
});

const backlog: BacklogAnswer = {
  at: AT,
  healthy: true,
  health: [],
  outbox: {
    pending: 4,
    leased: 0,
    dead: 2,
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
  lastAlertPost: null,
  windows: [],
  queue: { available: false, reason: "stand-in" },
  alerts: [],
  shards: [shard(0, 3, 1, 300), shard(1, 1, 1, 1200)],
  history: [],
};

const deadRow = (ref: string, receiptId: string): DeadPageAnswer["rows"][number] => {
  const [s, id] = ref.split(":").map(Number) as [number, number];
  return {
    ref,
    shard: s,
    id,
    receiptId,
    teamId: s === 1 ? "T0TEAM" : "T0ZERO",
    effect: "chat.postMessage",
    attempts: 1,
    lastError: "chat.postMessage: channel_not_found",
    createdAt: AT,
    diedAt: AT,
    expiresAt: null,
    maybePerformed: false,
    payload: {},
  };
};

const dead: DeadPageAnswer = { shardCount: 2, rows: [deadRow("1:7", "EvONE"), deadRow("0:7", "EvZERO")], nextCursor: null, scanned: null };

const replayOf = (dryRun: boolean): ReplayAnswer => ({
  dryRun,
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
  skipped: [],
  perShard: [
    { shard: 0, replayed: 0, skipped: 0 },
    { shard: 1, replayed: 1, skipped: 0 },
  ],
  enqueue: { sent: dryRun ? 0 : 1, failed: 0 },
  steps: 1,
  maxPerCall: 500,
  more: false,
  nextCursor: null,
});

describe("the dashboard over two shards, in Chromium", { timeout: 60_000 }, () => {
  let server: Server;
  let url = "";
  let browser: Browser;
  let page: Page;
  const asked: { path: string; body: string }[] = [];

  beforeAll(async () => {
    execFileSync("bash", [join(ROOT, "scripts/ensure-chromium.sh")], { stdio: "inherit", timeout: 600_000 });
    server = createServer((request, response) => {
      let body = "";
      request.on("data", (chunk) => {
        body += chunk;
      });
      request.on("end", async () => {
        const path = request.url ?? "";
        if (path === "/admin") {
          const page = dashboardResponse();
          response.writeHead(200, Object.fromEntries(page.headers)).end(await page.text());
          return;
        }
        asked.push({ path, body });
        const send = (answer: unknown) => response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer));
        if (request.headers.authorization !== `Bearer ${TOKEN}`) return response.writeHead(401).end("{}");
        if (path.startsWith("/admin/backlog")) return send(backlog);
        if (path.startsWith("/admin/dead")) return send(dead);
        if (path === "/admin/installations") return send({ mode: "single-workspace", now: AT, installations: [] });
        if (path.startsWith("/admin/events/")) return send({ id: "EvONE", shards: [1], receipt: null, complete: false, rows: [] });
        if (path === "/admin/replay") return send(replayOf((JSON.parse(body) as { dryRun: boolean }).dryRun));
        response.writeHead(404).end("{}");
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
    page = await browser.newPage();
    await page.goto(`${url}/admin`);
    await page.fill("#token", TOKEN);
    await page.click("#save");
    await page.waitForSelector("body[data-loaded='true']");
  }, 900_000);

  afterAll(async () => {
    await browser?.close();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  });

  it("shows the summed tiles and, under them, each shard's pending, dead and oldest row", async () => {
    expect(await page.textContent('[data-tile="Pending"] .value')).toBe("4");
    const rows = await page.$$eval("#shards tr[data-shard]", (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
    expect(rows).toEqual([
      ["0", "3", "0", "1", "5 min", "0", "0"],
      ["1", "1", "0", "1", "20 min", "0", "0"],
    ]);
  });

  it("names each dead row by its ref and reads its trail from its own shard", async () => {
    expect(await page.$$eval("#dead-rows tr", (trs) => trs.map((tr) => tr.getAttribute("data-id")))).toEqual(["1:7", "0:7"]);
    await page.click("#dead-rows tr[data-id='1:7'] a[data-receipt]");
    await page.waitForFunction(() => (document.getElementById("trail")?.textContent ?? "").includes('"shards"'));
    expect(asked.map((a) => a.path)).toContain("/admin/events/EvONE?shard=1");
  });

  it("replays by ref: a dry run of the ticked row posts its ref and shows the count per shard", async () => {
    asked.length = 0;
    await page.check("#dead-rows tr[data-id='1:7'] input[type=checkbox]");
    await page.click("#dryrun");
    await page.waitForFunction(() => (document.getElementById("result")?.textContent ?? "").startsWith("Dry run"));
    expect(asked.map((a) => [a.path, JSON.parse(a.body)])).toEqual([["/admin/replay", { ids: ["1:7"], dryRun: true }]]);
    expect(await page.textContent("#result")).toBe("Dry run: would replay 1 row(s) (shard 0: 0, shard 1: 1).");
  });
});
