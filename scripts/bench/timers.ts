/**
 * Section "timers": how late timed effects are, through `npm start` itself with its cron at the production
 * interval (60 s, npm start's default), the consumer's SLACK_API_URL pointed at this process's fake Slack.
 *
 * The app is the bench's (the reference app as shipped, /remind included): `/remind <minutes> <text>` records
 * a reminder `minutes` later. Reminders at several horizons are sent spread over a window (so their times fall
 * at every phase of the cron's minute), with QUEUE_DELAY_MAX_SECONDS lowered for this run so that some
 * horizons are within the queue's delay (their message is delayed to their time) and some beyond it (no
 * message: the sweep sends them at the first tick after their time) — the two paths production has, a 12 h
 * delay being too long to wait for here. Each reminder's time is read from the run itself (GET /admin/timers,
 * its `dueAt`), its arrival at the fake Slack on the same machine's clock; lateness = arrival − time.
 *
 * Bounded: every wait has a ceiling (the furthest time + two cron intervals); the run is stopped whatever
 * happens. A figure of this machine, noisy beside other work: what bounds it is the design (docs/how-it-works.md,
 * "Timers"), which the verdicts hold it to.
 */

import { freePort } from "../../cli/local/processes.ts";
import { localAdminTokenFor } from "../../cli/local/run-info.ts";
import { postSigned, slashCommand } from "../../cli/local/slack-payloads.ts";
import type { TimersPageAnswer } from "../../shared/ops/timers-answer.ts";
import { onInterrupt } from "./cleanup.ts";
import { startFakeSlack } from "./fake-slack.ts";
import { launchNpmStart, waitUntilUp } from "./pipeline.ts";
import { BENCH_SIGNING_SECRET } from "./signed-events.ts";
import { quantile, round } from "./stats.ts";

export interface TimersOptions {
  /** The reminders' horizons, in minutes (/remind takes whole minutes). */
  readonly horizonsMinutes: readonly number[];
  /** Reminders per horizon. */
  readonly perHorizon: number;
  /** The window the sends are spread over, in seconds: at least the cron interval, so every phase is met. */
  readonly spreadSeconds: number;
  /** QUEUE_DELAY_MAX_SECONDS for the run: horizons within it are queued, beyond it left to the sweep. */
  readonly queueDelayMaxSeconds: number;
  /** npm start's --sweep-every (the production cron is once a minute). */
  readonly cronSeconds: number;
  /** Start-up's ceiling. */
  readonly maxStartSeconds: number;
}

export interface TimerGroup {
  readonly horizonSeconds: number;
  /** "queued": a message delayed to its time; "sweep": no message, sent by the first tick after its time. */
  readonly path: "queued" | "sweep";
  readonly sent: number;
  readonly delivered: number;
  /** Lateness (arrival − time), ms. */
  readonly lateMs: { readonly min: number; readonly p50: number; readonly p99: number; readonly max: number };
}

export interface TimersResult {
  readonly config: TimersOptions;
  readonly groups: readonly TimerGroup[];
  /** Lateness over every delivered reminder of a path, ms. */
  readonly byPath: Readonly<Record<"queued" | "sweep", TimerGroup["lateMs"] | null>>;
  /** Reminders that arrived more than once (at least once means a duplicate is possible; none expected here). */
  readonly duplicates: number;
  readonly seconds: number;
}

const CHANNEL = "C0BENCHTIMERS";
const textOf = (i: number) => `:alarm_clock: Reminder from <@U0DEMOUSER>: bench-timer-${i}`;

export async function benchTimers(options: TimersOptions, progress: (line: string) => void): Promise<TimersResult> {
  const started = performance.now();
  const slack = await startFakeSlack();
  const port = await freePort();
  const launched = await launchNpmStart({ port }, slack, {
    QUEUE_DELAY_MAX_SECONDS: String(options.queueDelayMaxSeconds),
    SWEEP_EVERY_SECONDS: String(options.cronSeconds),
  });
  const unregister = onInterrupt(() => launched.stop());
  try {
    await waitUntilUp(`${launched.base}/healthz`, options.maxStartSeconds * 1000, launched);
    const token = launched.dir ? localAdminTokenFor(launched.base, launched.dir) : undefined;
    if (!token) throw new Error("the local run's admin token was not found in its run folder");

    // Sent spread evenly over the window, the horizons interleaved.
    const total = options.horizonsMinutes.length * options.perHorizon;
    const sends: { i: number; minutes: number; trigger: string }[] = [];
    progress(`timers: ${total} reminders over ${options.spreadSeconds} s, horizons ${options.horizonsMinutes.join(", ")} min`);
    const windowStart = performance.now();
    for (let i = 0; i < total; i++) {
      const wait = windowStart + (i * options.spreadSeconds * 1000) / total - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      const minutes = options.horizonsMinutes[i % options.horizonsMinutes.length] as number;
      const trigger = `bench.timer.${i}`;
      const ack = await postSigned(
        launched.base,
        BENCH_SIGNING_SECRET,
        slashCommand({
          command: "/remind",
          text: `${minutes} bench-timer-${i}`,
          channel: CHANNEL,
          responseUrl: "http://127.0.0.1:9/unused",
          triggerId: trigger,
        }),
      );
      if (ack.status !== 200) throw new Error(`/remind answered ${ack.status}: ${ack.body.slice(0, 200)}`);
      sends.push({ i, minutes, trigger });
    }

    // Each reminder's time, as the run recorded it (before the first of them fires).
    const dueAt = new Map<string, number>();
    for (let cursor: string | null = null, first = true; first || cursor; first = false) {
      const page = await fetch(`${launched.base}/admin/timers?limit=200${cursor ? `&cursor=${cursor}` : ""}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      const body = (await page.json()) as TimersPageAnswer;
      for (const row of body.rows) if (row.name && row.dueAt) dueAt.set(row.name, Date.parse(row.dueAt));
      cursor = body.nextCursor;
    }
    const times = sends.map((s) => dueAt.get(`remind:U0DEMOUSER:${s.trigger}`));
    if (times.some((t) => t === undefined))
      throw new Error(`GET /admin/timers does not list every reminder sent (${dueAt.size} of ${total})`);

    const last = Math.max(...(times as number[]));
    const ceiling = last - Date.now() + 2 * options.cronSeconds * 1000 + 10_000;
    progress(`timers: waiting up to ${Math.round(ceiling / 1000)} s for the reminders`);
    await slack.waitForDistinct(total, ceiling);

    const arrivals = new Map<string, number[]>();
    for (const a of slack.arrivals) {
      if (a.method !== "chat.postMessage") continue;
      arrivals.set(a.key, [...(arrivals.get(a.key) ?? []), performance.timeOrigin + a.at]);
    }
    const path = (minutes: number): "queued" | "sweep" => (minutes * 60 <= options.queueDelayMaxSeconds ? "queued" : "sweep");
    const late = sends.map((s, k) => {
      const at = arrivals.get(textOf(s.i))?.[0];
      return { minutes: s.minutes, path: path(s.minutes), lateMs: at === undefined ? undefined : at - (times[k] as number) };
    });
    const stats = (values: readonly number[]): TimerGroup["lateMs"] | null =>
      values.length === 0
        ? null
        : {
            min: round(Math.min(...values), 0),
            p50: round(quantile(values, 0.5), 0),
            p99: round(quantile(values, 0.99), 0),
            max: round(Math.max(...values), 0),
          };
    const groups = options.horizonsMinutes.map((minutes): TimerGroup => {
      const mine = late.filter((l) => l.minutes === minutes);
      const values = mine.flatMap((l) => (l.lateMs === undefined ? [] : [l.lateMs]));
      return {
        horizonSeconds: minutes * 60,
        path: path(minutes),
        sent: mine.length,
        delivered: values.length,
        lateMs: stats(values) ?? { min: Number.NaN, p50: Number.NaN, p99: Number.NaN, max: Number.NaN },
      };
    });
    const ofPath = (p: "queued" | "sweep") =>
      stats(late.filter((l) => l.path === p && l.lateMs !== undefined).map((l) => l.lateMs as number));
    return {
      config: options,
      groups,
      byPath: { queued: ofPath("queued"), sweep: ofPath("sweep") },
      duplicates: [...arrivals.values()].filter((list) => list.length > 1).length,
      seconds: round((performance.now() - started) / 1000, 0),
    };
  } finally {
    unregister();
    await launched.stop();
    await slack.close();
  }
}
