/** `ackbox timers list [--team] [--due-before] [--limit] [--cursor]`: pending and cancelled timers, soonest first. */
import type { TimersPage } from "../api.ts";
import type { Context } from "../context.ts";
import { EXIT, type ExitCode } from "../exit.ts";
import { table, when } from "../format.ts";

export interface TimersOptions {
  readonly team: string | undefined;
  /** As given: epoch ms, ISO 8601, or a span from now (the API parses it). */
  readonly dueBefore: string | undefined;
  readonly limit: string | undefined;
  readonly cursor: string | undefined;
}

export async function timersListCommand(ctx: Context, options: TimersOptions): Promise<ExitCode> {
  const query = new URLSearchParams();
  if (options.team !== undefined) query.set("team", options.team);
  if (options.dueBefore !== undefined) query.set("due_before", options.dueBefore);
  if (options.limit !== undefined) query.set("limit", options.limit);
  if (options.cursor !== undefined) query.set("cursor", options.cursor);
  const page = await ctx.client.get<TimersPage>(`/admin/timers${query.size > 0 ? `?${query}` : ""}`);
  if (ctx.json) {
    ctx.out(`${JSON.stringify(page)}\n`);
    return EXIT.ok;
  }
  if (page.rows.length === 0) ctx.out("no timers match\n");
  else {
    ctx.out(
      `${table(page.rows, [
        { title: page.shardCount > 1 ? "ref" : "id", value: (r) => r.ref, align: "right" },
        { title: "time (UTC)", value: (r) => when(r.dueAt) },
        // waiting: its time is ahead; due: its time has come, not yet attempted; retrying; cancelled (never performed).
        { title: "state", value: (r) => (r.state === "retrying" ? `retrying (${r.attempts})` : r.state) },
        { title: "effect", value: (r) => r.effect },
        { title: "team", value: (r) => r.teamId },
        { title: "name", value: (r) => r.name, max: 48 },
        { title: "event / operation", value: (r) => r.receiptId, max: 40 },
        { title: "cancelled by", value: (r) => r.cancelledBy, max: 40 },
      ])}\n`,
    );
  }
  if (page.nextCursor) ctx.out(`more: npx ackbox timers list --cursor ${page.nextCursor} (with the same filters)\n`);
  return EXIT.ok;
}
