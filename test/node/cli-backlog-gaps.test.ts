/**
 * `npx ackbox backlog` shows the delivery gaps GET /admin/backlog answers
 * (test/ingress/admin.gaps.test.ts proves the real answer), each with the
 * backfill that recovers it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Backlog } from "../../cli/api.ts";
import { runCli, serveJson } from "./support/cli-in-process.ts";

const AT = "2027-01-15T12:00:00.000Z";
const base: Backlog = {
  at: AT,
  healthy: true,
  health: [],
  outbox: {
    pending: 0,
    leased: 0,
    dead: 0,
    byEffect: {},
    oldestPendingAgeSeconds: null,
    oldestPendingCreatedAt: null,
    staleLeases: 0,
    neverEnqueued: 0,
    overdue: 0,
    countCap: 10_000,
    capped: false,
  },
  blockedTeams: [],
  lastAlertPost: null,
  windows: [],
  queue: { available: false, reason: "not measured" },
  alerts: [],
};
const gap = {
  teamId: "T0TEAM",
  channel: "C0LOST",
  from: "2027-01-15T09:00:00.000Z",
  until: "2027-01-15T10:30:00.000Z",
  seconds: 5400,
  backfill: "npx ackbox backfill --channel C0LOST --since 2027-01-15T08:54:00Z --until 2027-01-15T10:30:00Z",
};

let current: Backlog;
let served: Awaited<ReturnType<typeof serveJson>>;
beforeAll(async () => {
  served = await serveJson((path) => (path === "/admin/backlog" ? [200, JSON.stringify(current)] : [404, "{}"]));
});
afterAll(() => served.close());

const run = (...argv: string[]) =>
  runCli({ argv: [...argv, "--url", served.url], env: { ACKBOX_ADMIN_TOKEN: "cli-backlog-gaps-token-0123456789ab" }, isTty: false });

describe("npx ackbox backlog: delivery gaps", () => {
  it("lists each gap with how long it lasted and the backfill that recovers it", async () => {
    current = { ...base, deliveryGaps: [gap] };
    const { code, out } = await run("backlog");
    expect(code).toBe(0);
    expect(out).toContain("delivery gaps: channels silent longer than Slack's retry window");
    expect(out).toMatch(
      /C0LOST\s+2027-01-15 09:00:00\s+2027-01-15 10:30:00\s+1\.5 h\s+npx ackbox backfill --channel C0LOST --since 2027-01-15T08:54:00Z/,
    );
  });

  it("says nothing of gaps when there are none (or the ingress predates them)", async () => {
    for (const answer of [{ ...base, deliveryGaps: [] }, base]) {
      current = answer;
      expect((await run("backlog")).out).not.toContain("delivery gaps");
    }
  });
});
