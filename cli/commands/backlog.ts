/**
 * `ackbox backlog [--watch [--interval s] [--count n]] [--check]`: is it
 * healthy, and what is owed. With CLOUDFLARE_ACCOUNT_ID and
 * CLOUDFLARE_API_TOKEN set, also the queue's backlog from Cloudflare's
 * GraphQL Analytics API.
 */
import type { Backlog } from "../api.ts";
import { type AnalyticsResult, analyticsConfigured, queueBacklogAnalytics } from "../cloudflare.ts";
import type { Context } from "../context.ts";
import { CliError, EXIT, type ExitCode } from "../exit.ts";
import { age, bytes, pairs, percent, table, when, windowName } from "../format.ts";

export interface BacklogOptions {
  readonly watch: boolean;
  readonly intervalSeconds: number;
  /** Snapshots before a watch stops by itself; undefined = until interrupted. */
  readonly count: number | undefined;
  readonly check: boolean;
}

export async function backlogCommand(ctx: Context, options: BacklogOptions): Promise<ExitCode> {
  if (!options.watch) return snapshot(ctx, options);
  let last: ExitCode = EXIT.ok;
  for (let i = 0; options.count === undefined || i < options.count; i++) {
    if (i > 0) await ctx.sleep(options.intervalSeconds * 1000);
    try {
      if (ctx.isTty && !ctx.json) ctx.clearScreen();
      last = await snapshot(ctx, options);
    } catch (error) {
      // A monitor keeps watching through an unreachable server (it may be restarting); a wrong token or URL stops it.
      if (!(error instanceof CliError) || error.code !== EXIT.unreachable) throw error;
      ctx.err(`ackbox: ${error.message} (still watching)`);
      last = error.code;
    }
  }
  return last;
}

async function snapshot(ctx: Context, options: BacklogOptions): Promise<ExitCode> {
  const backlog = await ctx.client.get<Backlog>("/admin/backlog");
  const analytics = analyticsConfigured(ctx.env) ? await queueBacklogAnalytics(ctx.env, ctx.now(), ctx.timeoutMs) : undefined;
  if (ctx.json) ctx.out(`${JSON.stringify(analytics ? { ...backlog, cloudflare: analytics } : backlog)}\n`);
  else ctx.out(`${render(backlog, analytics, ctx.client.base.origin)}\n`);
  return options.check && !backlog.healthy ? EXIT.unhealthy : EXIT.ok;
}

export function render(b: Backlog, analytics: AnalyticsResult | undefined, origin: string): string {
  const breached = b.health.filter((c) => c.breached).map((c) => c.kind);
  const lines = [
    `ackbox backlog at ${when(b.at)} UTC (${origin})`,
    `health: ${b.healthy ? "OK" : `UNHEALTHY (${breached.join(", ")})`}`,
    table(
      b.health,
      [
        { title: "check", value: (c) => c.kind },
        { title: "state", value: (c) => (c.breached ? "BREACHED" : "ok") },
        { title: "detail", value: (c) => c.detail },
      ],
      "  ",
    ),
    "",
    "outbox",
    pairs([
      ["pending", count(b.outbox.pending, b.outbox)],
      // Timers not yet due are pending too, but owed later: not late, not in the oldest pending age.
      [
        "  waiting for their time",
        b.outbox.waitingForTime === undefined
          ? "-"
          : `${b.outbox.waitingForTime}${b.outbox.nextTimerAt ? ` (next at ${when(b.outbox.nextTimerAt)})` : ""}`,
      ],
      ["leased", count(b.outbox.leased, b.outbox)],
      ["dead", count(b.outbox.dead, b.outbox)],
      [
        "oldest pending",
        b.outbox.oldestPendingAgeSeconds === null
          ? "-"
          : `${age(b.outbox.oldestPendingAgeSeconds)} late (owed since ${when(b.outbox.oldestPendingDueAt)})`,
      ],
      ["stale leases", b.outbox.staleLeases],
      ["never enqueued", b.outbox.neverEnqueued],
      ["overdue for the sweep", b.outbox.overdue],
    ]),
  ];
  const effects = Object.entries(b.outbox.byEffect).sort(([x], [y]) => x.localeCompare(y));
  if (effects.length > 0) {
    lines.push(
      "",
      table(
        effects,
        [
          { title: "by effect", value: ([effect]) => effect },
          { title: "pending", value: ([, c]) => c.pending, align: "right" },
          { title: "leased", value: ([, c]) => c.leased, align: "right" },
          { title: "dead", value: ([, c]) => c.dead, align: "right" },
        ],
        "  ",
      ),
    );
  }
  if (b.customSteps) {
    const steps = b.customSteps;
    lines.push(
      "",
      "custom steps (executions whose workflow token is held)",
      pairs([
        ["executions", steps.executions],
        ["waiting for a user", steps.waitingForUser],
        // Past a waiting step's deadline and not completed: its workflow may end with an error.
        ["near token expiry", `${steps.nearExpiry}${steps.nextExpiryAt ? ` (next token dies at ${when(steps.nextExpiryAt)} UTC)` : ""}`],
      ]),
    );
  }
  if (b.shards) {
    // Only with SHARD_COUNT > 1: where the backlog is. The figures above are the shards' sums (oldest: the max).
    lines.push(
      "",
      table(
        b.shards,
        [
          { title: "by shard", value: (s) => s.shard, align: "right" },
          { title: "pending", value: (s) => `${s.pending}${s.capped ? "+" : ""}`, align: "right" },
          { title: "leased", value: (s) => s.leased, align: "right" },
          { title: "dead", value: (s) => s.dead, align: "right" },
          {
            title: "oldest pending",
            value: (s) => (s.oldestPendingAgeSeconds === null ? "-" : age(s.oldestPendingAgeSeconds)),
            align: "right",
          },
          { title: "stale leases", value: (s) => s.staleLeases, align: "right" },
          { title: "overdue", value: (s) => s.overdue, align: "right" },
          { title: "parked dead (alert window)", value: (s) => s.window?.parkedDead, align: "right" },
        ],
        "  ",
      ),
    );
  }
  lines.push(
    "",
    table(
      [...b.windows].sort((x, y) => x.seconds - y.seconds),
      [
        { title: "last", value: (w) => windowName(w.seconds) },
        { title: "done", value: (w) => w.done, align: "right" },
        { title: "done/min", value: (w) => w.donePerMinute, align: "right" },
        { title: "failed attempts", value: (w) => w.failedAttempts, align: "right" },
        { title: "parked dead", value: (w) => w.parkedDead, align: "right" },
        { title: "failure rate", value: (w) => percent(w.failureRate), align: "right" },
      ],
      "  ",
    ),
    "",
    `queue (binding metrics): ${
      b.queue.available
        ? `${b.queue.backlogCount} messages, ${bytes(b.queue.backlogBytes)}${b.queue.oldestMessageAgeSeconds === null ? "" : `, oldest ${age(b.queue.oldestMessageAgeSeconds)}`}`
        : `unavailable (${b.queue.reason})`
    }`,
  );
  const firing = b.alerts.filter((a) => a.firing);
  lines.push(
    `alerts: ${firing.length === 0 ? "none firing" : firing.map((a) => `${a.kind} firing since ${when(a.since)} UTC`).join("; ")}`,
  );
  // A dead alert post: ALERT_CHANNEL cannot be posted to, and alerts are only logged until the row is replayed.
  const post = b.lastAlertPost;
  if (post?.status === "dead") {
    lines.push(
      `alert channel: DEAD — the last alert post (row ${post.id}, channel ${post.channel ?? "-"}) died of ${post.error ?? "an error"}; ` +
        `alerts are only logged until it is replayed (fix the channel, then npx ackbox dead replay --id ${b.shards ? `0:${post.id}` : post.id}) or ALERT_CHANNEL changes`,
    );
  }
  if (b.blockedTeams.length > 0) {
    lines.push(
      "",
      "teams waiting for their installation (re-install at /slack/install: the rows resume)",
      table(
        b.blockedTeams,
        [
          { title: "team", value: (t) => t.teamId },
          { title: "state", value: (t) => (t.state === "blocked" ? `blocked (${t.reason ?? "auth failure"})` : "not installed") },
          { title: "rows", value: (t) => t.rows, align: "right" },
          { title: "waiting since (UTC)", value: (t) => when(t.waitingSince) },
          { title: "blocked at (UTC)", value: (t) => (t.blockedAt === null ? "-" : when(t.blockedAt)) },
        ],
        "  ",
      ),
    );
  }
  const gaps = b.deliveryGaps ?? [];
  if (gaps.length > 0) {
    // A quiet workspace has silences too; several silent over one stretch, or refusals by signature in one, lost events.
    lines.push(
      "",
      "delivery gaps: workspaces the ingress heard nothing signed from for longer than Slack's retry window (events may be lost; backfill recovers them once each)",
      table(
        gaps,
        [
          { title: "team", value: (g) => g.teamId },
          { title: "silent from (UTC)", value: (g) => when(g.from) },
          { title: "until (UTC)", value: (g) => when(g.until) },
          { title: "for", value: (g) => duration(g.seconds), align: "right" },
          { title: "refused (401) from", value: (g) => (g.refusedFrom ? when(g.refusedFrom) : "-") },
          { title: "to recover", value: (g) => g.backfill },
        ],
        "  ",
      ),
    );
  }
  if (analytics) {
    if (!analytics.available) lines.push(`cloudflare analytics (queueBacklogAdaptiveGroups): unavailable (${analytics.reason})`);
    else if (analytics.queues.length === 0) lines.push("cloudflare analytics (queueBacklogAdaptiveGroups): no samples in the last 30 min");
    else {
      lines.push(
        "cloudflare analytics (queueBacklogAdaptiveGroups, newest minute per queue)",
        table(
          analytics.queues,
          [
            { title: "queue id", value: (q) => q.queueId },
            { title: "minute (UTC)", value: (q) => when(q.minute) },
            { title: "avg messages", value: (q) => q.messages, align: "right" },
            { title: "avg bytes", value: (q) => bytes(Math.round(q.bytes)), align: "right" },
          ],
          "  ",
        ),
      );
    }
  }
  return lines.join("\n");
}

function count(n: number, outbox: Backlog["outbox"]): string {
  return outbox.capped && n >= outbox.countCap ? `${n}+ (counted up to ${outbox.countCap})` : String(n);
}

function duration(seconds: number): string {
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
  if (seconds < 86_400) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86_400).toFixed(1)} d`;
}
