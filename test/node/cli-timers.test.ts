/**
 * `npx ackbox timers list`, in process against a loopback server answering GET /admin/timers as the Worker
 * does: what it asks (the filters as query parameters), what it prints (a row per timer, its state, the next
 * page's command), --json as given, and the usage errors it answers before any request.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { TimersPage } from "../../cli/api.ts";
import { runCli, serveJson } from "./support/cli-in-process.ts";

const page: TimersPage = {
  shardCount: 2,
  at: "2026-11-30T12:00:00.000Z",
  rows: [
    {
      ref: "0:7",
      shard: 0,
      id: 7,
      key: "name:T0AAA:remind%3AU1%3A1.2.3",
      name: "remind:U1:1.2.3",
      receiptId: "command:T0AAA:1.2.3",
      teamId: "T0AAA",
      effect: "chat.postMessage",
      dueAt: "2026-11-30T12:01:00.000Z",
      state: "waiting",
      attempts: 0,
      nextAttemptAt: "2026-11-30T12:01:00.000Z",
      lastError: null,
      createdAt: "2026-11-30T12:00:00.000Z",
      cancelledBy: null,
      cancelledAt: null,
      payload: { channel: "C1" },
    },
    {
      ref: "1:3",
      shard: 1,
      id: 3,
      key: "name:T0BBB:esc",
      name: "esc",
      receiptId: "Ev1",
      teamId: "T0BBB",
      effect: "chat.postMessage",
      dueAt: "2026-11-30T12:05:00.000Z",
      state: "cancelled",
      attempts: 0,
      nextAttemptAt: "2026-11-30T12:05:00.000Z",
      lastError: null,
      createdAt: "2026-11-30T11:00:00.000Z",
      cancelledBy: "interaction:T0BBB:9",
      cancelledAt: "2026-11-30T11:30:00.000Z",
      payload: {},
    },
  ],
  nextCursor: "1764504300000.1.3",
};

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

async function against(answer: TimersPage) {
  const asked: string[] = [];
  const server = await serveJson((path) => {
    asked.push(path);
    return [200, JSON.stringify(answer)];
  });
  close = server.close;
  const run = (...argv: string[]) =>
    runCli({ argv: [...argv, "--url", server.url], env: { ACKBOX_ADMIN_TOKEN: "t".repeat(40) }, isTty: false });
  return { asked, run };
}

describe("npx ackbox timers list", () => {
  it("asks for the filters given and prints each timer: its time, state, name, event, who cancelled it; then the next page", async () => {
    const { asked, run } = await against(page);
    const { code, out } = await run("timers", "list", "--team", "T0AAA", "--due-before", "2h", "--limit", "2");
    expect(code).toBe(0);
    expect(asked).toEqual(["/admin/timers?team=T0AAA&due_before=2h&limit=2"]);
    const lines = out.trimEnd().split("\n");
    expect(lines[0]?.split(/ {2,}/)).toEqual(["ref", "time (UTC)", "state", "effect", "team", "name", "event / operation", "cancelled by"]);
    expect(lines[1]?.trim().split(/ {2,}/)).toEqual([
      "0:7",
      "2026-11-30 12:01:00",
      "waiting",
      "chat.postMessage",
      "T0AAA",
      "remind:U1:1.2.3",
      "command:T0AAA:1.2.3",
      "-",
    ]);
    expect(lines[2]).toContain("cancelled");
    expect(lines[2]).toContain("interaction:T0BBB:9");
    expect(lines.at(-1)).toBe("more: npx ackbox timers list --cursor 1764504300000.1.3 (with the same filters)");
  });

  it("--json prints the answer as it came", async () => {
    const { run } = await against({ ...page, nextCursor: null });
    const { out } = await run("timers", "list", "--json");
    expect(JSON.parse(out)).toEqual({ ...page, nextCursor: null });
  });

  it("says so when nothing matches", async () => {
    const { run } = await against({ ...page, rows: [], nextCursor: null });
    expect((await run("timers", "list")).out).toBe("no timers match\n");
  });

  it("refuses a bad team, a bad limit, an unknown verb or option before asking anything (exit 2)", async () => {
    const { asked, run } = await against(page);
    for (const argv of [
      ["timers", "list", "--team", "t0aaa"],
      ["timers", "list", "--limit", "0"],
      ["timers", "show"],
      ["timers", "list", "--since", "1h"],
    ]) {
      const { code, err } = await run(...argv);
      expect(code, argv.join(" ")).toBe(2);
      expect(err, argv.join(" ")).toMatch(/^ackbox: /);
    }
    expect(asked).toEqual([]);
  });
});
