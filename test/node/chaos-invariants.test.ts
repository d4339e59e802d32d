/**
 * The chaos checker catches what it claims to catch: recorded runs, each
 * breaking one invariant, are fed to scripts/chaos/invariants.ts and each
 * violation must be reported (and a clean run must pass, so the reports are
 * not noise). And the fault plan is a function of the seed: the same seed
 * twice gives the same plan, so a red run can be replayed.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";
import { writeAppEntries } from "../../cli/local/app-entries.ts";
import { WORKER_BUILD_OPTIONS } from "../../cli/local/bundle.ts";
import { CHAOS_APP } from "../../scripts/chaos/chaos.ts";
import type { Application, Ledger } from "../../scripts/chaos/faulty-slack.ts";
import { checkInvariants, type OperatorView, type Outage, type RowRecord, rowKey } from "../../scripts/chaos/invariants.ts";
import { type EventPlan, planEvents, slackFate } from "../../scripts/chaos/plan.ts";
import type { ChaosEvent, Delivery, SentEvent } from "../../scripts/chaos/slack-sender.ts";

const T0 = 1_764_600_000_000;
const QUIET_PLAN: EventPlan = { index: 0, kind: "mention", fatal: false, duplicateNow: false, duplicateLaterMs: null, writeFaults: [] };

function event(n: number, fatal = false, shard = 0): ChaosEvent {
  const channel = fatal ? "C0DELETED" : "C0CHAOS1";
  return {
    receiptId: `Ev${n}`,
    kind: "mention",
    shard,
    request: { body: "{}", contentType: "application/json" },
    effectKey: `post:${channel}:${n}`,
    fatal,
    plan: { ...QUIET_PLAN, index: n, fatal },
  };
}

const ok200 = (at = T0): Delivery => ({ retryNum: 0, status: 200, at, writeFault: "none" });
const KEY1 = "post:C0CHAOS1:1";

/**
 * A clean recorded run: three events, each acked, recorded, applied once — one of them aimed at the deleted
 * channel and parked dead. With two shards, Ev2 lives on shard 1 and the others on shard 0; row ids count per
 * shard, as they do in D1 (so shard 1's Ev2 and shard 0's Ev1 are both row 1).
 */
function cleanRun(shardCount = 1) {
  const events = [event(1), event(2, false, shardCount > 1 ? 1 : 0), event(3, true)];
  const sent: SentEvent[] = events.map((e) => ({ event: e, deliveries: [ok200()], acked: true }));
  const rows: RowRecord[] = events.map((e, i) => ({
    shard: e.shard,
    id: events.slice(0, i + 1).filter((other) => other.shard === e.shard).length,
    idempotency_key: `${e.receiptId}:0`,
    receipt_id: e.receiptId,
    effect: "chat.postMessage",
    status: e.fatal ? "dead" : "done",
    attempts: 1,
    last_error: e.fatal ? "chat.postMessage: channel_not_found" : null,
  }));
  return {
    sent,
    receipts: events.map((e) => ({ id: e.receiptId, shard: e.shard })),
    rows,
    fenceLost: new Map<string, number>(),
    shardCount,
    applied: new Map<string, Application[]>([
      [KEY1, [{ at: T0 + 100, answered: true }]],
      ["post:C0CHAOS1:2", [{ at: T0 + 100, answered: true }]],
    ]),
    refused: new Set(["post:C0DELETED:3"]),
    outages: [] as Outage[],
    /** Not asked in most cases: the checks on the operator API's answers are their own test. */
    operator: undefined as OperatorView | undefined,
  };
}
type Run = ReturnType<typeof cleanRun>;

function ledger(applied: ReadonlyMap<string, readonly Application[]>, refused: ReadonlySet<string>): Ledger {
  return {
    applied,
    refused,
    fates: { applied: 0, fatal: refused.size, http_5xx: 0, http_429: 0, internal_error: 0, hang: 0, applied_then_hang: 0 },
    messagesPerThread: new Map([...applied].map(([key, a]) => [key, a.length])),
    reactions: new Set(),
    alreadyReacted: 0,
    calls: 0,
  };
}

const check = (run: Run) => checkInvariants({ ...run, ledger: ledger(run.applied, run.refused) });
const violationsOf = (run: Run) => Object.fromEntries(Object.entries(check(run).violations).filter(([, list]) => list.length > 0));

/** Replaces the i-th row of the run with a changed copy. */
function patchRow(run: Run, index: number, patch: Partial<RowRecord>): void {
  const row = run.rows[index];
  if (!row) throw new Error(`no row ${index}`);
  run.rows[index] = { ...row, ...patch };
}

describe("the chaos checker", () => {
  it("passes a clean run", () => {
    const verdict = check(cleanRun());
    expect(verdict.ok).toBe(true);
    expect(verdict.rows.dead).toBe(1);
  });

  it("reports an acked event whose effect never reached Slack (lost)", () => {
    const run = cleanRun();
    run.applied.delete(KEY1);
    expect(violationsOf(run)).toEqual({ lost: ["Ev1"] });
  });

  it("reports an acked event with outbox rows but no receipt", () => {
    const run = cleanRun();
    run.receipts = run.receipts.filter((r) => r.id !== "Ev2");
    expect(violationsOf(run)).toEqual({ ackedWithoutReceipt: ["Ev2"] });
  });

  it("reports an acked event with a receipt but no outbox row", () => {
    const run = cleanRun();
    run.rows = run.rows.filter((row) => row.receipt_id !== "Ev2");
    expect(violationsOf(run)).toEqual({ ackedWithoutRow: ["Ev2"] });
  });

  it("reports a delivery answered 200 although its durable write was made to fail", () => {
    const run = cleanRun();
    run.sent = run.sent.map((s, i) => (i === 0 ? { ...s, deliveries: [{ ...ok200(), writeFault: "before_commit" }] } : s));
    expect(violationsOf(run)).toEqual({ ackedThroughWriteFault: ["Ev1 (retry 0, before_commit)"] });
  });

  it("reports a row left pending or leased", () => {
    const run = cleanRun();
    patchRow(run, 1, { status: "leased" });
    expect(violationsOf(run)).toEqual({ stuck: ["0:2"] });
  });

  it("reports a repeat nothing explains", () => {
    const run = cleanRun();
    run.applied.set(KEY1, [
      { at: T0 + 100, answered: true },
      { at: T0 + 5_000, answered: true },
    ]);
    expect(violationsOf(run)).toEqual({ unexplainedDuplicates: [`${KEY1} applied 2×, 1 repeat(s) without a cause`] });
  });

  it("lets one lost answer excuse one repeat, not two", () => {
    const run = cleanRun();
    run.applied.set(KEY1, [
      { at: T0 + 100, answered: false },
      { at: T0 + 3_000, answered: true },
    ]);
    expect(violationsOf(run)).toEqual({});
    run.applied.set(KEY1, [
      { at: T0 + 100, answered: false },
      { at: T0 + 3_000, answered: true },
      { at: T0 + 6_000, answered: true },
    ]);
    expect(violationsOf(run)).toEqual({ unexplainedDuplicates: [`${KEY1} applied 3×, 1 repeat(s) without a cause`] });
  });

  it("lets a crash excuse one repeat of an effect applied just before it, and only after it", () => {
    const run = cleanRun();
    run.outages = [{ killedAt: T0 + 1_000, restartedAt: T0 + 4_000 }];
    run.applied.set(KEY1, [
      { at: T0 + 500, answered: true },
      { at: T0 + 5_000, answered: true },
    ]);
    expect(violationsOf(run)).toEqual({});
    // Two repeats after one crash: the second has no cause of its own.
    run.applied.set(KEY1, [
      { at: T0 + 500, answered: true },
      { at: T0 + 5_000, answered: true },
      { at: T0 + 9_000, answered: true },
    ]);
    expect(violationsOf(run).unexplainedDuplicates).toHaveLength(1);
    // Applied long before the crash: its completion had time to be written.
    run.applied.set(KEY1, [
      { at: T0 - 10_000, answered: true },
      { at: T0 + 5_000, answered: true },
    ]);
    expect(violationsOf(run).unexplainedDuplicates).toHaveLength(1);
  });

  it("lets a crash excuse a repeat of an effect the killed run sent that reached Slack after the kill signal, until the run was gone", () => {
    const run = cleanRun();
    run.outages = [{ killedAt: T0 + 1_000, goneAt: T0 + 1_200, restartedAt: T0 + 4_000 }];
    run.applied.set(KEY1, [
      { at: T0 + 1_050, answered: true }, // answered into a socket no one reads any more
      { at: T0 + 5_000, answered: true },
    ]);
    expect(violationsOf(run)).toEqual({});
    // Applied after the killed run was gone: nothing of it could have sent that call, so no crash explains it.
    run.applied.set(KEY1, [
      { at: T0 + 1_300, answered: true },
      { at: T0 + 5_000, answered: true },
    ]);
    expect(violationsOf(run).unexplainedDuplicates).toHaveLength(1);
  });

  it("lets each fence rejection on the row excuse one repeat", () => {
    const run = cleanRun();
    run.applied.set(KEY1, [
      { at: T0 + 100, answered: true },
      { at: T0 + 200, answered: true },
      { at: T0 + 300, answered: true },
    ]);
    run.fenceLost.set("0:1", 2);
    expect(violationsOf(run)).toEqual({});
    run.fenceLost.set("0:1", 1);
    expect(violationsOf(run).unexplainedDuplicates).toHaveLength(1);
  });

  it("reports a row dead for a reason the fault plan cannot cause", () => {
    const run = cleanRun();
    patchRow(run, 0, { status: "dead", last_error: "chat.postMessage: invalid_auth" });
    expect(violationsOf(run)).toEqual({
      deadNotPlanned: ["Ev1: chat.postMessage: invalid_auth (its event was not aimed at the deleted channel)"],
    });
  });

  it("reports a dead row of a fatal event that Slack never refused", () => {
    const run = cleanRun();
    run.refused.clear();
    expect(violationsOf(run)).toEqual({ deadNotPlanned: ["Ev3: chat.postMessage: channel_not_found (Slack never refused its effect)"] });
  });

  it("reports a fatal event's row marked done", () => {
    const run = cleanRun();
    patchRow(run, 2, { status: "done", last_error: null });
    // Done, yet Slack never applied it: lost as well.
    expect(violationsOf(run)).toEqual({ fatalMarkedDone: ["Ev3: done"], lost: ["Ev3"] });
  });
});

describe("the chaos checker, across shards", () => {
  it("passes a clean two-shard run and counts each shard's rows", () => {
    const verdict = check(cleanRun(2));
    expect(verdict.violations).toMatchObject({ misrouted: [], idleShards: [] });
    expect(verdict.ok).toBe(true);
    expect(verdict.rows.byShard).toEqual([
      { total: 2, done: 1 },
      { total: 1, done: 1 },
    ]);
  });

  it("reports a shard that delivered nothing: the run did not prove that shard", () => {
    const run = cleanRun(2);
    patchRow(run, 1, { status: "dead", last_error: "chat.postMessage: channel_not_found" });
    expect(violationsOf(run).idleShards).toEqual(["shard 1: no row delivered (1 rows)"]);
  });

  it("reports a receipt or a row on another shard than its team's, and does not count it as the event's", () => {
    const run = cleanRun(2);
    run.receipts = [...run.receipts, { id: "Ev2", shard: 0 }];
    expect(violationsOf(run)).toEqual({ misrouted: ["Ev2 on shard 0, its team's is 1"] });
    const moved = cleanRun(2);
    patchRow(moved, 1, { shard: 0, id: 3 });
    // The event's own shard has no row for it, and shard 1 delivered nothing.
    expect(violationsOf(moved)).toEqual({
      ackedWithoutRow: ["Ev2"],
      misrouted: ["Ev2 on shard 0, its team's is 1"],
      idleShards: ["shard 1: no row delivered (0 rows)"],
    });
  });

  it("reports an operator API that does not see the shards' dead rows: a count off, a row missed or named twice by the dead list", () => {
    const run = cleanRun(2);
    const faithful = { backlogDead: 1, backlogDeadByShard: [1, 0], deadRows: ["0:2"], pages: 1 };
    expect(violationsOf({ ...run, operator: faithful })).toEqual({});
    expect(violationsOf({ ...run, operator: { ...faithful, backlogDead: 0, backlogDeadByShard: [0, 0] } })).toEqual({
      operatorDisagrees: ["backlog counts 0 dead rows, the shards hold 1", "backlog counts 0 dead rows on shard 0, it holds 1"],
    });
    expect(violationsOf({ ...run, operator: { ...faithful, deadRows: [] } })).toEqual({ operatorDisagrees: ["dead list misses 0:2"] });
    expect(violationsOf({ ...run, operator: { ...faithful, deadRows: ["0:2", "0:2", "1:2"], pages: 2 } })).toEqual({
      operatorDisagrees: ["dead list names 0:2 twice", "dead list names 1:2, which is not a dead row"],
    });
  });

  it("keys a fence rejection by shard and row: row 1 of shard 1 does not excuse a repeat of row 1 of shard 0", () => {
    const run = cleanRun(2);
    run.applied.set(KEY1, [
      { at: T0 + 100, answered: true },
      { at: T0 + 200, answered: true },
    ]);
    run.fenceLost.set(rowKey({ shard: 1, id: 1 }), 1);
    expect(violationsOf(run).unexplainedDuplicates).toHaveLength(1);
    run.fenceLost.set(rowKey({ shard: 0, id: 1 }), 1);
    expect(violationsOf(run)).toEqual({});
  });
});

describe("the chaos fault plan", () => {
  const shares = { seed: 7, events: 200, writeFailures: 0.3, fatalShare: 0.1, duplicateNow: 0.15, duplicateLater: 0.1 };

  it("is the same for the same seed, and differs for another", () => {
    expect(planEvents(shares)).toEqual(planEvents(shares));
    expect(planEvents({ ...shares, seed: 8 })).not.toEqual(planEvents(shares));
    const fates = (seed: number) => Array.from({ length: 200 }, (_, n) => slackFate(seed, 0.2, `post:C1:${n}`, 1 + (n % 3)));
    expect(fates(7)).toEqual(fates(7));
    expect(fates(7)).not.toEqual(fates(8));
  });

  it("injects every kind of fault at the shares asked for", () => {
    const plan = planEvents(shares);
    const faults = plan.flatMap((p) => p.writeFaults);
    expect(faults.filter((f) => f === "before_commit").length).toBeGreaterThan(0);
    expect(faults.filter((f) => f === "after_commit").length).toBeGreaterThan(0);
    expect(faults.filter((f) => f !== "none").length / faults.length).toBeCloseTo(0.3, 1);
    expect(plan.some((p) => p.fatal)).toBe(true);
    expect(plan.some((p) => p.fatal && p.kind === "command")).toBe(false);
    expect(new Set(plan.map((p) => p.kind))).toEqual(new Set(["mention", "message", "command", "click"]));
  });

  it("takes no fault or fate from Math.random: the plan, the fakes and the sender never call it", () => {
    const sources = [
      ...readdirSync("scripts/chaos").map((f) => join("scripts/chaos", f)),
      ...readdirSync("test/chaos").map((f) => join("test/chaos", f)),
    ];
    const offenders = sources.filter((file) => /Math\.random\s*\(/.test(readFileSync(file, "utf8")));
    expect(offenders).toEqual([]);
  });

  it("the Workers under test, every module the chaos run bundles into them, use Math.random only as their injected retry jitter", async () => {
    // The jitter decides when a retry is due, never whether a call fails: the fates are keyed by what a call
    // is about (plan.ts), so a replayed seed gets the same faults whatever the jitter drew.
    const { metafile } = await build({
      ...WORKER_BUILD_OPTIONS,
      // The consumer as the chaos run bundles it: the engine's over the chaos run's app (scripts/chaos/chaos.ts).
      entryPoints: ["test/chaos/ingress-with-faults.ts", writeAppEntries("test-artifacts/chaos-random-scan", resolve(CHAOS_APP)).consumer],
      outdir: "test-artifacts/chaos-random-scan",
      write: false,
      metafile: true,
      logLevel: "silent",
    });
    const modules = Object.keys(metafile.inputs);
    const uses = modules.flatMap((file) =>
      readFileSync(file, "utf8")
        .split("\n")
        .filter((line) => /Math\.random/.test(line) && !/^\s*(\/\/|\*)/.test(line))
        .map((line) => `${file}: ${line.trim()}`),
    );
    expect(modules.length).toBeGreaterThan(50); // the whole graph was walked, not an entry alone
    expect(uses.sort()).toEqual([
      "node_modules/p-retry/index.js: const random = options.randomize ? (Math.random() + 1) : 1;",
      "workers/consumer/worker.ts: random: Math.random,",
      "workers/ingress/http.ts: random: Math.random,",
    ]);
    // p-retry draws only when asked to randomize: no module of the Workers asks.
    expect(modules.filter((file) => !file.startsWith("node_modules/") && /randomize/.test(readFileSync(file, "utf8")))).toEqual([]);
  });
});

describe("the chaos checker, OAuth-installed workspaces and a shard added", () => {
  type InstallationRow = { shard: number; install_key: string; blocked_reason: string | null };
  const installed = (
    run: Run,
    over: Partial<Ledger>,
    rows: InstallationRow[] = [{ shard: 0, install_key: "T:T0ONE", blocked_reason: null }],
  ) =>
    checkInvariants({
      ...run,
      sent: run.sent.map((s) => ({ ...s, event: { ...s.event, team: "T0ONE" } })),
      ledger: { ...ledger(run.applied, run.refused), ...over },
      installations: { teams: ["T0ONE"], rows, refreshed: ["T0ONE"] },
    });
  const refreshed = { refreshes: new Map([["T0ONE", 1]]) };
  const nonEmpty = (v: ReturnType<typeof check>) => Object.fromEntries(Object.entries(v.violations).filter(([, list]) => list.length > 0));

  it("passes a run whose every call carried its own workspace's token, its installation on shard 0 and refreshed", () => {
    const run = cleanRun();
    expect(nonEmpty(installed(run, { ...refreshed, teamsByKey: new Map([[KEY1, ["T0ONE"]]]) }))).toEqual({});
  });

  it("reports an effect called with another workspace's token, or one Slack never issued (wrongToken)", () => {
    const run = cleanRun();
    expect(nonEmpty(installed(run, { ...refreshed, teamsByKey: new Map([[KEY1, ["T0ONE", "T0TWO", ""]]]) }))).toEqual({
      wrongToken: [`${KEY1} (T0ONE's) called with T0TWO, an unknown token`],
    });
  });

  it("reports a refresh token spent twice (refreshDoubleSpent)", () => {
    expect(nonEmpty(installed(cleanRun(), { ...refreshed, refreshReused: 1 }))).toEqual({
      refreshDoubleSpent: ["1 refresh token(s) spent twice"],
    });
  });

  it("reports an installation lost, blocked, on another shard than 0, or never refreshed though due (installations)", () => {
    expect(nonEmpty(installed(cleanRun(), refreshed, []))).toEqual({ installations: ["T0ONE: no installation on any shard"] });
    expect(
      nonEmpty(installed(cleanRun(), refreshed, [{ shard: 0, install_key: "T:T0ONE", blocked_reason: "invalid_refresh_token" }])),
    ).toEqual({
      installations: ["T0ONE: blocked (invalid_refresh_token)"],
    });
    expect(nonEmpty(installed(cleanRun(), refreshed, [{ shard: 1, install_key: "T:T0ONE", blocked_reason: null }]))).toEqual({
      installations: ["T0ONE: an installation on shard 1"],
    });
    expect(nonEmpty(installed(cleanRun(), {}))).toEqual({ installations: ["T0ONE: its token came due and was never refreshed"] });
  });

  it("a workspace has one home: an event recorded on a second shard too is misrouted, whatever shard was added", () => {
    const run = cleanRun(2);
    const both: Run = { ...run, receipts: [...run.receipts, { id: "Ev1", shard: 1 }] };
    expect(violationsOf(both)).toEqual({ misrouted: ["Ev1 on shard 1, its team's is 0"] });
  });

  it("reports one idempotency key on two shards: an effect recorded twice (doubled)", () => {
    const run = cleanRun(2);
    run.rows = [...run.rows, { ...(run.rows[0] as RowRecord), shard: 1, id: 9, receipt_id: "backfill:Ev1" }];
    expect(violationsOf(run).doubled).toEqual(["Ev1:0 on shards 0 and 1"]);
  });

  it("an event whose rows a copy of its fact recorded first (the backfill's) has its rows", () => {
    const run = cleanRun();
    run.sent = run.sent.map((s) => (s.event.receiptId === "Ev1" ? { ...s, event: { ...s.event, fact: "message:T1:C1:1.1" } } : s));
    run.rows = run.rows.map((row) =>
      row.receipt_id === "Ev1" ? { ...row, receipt_id: "backfill:message:T1:C1:1.1", fact: "message:T1:C1:1.1" } : row,
    );
    expect(violationsOf(run)).toEqual({});
  });

  describe("the backfill right after the restart", () => {
    const FACT = "message:T1:C1:1.1";
    const withFact = (run: Run): Run => ({
      ...run,
      sent: run.sent.map((s) => (s.event.receiptId === "Ev1" ? { ...s, event: { ...s.event, fact: FACT } } : s)),
      rows: run.rows.map((row) => (row.receipt_id === "Ev1" ? { ...row, fact: FACT } : row)),
    });
    const page = { status: 200, read: 1, alreadyHandled: 1, recorded: 0 };
    const backfilled = (run: Run, backfill: Parameters<typeof checkInvariants>[0]["backfill"]) =>
      Object.fromEntries(
        Object.entries(checkInvariants({ ...run, ledger: ledger(run.applied, run.refused), backfill }).violations).filter(
          ([, l]) => l.length > 0,
        ),
      );

    it("passes when it found what was delivered live, and sums its pages", () => {
      const run = withFact(cleanRun());
      const backfill = { team: "T1", home: 0, startedAt: T0 + 1_000, pages: [page, page] };
      expect(backfilled(run, backfill)).toEqual({});
      expect(checkInvariants({ ...run, ledger: ledger(run.applied, run.refused), backfill }).backfill).toEqual({
        pages: 2,
        read: 2,
        alreadyHandled: 2,
        recorded: 0,
      });
    });

    it("reports a page that did not answer 200, a row it recorded for an event acked live before it, and a row off its team's shard", () => {
      const run = withFact(cleanRun(2));
      run.rows = [...run.rows, { ...(run.rows[0] as RowRecord), shard: 1, id: 7, receipt_id: `backfill:${FACT}` }];
      const backfill = { team: "T1", home: 0, startedAt: T0 + 1_000, pages: [page, { status: 409, error: "no installation" }] };
      expect(backfilled(run, backfill)).toEqual({
        misrouted: ["Ev1 on shard 1, its team's is 0"],
        doubled: ["Ev1:0 on shards 0 and 1"],
        backfill: [
          "page 2 answered 409: no installation",
          "1:7 (Ev1:0) on shard 1, T1's is 0",
          "Ev1:0 recorded again, though Ev1 was delivered live before the backfill",
        ],
      });
    });
  });

  describe("the uninstall right after the restart", () => {
    const AT = T0 + 500;
    const parkedRun = () => {
      const run = cleanRun();
      run.applied.delete(KEY1);
      run.rows = run.rows.map((row) =>
        row.receipt_id === "Ev1"
          ? {
              ...row,
              status: "dead",
              last_error: "installation removed: app_uninstalled for team T1 (re-install the app there, then replay)",
              team_id: "T1",
              created_at: AT - 1,
            }
          : row,
      );
      return run;
    };
    const uninstalled = (run: Run, uninstall = { team: "T1", at: AT }) =>
      checkInvariants({ ...run, ledger: ledger(run.applied, run.refused), uninstall });

    it("its team's rows of before it, parked, are neither lost nor unplanned deaths; their count is reported", () => {
      const verdict = uninstalled(parkedRun());
      expect(Object.fromEntries(Object.entries(verdict.violations).filter(([, l]) => l.length > 0))).toEqual({});
      expect(verdict.uninstall).toEqual({ team: "T1", parked: 1 });
    });

    it("reports a row it parked of another team, or of its team but recorded after it", () => {
      const other = uninstalled(parkedRun(), { team: "T2", at: AT });
      expect(other.violations.uninstall).toEqual(["0:1 of T1 parked by the uninstall of T2"]);
      expect(other.violations.lost).toEqual(["Ev1"]);
      const late = uninstalled(parkedRun(), { team: "T1", at: AT - 2 });
      expect(late.violations.uninstall).toEqual(["0:1 of T1 parked by the uninstall of T1, though recorded after it"]);
    });
  });
});
