/**
 * `ackbox events show <event_id, operation id or custom step execution id>`: the audit trail of one event, or of
 * one execution of a custom step (Fx…: every row of it, whichever input recorded them).
 */
import type { Trail } from "../api.ts";
import type { Context } from "../context.ts";
import { EXIT, type ExitCode } from "../exit.ts";
import { pairs, table, when } from "../format.ts";

/** `team`: look only on that team's shard; without it the API looks on every shard (an event id does not name a team). */
export async function eventsShowCommand(ctx: Context, id: string, team?: string): Promise<ExitCode> {
  const query = team === undefined ? "" : `?team=${encodeURIComponent(team)}`;
  const trail = await ctx.client.get<Trail>(`/admin/events/${encodeURIComponent(id)}${query}`);
  if (ctx.json) {
    ctx.out(`${JSON.stringify(trail)}\n`);
    return EXIT.ok;
  }
  const lines: string[] = [];
  const r = trail.receipt;
  const x = trail.execution;
  // With several shards a row is named by its ref, "<shard>:<id>" (what dead replay --id takes).
  const several = trail.rows.some((row) => row.ref !== String(row.id)) || (r !== null && r.shard > 0);
  lines.push(
    r
      ? `event ${trail.id}: ${r.kind} ${r.type}${r.teamId ? `, team ${r.teamId}` : ""}, received ${when(r.receivedAt)} UTC${r.retryNum ? ` (Slack retry ${r.retryNum})` : ""}${several ? `, on shard ${r.shard}` : ""}`
      : x?.id === trail.id
        ? `execution ${trail.id}: every row of it, whichever input recorded them`
        : `event ${trail.id}: receipt pruned (past RECEIPT_RETENTION_HOURS); its rows remain`,
    `complete: ${trail.complete ? "yes, every effect done (or cancelled)" : "no"}`,
  );
  if (x) lines.push(...executionLines(x));
  for (const a of trail.answers ?? []) lines.push(answerLine(a));
  if (r?.fact && r.fact !== r.id) lines.push(`fact: ${r.fact}`);
  const recordedBy = [...new Set(trail.rows.flatMap((row) => (row.receiptId ? [row.receiptId] : [])))].filter((id) => id !== trail.id);
  if (r && recordedBy.length > 0) lines.push(`a copy of a fact already recorded by ${recordedBy.join(", ")}: nothing new was done for it`);
  for (const row of chainOrder(trail.rows)) {
    const indent = "    ".repeat(row.depth ?? 0);
    const followUp = row.parentId ? `↳ follow-up of row ${several ? `${row.shard}:${row.parentId}` : row.parentId}: ` : "";
    lines.push(
      "",
      `${indent}${followUp}row ${row.ref}  ${row.effect}  ${row.status.toUpperCase()}  (${row.attempts} attempt${row.attempts === 1 ? "" : "s"} this life, key ${row.key})`,
      indentLines(
        indent,
        pairs([
          ...(row.name ? [["name", row.name] as [string, string]] : []),
          ...(row.cancelledBy ? [["cancelled by", `${row.cancelledBy} (never performed)`] as [string, string]] : []),
          ["created", when(row.createdAt)],
          // A timer: not performed before its time.
          ...(row.dueAt ? [["time", `${when(row.dueAt)} (a timer: not performed before it)`] as [string, string]] : []),
          ["enqueued", when(row.enqueuedAt)],
          ["next attempt", row.status === "pending" ? when(row.nextAttemptAt) : "-"],
          ["lease expires", when(row.leaseExpiresAt)],
          ["deadline", when(row.deadline)],
          [row.status === "dead" ? "died" : row.status === "cancelled" ? "cancelled" : "completed", when(row.completedAt)],
          ["sweeps", row.sweeps],
          ["last error", row.lastError],
          ["result", row.result === null ? null : JSON.stringify(row.result)],
          ["payload", JSON.stringify(row.payload)],
        ]),
      ),
    );
    if (row.history.length > 0) {
      lines.push(
        `${indent}  history (failed attempts, fence losses, dead letters, replays; a success writes none):`,
        table(
          row.history,
          [
            { title: "finished (UTC)", value: (h) => when(h.finishedAt) },
            { title: "attempt", value: (h) => h.attempt, align: "right" },
            { title: "outcome", value: (h) => h.outcome },
            { title: "error", value: (h) => h.error, max: 100 },
          ],
          `${indent}    `,
        ),
      );
    }
  }
  const cancels = trail.cancels ?? [];
  if (cancels.length > 0) {
    lines.push(
      "",
      "cancels (cancel(name): a named row ends only if still pending and never attempted):",
      table(
        cancels,
        [
          { title: "at (UTC)", value: (c) => when(c.at) },
          {
            title: "asked by",
            value: (c) => (c.byRow === null ? "the input" : `row ${several ? `${r?.shard ?? 0}:${c.byRow}` : c.byRow}`),
          },
          { title: "name", value: (c) => c.name, max: 60 },
          {
            title: "outcome",
            value: (c) => (c.outcome === "too_late" && c.rowStatus ? `too late (${c.rowStatus})` : c.outcome.replaceAll("_", " ")),
          },
          { title: "row", value: (c) => c.rowRef },
        ],
        "    ",
      ),
    );
  }
  ctx.out(`${lines.join("\n")}\n`);
  return EXIT.ok;
}

type TrailRow = Trail["rows"][number];

/** An assistant's answer: its turn's state, its one message, what Slack has of it, how often the model was asked. */
function answerLine(a: NonNullable<Trail["answers"]>[number]): string {
  const message = a.streamTs ? `message ${a.streamTs}, ${a.sentChars} characters confirmed` : "no message yet";
  const kept = a.answerChars === null ? "no answer kept yet" : `answer kept (${a.answerChars} characters)`;
  const stop = a.stopRequestedAt ? `, stop asked ${when(a.stopRequestedAt)} UTC` : "";
  return `assistant answer (row ${a.rowRef}) to ${a.messageTs} in ${a.channel}/${a.threadTs}: ${a.state.toUpperCase()}; ${message}; ${kept}; model asked ${a.modelCalls} time${a.modelCalls === 1 ? "" : "s"}${stop}`;
}

/** A custom step execution: its token's life (never the token), its completion and its deadline. */
function executionLines(x: NonNullable<Trail["execution"]>): string[] {
  const token =
    x.workflowToken === "held"
      ? `held (dies ${when(x.tokenExpiresAt)} UTC)`
      : `scrubbed: ${x.workflowToken}${x.endedAt ? ` (${when(x.endedAt)} UTC)` : ""}`;
  const completion = x.completion
    ? `row ${x.completion.rowRef} ${x.completion.effect} ${x.completion.status.toUpperCase()}`
    : "none recorded yet: the step waits for a user";
  return [
    `custom step ${x.callbackId}, execution ${x.id}, team ${x.teamId}: its workflow token came with ${x.receiptId}, issued ${when(x.tokenIssuedAt)} UTC`,
    pairs([
      ["workflow token", token],
      ["completion", completion],
      ...(x.deadline
        ? [
            ["deadline", `row ${x.deadline.rowRef} ${x.deadline.status.toUpperCase()} (due ${when(x.deadline.dueAt)} UTC)`] as [
              string,
              string,
            ],
          ]
        : []),
    ]),
  ];
}

/** Rows as their chains: each row, then the follow-ups it asked for (in id order), under it. */
function chainOrder(rows: readonly TrailRow[]): TrailRow[] {
  // A follow-up lives on its parent's shard: a chain is (shard, id).
  const key = (shard: number, id: number) => `${shard}:${id}`;
  const ids = new Set(rows.map((r) => key(r.shard, r.id)));
  const children = new Map<string, TrailRow[]>();
  for (const row of rows) {
    const parent = row.parentId ? key(row.shard, row.parentId) : undefined;
    if (parent && ids.has(parent)) children.set(parent, [...(children.get(parent) ?? []), row]);
  }
  const ordered: TrailRow[] = [];
  const visit = (row: TrailRow) => {
    ordered.push(row);
    for (const child of children.get(key(row.shard, row.id)) ?? []) visit(child);
  };
  for (const row of rows) if (!row.parentId || !ids.has(key(row.shard, row.parentId))) visit(row);
  return ordered;
}

function indentLines(indent: string, text: string): string {
  return indent === ""
    ? text
    : text
        .split("\n")
        .map((line) => `${indent}${line}`)
        .join("\n");
}
