import { env } from "cloudflare:workers";
import type { DeliveryDeps } from "../../shared/delivery/deliver.ts";
import { networkEdge } from "../../shared/effects/outbound.ts";
import { recordingLog } from "../../shared/log.ts";
import { parseSettings, type Settings } from "../../shared/settings.ts";
import { slackWebApi } from "../../shared/slack/web-api.ts";
import { recordingQueue } from "./rows.ts";
import { TEST_BOT_TOKEN, TEST_SLACK_API_URL } from "./settings.ts";
import { testApp } from "./test-app.ts";

/** The consumer's delivery, for app tests: they run effects through it without importing the engine (shared/). */
export { deliverBatch } from "../../shared/delivery/deliver.ts";

export function testSettings(over: Partial<Settings> = {}): Settings {
  const parsed = parseSettings(env);
  if (!parsed.ok) throw new Error(parsed.errors.join("; "));
  return { ...parsed.settings, ...over };
}

/** A clock tests move by hand: time is a parameter, never waited for. */
export function manualClock(start: number) {
  let now = start;
  const clock = () => now;
  clock.set = (to: number) => {
    now = to;
  };
  clock.advance = (ms: number) => {
    now += ms;
  };
  return clock;
}

/**
 * The consumer's dependencies over real D1, Slack's client pointed at the fake, a manual clock and pinned
 * randomness. Its queue records what it is sent (`queue.sent`): a test that calls the code directly never sends to
 * the test Worker's real queue, whose consumer would deliver the message ~100 ms later onto whatever row has that
 * id then. A test of real delivery passes `queue: env.OUTBOX_QUEUE` and says why.
 */
export function deliveryDeps(start: number, over: Partial<Omit<DeliveryDeps, "settings">> & { settings?: Partial<Settings> } = {}) {
  const clock = manualClock(start);
  const log = recordingLog();
  const sleeps: number[] = [];
  let tokens = 0;
  const settings = testSettings(over.settings);
  const queue = recordingQueue();
  const deps: DeliveryDeps = {
    db: env.DB,
    queue,
    effects: testApp().effects,
    context: {
      slack: slackWebApi(TEST_BOT_TOKEN, TEST_SLACK_API_URL, networkEdge),
      responseUrlHosts: settings.responseUrlHosts,
      timeoutMs: settings.effectTimeoutMs,
      fetch: (input, init) => fetch(input, init),
      edge: networkEdge,
    },
    log,
    clock,
    random: () => 0.5,
    newToken: () => `claim-${++tokens}`,
    // In-batch pacing waits on the manual clock: the wait is recorded, never slept.
    sleep: async (ms: number) => {
      sleeps.push(ms);
      clock.advance(ms);
    },
    ...over,
    settings,
  };
  return { deps, clock, log, sleeps, queue };
}
