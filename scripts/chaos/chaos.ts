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
 * the run, by the cron and by the consumer, under load and across the crash. And the restart adds a shard (SHARD_COUNT N → N + 1 with
 * SHARD_COUNT_PREVIOUS N, docs/scaling.md "Adding a shard"): the teams are
 * one per shard of N + 1, so one team moves to the new shard mid-run while
 * Slack still redelivers its earlier events.
 */
import { mkdirSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { writeAppEntries } from "../../cli/local/app-entries.ts";
import { bundleWorker } from "../../cli/local/bundle.ts";
import type { LocalShard } from "../../cli/local/config.ts";
import { queryEveryShard } from "../../cli/local/d1.ts";
import { type Pipeline, PROJECT_ROOT, startPipeline } from "../../cli/local/pipeline.ts";
import { shardOfTeam, teamsOnEveryShard } from "../../cli/local/shard-teams.ts";
import { appMention, buttonClick, channelMessage, eventCallback, slashCommand, type Team } from "../../cli/local/slack-payloads.ts";
import type { BacklogAnswer } from "../../shared/ops/backlog-answer.ts";
import type { DeadPageAnswer } from "../../shared/ops/dead-answer.ts";
import { type FaultySlack, startFaultySlack } from "./faulty-slack.ts";
import { checkInvariants, type OperatorView, type Outage, type RowRecord, rowKey, type Verdict } from "./invariants.ts";
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
  /** The restart adds a shard (SHARD_COUNT + 1, SHARD_COUNT_PREVIOUS); needs a kill. */
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
  /** The team whose events went to each shard (index = shard). */
  readonly teams: readonly string[];
  /** What the operator API answered after the run (checked against the shards by the verdict). */
  readonly operator: OperatorView;
  /** OAuth runs: installs and refreshes the fake Slack answered, per team. */
  readonly oauth?: { readonly installs: Readonly<Record<string, number>>; readonly refreshes: Readonly<Record<string, number>> };
  /** The shard count after the run (one more than `options.shards` when a shard was added). */
  readonly shardsAfter: number;
}

const SECRET = "ackbox-chaos-signing-secret";
const ADMIN_TOKEN = "ackbox-chaos-admin-token-9e4f1c7a2b8d";
const FATAL_CHANNEL = "C0DELETED";
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
  // One team per shard of the final count: under N + 1 one of them lands on the new shard, under N on an old one.
  const teams = teamsOnEveryShard(shardsAfter, "T0CHAOS");
  const rotating = teams[0]?.teamId;
  const slack = await startFaultySlack(
    {
      transient: options.slackFaults,
      fatalChannels: new Set([FATAL_CHANNEL]),
      retryAfterSeconds: 1,
      hangMs: 5_000,
      seed: options.seed,
    },
    options.oauth
      ? { expiresInSeconds: (teamId) => (teamId === rotating ? (REFRESH_AHEAD_MS + ROTATION_DUE_MS) / 1000 : 43_200) }
      : undefined,
  );
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
  const start = (port: number, shardCount = options.shards) =>
    startPipeline({
      port,
      env: shardCount === options.shards ? env : { ...env, SHARD_COUNT: String(shardCount), SHARD_COUNT_PREVIOUS: String(options.shards) },
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
        `installing ${teams.length} workspaces through /slack/install (rotating tokens; ${rotating}'s due in ${ROTATION_DUE_MS / 1000} s)…`,
      );
      for (const team of teams) await install(run.url, team.teamId);
    }
    const events = makeEvents(options, slack, teams, shardsAfter);
    const outages: Outage[] = [];
    let restartMs: number | null = null;
    let restarting: Promise<void> | undefined;
    const killAfter = options.killAt === null ? Number.POSITIVE_INFINITY : Math.floor(options.events * options.killAt);

    log(`sending ${events.length} events (write failures ${pct(options.writeFailures)}, Slack faults ${pct(options.slackFaults)})…`);
    const sendStarted = Date.now();
    const sent: SentEvent[] = await sendAll(events, {
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
        if (count % 50 === 0) log(`  ${count}/${events.length} first deliveries`);
        if (count === killAfter && run && !restarting) {
          const victim = run;
          restarting = (async () => {
            const killedAt = Date.now();
            log(`  killing the local process (its in-memory queue goes with it) after ${count} events…`);
            await victim.kill();
            const goneAt = Date.now();
            if (addShard) log(`  restarting with a shard added (SHARD_COUNT ${shardsAfter}, SHARD_COUNT_PREVIOUS ${options.shards})…`);
            run = await restartOn(port, (p) => start(p, shardsAfter));
            const restartedAt = Date.now();
            restartMs = restartedAt - killedAt;
            outages.push({ killedAt, goneAt, restartedAt });
            log(`  restarted in ${(restartMs / 1000).toFixed(1)} s`);
          })();
          // Awaited after the sends; until then a failure must not go unhandled.
          restarting.catch(() => {});
        }
      },
    });
    await restarting;
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
      "SELECT id, idempotency_key, receipt_id, effect, status, attempts, last_error FROM outbox ORDER BY id",
    );
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
        ? { installations: { teams: teams.map((t) => t.teamId), rows: installations, refreshed: rotating ? [rotating] : [] } }
        : {}),
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
      teams: teams.map((t) => t.teamId),
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

function makeEvents(options: ChaosOptions, slack: FaultySlack, teams: readonly Team[], shardsAfter: number): ChaosEvent[] {
  // The run's own database and Slack start empty, so ids need only the seed to be distinct.
  const runId = `S${options.seed}`;
  return planEvents(options).map((plan): ChaosEvent => {
    const i = plan.index;
    // Event i goes to team i mod (teams): every shard takes its share of each kind of fault.
    const team = teams[i % teams.length] as Team;
    // Its team's shard before the run's shard is added, and after it (the same for every team that did not move).
    const shard = shardOfTeam(team.teamId, options.shards);
    const after = shardOfTeam(team.teamId, shardsAfter);
    const n = String(i).padStart(6, "0");
    const ts = `1764600${String(i).padStart(3, "0").slice(-3)}.${n}`;
    const channel = plan.fatal ? FATAL_CHANNEL : `C0CHAOS${i % 7}`;
    const common = {
      kind: plan.kind,
      fatal: plan.fatal,
      plan,
      shard,
      ...(after === shard ? {} : { altShard: after }),
      ...(options.oauth ? { team: team.teamId } : {}),
    };
    switch (plan.kind) {
      case "mention": {
        const receiptId = `EvCHAOS${runId}M${n}`;
        return {
          ...common,
          receiptId,
          request: eventCallback(appMention({ channel, ts, team: team.teamId }), receiptId, team),
          effectKey: `post:${channel}:${ts}`,
        };
      }
      case "message": {
        const receiptId = `EvCHAOS${runId}R${n}`;
        return {
          ...common,
          receiptId,
          request: eventCallback(channelMessage({ channel, ts, team: team.teamId }), receiptId, team),
          effectKey: `react:${channel}:${ts}:eyes`,
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
