/**
 * The invariant checker: after the run has quiesced, compares what Slack was
 * sent (the sender's log, with the faults the plan injected), what the
 * database holds (receipts, outbox rows, fence rejections), and what the fake
 * Slack applied or refused. Pure: it takes the records and returns the verdict.
 * Each check is one violation list, named and explained in docs/reliability.md
 * (its list is this file's contract); test/node/chaos-invariants.test.ts feeds
 * it recorded runs that break each one and asserts it is reported.
 */
import type { Application, Ledger } from "./faulty-slack.ts";
import type { SentEvent } from "./slack-sender.ts";

export interface RowRecord {
  /** The shard whose database holds the row (ids repeat across shards). */
  readonly shard: number;
  readonly id: number;
  readonly idempotency_key: string;
  readonly receipt_id: string;
  readonly effect: string;
  readonly status: string;
  readonly attempts: number;
  readonly last_error: string | null;
  /** The fact its key names (outbox.fact; a copy of it, or a backfill, lands on the same keys). */
  readonly fact?: string | null;
  readonly team_id?: string | null;
  readonly created_at?: number;
}

/** The backfill the run makes right after its restart (scripts/chaos/chaos.ts), as the operator API answered it. */
export interface BackfillRun {
  /** The workspace whose channel it read, and the shard that workspace lives on. */
  readonly team: string;
  readonly home: number;
  /** When its first page was asked (ms): an event acked before then had its rows already. */
  readonly startedAt: number;
  readonly pages: readonly {
    readonly status: number;
    readonly read?: number;
    readonly alreadyHandled?: number;
    readonly recorded?: number;
    readonly error?: string;
  }[];
}

/** The uninstall the run makes right after its restart: whose, and the removal's time (its payload's `at`, ms). */
export interface UninstallRun {
  readonly team: string;
  readonly at: number;
}

export interface Outage {
  /** When the kill signal was sent. */
  readonly killedAt: number;
  /**
   * When no process of the killed run was left. A call the dying run sent
   * before the kill can reach Slack up to then (it was in a socket, or this
   * process's event loop was busy killing): its answer has no one to read it.
   */
  readonly goneAt?: number;
  readonly restartedAt: number;
}

/** What the operator API answered after the run (GET /admin/backlog, then GET /admin/dead page by page). */
export interface OperatorView {
  readonly backlogDead: number;
  /** The backlog's per-shard dead counts (index = shard); null when it has no per-shard breakdown (one shard). */
  readonly backlogDeadByShard: readonly number[] | null;
  /** Every row the dead list's pages named, as "<shard>:<id>", in page order. */
  readonly deadRows: readonly string[];
  readonly pages: number;
}

export type Explanation = "answer_lost" | "crash" | "fence_lost";

export interface Verdict {
  readonly events: { sent: number; acked: number; neverAcked: number; fatal: number; fatalAcked: number };
  readonly deliveries: {
    total: number;
    answered500: number;
    noAnswer: number;
    redeliveries: number;
    redeliveredAfterFailure: number;
    /** Deliveries whose durable write the plan made fail (before / after committing). */
    writeFaults: { beforeCommit: number; afterCommit: number };
  };
  readonly effects: {
    distinctApplied: number;
    applications: number;
    duplicates: number;
    explainedDuplicates: number;
    visibleDuplicates: number;
  };
  readonly rows: {
    total: number;
    done: number;
    dead: number;
    stuck: number;
    deadByReason: Record<string, number>;
    /** Rows per shard, and of them done, index = shard. */
    byShard: readonly { total: number; done: number }[];
  };
  /** Each repeated effect, the cause that excused each repeat, and its applications' times relative to the first crash (ms). */
  readonly duplicateDetails: readonly {
    key: string;
    explainedBy: readonly Explanation[];
    unexplained: number;
    applied: readonly { atMs: number; answered: boolean }[];
  }[];
  /** The rows of each lost event, for diagnosis. */
  readonly lostDetails: readonly { receiptId: string; effectKey: string; rows: readonly RowRecord[] }[];
  readonly violations: {
    ackedWithoutReceipt: string[];
    ackedWithoutRow: string[];
    ackedThroughWriteFault: string[];
    lost: string[];
    /** "<shard>:<id>" of each row left pending or leased. */
    stuck: string[];
    misrouted: string[];
    idleShards: string[];
    operatorDisagrees: string[];
    unexplainedDuplicates: string[];
    deadNotPlanned: string[];
    fatalMarkedDone: string[];
    wrongToken: string[];
    refreshDoubleSpent: string[];
    installations: string[];
    /** One idempotency key on more than one shard: an effect recorded twice. */
    doubled: string[];
    /** The backfill: a page that did not answer 200, a row it recorded for an event delivered live before it, or off its team's shard. */
    backfill: string[];
    /** The uninstall: a row it parked that was not its team's live row of before it. */
    uninstall: string[];
  };
  /** The backfill's tally, summed over its pages. */
  readonly backfill?: { readonly pages: number; readonly read: number; readonly alreadyHandled: number; readonly recorded: number };
  /** The uninstall's team and how many of its rows it parked. */
  readonly uninstall?: { readonly team: string; readonly parked: number };
  readonly ok: boolean;
}

const FATAL_REASON = /channel_not_found/;
const UNINSTALL_REASON = /^installation removed: app_uninstalled/;

/** A row's identity across shards: "<shard>:<id>" (ids repeat across shards). */
export const rowKey = (row: { readonly shard: number; readonly id: number }): string => `${row.shard}:${row.id}`;

/** How long an effect may take from Slack applying it to its completion being written, beyond which a crash cannot explain a repeat. */
export const EFFECT_TO_COMPLETION_MS = 2_000;

export function checkInvariants(input: {
  readonly sent: readonly SentEvent[];
  /** The rows in `receipts`, each with its shard. */
  readonly receipts: readonly { readonly id: string; readonly shard: number }[];
  readonly rows: readonly RowRecord[];
  /** rowKey → how many completions its fence rejected (outbox_attempts outcome 'fence_lost'). */
  readonly fenceLost: ReadonlyMap<string, number>;
  /** Shards the run was configured with (each must deliver). */
  readonly shardCount: number;
  /** The operator API's view after the run, when it was asked. */
  readonly operator?: OperatorView;
  readonly ledger: Ledger;
  readonly outages: readonly Outage[];
  /** OAuth runs: the workspaces installed, and every installation row found after the run. */
  readonly installations?: {
    readonly teams: readonly string[];
    readonly rows: readonly { readonly shard: number; readonly install_key: string; readonly blocked_reason: string | null }[];
    /** Teams whose token came due during the run: each must have been refreshed at least once. */
    readonly refreshed?: readonly string[];
  };
  readonly backfill?: BackfillRun;
  readonly uninstall?: UninstallRun;
}): Verdict {
  const { sent, rows, ledger, outages } = input;
  const rowsByReceipt = new Map<string, RowRecord[]>();
  for (const row of rows) rowsByReceipt.set(row.receipt_id, [...(rowsByReceipt.get(row.receipt_id) ?? []), row]);
  const rowsByFact = new Map<string, RowRecord[]>();
  for (const row of rows) if (row.fact) rowsByFact.set(row.fact, [...(rowsByFact.get(row.fact) ?? []), row]);
  // An event's rows: its own, or its fact's (a copy recorded first: another delivery's, or the backfill's).
  const rowsOf = (event: SentEvent["event"]): RowRecord[] => [
    ...new Set([...(rowsByReceipt.get(event.receiptId) ?? []), ...(event.fact ? (rowsByFact.get(event.fact) ?? []) : [])]),
  ];
  const parkedByUninstall = (row: RowRecord): boolean =>
    input.uninstall !== undefined &&
    row.status === "dead" &&
    UNINSTALL_REASON.test(row.last_error ?? "") &&
    row.team_id === input.uninstall.team &&
    (row.created_at ?? Number.POSITIVE_INFINITY) <= input.uninstall.at;
  const eventByReceipt = new Map(sent.map((s) => [s.event.receiptId, s.event]));

  const violations: Verdict["violations"] = {
    ackedWithoutReceipt: [],
    ackedWithoutRow: [],
    ackedThroughWriteFault: [],
    lost: [],
    stuck: [],
    misrouted: [],
    idleShards: [],
    operatorDisagrees: [],
    unexplainedDuplicates: [],
    deadNotPlanned: [],
    fatalMarkedDone: [],
    wrongToken: [],
    refreshDoubleSpent: [],
    installations: [],
    doubled: [],
    backfill: [],
    uninstall: [],
  };
  const lostDetails: Verdict["lostDetails"][number][] = [];
  const receiptShards = new Map<string, number[]>();
  for (const receipt of input.receipts) receiptShards.set(receipt.id, [...(receiptShards.get(receipt.id) ?? []), receipt.shard]);
  for (const { event, acked, deliveries } of sent) {
    const own = rowsOf(event);
    const shards = receiptShards.get(event.receiptId) ?? [];
    // A workspace has one home: every receipt and row of its events there, whatever shard was added meanwhile.
    const recordedOn = new Set([...shards, ...own.map((row) => row.shard)]);
    if (acked && !shards.includes(event.shard)) violations.ackedWithoutReceipt.push(event.receiptId);
    if (acked && !own.some((row) => row.shard === event.shard)) violations.ackedWithoutRow.push(event.receiptId);
    for (const elsewhere of [...recordedOn].filter((shard) => shard !== event.shard))
      violations.misrouted.push(`${event.receiptId} on shard ${elsewhere}, its team's is ${event.shard}`);
    if (input.installations && event.team !== undefined) {
      const teams = ledger.teamsByKey?.get(event.effectKey) ?? [];
      const wrong = teams.filter((team) => team !== event.team);
      if (wrong.length > 0)
        violations.wrongToken.push(
          `${event.effectKey} (${event.team}'s) called with ${wrong.map((t) => t || "an unknown token").join(", ")}`,
        );
    }
    for (const delivery of deliveries) {
      if (delivery.writeFault !== "none" && delivery.status === 200)
        violations.ackedThroughWriteFault.push(`${event.receiptId} (retry ${delivery.retryNum}, ${delivery.writeFault})`);
    }
    const applied = ledger.applied.get(event.effectKey)?.length ?? 0;
    const deadFatally = own.some((row) => row.status === "dead" && FATAL_REASON.test(row.last_error ?? ""));
    // Parked by the uninstall before it was performed: what an uninstall is for, not a loss.
    const parked = own.length > 0 && own.every(parkedByUninstall);
    if (acked && applied === 0 && !deadFatally && !parked) {
      violations.lost.push(event.receiptId);
      lostDetails.push({ receiptId: event.receiptId, effectKey: event.effectKey, rows: own });
    }
    if (event.fatal) {
      for (const row of own) if (row.status === "done") violations.fatalMarkedDone.push(`${row.receipt_id}: done`);
    }
  }

  violations.stuck.push(...rows.filter((row) => row.status === "pending" || row.status === "leased").map(rowKey));
  const byShard = Array.from({ length: input.shardCount }, (_, shard) => {
    const own = rows.filter((row) => row.shard === shard);
    return { total: own.length, done: own.filter((row) => row.status === "done").length };
  });
  byShard.forEach((shard, index) => {
    if (shard.done === 0) violations.idleShards.push(`shard ${index}: no row delivered (${shard.total} rows)`);
  });
  if (input.installations) {
    if ((ledger.refreshReused ?? 0) > 0) violations.refreshDoubleSpent.push(`${ledger.refreshReused} refresh token(s) spent twice`);
    for (const team of input.installations.teams) {
      const found = input.installations.rows.filter((row) => row.install_key === `T:${team}`);
      if (found.length === 0) violations.installations.push(`${team}: no installation on any shard`);
      for (const row of found) {
        if (row.shard !== 0) violations.installations.push(`${team}: an installation on shard ${row.shard}`);
        if (row.blocked_reason !== null) violations.installations.push(`${team}: blocked (${row.blocked_reason})`);
      }
      if (found.length > 1) violations.installations.push(`${team}: ${found.length} installations`);
    }
    for (const team of input.installations.refreshed ?? [])
      if ((ledger.refreshes?.get(team) ?? 0) === 0) violations.installations.push(`${team}: its token came due and was never refreshed`);
  }
  if (input.operator) violations.operatorDisagrees.push(...operatorDisagreements(input.operator, rows, input.shardCount));
  const deadByReason: Record<string, number> = {};
  for (const row of rows.filter((r) => r.status === "dead")) {
    const reason = (row.last_error ?? "unknown").replace(/^[\w.]+: /, "");
    deadByReason[reason] = (deadByReason[reason] ?? 0) + 1;
    if (parkedByUninstall(row)) continue;
    if (UNINSTALL_REASON.test(row.last_error ?? ""))
      violations.uninstall.push(
        `${rowKey(row)} of ${row.team_id ?? "no team"} parked by the uninstall of ${input.uninstall?.team ?? "nobody"}${row.team_id === input.uninstall?.team ? ", though recorded after it" : ""}`,
      );
    const event = eventByReceipt.get(row.receipt_id);
    const why = !event
      ? "no event sent has this receipt"
      : !event.fatal
        ? "its event was not aimed at the deleted channel"
        : !FATAL_REASON.test(row.last_error ?? "")
          ? "its reason is not channel_not_found"
          : !ledger.refused.has(event.effectKey)
            ? "Slack never refused its effect"
            : null;
    if (why) violations.deadNotPlanned.push(`${row.receipt_id}: ${row.last_error} (${why})`);
  }

  const shardsByKey = new Map<string, Set<number>>();
  for (const row of rows) shardsByKey.set(row.idempotency_key, (shardsByKey.get(row.idempotency_key) ?? new Set()).add(row.shard));
  for (const [key, on] of shardsByKey) if (on.size > 1) violations.doubled.push(`${key} on shards ${[...on].join(" and ")}`);
  const backfill = input.backfill ? checkBackfill(input.backfill, sent, rows, violations.backfill) : undefined;

  const rowByEffectKey = new Map<string, RowRecord>();
  for (const { event } of sent) {
    const row = rowsOf(event)[0];
    if (row) rowByEffectKey.set(event.effectKey, row);
  }
  let duplicates = 0;
  let explainedDuplicates = 0;
  let visibleDuplicates = 0;
  const duplicateDetails: Verdict["duplicateDetails"][number][] = [];
  const origin = outages[0]?.killedAt ?? 0;
  for (const [key, applications] of ledger.applied) {
    if (applications.length < 2) continue;
    duplicates += applications.length - 1;
    const row = rowByEffectKey.get(key);
    const { explainedBy, unexplained } = explainRepeats(applications, outages, row ? (input.fenceLost.get(rowKey(row)) ?? 0) : 0);
    explainedDuplicates += explainedBy.length;
    duplicateDetails.push({
      key,
      explainedBy,
      unexplained,
      applied: applications.map((a) => ({ atMs: a.at - origin, answered: a.answered })),
    });
    if (unexplained > 0)
      violations.unexplainedDuplicates.push(`${key} applied ${applications.length}×, ${unexplained} repeat(s) without a cause`);
  }
  for (const count of ledger.messagesPerThread.values()) visibleDuplicates += Math.max(0, count - 1);
  for (const [key, applications] of ledger.applied) {
    if (key.startsWith("respond:")) visibleDuplicates += Math.max(0, applications.length - 1);
  }

  const deliveries = sent.flatMap((s) => s.deliveries);
  return {
    events: {
      sent: sent.length,
      acked: sent.filter((s) => s.acked).length,
      neverAcked: sent.filter((s) => !s.acked).length,
      fatal: sent.filter((s) => s.event.fatal).length,
      fatalAcked: sent.filter((s) => s.event.fatal && s.acked).length,
    },
    deliveries: {
      total: deliveries.length,
      answered500: deliveries.filter((d) => d.status === 500).length,
      noAnswer: deliveries.filter((d) => d.status === 0).length,
      redeliveries: deliveries.filter((d) => d.retryNum > 0).length,
      redeliveredAfterFailure: sent.filter((s) => s.deliveries.some((d) => d.status !== 200) && s.deliveries.some((d) => d.retryNum > 0))
        .length,
      writeFaults: {
        beforeCommit: deliveries.filter((d) => d.writeFault === "before_commit").length,
        afterCommit: deliveries.filter((d) => d.writeFault === "after_commit").length,
      },
    },
    effects: {
      distinctApplied: ledger.applied.size,
      applications: [...ledger.applied.values()].reduce((sum, a) => sum + a.length, 0),
      duplicates,
      explainedDuplicates,
      visibleDuplicates,
    },
    rows: {
      total: rows.length,
      done: rows.filter((r) => r.status === "done").length,
      dead: rows.filter((r) => r.status === "dead").length,
      stuck: violations.stuck.length,
      deadByReason,
      byShard,
    },
    duplicateDetails,
    lostDetails,
    violations,
    ...(backfill ? { backfill } : {}),
    ...(input.uninstall ? { uninstall: { team: input.uninstall.team, parked: rows.filter(parkedByUninstall).length } } : {}),
    ok: Object.values(violations).every((list) => list.length === 0),
  };
}

/**
 * The backfill right after the shard add: every page answered 200, and every row it recorded is on its team's
 * shard and of a message whose live event had not been acked when it began — a message delivered live is found
 * already handled, never recorded again (a backfill routed to another shard than the team's would record it
 * again there). Returns its tally.
 */
function checkBackfill(
  run: BackfillRun,
  sent: readonly SentEvent[],
  rows: readonly RowRecord[],
  violations: string[],
): NonNullable<Verdict["backfill"]> {
  run.pages.forEach((page, index) => {
    if (page.status !== 200) violations.push(`page ${index + 1} answered ${page.status}: ${page.error ?? "no error given"}`);
  });
  const ackedBefore = new Map<string, string>();
  for (const { event, deliveries } of sent) {
    if (event.fact && deliveries.some((d) => d.status === 200 && d.at < run.startedAt)) ackedBefore.set(event.fact, event.receiptId);
  }
  for (const row of rows.filter((r) => r.receipt_id.startsWith("backfill:"))) {
    if (row.shard !== run.home)
      violations.push(`${rowKey(row)} (${row.idempotency_key}) on shard ${row.shard}, ${run.team}'s is ${run.home}`);
    const live = row.fact ? ackedBefore.get(row.fact) : undefined;
    if (live) violations.push(`${row.idempotency_key} recorded again, though ${live} was delivered live before the backfill`);
  }
  const sum = (field: "read" | "alreadyHandled" | "recorded") => run.pages.reduce((total, page) => total + (page[field] ?? 0), 0);
  return { pages: run.pages.length, read: sum("read"), alreadyHandled: sum("alreadyHandled"), recorded: sum("recorded") };
}

/** Where the operator API's answers differ from the rows the shards hold. */
function operatorDisagreements(view: OperatorView, rows: readonly RowRecord[], shardCount: number): string[] {
  const problems: string[] = [];
  const dead = rows.filter((row) => row.status === "dead");
  if (view.backlogDead !== dead.length) problems.push(`backlog counts ${view.backlogDead} dead rows, the shards hold ${dead.length}`);
  if (shardCount > 1) {
    for (let shard = 0; shard < shardCount; shard++) {
      const held = dead.filter((row) => row.shard === shard).length;
      const counted = view.backlogDeadByShard?.[shard];
      if (counted !== held) problems.push(`backlog counts ${counted ?? "no figure"} dead rows on shard ${shard}, it holds ${held}`);
    }
  }
  const seen = new Set<string>();
  for (const ref of view.deadRows) {
    if (seen.has(ref)) problems.push(`dead list names ${ref} twice`);
    seen.add(ref);
  }
  const held = new Set(dead.map(rowKey));
  for (const ref of held) if (!seen.has(ref)) problems.push(`dead list misses ${ref}`);
  for (const ref of seen) if (!held.has(ref)) problems.push(`dead list names ${ref}, which is not a dead row`);
  return problems;
}

/**
 * Matches each repeat of one effect to a cause of its own. Walking the
 * applications in time order, an application whose completion could not be
 * recorded yields one credit: its answer was lost (usable by any later
 * repeat), or the process was killed within EFFECT_TO_COMPLETION_MS after it
 * (usable by a repeat after the kill), or, failing those, one of its row's
 * fence rejections. Each repeat spends one credit; a repeat with none is
 * unexplained. One application yields at most one credit, so one lost answer
 * never excuses two repeats.
 */
export function explainRepeats(
  applications: readonly Application[],
  outages: readonly Outage[],
  fenceRejections: number,
): { explainedBy: Explanation[]; unexplained: number } {
  const credits: { from: number; cause: Explanation }[] = [];
  const explainedBy: Explanation[] = [];
  let unexplained = 0;
  let fenceLeft = fenceRejections;
  [...applications]
    .sort((a, b) => a.at - b.at)
    .forEach((application, index) => {
      if (index > 0) {
        const usable = credits.findIndex((credit) => credit.from < application.at);
        if (usable < 0) unexplained += 1;
        else explainedBy.push(...credits.splice(usable, 1).map((credit) => credit.cause));
      }
      const killed = outages.find(
        (o) => application.at <= (o.goneAt ?? o.killedAt) && application.at >= o.killedAt - EFFECT_TO_COMPLETION_MS,
      );
      if (!application.answered) credits.push({ from: application.at, cause: "answer_lost" });
      else if (killed) credits.push({ from: killed.killedAt, cause: "crash" });
      else if (fenceLeft > 0) {
        fenceLeft -= 1;
        credits.push({ from: application.at, cause: "fence_lost" });
      }
    });
  return { explainedBy, unexplained };
}
