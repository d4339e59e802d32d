/**
 * `npx ackbox` against a running local instance (wrangler dev on a free
 * loopback port, seeded rows): each command's output and exit code, the
 * error paths (no token, wrong token, unreachable URL, https to plain HTTP,
 * API off, not ackbox), and Cloudflare's GraphQL Analytics against a local
 * fake. The CLI runs in this process (cli/main.ts takes its whole world as
 * arguments); a few cases run the real `npx ackbox` process, so the bin
 * entry, the environment and the exit code are proven as an operator sees
 * them. docs/operating.md's commands, as written, run against the demo's data
 * in runbook.test.ts.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, type LocalIngress, offlineEnv, ROOT, run, SEED_IDS, seedSql, startLocalIngress } from "../support/ops-local.mts";
import { runCli } from "./support/cli-in-process.ts";

const TOKEN = "cli-test-admin-token-7c1e0b9d4a2f6e83";
/** npx as the operator runs it; node_modules/.bin first on the PATH, so it and the CLI run under the project's Node 22. */
const NPX = "npx";
const PATH = `${join(ROOT, "node_modules/.bin")}:${process.env.PATH ?? ""}`;
const MINUTE = 60_000;

/** A run folder with no run in it: the CLI must not find a developer's own `npm start` token here. */
const NO_LOCAL_RUN = join(ROOT, "test-artifacts", "no-local-run");

/** `npx ackbox …`, in process, with the token in its environment (and nothing else of this one's). */
async function ackbox(args: readonly string[], env: Record<string, string> = {}, token: string | null = TOKEN) {
  const base: Record<string, string> = { ACKBOX_LOCAL_DIR: NO_LOCAL_RUN, ...env };
  if (token !== null) base.ACKBOX_ADMIN_TOKEN = token;
  const { code, out, err } = await runCli({ argv: args, env: base, isTty: false });
  return { code, stdout: out, stderr: err };
}

/** The real `npx ackbox …` process, as an operator runs it. */
function npxAckbox(args: readonly string[], env: Record<string, string> = {}, token: string | null = TOKEN) {
  const base = offlineEnv({ PATH, ACKBOX_LOCAL_DIR: NO_LOCAL_RUN, ...env });
  if (token !== null) base.ACKBOX_ADMIN_TOKEN = token;
  return run(NPX, ["ackbox", ...args], { env: base, timeoutMs: 60_000 });
}

function json<T = Record<string, unknown>>(text: string): T {
  return JSON.parse(text) as T;
}

describe("against a running instance", { timeout: 60_000 }, () => {
  let local: LocalIngress;
  /** The clock the rows were seeded by: every time filter below is explicit about it. */
  let seededAt: number;
  const url = () => ["--url", local.url];

  beforeAll(async () => {
    seededAt = Date.now();
    local = await startLocalIngress({ adminToken: TOKEN, seed: seedSql(seededAt) });
  }, 180_000);
  afterAll(async () => {
    await local?.stop();
  }, 30_000);

  describe("the real npx ackbox process (the bin entry, its environment, its exit code)", () => {
    it("--help prints the usage and exits 0", async () => {
      const result = await npxAckbox(["--help"]);
      expect(result.code).toBe(0);
      expect(result.stdout).toContain("Usage: npx ackbox <command>");
    });

    it("backlog --check against the instance, the token from ACKBOX_ADMIN_TOKEN: exits 7 while a check is breached", async () => {
      const result = await npxAckbox(["backlog", "--check", ...url()]);
      expect(result.stderr).toBe("");
      expect(result.code).toBe(7);
      expect(result.stdout).toContain("health: UNHEALTHY (oldest_pending, new_dead)");
    });

    it("no token: exits 4 and says which variable", async () => {
      const result = await npxAckbox(["dead", "list", ...url()], {}, null);
      expect(result.code).toBe(4);
      expect(result.stderr).toContain("ackbox: ACKBOX_ADMIN_TOKEN is not set");
    });
  });

  describe("--help", () => {
    it.each([
      [["--help"], "Usage: npx ackbox <command>"],
      [["backlog", "--help"], "Usage: npx ackbox backlog"],
      [["dead", "--help"], "Usage: npx ackbox dead <list|replay>"],
      [["dead", "list", "--help"], "Usage: npx ackbox dead list"],
      [["dead", "replay", "-h"], "Usage: npx ackbox dead replay"],
      [["events", "show", "--help"], "Usage: npx ackbox events show"],
    ])("%j prints its usage and exits 0", async (args, usage) => {
      const result = await ackbox(args);
      expect(result.code).toBe(0);
      expect(result.stdout).toContain(usage);
    });

    it("documents the exit codes", async () => {
      const { stdout } = await ackbox(["--help"]);
      for (const line of ["3  cannot reach --url", "4  no token", "5  no operator API", "7  backlog --check"])
        expect(stdout).toContain(line);
    });
  });

  describe("backlog", () => {
    it("prints health, the outbox figures, the windows and the queue line", async () => {
      const { code, stdout, stderr } = await ackbox(["backlog", ...url()]);
      expect(stderr).toBe("");
      expect(code).toBe(0);
      expect(stdout).toContain(`ackbox backlog at `);
      expect(stdout).toContain("health: UNHEALTHY (oldest_pending, new_dead)");
      // Seeded 700 s before seededAt: its age is 700 s plus however long the start and the tests took.
      const age = Number(/oldest_pending\s+BREACHED\s+oldest pending row is (\d+) s old \(limit 600 s\)/.exec(stdout)?.[1]);
      expect(age).toBeGreaterThanOrEqual(700);
      expect(age).toBeLessThanOrEqual(700 + Math.ceil((Date.now() - seededAt) / 1000));
      expect(stdout).toMatch(/^ {2}pending\s+1$/m);
      expect(stdout).toMatch(/^ {2}leased\s+1$/m);
      expect(stdout).toMatch(/^ {2}dead\s+3$/m);
      expect(stdout).toMatch(/^ {2}stale leases\s+1$/m);
      expect(stdout).toMatch(/^ {2}never enqueued\s+1$/m);
      expect(stdout).toMatch(/^ {2}chat\.postMessage\s+0\s+0\s+2$/m);
      expect(stdout).toMatch(/^ {2}reactions\.add\s+1\s+1\s+1$/m);
      expect(stdout).toMatch(/^ {2}5 min\s+1\s+/m);
      // The windows shortest first: 5 min, the 15 min alert window, 1 h.
      expect([...stdout.matchAll(/^ {2}(\d+ (?:min|h))\s+\d/gm)].map((m) => m[1])).toEqual(["5 min", "15 min", "1 h"]);
      expect(stdout).toContain("queue (binding metrics): 0 messages, 0 B");
      expect(stdout).not.toContain("cloudflare analytics");
    });

    it("--json prints the API's document", async () => {
      const { code, stdout } = await ackbox(["backlog", "--json", ...url()]);
      expect(code).toBe(0);
      const body = json<{ healthy: boolean; outbox: { pending: number; dead: number; oldestPendingAgeSeconds: number } }>(stdout);
      expect(body.healthy).toBe(false);
      expect(body.outbox).toMatchObject({ pending: 1, dead: 3 });
      expect(body.outbox.oldestPendingAgeSeconds).toBeGreaterThanOrEqual(700);
    });

    it("--check exits 7 while a check is breached", async () => {
      const { code, stdout } = await ackbox(["backlog", "--check", ...url()]);
      expect(code).toBe(7);
      expect(stdout).toContain("UNHEALTHY");
    });

    it("--watch --count prints that many snapshots, --interval apart, then stops", async () => {
      // The waits between snapshots are the CLI's sleep, recorded (and kept short) rather than slept out.
      const slept: number[] = [];
      const sleep = async (ms: number) => {
        slept.push(ms);
        await new Promise((resolve) => setTimeout(resolve, 20));
      };
      const argv = ["backlog", "--watch", "--interval", "1", "--count", "3", "--json", ...url()];
      const { code, out: stdout } = await runCli({
        argv,
        env: { ACKBOX_ADMIN_TOKEN: TOKEN, ACKBOX_LOCAL_DIR: NO_LOCAL_RUN },
        isTty: false,
        sleep,
      });
      expect(code).toBe(0);
      const snapshots = stdout
        .trim()
        .split("\n")
        .map((line) => json<{ at: string }>(line));
      expect(snapshots).toHaveLength(3);
      expect(new Set(snapshots.map((s) => s.at)).size).toBe(3);
      expect(slept).toEqual([1_000, 1_000]);
    });

    it("refuses --interval without --watch, and a bad --count", async () => {
      expect((await ackbox(["backlog", "--interval", "3", ...url()])).code).toBe(2);
      const bad = await ackbox(["backlog", "--watch", "--count", "zero", ...url()]);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain("--count wants a whole number");
    });
  });

  describe("dead list", () => {
    it("lists dead rows newest first with their errors", async () => {
      const { code, stdout } = await ackbox(["dead", "list", ...url()]);
      expect(code).toBe(0);
      const lines = stdout.trim().split("\n");
      expect(lines[0]).toMatch(/^\s*id\s+died \(UTC\)\s+effect\s+team\s+attempts\s+event \/ operation\s+last error$/);
      expect(lines.slice(1).map((l) => Number(l.trim().split(/\s+/)[0]))).toEqual([
        SEED_IDS.deadChannelOtherTeam,
        SEED_IDS.deadExhausted,
        SEED_IDS.deadChannel,
      ]);
      expect(stdout).toMatch(/101\s+\S+ \S+\s+chat\.postMessage\s+T0OPS\s+1\s+EvOPS0DEAD1\s+chat\.postMessage: channel_not_found/);
    });

    it.each([
      [
        ["--error", "CHANNEL_NOT_FOUND"],
        [106, 101],
      ],
      [
        ["--team", "T0OPS"],
        [102, 101],
      ],
      [["--filter", "effect=reactions.add"], [102]],
      [["--filter", "effect=chat.postMessage,team=T0OTHER"], [106]],
      // Died 3, 5 and 10 minutes before seededAt: the boundary 4 minutes before it, as epoch ms and as ISO 8601
      // (an age is measured from the ingress's clock, so only one that holds for a day is asked).
      [["--since", "seeded-4m"], [106]],
      [
        ["--until", "seeded-4m-iso"],
        [102, 101],
      ],
      [
        ["--since", "1d"],
        [106, 102, 101],
      ],
    ])("filters: %j", async (given, expected) => {
      const boundary = seededAt - 4 * MINUTE;
      const filters = given.map((arg) =>
        arg === "seeded-4m" ? String(boundary) : arg === "seeded-4m-iso" ? new Date(boundary).toISOString() : arg,
      );
      const { code, stdout } = await ackbox(["dead", "list", "--json", ...filters, ...url()]);
      expect(code).toBe(0);
      expect(json<{ rows: { id: number }[] }>(stdout).rows.map((r) => r.id)).toEqual(expected);
    });

    it("pages: --limit, then the printed --cursor gives the next page", async () => {
      const first = await ackbox(["dead", "list", "--limit", "2", ...url()]);
      const cursor = /--cursor (\S+)/.exec(first.stdout)?.[1];
      expect(cursor).toMatch(/^\d+\.\d+$/);
      const second = await ackbox(["dead", "list", "--json", "--limit", "2", "--cursor", cursor ?? "", ...url()]);
      const page = json<{ rows: { id: number }[]; nextCursor: string | null }>(second.stdout);
      expect(page.rows.map((r) => r.id)).toEqual([SEED_IDS.deadChannel]);
      expect(page.nextCursor).toBeNull();
    });

    it("says when nothing matches", async () => {
      const { code, stdout } = await ackbox(["dead", "list", "--effect", "chat.update", ...url()]);
      expect([code, stdout]).toEqual([0, "no dead rows match\n"]);
    });

    it("passes the API's refusal on as a usage error (exit 2)", async () => {
      const result = await ackbox(["dead", "list", "--since", "yesterday", ...url()]);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain("ackbox: refused: since: want epoch ms, ISO 8601 or an age like 15m, 2h, 7d");
    });

    it("refuses an unknown filter key and a key given twice", async () => {
      expect((await ackbox(["dead", "list", "--filter", "status=dead", ...url()])).stderr).toContain('unknown key "status"');
      expect((await ackbox(["dead", "list", "--team", "A", "--filter", "team=B", ...url()])).code).toBe(2);
    });
  });

  describe("events show", () => {
    it("prints the audit trail of an event", async () => {
      const { code, stdout } = await ackbox(["events", "show", "EvOPS0DEAD2", ...url()]);
      expect(code).toBe(0);
      expect(stdout).toContain("event EvOPS0DEAD2: event message, team T0OPS, received");
      expect(stdout).toContain("complete: no");
      expect(stdout).toContain("row 102  reactions.add  DEAD  (8 attempts this life, key EvOPS0DEAD2:eyes)");
      expect(stdout).toMatch(/\s+7\s+retry\s+reactions\.add: HTTP 503/);
      expect(stdout).toMatch(/\s+8\s+dead\s+attempts exhausted \(8 of 8\): reactions\.add: HTTP 503/);
    });

    it("--json prints the trail's document", async () => {
      const { stdout } = await ackbox(["events", "show", "EvOPS0DONE", "--json", ...url()]);
      const trail = json<{ complete: boolean; rows: { status: string; result: unknown }[] }>(stdout);
      expect(trail.complete).toBe(true);
      expect(trail.rows[0]).toMatchObject({ status: "done", result: { channel: "C0OPS", ts: "1764504001.000100" } });
    });

    it("exits 6 for an event it has never seen", async () => {
      const result = await ackbox(["events", "show", "EvNOSUCH", ...url()]);
      expect(result.code).toBe(6);
      expect(result.stderr).toBe("ackbox: no receipt or outbox row for EvNOSUCH (it may have been pruned)\n");
    });

    it("wants exactly one id", async () => {
      expect((await ackbox(["events", "show", ...url()])).code).toBe(2);
      expect((await ackbox(["events", "list", ...url()])).code).toBe(2);
    });
  });

  describe("errors an operator can act on", () => {
    it("no token: exit 4, says which variable", async () => {
      const result = await ackbox(["backlog", ...url()], {}, null);
      expect(result.code).toBe(4);
      expect(result.stderr).toBe(
        "ackbox: ACKBOX_ADMIN_TOKEN is not set: export it with the ingress's ADMIN_TOKEN " +
          "(against a running npm start it is found by itself: check --url, PORT and ACKBOX_LOCAL_DIR)\n",
      );
    });

    it("wrong token: exit 4, says it does not match", async () => {
      const result = await ackbox(["dead", "list", ...url()], {}, "not-the-token");
      expect(result.code).toBe(4);
      expect(result.stderr).toBe("ackbox: unauthorized (401): ACKBOX_ADMIN_TOKEN does not match the ingress's ADMIN_TOKEN\n");
      expect(result.stdout).toBe("");
    });

    it("nothing listening at --url: exit 3, connection refused", async () => {
      const port = await freePort();
      const result = await ackbox(["backlog", "--url", `http://127.0.0.1:${port}`]);
      expect(result.code).toBe(3);
      expect(result.stderr).toBe(`ackbox: cannot reach http://127.0.0.1:${port}: connection refused. Is it running, and is --url right?\n`);
    });

    it("https:// against the plain-HTTP port: exit 3, says it does not speak TLS (no OpenSSL dump)", async () => {
      const https = local.url.replace("http://", "https://");
      const result = await ackbox(["backlog", "--url", https]);
      expect(result.code).toBe(3);
      expect(result.stderr).toBe(
        `ackbox: cannot reach ${https}: it does not speak TLS on that port (https:// to a plain-HTTP server?): try ${local.url}. Is it running, and is --url right?\n`,
      );
    });

    it("no --url: the local run on PORT", async () => {
      const { code, stdout } = await ackbox(["backlog", "--json"], { PORT: new URL(local.url).port });
      expect(code).toBe(0);
      expect(json<{ outbox: { dead: number } }>(stdout).outbox.dead).toBeGreaterThan(0);
    });

    it("a --url that is not a URL: exit 2", async () => {
      const result = await ackbox(["backlog", "--url", "127.0.0.1:8787"]);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain("is not a URL");
    });

    it("a server that is not ackbox: exit 5 on a 404, exit 1 on an answer that is not JSON", async () => {
      const server = createServer((req, res) => {
        if (req.url?.startsWith("/admin/backlog")) {
          res.writeHead(200, { "content-type": "text/html" });
          res.end("<html>hello</html>");
        } else {
          res.writeHead(404);
          res.end("nope");
        }
      });
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      const other = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      try {
        const notFound = await ackbox(["dead", "list", "--url", other]);
        expect(notFound.code).toBe(5);
        expect(notFound.stderr).toContain("no operator API at");
        const notJson = await ackbox(["backlog", "--url", other]);
        expect(notJson.code).toBe(1);
        expect(notJson.stderr).toContain("the answer is not JSON");
      } finally {
        await new Promise((r) => server.close(r));
      }
    });

    it("unknown commands and options: exit 2 with a pointer to --help", async () => {
      for (const args of [["frobnicate"], ["dead", "bury"], ["backlog", "--frob"], ["backlog", "extra"]]) {
        const result = await ackbox([...args, ...url()]);
        expect(result.code, args.join(" ")).toBe(2);
        expect(result.stderr, args.join(" ")).toMatch(/^ackbox: .*(--help|see --help)/);
      }
      const bare = await ackbox([]);
      expect(bare.code).toBe(2);
      expect(bare.stderr).toContain("Usage: npx ackbox <command>");
    });
  });

  describe("cloudflare analytics (queueBacklogAdaptiveGroups) against a local fake", () => {
    let server: Server;
    let graphql: string;
    const seen: { auth: string | undefined; body: { query: string; variables: Record<string, string> } }[] = [];
    let answer: () => unknown = () => ({});

    beforeAll(async () => {
      server = createServer((req: IncomingMessage, res) => {
        const chunks: Buffer[] = [];
        req.on("data", (c: Buffer) => chunks.push(c));
        req.on("end", () => {
          seen.push({ auth: req.headers.authorization, body: JSON.parse(Buffer.concat(chunks).toString("utf8")) });
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify(answer()));
        });
      });
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      graphql = `http://127.0.0.1:${(server.address() as AddressInfo).port}/client/v4/graphql`;
    });
    afterAll(() => new Promise<void>((r) => server.close(() => r())));

    const cloudflare = (queueId?: string) => ({
      CLOUDFLARE_ACCOUNT_ID: "0123456789abcdef0123456789abcdef",
      CLOUDFLARE_API_TOKEN: "cf-analytics-token",
      CLOUDFLARE_GRAPHQL_URL: graphql,
      ...(queueId ? { CLOUDFLARE_QUEUE_ID: queueId } : {}),
    });

    it("asks the documented query and prints the newest minute per queue", async () => {
      seen.length = 0;
      answer = () => ({
        data: {
          viewer: {
            accounts: [
              {
                queueBacklogAdaptiveGroups: [
                  { avg: { messages: 42, bytes: 4096 }, dimensions: { datetimeMinute: "2026-11-30T11:59:00Z", queueId: "q0outbox" } },
                  { avg: { messages: 40, bytes: 4000 }, dimensions: { datetimeMinute: "2026-11-30T11:58:00Z", queueId: "q0outbox" } },
                  { avg: { messages: 0, bytes: 0 }, dimensions: { datetimeMinute: "2026-11-30T11:59:00Z", queueId: "q1dlq" } },
                ],
              },
            ],
          },
        },
        errors: null,
      });
      const { code, stdout } = await ackbox(["backlog", ...url()], cloudflare());
      expect(code).toBe(0);
      expect(stdout).toContain("cloudflare analytics (queueBacklogAdaptiveGroups, newest minute per queue)");
      expect(stdout).toMatch(/q0outbox\s+2026-11-30 11:59:00\s+42\s+4\.0 KiB/);
      expect(stdout).toMatch(/q1dlq\s+2026-11-30 11:59:00\s+0\s+0 B/);
      expect(seen).toHaveLength(1);
      expect(seen[0]?.auth).toBe("Bearer cf-analytics-token");
      expect(seen[0]?.body.query).toContain("queueBacklogAdaptiveGroups(");
      expect(seen[0]?.body.query).toContain("accounts(filter: { accountTag: $accountTag })");
      expect(seen[0]?.body.query).toMatch(/avg \{\s+messages\s+bytes\s+\}/);
      expect(seen[0]?.body.variables).toMatchObject({ accountTag: "0123456789abcdef0123456789abcdef" });
      const { datetimeStart, datetimeEnd } = seen[0]?.body.variables ?? {};
      expect(Date.parse(datetimeEnd ?? "") - Date.parse(datetimeStart ?? "")).toBe(30 * 60_000);
    });

    it("narrows to CLOUDFLARE_QUEUE_ID, and --json carries the figures", async () => {
      seen.length = 0;
      answer = () => ({
        data: {
          viewer: {
            accounts: [
              {
                queueBacklogAdaptiveGroups: [
                  { avg: { messages: 7, bytes: 700 }, dimensions: { datetimeMinute: "2026-11-30T11:59:00Z", queueId: "q0outbox" } },
                ],
              },
            ],
          },
        },
        errors: null,
      });
      const { stdout } = await ackbox(["backlog", "--json", ...url()], cloudflare("q0outbox"));
      expect(seen[0]?.body.variables.queueId).toBe("q0outbox");
      expect(seen[0]?.body.query).toContain("queueId: $queueId");
      expect(json<{ cloudflare: unknown }>(stdout).cloudflare).toMatchObject({
        available: true,
        queues: [{ queueId: "q0outbox", minute: "2026-11-30T11:59:00Z", messages: 7, bytes: 700 }],
      });
    });

    it("reports a GraphQL error in the output without failing the command", async () => {
      answer = () => ({ data: null, errors: [{ message: "not authorized for that account", path: ["viewer"] }] });
      const { code, stdout } = await ackbox(["backlog", ...url()], cloudflare());
      expect(code).toBe(0);
      expect(stdout).toContain("cloudflare analytics (queueBacklogAdaptiveGroups): unavailable (GraphQL: not authorized for that account)");
    });
  });

  describe("dead replay", () => {
    // Runs last in this instance: it changes the seeded state.
    it("needs to be told which rows", async () => {
      const result = await ackbox(["dead", "replay", ...url()]);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain("say which dead rows");
      expect((await ackbox(["dead", "replay", "--id", "abc", ...url()])).code).toBe(2);
      expect((await ackbox(["dead", "replay", "--id", "101", "--all", ...url()])).code).toBe(2);
    });

    it("a dry run shows what would move and changes nothing", async () => {
      const before = await ackbox(["dead", "list", "--json", ...url()]);
      const { code, stdout } = await ackbox(["dead", "replay", "--error", "channel_not_found", "--dry-run", ...url()]);
      expect(code).toBe(0);
      expect(stdout).toContain("dry run: would replay 2 dead row(s)");
      expect(stdout).toMatch(/106\s+chat\.postMessage\s+EvOPS0DEAD3\s+0 s\s+chat\.postMessage: channel_not_found/);
      expect((await ackbox(["dead", "list", "--json", ...url()])).stdout).toBe(before.stdout);
    });

    it("replays the filtered dead rows once: the second run finds none", async () => {
      const first = await ackbox(["dead", "replay", "--error", "channel_not_found", ...url()]);
      expect(first.code).toBe(0);
      expect(first.stdout).toContain("replayed 2 dead row(s)");
      expect(first.stdout).toContain("queue: 2 sent");
      const second = await ackbox(["dead", "replay", "--error", "channel_not_found", ...url()]);
      expect(second.stdout).toBe("replayed 0 dead row(s)\n");
      const left = json<{ rows: { id: number }[] }>((await ackbox(["dead", "list", "--json", ...url()])).stdout);
      expect(left.rows.map((r) => r.id)).toEqual([SEED_IDS.deadExhausted]);
      const trail = await ackbox(["events", "show", "EvOPS0DEAD1", ...url()]);
      expect(trail.stdout).toContain("row 101  chat.postMessage  PENDING  (0 attempts this life");
      expect(trail.stdout).toMatch(/\s+1\s+replay\s+chat\.postMessage: channel_not_found/);
    });

    it("by id: replays the dead one, skips the others untouched", async () => {
      const { code, stdout } = await ackbox([
        "dead",
        "replay",
        "--id",
        `${SEED_IDS.deadExhausted},${SEED_IDS.oldPending}`,
        "--id",
        "999",
        ...url(),
      ]);
      expect(code).toBe(0);
      expect(stdout).toContain("replayed 1 dead row(s)");
      expect(stdout).toContain(`skipped (not dead, untouched): ${SEED_IDS.oldPending} (pending), 999 (missing)`);
      const backlog = json<{ outbox: { dead: number; pending: number } }>((await ackbox(["backlog", "--json", ...url()])).stdout);
      expect(backlog.outbox).toMatchObject({ dead: 0, pending: 4 });
    });
  });
});

describe("against an instance with the operator API off (ADMIN_TOKEN unset)", { timeout: 60_000 }, () => {
  let local: LocalIngress;
  beforeAll(async () => {
    local = await startLocalIngress({});
  }, 180_000);
  afterAll(async () => {
    await local?.stop();
  }, 30_000);

  it.each([[["backlog"]], [["dead", "list"]], [["events", "show", "EvOPS0DEAD1"]], [["dead", "replay", "--all"]]])(
    "%j exits 5 and says the API is off",
    async (args) => {
      const result = await ackbox([...args, "--url", local.url]);
      expect(result.code).toBe(5);
      expect(result.stderr).toBe(
        `ackbox: no operator API at ${local.url} (404): ADMIN_TOKEN is unset there (the API is off: npx wrangler secret put ADMIN_TOKEN turns it on; npm start sets its own), or this is not an ackbox ingress\n`,
      );
    },
  );
});
