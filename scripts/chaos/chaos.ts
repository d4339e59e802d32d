/**
 * The fault-injection run: the real local pipeline (both Workers in one
 * wrangler dev, real local D1 and Queues), an ingress whose durable write
 * fails for a share of requests, a Slack that fails a share of calls and
 * refuses some channels outright, Slack-style redeliveries, and the local
 * process killed mid-run (its in-memory queue lost) and started again.
 * Then it waits for the pipeline to quiesce and checks the invariants.
 *
 * By default as a distributed app: every team is installed through the
 * ingress's OAuth flow before the first event (the fake Slack issues rotating
 * tokens), and every token the first team is issued comes due for rotation
 * 8 s after it is issued, so that team is refreshed again and again during
 * the run, by the cron and by the consumer, under load and across the crash.
 *
 * And the restart adds a shard: SHARD_COUNT N → N + 1 and nothing else
 * (docs/scaling.md, "Adding a shard"). Every team seen before it stays where
 * it was placed — two of them are teams the rule would now put on the new
 * shard — and a workspace installed after it lands there. Right after the
 * restart the run uninstalls one of those two (and installs it again once the
 * removal is done) and backfills a channel of the other over the messages
 * delivered live before the kill, while Slack still redelivers the earlier
 * events.
 */
import { mkdirSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { writeAppEntries } from "../../cli/local/app-entries.ts";
import { bundleWorker } from "../../cli/local/bundle.ts";
import type { LocalShard } from "../../cli/local/config.ts";
import { queryEveryShard } from "../../cli/local/d1.ts";
import { type Pipeline, PROJECT_ROOT, startPipeline } from "../../cli/local/pipeline.ts";
import { shardOfTeam, teamsOnEveryShard } from "../../cli/local/shard-teams.ts";
import {
  appMention,
  buttonClick,
  channelMessage,
  eventCallback,
  postSigned,
  slashCommand,
  type Team,
} from "../../cli/local/slack-payloads.ts";
import { BACKFILL_PAGE_MAX, type BackfillPageAnswer } from "../../shared/ops/backfill-answer.ts";
import type { BacklogAnswer } from "../../shared/ops/backlog-answer.ts";
import type { DeadPageAnswer } from "../../shared/ops/dead-answer.ts";
import { type FaultySlack, startFaultySlack } from "./faulty-slack.ts";
import { type BackfillRun, checkInvariants, type OperatorView, type Outage, type RowRecord, rowKey, type Verdict } from "./invariants.ts";
import { planEvents } from "./plan.ts";
import { type ChaosEvent, type SentEvent, sendAll } from "./slack-sender.ts";

/** The app the chaos traffic is written for (its keys, its replies): the one test/chaos/ingress-with-faults.ts wraps. */
export const CHAOS_APP = "examples/reference/index.ts";

export interface ChaosOptions {
  readonly events: number;
  readonly seed: number;
  /** Share of deliveries whose durable write fails (half before, half after committing), by the seeded plan. */
  readonly writeFailures: number;
  /** Share of Slack calls answered with a transient fault. */
  readonly slackFaults: number;
  /** Share of events aimed at a channel that does not exist (fatal). */
  readonly fatalShare: number;
  readonly duplicateNow: number;
  readonly duplicateLater: number;
  /** Kill the local process when this share of events has been sent (none: no kill). */
  readonly killAt: number | null;
  readonly concurrency: number;
  /** How long the run may take to quiesce after the last delivery. */
  readonly horizonMs: number;
  /** D1 databases (SHARD_COUNT); the events' teams are spread so that every shard takes traffic. */
  readonly shards: number;
  /** Install every team through OAuth (rotating tokens, one due mid-run) instead of one SLACK_BOT_TOKEN. */
  readonly oauth: boolean;
  /** The restart adds a shard (SHARD_COUNT + 1, nothing else); needs a kill. */
  readonly addShard: boolean;
  readonly log: (line: string) => void;
  /** Fills the run's empty state folder before the first start (the tests copy an already-migrated D1 state). */
  readonly prepareState?: (stateDir: string) => Promise<void>;
}

export const DEFAULTS: ChaosOptions = {
  events: 300,
  seed: 1,
  writeFailures: 0.1,
  slackFaults: 0.15,
  fatalShare: 0.05,
  duplicateNow: 0.15,
  duplicateLater: 0.1,
  killAt: 0.5,
  concurrency: 8,
  horizonMs: 120_000,
  shards: 2,
  oauth: true,
  addShard: true,
  log: () => {},
};

export interface ChaosReport {
  readonly options: Omit<ChaosOptions, "log">;
  readonly verdict: Verdict;
  readonly slackFates: Readonly<Record<string, number>>;
  readonly restartMs: number | null;
  readonly sendMs: number;
  /** From the last delivery until no row was pending or leased. */
  readonly quiesceMs: number;
  readonly fenceRejections: number;
  /** A team whose events went to each shard (index = shard): one placed there before the add, and the one installed after it. */
  readonly teams: readonly string[];
  /** What the operator API answered after the run (checked against the shards by the verdict). */
  readonly operator: OperatorView;
  /** OAuth runs: installs and refreshes the fake Slack answered, per team. */
  readonly oauth?: { readonly installs: Readonly<Record<string, number>>; readonly refreshes: Readonly<Record<string, number>> };
  /** The shard count after the run (one more than `options.shards` when a shard was added). */
  readonly shardsAfter: number;
  /** The teams the restart's backfill read, it uninstalled (then installed again), and installed after the add. */
  readonly afterRestart: { readonly backfilled?: string; readonly uninstalled?: string; readonly installedAfter?: string };
}

const SECRET = "ackbox-chaos-signing-secret";
const ADMIN_TOKEN = "ackbox-chaos-admin-token-9e4f1c7a2b8d";
const FATAL_CHANNEL = "C0DELETED";
/** The backfilled team's channel: its messages and mentions of before the kill are what the backfill reads. */
const FILL_CHANNEL = "C0FILL";
const WORK = join(PROJECT_ROOT, ".ackbox/chaos");
const OAUTH_ENV = {
  SLACK_CLIENT_ID: "1111.2222",
  SLACK_CLIENT_SECRET: "ackbox-chaos-client-secret",
  SLACK_REDIRECT_URL: "https://ackbox.chaos.invalid/slack/oauth_redirect",
  TOKEN_ENCRYPTION_KEY: "5c".repeat(32),
  SLACK_BOT_TOKEN: "",
};
/** The rotating team's token comes due this long after its install: REFRESH_AHEAD_MS (shared/installations/rotation.ts) before its expiry. */
const ROTATION_DUE_MS = 8_000;
const REFRESH_AHEAD_MS = 30 * 60_000;

/** Timings compressed so a run takes a minute or two, inside what settings allow. */
const CHAOS_SETTINGS = {
  LEASE_SECONDS: "6",
  EFFECT_TIMEOUT_SECONDS: "2",
  MAX_ATTEMPTS: "8",
  BACKOFF_BASE_SECONDS: "1",
  BACKOFF_CAP_SECONDS: "4",
  SWEEP_GRACE_SECONDS: "5",
  WATCHED_CHANNELS: "",
  RESPONSE_URL_HOSTS: "127.0.0.1",
  ALERT_CHANNEL: "",
};

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const log = options.log;
  const stateDir = join(WORK, `state-${process.pid}-${Date.now()}`);
  mkdirSync(WORK, { recursive: true });
  const bundles = await buildBundles();
  await options.prepareState?.(stateDir);
  const addShard = options.addShard && options.killAt !== null;
  const shardsAfter = addShard ? options.shards + 1 : options.shards;
  const killAfter = options.killAt === null ? Number.POSITIVE_INFINITY : Math.floor(options.events * options.killAt);
  const teams = chaosTeams(options, shardsAfter);
  const rotating = teams.before[0]?.teamId;
  // The fake Slack reads the run's events (their fates' keys, the backfilled channel) once they are made, with its URL.
  let made: ChaosEvents | undefined;
  const slack = await startFaultySlack(
    {
      transient: options.slackFaults,
      fatalChannels: new Set([FATAL_CHANNEL]),
      retryAfterSeconds: 1,
      hangMs: 5_000,
      seed: options.seed,
      fateKeyOf: (key) => made?.fateKeyOf(key) ?? key,
    },
    options.oauth
      ? { expiresInSeconds: (teamId) => (teamId === rotating ? (REFRESH_AHEAD_MS + ROTATION_DUE_MS) / 1000 : 43_200) }
      : undefined,
    { history: (channel) => (channel === FILL_CHANNEL ? (made?.fillHistory ?? []) : []), singleTeam: teams.backfilled?.teamId ?? "T0NONE" },
  );
  const events = makeEvents(options, teams, killAfter, slack);
  made = events;
  const env = {
    ...CHAOS_SETTINGS,
    SHARD_COUNT: String(options.shards),
    SLACK_SIGNING_SECRET: SECRET,
    SLACK_BOT_TOKEN: "xoxb-ackbox-chaos",
    SLACK_API_URL: slack.apiUrl,
    ADMIN_TOKEN,
    ...(options.oauth ? OAUTH_ENV : {}),
  };
  let fenceRejections = 0;
  // Adding a shard is raising SHARD_COUNT: nothing else changes (the local run binds and migrates every shard it counts).
  const start = (port: number, shardCount = options.shards) =>
    startPipeline({
      port,
      env: { ...env, SHARD_COUNT: String(shardCount) },
      devVarsFile: null,
      dir: join(WORK, "run"),
      persistTo: stateDir,
      cronIntervalMs: 1_000,
      bundles,
      app: CHAOS_APP,
      onRecord: (record) => {
        if (record.msg?.startsWith("fence rejected")) fenceRejections += 1;
      },
    });

  let run: Pipeline | undefined;
  try {
    log(`starting the local pipeline with ${options.shards} shard${options.shards > 1 ? "s" : ""}…`);
    run = await start(0);
    const port = run.port;
    if (options.oauth) {
      log(
        `installing ${teams.before.length} workspaces through /slack/install (rotating tokens; ${rotating}'s due in ${ROTATION_DUE_MS / 1000} s)…`,
      );
      for (const team of teams.before) await install(run.url, team.teamId);
    }
    const outages: Outage[] = [];
    let restartMs: number | null = null;
    let restarting: Promise<void> | undefined;
    let afterRestart: Promise<AfterRestart> | undefined;

    log(`sending ${events.list.length} events (write failures ${pct(options.writeFailures)}, Slack faults ${pct(options.slackFaults)})…`);
    const sendStarted = Date.now();
    const sent: SentEvent[] = await sendAll(events.list, {
      ingressUrl: run.url,
      secret: SECRET,
      // Slack: nearly at once, ~1 min, ~5 min, compressed; the last also waits out a restart still under way, as
      // a real 5 minutes would on any machine (a restart took 31 s under load, longer than the compressed 24 s).
      retrySchedule: [300, 4_000, 20_000],
      beforeLastRetry: async () => {
        await restarting?.catch(() => {});
      },
      concurrency: options.concurrency,
      onProgress: (count) => {
        if (count % 50 === 0) log(`  ${count}/${events.list.length} first deliveries`);
        if (count === killAfter && run && !restarting) {
          const victim = run;
          restarting = (async () => {
            const killedAt = Date.now();
            log(`  killing the local process (its in-memory queue goes with it) after ${count} events…`);
            await victim.kill();
            const goneAt = Date.now();
            if (addShard) log(`  restarting with a shard added (SHARD_COUNT ${options.shards} → ${shardsAfter}, nothing else)…`);
            const restarted = await restartOn(port, (p) => start(p, shardsAfter));
            run = restarted;
            const restartedAt = Date.now();
            restartMs = restartedAt - killedAt;
            outages.push({ killedAt, goneAt, restartedAt });
            log(`  restarted in ${(restartMs / 1000).toFixed(1)} s`);
            // Right after the add, while the events keep coming (and before Slack's last retries, which wait for this).
            if (teams.installedAfter && options.oauth) await install(restarted.url, teams.installedAfter.teamId);
            afterRestart = rightAfterTheAdd(restarted, options, teams, events, log);
            await afterRestart;
          })();
          // Awaited after the sends; until then a failure must not go unhandled.
          restarting.catch(() => {});
        }
      },
    });
    await restarting;
    const after = await afterRestart;
    const sendMs = Date.now() - sendStarted;
    const lastDelivery = Date.now();

    log("waiting for the pipeline to quiesce…");
    if (!run) throw new Error("the pipeline is not running");
    const configs = run.configs;
    const query = <Row>(sql: string) => queryEveryShard<Row>({ config: configs.ingress, persistTo: stateDir, shards: configs.shards, sql });
    await waitQuiet(run.url, options.horizonMs, log, configs.shards, query);
    const quiesceMs = Date.now() - lastDelivery;
    const operator = await readOperatorView(run.url);
    await run.stop();
    run = undefined;

    const rows = await query<Omit<RowRecord, "shard">>(
      "SELECT id, idempotency_key, receipt_id, effect, status, attempts, last_error, fact, team_id, created_at FROM outbox ORDER BY id",
    );
    const removal = await query<{ payload: string }>(
      "SELECT payload FROM outbox WHERE effect = 'installation.removed' ORDER BY id LIMIT 1",
    );
    const removedAt = removal[0] ? (JSON.parse(removal[0].payload) as { at?: number }).at : undefined;
    const receipts = await query<{ id: string }>("SELECT id FROM receipts");
    const installations = options.oauth
      ? await query<{ install_key: string; blocked_reason: string | null }>("SELECT install_key, blocked_reason FROM installations")
      : [];
    const fenceLost = await query<{ outbox_id: number; n: number }>(
      "SELECT outbox_id, COUNT(*) AS n FROM outbox_attempts WHERE outcome = 'fence_lost' GROUP BY outbox_id",
    );
    const verdict = checkInvariants({
      sent,
      receipts,
      rows,
      fenceLost: new Map(fenceLost.map((r) => [rowKey({ shard: r.shard, id: r.outbox_id }), r.n])),
      ledger: slack.ledger(),
      outages,
      shardCount: configs.shards.length,
      operator,
      ...(options.oauth
        ? { installations: { teams: teams.all.map((t) => t.teamId), rows: installations, refreshed: rotating ? [rotating] : [] } }
        : {}),
      ...(after?.backfill ? { backfill: after.backfill } : {}),
      ...(after?.uninstalled && removedAt !== undefined ? { uninstall: { team: after.uninstalled, at: removedAt } } : {}),
    });
    const { log: _log, ...rest } = options;
    return {
      options: rest,
      verdict,
      slackFates: slack.ledger().fates,
      restartMs,
      sendMs,
      quiesceMs,
      fenceRejections,
      teams: teams.byShard,
      operator,
      ...(options.oauth
        ? {
            oauth: {
              installs: Object.fromEntries(slack.ledger().installs ?? []),
              refreshes: Object.fromEntries(slack.ledger().refreshes ?? []),
            },
          }
        : {}),
      shardsAfter,
      afterRestart: {
        ...(teams.backfilled ? { backfilled: teams.backfilled.teamId } : {}),
        ...(after?.uninstalled ? { uninstalled: after.uninstalled } : {}),
        ...(teams.installedAfter ? { installedAfter: teams.installedAfter.teamId } : {}),
      },
    };
  } finally {
    await run?.stop().catch(() => {});
    await slack.close();
    rmSync(stateDir, { recursive: true, force: true });
  }
}

/**
 * Starts the pipeline again on the port Slack knows. Right after a SIGKILL the
 * port can stay taken for a moment (a child still closing): try for up to 15 s.
 */
async function restartOn(port: number, start: (port: number) => Promise<Pipeline>): Promise<Pipeline> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      return await start(port);
    } catch (error) {
      if (!(error instanceof Error && error.message.includes("already in use")) || Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

/**
 * Polls the operator API until no row is pending or leased twice in a row, or
 * the horizon passes; says what is left every 5 s. With several shards, each
 * shard's outbox is then read directly before the run counts as quiet, so the
 * verdict never depends on how the operator API adds the shards up.
 */
async function waitQuiet(
  url: string,
  horizonMs: number,
  log: (line: string) => void,
  shards: readonly LocalShard[],
  query: <Row>(sql: string) => Promise<Array<Row & { shard: number }>>,
): Promise<void> {
  const deadline = Date.now() + horizonMs;
  let quietPolls = 0;
  for (let poll = 1; Date.now() < deadline; poll++) {
    try {
      const response = await fetch(`${url}/admin/backlog`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      const body = (await response.json()) as { outbox: { pending: number; leased: number; overdue: number; staleLeases: number } };
      const { pending, leased, overdue, staleLeases } = body.outbox;
      quietPolls = pending + leased === 0 ? quietPolls + 1 : 0;
      if (quietPolls >= 2) {
        if (shards.length === 1) return;
        const owed = await query<{ n: number }>("SELECT COUNT(*) AS n FROM outbox WHERE status IN ('pending', 'leased')");
        if (owed.every((row) => row.n === 0)) return;
        log(`  still owed on a shard: ${owed.map((row) => `shard ${row.shard} ${row.n}`).join(", ")}`);
      } else if (poll % 5 === 0)
        log(`  still owed: ${pending} pending, ${leased} leased (${overdue} overdue for the sweep, ${staleLeases} stale leases)`);
    } catch {
      quietPolls = 0;
    }
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

/** The operator API's answers after the run: the backlog's dead counts and the dead list, walked in small pages. */
async function readOperatorView(url: string): Promise<OperatorView> {
  const get = async <T>(path: string): Promise<T> => {
    const response = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    if (response.status !== 200) throw new Error(`GET ${path} answered ${response.status}: ${(await response.text()).slice(0, 300)}`);
    return (await response.json()) as T;
  };
  const backlog = await get<BacklogAnswer>("/admin/backlog");
  const deadRows: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  // Pages of 2, so the dead list, merged over every shard, is walked across several pages.
  do {
    const page: DeadPageAnswer = await get<DeadPageAnswer>(`/admin/dead?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    pages += 1;
    deadRows.push(...page.rows.map((row) => rowKey(row)));
    cursor = page.nextCursor;
  } while (cursor !== null && pages < 1_000);
  return {
    backlogDead: backlog.outbox.dead,
    backlogDeadByShard: backlog.shards
      ? Array.from({ length: Math.max(0, ...backlog.shards.map((s) => s.shard + 1)) }, (_, index) =>
          Number(backlog.shards?.find((s) => s.shard === index)?.dead ?? Number.NaN),
        )
      : null,
    deadRows,
    pages,
  };
}

/**
 * Installs `teamId` the way a browser does: /slack/install sets the state cookie and redirects to Slack;
 * Slack (the fake) sends the browser back to /slack/oauth_redirect with a code, here the team id.
 */
async function install(url: string, teamId: string): Promise<void> {
  const started = await fetch(`${url}/slack/install`, { redirect: "manual" });
  const state = new URL(started.headers.get("location") ?? "").searchParams.get("state") ?? "";
  const cookie = (started.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
  const finished = await fetch(`${url}/slack/oauth_redirect?code=${encodeURIComponent(teamId)}&state=${encodeURIComponent(state)}`, {
    headers: { cookie },
    redirect: "manual",
  });
  if (finished.status !== 200)
    throw new Error(`installing ${teamId} answered ${finished.status}: ${(await finished.text()).slice(0, 300)}`);
}

interface ChaosTeams {
  /** Installed before the first event, one a shard of the count the run starts with, and (with a shard added) the two below. */
  readonly before: readonly Team[];
  /** Every team installed in the run. */
  readonly all: readonly Team[];
  /** Whose channel the restart's backfill reads; with a shard added, a team the rule would now put on the new shard. */
  readonly backfilled?: Team;
  /** Whom the restart uninstalls (then installs again); the same kind of team. */
  readonly uninstalled?: Team;
  /** A workspace first seen after the add: the rule places it on the new shard. */
  readonly installedAfter?: Team;
  /** The home shard of each team, by team id. */
  readonly homes: ReadonlyMap<string, number>;
  /** A team of each shard after the run (index = shard), for the report. */
  readonly byShard: readonly string[];
}

/**
 * The run's workspaces: one on each shard of the count it starts with; with a restart, two more placed before
 * the add on shards the rule no longer gives them (the backfill's and the uninstall's); with a shard added, one
 * installed after the add, which the rule places on the new shard.
 */
function chaosTeams(options: ChaosOptions, shardsAfter: number): ChaosTeams {
  const old = teamsOnEveryShard(options.shards, "T0CHAOS");
  const added = shardsAfter > options.shards;
  const pick = (prefix: string, fits: (teamId: string) => boolean): Team => {
    for (let n = 0; n < 10_000; n++) if (fits(`${prefix}${n}`)) return { teamId: `${prefix}${n}`, appId: old[0]?.appId ?? "A0ACKBOX" };
    throw new Error(`no team named ${prefix}<n> fits the run`);
  };
  const moves = (teamId: string) => !added || shardOfTeam(teamId, shardsAfter) !== shardOfTeam(teamId, options.shards);
  const restart = options.killAt !== null;
  const backfilled = restart ? pick("T0FILL", moves) : undefined;
  const uninstalled = restart && options.oauth ? pick("T0GONE", moves) : undefined;
  const installedAfter = added ? pick("T0NEW", (teamId) => shardOfTeam(teamId, shardsAfter) === options.shards) : undefined;
  const before = [...old, ...(backfilled ? [backfilled] : []), ...(uninstalled ? [uninstalled] : [])];
  const homes = new Map(before.map((team) => [team.teamId, shardOfTeam(team.teamId, options.shards)]));
  if (installedAfter) homes.set(installedAfter.teamId, options.shards);
  return {
    before,
    all: [...before, ...(installedAfter ? [installedAfter] : [])],
    ...(backfilled ? { backfilled } : {}),
    ...(uninstalled ? { uninstalled } : {}),
    ...(installedAfter ? { installedAfter } : {}),
    homes,
    byShard: [...old.map((team) => team.teamId), ...(installedAfter ? [installedAfter.teamId] : [])],
  };
}

interface ChaosEvents {
  readonly list: ChaosEvent[];
  /** The backfilled team's messages of before the kill, as conversations.history keeps them. */
  readonly fillHistory: readonly Readonly<Record<string, string>>[];
  /** The key a call's fate is drawn on: each event's ts of this run replaced by one fixed by its index. */
  readonly fateKeyOf: (effectKey: string) => string;
}

function makeEvents(options: ChaosOptions, teams: ChaosTeams, killAfter: number, slack: FaultySlack): ChaosEvents {
  // The run's own database and Slack start empty, so ids need only the seed to be distinct. Message times are
  // this hour's (a backfill reads only inside the rows' retention); faults are drawn on times fixed by the index.
  const runId = `S${options.seed}`;
  const base = Math.floor(Date.now() / 1000) - options.events - 600;
  const fixedTs = new Map<string, string>();
  const fillHistory: Record<string, string>[] = [];
  // After the kill (and the events in flight then), every other event is the new workspace's.
  const newFrom = killAfter + options.concurrency;
  const list = planEvents(options).map((plan): ChaosEvent => {
    const i = plan.index;
    const afterAdd = teams.installedAfter !== undefined && i >= newFrom && i % 2 === 0;
    // Event i goes to team i mod (teams): every shard takes its share of each kind of fault.
    const team = afterAdd ? (teams.installedAfter as Team) : (teams.before[i % teams.before.length] as Team);
    const n = String(i).padStart(6, "0");
    const ts = `${base + i}.${n}`;
    fixedTs.set(ts, `1764600${String(i).padStart(3, "0").slice(-3)}.${n}`);
    const filled = team.teamId === teams.backfilled?.teamId && i < killAfter && (plan.kind === "mention" || plan.kind === "message");
    const channel = plan.fatal ? FATAL_CHANNEL : filled ? FILL_CHANNEL : `C0CHAOS${i % 7}`;
    const common = {
      kind: plan.kind,
      fatal: plan.fatal,
      plan,
      shard: teams.homes.get(team.teamId) ?? 0,
      ...(options.oauth ? { team: team.teamId } : {}),
    };
    switch (plan.kind) {
      case "mention": {
        const receiptId = `EvCHAOS${runId}M${n}`;
        const event = appMention({ channel, ts, team: team.teamId });
        if (filled && !plan.fatal) fillHistory.push({ type: "message", user: event.user, text: event.text, ts });
        return {
          ...common,
          receiptId,
          request: eventCallback(event, receiptId, team),
          effectKey: `post:${channel}:${ts}`,
          fact: `app_mention:${team.teamId}:${channel}:${ts}`,
        };
      }
      case "message": {
        const receiptId = `EvCHAOS${runId}R${n}`;
        const event = channelMessage({ channel, ts, team: team.teamId });
        if (filled && !plan.fatal) fillHistory.push({ type: "message", user: event.user, text: event.text, ts });
        return {
          ...common,
          receiptId,
          request: eventCallback(event, receiptId, team),
          effectKey: `react:${channel}:${ts}:eyes`,
          fact: `message:${team.teamId}:${channel}:${ts}`,
        };
      }
      case "command": {
        const trigger = `${runId}.${n}.cmd`;
        return {
          ...common,
          receiptId: `command:${team.teamId}:${trigger}`,
          request: slashCommand({ channel, responseUrl: slack.responseUrl(`${runId}-${n}`), triggerId: trigger, team }),
          effectKey: `respond:/respond/${runId}-${n}`,
        };
      }
      default: {
        const trigger = `${runId}.${n}.click`;
        return {
          ...common,
          receiptId: `interaction:${team.teamId}:${trigger}`,
          request: buttonClick({ channel, messageTs: ts, triggerId: trigger, responseUrl: slack.responseUrl(`unused-${n}`), team }),
          effectKey: `update:${channel}:${ts}`,
        };
      }
    }
  });
  return {
    list,
    fillHistory,
    fateKeyOf: (key) => key.replace(/\d{10}\.\d{6}/g, (ts) => fixedTs.get(ts) ?? ts),
  };
}

interface AfterRestart {
  /** The team uninstalled (and installed again once its removal was done), when the run has OAuth installs. */
  readonly uninstalled?: string;
  readonly backfill?: BackfillRun;
}

/**
 * Right after the shard add: an uninstall of one team placed before it (its removal awaited, then the team
 * installed again: the rows recorded meanwhile wait for that and go out then), and a backfill of the other one's
 * channel over its messages of before the kill — most of them delivered live on the team's home, before the add.
 */
async function rightAfterTheAdd(
  run: Pipeline,
  options: ChaosOptions,
  teams: ChaosTeams,
  events: ChaosEvents,
  log: (line: string) => void,
): Promise<AfterRestart> {
  const [uninstalled, backfill] = await Promise.all([
    teams.uninstalled ? uninstallAndBack(run, teams.uninstalled, log) : Promise.resolve(undefined),
    teams.backfilled && events.fillHistory.length > 0
      ? backfillChannel(run, options, teams.backfilled, teams.homes.get(teams.backfilled.teamId) ?? 0, events, log)
      : Promise.resolve(undefined),
  ]);
  return { ...(uninstalled ? { uninstalled } : {}), ...(backfill ? { backfill } : {}) };
}

async function uninstallAndBack(run: Pipeline, team: Team, log: (line: string) => void): Promise<string> {
  log(`  uninstalling ${team.teamId} (app_uninstalled), then installing it again once the removal is done…`);
  const eventId = `EvCHAOSGONE${team.teamId}`;
  const request = eventCallback({ type: "app_uninstalled", event_ts: `${Math.floor(Date.now() / 1000)}.000000` }, eventId, team);
  for (let tries = 0; ; tries++) {
    const posted = await postSigned(run.url, SECRET, request, { timeoutMs: 5_000 }).catch(() => undefined);
    if (posted?.status === 200) break;
    if (tries >= 20) throw new Error(`the uninstall of ${team.teamId} was never acked (last answer ${posted?.status ?? "none"})`);
    await new Promise((r) => setTimeout(r, 500));
  }
  const query = <Row>(sql: string) =>
    queryEveryShard<Row>({ config: run.configs.ingress, persistTo: run.persistTo, shards: run.configs.shards, sql });
  const deadline = Date.now() + 60_000;
  for (;;) {
    const done = await query<{ n: number }>("SELECT COUNT(*) AS n FROM outbox WHERE effect = 'installation.removed' AND status = 'done'");
    if (done.some((row) => row.n > 0)) break;
    if (Date.now() > deadline) throw new Error(`the uninstall of ${team.teamId} was not performed within 60 s`);
    await new Promise((r) => setTimeout(r, 500));
  }
  await install(run.url, team.teamId);
  log(`  ${team.teamId} uninstalled and installed again`);
  return team.teamId;
}

async function backfillChannel(
  run: Pipeline,
  options: ChaosOptions,
  team: Team,
  home: number,
  events: ChaosEvents,
  log: (line: string) => void,
): Promise<BackfillRun> {
  const times = events.fillHistory.map((m) => Number(m.ts));
  const window = { channel: FILL_CHANNEL, oldest: String(Math.min(...times)), latest: String(Math.max(...times)) };
  log(`  backfilling ${FILL_CHANNEL} of ${team.teamId} over its ${times.length} messages of before the kill…`);
  const startedAt = Date.now();
  const pages: BackfillRun["pages"][number][] = [];
  let cursor: string | null = null;
  // As the CLI does: the channel's type the first page answered (conversations.info) goes with every next page.
  let channelType: string | undefined;
  do {
    const body: Record<string, unknown> = {
      ...window,
      limit: BACKFILL_PAGE_MAX,
      ...(options.oauth ? { team: team.teamId } : {}),
      ...(cursor ? { cursor } : {}),
      ...(channelType ? { channelType } : {}),
    };
    const response: Response = await fetch(`${run.url}/admin/backfill`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const answer = (await response.json().catch(() => ({}))) as BackfillPageAnswer & { error?: string };
    pages.push({
      status: response.status,
      ...(response.status === 200 ? { read: answer.read, alreadyHandled: answer.alreadyHandled, recorded: answer.recorded } : {}),
      ...(answer.error ? { error: answer.error } : {}),
    });
    cursor = response.status === 200 ? (answer.nextCursor ?? null) : null;
    if (response.status === 200) channelType = answer.channelType;
  } while (cursor !== null && pages.length < 20);
  const sum = (field: "read" | "alreadyHandled" | "recorded") => pages.reduce((n, page) => n + (page[field] ?? 0), 0);
  log(`  backfill: ${sum("read")} read, ${sum("alreadyHandled")} already handled, ${sum("recorded")} recorded`);
  return { team: team.teamId, home, startedAt, pages };
}

/**
 * The two Workers as the chaos run starts them, over the app its traffic is written for (CHAOS_APP, whatever
 * app/index.ts is): the consumer as the engine builds it, the ingress behind its fault seam.
 */
async function buildBundles(): Promise<{ ingress: string; consumer: string }> {
  const out = join(WORK, "build");
  const entries = writeAppEntries(out, resolve(PROJECT_ROOT, CHAOS_APP));
  return {
    ingress: await bundleWorker(resolve(PROJECT_ROOT, "test/chaos/ingress-with-faults.ts"), join(out, "ingress-with-faults.mjs")),
    consumer: await bundleWorker(entries.consumer, join(out, "consumer.mjs")),
  };
}

const pct = (share: number) => `${Math.round(share * 100)} %`;
