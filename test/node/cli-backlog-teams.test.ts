/**
 * `npx ackbox backlog`, in process, against a stand-in operator API answering
 * what GET /admin/backlog answers (its type is the Worker's own contract,
 * shared/ops/backlog-answer.ts; test/ingress/admin.backlog.test.ts proves the
 * real answer): the teams waiting for their installation and a dead alert
 * post are named in the human view, and are in --json as they came; the
 * shard_count check (the Workers disagreeing on SHARD_COUNT) fails --check.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Backlog } from "../../cli/api.ts";
import { runCli, serveJson } from "./support/cli-in-process.ts";

const AT = "2027-01-15T12:00:00.000Z";

function answer(over: Partial<Backlog> = {}): Backlog {
  return {
    at: AT,
    healthy: false,
    health: [
      {
        kind: "oldest_pending",
        breached: true,
        value: 700,
        threshold: 600,
        detail:
          "oldest pending row is 700 s old (limit 600 s); waiting for their installation: team T0BLOCK blocked (token_revoked): 2 row(s) waiting since 2027-01-15T11:48:20.000Z",
      },
    ],
    outbox: {
      pending: 3,
      leased: 0,
      dead: 1,
      byEffect: {},
      oldestPendingAgeSeconds: 700,
      oldestPendingDueAt: "2027-01-15T11:48:20.000Z",
      waitingForTime: 0,
      nextTimerAt: null,
      staleLeases: 0,
      neverEnqueued: 0,
      overdue: 0,
      countCap: 10_000,
      capped: false,
    },
    blockedTeams: [
      {
        teamId: "T0BLOCK",
        installKey: "T:T0BLOCK",
        state: "blocked",
        reason: "token_revoked",
        blockedAt: "2027-01-15T11:55:00.000Z",
        rows: 2,
        waitingSince: "2027-01-15T11:48:20.000Z",
      },
      {
        teamId: "T0NONE",
        installKey: null,
        state: "missing",
        reason: null,
        blockedAt: null,
        rows: 1,
        waitingSince: "2027-01-15T11:59:00.000Z",
      },
    ],
    lastAlertPost: { id: 42, status: "dead", error: "chat.postMessage: channel_not_found", channel: "C0ALERTS" },
    windows: [],
    queue: { available: false, reason: "not measured" },
    alerts: [],
    ...over,
  };
}

let current: Backlog;
let served: Awaited<ReturnType<typeof serveJson>>;
beforeAll(async () => {
  served = await serveJson((path) => (path === "/admin/backlog" ? [200, JSON.stringify(current)] : [404, "{}"]));
});
afterAll(() => served.close());

const run = (...argv: string[]) =>
  runCli({ argv: [...argv, "--url", served.url], env: { ACKBOX_ADMIN_TOKEN: "cli-backlog-token-0123456789abcdef" }, isTty: false });

describe("npx ackbox backlog: blocked teams and the alert channel", () => {
  it("names each waiting team, its state, its rows and since when, and a dead alert post with how to fix it", async () => {
    current = answer();
    const { code, out } = await run("backlog");
    expect(code).toBe(0);
    expect(out).toContain("teams waiting for their installation (re-install at /slack/install: the rows resume)");
    expect(out).toMatch(/T0BLOCK\s+blocked \(token_revoked\)\s+2\s+2027-01-15 11:48:20\s+2027-01-15 11:55:00/);
    expect(out).toMatch(/T0NONE\s+not installed\s+1\s+2027-01-15 11:59:00\s+-/);
    expect(out).toContain(
      "alert channel: DEAD — the last alert post (row 42, channel C0ALERTS) died of chat.postMessage: channel_not_found; alerts are only logged until it is replayed",
    );
    expect(out).toContain("npx ackbox dead replay --id 42");
  });

  it("says nothing of either when no team waits and the last alert post went out", async () => {
    current = answer({ blockedTeams: [], lastAlertPost: { id: 7, status: "done", error: null, channel: "C0ALERTS" } });
    const { out } = await run("backlog");
    expect(out).not.toContain("waiting for their installation (");
    expect(out).not.toContain("alert channel");
  });

  it("passes both through --json as the API answered them", async () => {
    current = answer();
    const { code, out } = await run("backlog", "--json");
    expect(code).toBe(0);
    const parsed = JSON.parse(out) as Backlog;
    expect(parsed.blockedTeams).toEqual(current.blockedTeams);
    expect(parsed.lastAlertPost).toEqual(current.lastAlertPost);
  });
});

describe("npx ackbox backlog: the Workers disagreeing on SHARD_COUNT", () => {
  it("shows the shard_count check breached with its detail, and --check exits 7 on it alone", async () => {
    const detail =
      "the consumer got a queue message for a shard it does not have 12 s ago: its SHARD_COUNT is lower than this ingress's (2), and those rows are neither delivered nor swept; deploy both Workers with the same SHARD_COUNT";
    current = answer({
      healthy: false,
      health: [{ kind: "shard_count", breached: true, value: 12, threshold: 1800, detail }],
      blockedTeams: [],
      lastAlertPost: null,
    });
    const { code, out } = await run("backlog", "--check");
    expect(code).toBe(7);
    expect(out).toContain("health: UNHEALTHY (shard_count)");
    expect(out).toMatch(/shard_count\s+BREACHED\s+the consumer got a queue message for a shard it does not have/);
  });
});

// The delivery gaps GET /admin/backlog answers (test/ingress/admin.gaps.test.ts proves the real answer).
describe("npx ackbox backlog: delivery gaps", () => {
  const gap = {
    teamId: "T0TEAM",
    from: "2027-01-15T09:00:00.000Z",
    until: "2027-01-15T10:30:00.000Z",
    seconds: 5400,
    refusedFrom: "2027-01-15T09:01:00.000Z",
    backfill: "npx ackbox backfill --all-channels --since 2027-01-15T08:54:00Z --until 2027-01-15T10:30:00Z",
  };

  it("lists each gap with how long it lasted, when requests were refused by their signature in it, and the backfill that recovers it", async () => {
    current = answer({ deliveryGaps: [gap, { ...gap, teamId: "T0QUIET", refusedFrom: null }] });
    const { code, out } = await run("backlog");
    expect(code).toBe(0);
    expect(out).toContain("delivery gaps: workspaces the ingress heard nothing signed from for longer than Slack's retry window");
    expect(out).toMatch(
      /T0TEAM\s+2027-01-15 09:00:00\s+2027-01-15 10:30:00\s+1\.5 h\s+2027-01-15 09:01:00\s+npx ackbox backfill --all-channels --since 2027-01-15T08:54:00Z/,
    );
    expect(out).toMatch(/T0QUIET\s+2027-01-15 09:00:00\s+2027-01-15 10:30:00\s+1\.5 h\s+-\s+npx ackbox backfill/);
  });

  it("says nothing of gaps when there are none (or the ingress predates them)", async () => {
    for (const backlog of [answer({ deliveryGaps: [] }), answer()]) {
      current = backlog;
      expect((await run("backlog")).out).not.toContain("delivery gaps");
    }
  });
});

// The timers' and custom steps' figures GET /admin/backlog answers (test/ingress/admin.backlog.test.ts proves the real answer).
describe("npx ackbox backlog: timers and custom steps, as operators read them", () => {
  it("says how many rows wait for their time and when the next is, how late the oldest owed row is, and the steps waiting for a user", async () => {
    current = answer({
      outbox: {
        ...answer().outbox,
        oldestPendingAgeSeconds: 700,
        oldestPendingDueAt: "2027-01-15T11:48:20.000Z",
        waitingForTime: 4,
        nextTimerAt: "2027-01-15T13:00:00.000Z",
      },
      customSteps: { executions: 3, waitingForUser: 2, nearExpiry: 1, nextExpiryAt: "2027-01-15T12:02:00.000Z" },
    });
    const { code, out } = await run("backlog");
    expect(code).toBe(0);
    expect(out).toMatch(/^ {4}waiting for their time {2,}4 \(next at 2027-01-15 13:00:00\)$/m);
    expect(out).toMatch(/^ {2}oldest pending {2,}11 min 40 s late \(owed since 2027-01-15 11:48:20\)$/m);
    expect(out).toContain("custom steps (executions whose workflow token is held)");
    expect(out).toMatch(/^ {2}executions {2,}3$/m);
    expect(out).toMatch(/^ {2}waiting for a user {2,}2$/m);
    expect(out).toMatch(/^ {2}near token expiry {2,}1 \(next token dies at 2027-01-15 12:02:00 UTC\)$/m);
  });

  it("with nothing waiting: zeros, no next time, nothing late", async () => {
    current = answer({
      outbox: { ...answer().outbox, oldestPendingAgeSeconds: null, oldestPendingDueAt: null, waitingForTime: 0, nextTimerAt: null },
      customSteps: { executions: 0, waitingForUser: 0, nearExpiry: 0, nextExpiryAt: null },
    });
    const { out } = await run("backlog");
    expect(out).toMatch(/^ {4}waiting for their time {2,}0$/m);
    expect(out).toMatch(/^ {2}oldest pending {2,}-$/m);
    expect(out).toMatch(/^ {2}waiting for a user {2,}0$/m);
  });
});
