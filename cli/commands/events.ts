/** `ackbox events show <event_id or operation id>`: the audit trail of one event. */
import type { Trail } from "../api.ts";
import type { Context } from "../context.ts";
import { EXIT, type ExitCode } from "../exit.ts";
import { pairs, table, when } from "../format.ts";

export async function eventsShowCommand(ctx: Context, id: string): Promise<ExitCode> {
  const trail = await ctx.client.get<Trail>(`/admin/events/${encodeURIComponent(id)}`);
  if (ctx.json) {
    ctx.out(`${JSON.stringify(trail)}\n`);
    return EXIT.ok;
  }
  const lines: string[] = [];
  const r = trail.receipt;
  lines.push(
    r
      ? `event ${trail.id}: ${r.kind} ${r.type}${r.teamId ? `, team ${r.teamId}` : ""}, received ${when(r.receivedAt)} UTC${r.retryNum ? ` (Slack retry ${r.retryNum})` : ""}`
      : `event ${trail.id}: receipt pruned (past RECEIPT_RETENTION_HOURS); its rows remain`,
    `complete: ${trail.complete ? "yes, every effect done" : "no"}`,
  );
  for (const row of trail.rows) {
    lines.push(
      "",
      `row ${row.id}  ${row.effect}  ${row.status.toUpperCase()}  (${row.attempts} attempt${row.attempts === 1 ? "" : "s"} this life, key ${row.key})`,
      pairs([
        ["created", when(row.createdAt)],
        ["enqueued", when(row.enqueuedAt)],
        ["next attempt", row.status === "pending" ? when(row.nextAttemptAt) : "-"],
        ["lease expires", when(row.leaseExpiresAt)],
        ["deadline", when(row.deadline)],
        [row.status === "dead" ? "died" : "completed", when(row.completedAt)],
        ["sweeps", row.sweeps],
        ["last error", row.lastError],
        ["result", row.result === null ? null : JSON.stringify(row.result)],
        ["payload", JSON.stringify(row.payload)],
      ]),
    );
    if (row.history.length > 0) {
      lines.push(
        "  history (failed attempts, fence losses, dead letters, replays; a success writes none):",
        table(
          row.history,
          [
            { title: "finished (UTC)", value: (h) => when(h.finishedAt) },
            { title: "attempt", value: (h) => h.attempt, align: "right" },
            { title: "outcome", value: (h) => h.outcome },
            { title: "error", value: (h) => h.error, max: 100 },
          ],
          "    ",
        ),
      );
    }
  }
  ctx.out(`${lines.join("\n")}\n`);
  return EXIT.ok;
}
