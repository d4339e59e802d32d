/**
 * `ackbox events show` lays a chain of follow-ups out under its parent.
 * (The command against a running instance: cli.test.ts; this is its layout,
 * from a trail document as GET /admin/events answers it.)
 */
import { describe, expect, it } from "vitest";
import type { Trail } from "../../cli/api.ts";
import type { AdminClient } from "../../cli/client.ts";
import { eventsShowCommand } from "../../cli/commands/events.ts";
import type { Context } from "../../cli/context.ts";

const row = (id: number, effect: string, parentId: number | null, depth: number, shard?: number): Trail["rows"][number] => ({
  // The API's ref: the plain id with one shard, "<shard>:<id>" with several.
  ref: shard === undefined ? String(id) : `${shard}:${id}`,
  shard: shard ?? 0,
  id,
  key: `command:T1:t:ask-placeholder${">x".repeat(depth)}`,
  effect,
  parentId,
  depth,
  status: "done",
  attempts: 1,
  lastError: null,
  payload: {},
  result: null,
  createdAt: "2026-11-30T12:00:00.000Z",
  enqueuedAt: null,
  nextAttemptAt: "2026-11-30T12:00:00.000Z",
  leaseExpiresAt: null,
  deadline: null,
  completedAt: "2026-11-30T12:00:01.000Z",
  sweeps: 0,
  history: [],
});

/** What events show prints for a trail document, as GET /admin/events would answer it. */
async function render(trail: Trail): Promise<string> {
  let out = "";
  const ctx = {
    client: { get: async () => trail } as unknown as AdminClient,
    json: false,
    out: (text: string) => {
      out += text;
    },
  } as unknown as Context;
  await eventsShowCommand(ctx, trail.id);
  return out;
}

describe("events show", () => {
  it("lists each follow-up under the row that asked for it, indented by depth", async () => {
    // Ids out of chain order on purpose: a second root (11) between the chain's rows.
    const trail: Trail = {
      id: "command:T1:t",
      shards: [0],
      receipt: {
        shard: 0,
        id: "command:T1:t",
        kind: "command",
        type: "/ask",
        teamId: "T1",
        retryNum: null,
        receivedAt: "2026-11-30T12:00:00.000Z",
      },
      complete: true,
      rows: [
        row(10, "ask-placeholder", null, 0),
        row(11, "response_url", null, 0),
        row(12, "ask-service", 10, 1),
        row(13, "chat.update", 12, 2),
      ],
    };
    const out = await render(trail);
    const heads = out.split("\n").filter((line) => /row \d+ {2}/.test(line));
    expect(heads.map((line) => line.replace(/ {2}DONE.*/, ""))).toEqual([
      "row 10  ask-placeholder",
      "    ↳ follow-up of row 10: row 12  ask-service",
      "        ↳ follow-up of row 12: row 13  chat.update",
      "row 11  response_url",
    ]);
  });

  it("with several shards names each row by its ref and says the receipt's shard, chains kept on their shard", async () => {
    const trail: Trail = {
      id: "EvONE",
      shards: [1],
      receipt: {
        shard: 1,
        id: "EvONE",
        kind: "event",
        type: "app_mention",
        teamId: "T0TEAM",
        retryNum: null,
        receivedAt: "2026-11-30T12:00:00.000Z",
      },
      complete: true,
      rows: [row(10, "ask-placeholder", null, 0, 1), row(12, "ask-service", 10, 1, 1)],
    };
    const out = await render(trail);
    expect(out).toContain("team T0TEAM, received 2026-11-30 12:00:00 UTC, on shard 1");
    const heads = out.split("\n").filter((line) => /row \d+:\d+ {2}/.test(line));
    expect(heads.map((line) => line.replace(/ {2}DONE.*/, ""))).toEqual([
      "row 1:10  ask-placeholder",
      "    ↳ follow-up of row 1:10: row 1:12  ask-service",
    ]);
  });
});

describe("events show: names and cancels", () => {
  const receipt = (id: string) => ({
    shard: 0,
    id,
    kind: "interaction",
    type: "block_actions",
    teamId: "T1",
    retryNum: null,
    receivedAt: "2026-11-30T12:00:00.000Z",
  });

  it("a cancelled named row says CANCELLED, its name and the input that cancelled it", async () => {
    const cancelled = {
      ...row(7, "chat.postMessage", null, 0),
      status: "cancelled",
      name: "remind:U1:1.2",
      cancelledBy: "interaction:T1:9",
    };
    const out = await render({ id: "command:T1:t", shards: [0], receipt: receipt("command:T1:t"), complete: true, rows: [cancelled] });
    expect(out).toContain("row 7  chat.postMessage  CANCELLED");
    expect(out).toMatch(/name +remind:U1:1\.2/);
    expect(out).toMatch(/cancelled by +interaction:T1:9 \(never performed\)/);
    expect(out).toMatch(/\n {2}cancelled +2026-11-30 12:00:01/);
  });

  it("the asking input's trail ends with what each of its cancels found", async () => {
    const out = await render({
      id: "interaction:T1:9",
      shards: [0],
      receipt: receipt("interaction:T1:9"),
      complete: true,
      rows: [],
      cancels: [
        { name: "remind:U1:1.2", byRow: null, outcome: "cancelled", rowRef: "7", rowStatus: "pending", at: "2026-11-30T12:00:05.000Z" },
        { name: "late", byRow: null, outcome: "too_late", rowRef: "8", rowStatus: "leased", at: "2026-11-30T12:00:05.000Z" },
        { name: "gone", byRow: null, outcome: "nothing_to_cancel", rowRef: null, rowStatus: null, at: "2026-11-30T12:00:05.000Z" },
      ],
    });
    const lines = out.split("\n");
    const from = lines.findIndex((l) => l.startsWith("cancels ("));
    expect(lines.slice(from + 2, from + 5).map((l) => l.trim().split(/ {2,}/))).toEqual([
      ["2026-11-30 12:00:05", "the input", "remind:U1:1.2", "cancelled", "7"],
      ["2026-11-30 12:00:05", "the input", "late", "too late (leased)", "8"],
      ["2026-11-30 12:00:05", "the input", "gone", "nothing to cancel", "-"],
    ]);
  });
});

describe("events show: a custom step's execution", () => {
  const execution = (over: Partial<NonNullable<Trail["execution"]>> = {}): NonNullable<Trail["execution"]> => ({
    shard: 0,
    id: "Fx0WAIT",
    teamId: "T1",
    callbackId: "ackbox_approval",
    receiptId: "Ev0EXEC",
    tokenIssuedAt: "2026-11-30T12:00:00.000Z",
    tokenExpiresAt: "2026-11-30T12:15:00.000Z",
    workflowToken: "completed",
    endedAt: "2026-11-30T12:03:00.000Z",
    completion: { rowRef: "3", effect: "functions.completeSuccess", status: "done" },
    deadline: { rowRef: "2", status: "cancelled", dueAt: "2026-11-30T12:10:00.000Z" },
    ...over,
  });

  it("by its id: every row of it, and its token's life, its completion and its deadline (never the token)", async () => {
    const out = await render({
      id: "Fx0WAIT",
      shards: [0],
      receipt: null,
      complete: true,
      rows: [
        row(1, "chat.postMessage", null, 0),
        { ...row(2, "functions.completeError", null, 0), status: "cancelled" },
        row(3, "functions.completeSuccess", null, 0),
      ],
      execution: execution(),
    });
    const lines = out.split("\n");
    expect(lines[0]).toBe("execution Fx0WAIT: every row of it, whichever input recorded them");
    expect(out).toContain(
      "custom step ackbox_approval, execution Fx0WAIT, team T1: its workflow token came with Ev0EXEC, issued 2026-11-30 12:00:00 UTC",
    );
    expect(out).toMatch(/workflow token +scrubbed: completed \(2026-11-30 12:03:00 UTC\)/);
    expect(out).toMatch(/completion +row 3 functions\.completeSuccess DONE/);
    expect(out).toMatch(/deadline +row 2 CANCELLED \(due 2026-11-30 12:10:00 UTC\)/);
  });

  it("one still waiting for a user says so, and when its token dies", async () => {
    const out = await render({
      id: "Ev0EXEC",
      shards: [0],
      receipt: {
        shard: 0,
        id: "Ev0EXEC",
        kind: "event",
        type: "function_executed",
        teamId: "T1",
        retryNum: null,
        receivedAt: "2026-11-30T12:00:00.000Z",
      },
      complete: false,
      rows: [],
      execution: execution({
        workflowToken: "held",
        endedAt: null,
        completion: null,
        deadline: { rowRef: "2", status: "pending", dueAt: "2026-11-30T12:10:00.000Z" },
      }),
    });
    expect(out).toMatch(/workflow token +held \(dies 2026-11-30 12:15:00 UTC\)/);
    expect(out).toMatch(/completion +none recorded yet: the step waits for a user/);
    expect(out).toMatch(/deadline +row 2 PENDING \(due/);
  });
});
