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
    let out = "";
    const ctx = {
      client: { get: async () => trail } as unknown as AdminClient,
      json: false,
      out: (text: string) => {
        out += text;
      },
    } as unknown as Context;
    await eventsShowCommand(ctx, "command:T1:t");
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
    let out = "";
    const ctx = {
      client: { get: async () => trail } as unknown as AdminClient,
      json: false,
      out: (text: string) => {
        out += text;
      },
    } as unknown as Context;
    await eventsShowCommand(ctx, "EvONE");
    expect(out).toContain("team T0TEAM, received 2026-11-30 12:00:00 UTC, on shard 1");
    const heads = out.split("\n").filter((line) => /row \d+:\d+ {2}/.test(line));
    expect(heads.map((line) => line.replace(/ {2}DONE.*/, ""))).toEqual([
      "row 1:10  ask-placeholder",
      "    ↳ follow-up of row 1:10: row 1:12  ask-service",
    ]);
  });
});
