import { env } from "cloudflare:workers";
import { parseAppSettings } from "../../shared/app/settings.ts";
import { recordingLog } from "../../shared/log.ts";
import { parseSettings } from "../../shared/settings.ts";
import type { AckDeps } from "../../workers/ingress/ack.ts";
import { recordingQueue } from "./rows.ts";
import { testApp } from "./test-app.ts";

/**
 * The ack path's dependencies over the real local D1, with a log recorder,
 * the engine's test app (test-app.ts), a queue that records what it is sent
 * (never the test Worker's real one: see consumer.ts, deliveryDeps) and a
 * waitUntil that tests can drain. Override any piece.
 */
export function ingressDeps(overrides: Partial<AckDeps> = {}) {
  const parsed = parseSettings(env);
  if (!parsed.ok) throw new Error(parsed.errors.join("; "));
  const log = recordingLog();
  const background: Promise<unknown>[] = [];
  const app = overrides.app ?? testApp();
  // The app's own settings from the same bindings, as the Worker reads them (test/support/settings.ts sets the examples').
  const appParsed = parseAppSettings(app.declaredSettings, env);
  if (!appParsed.ok) throw new Error(appParsed.errors.join("; "));
  const queue = recordingQueue();
  const deps: AckDeps = {
    db: env.DB,
    queue,
    settings: parsed.settings,
    appSettings: appParsed.settings,
    log,
    app,
    waitUntil: (work) => {
      background.push(work);
    },
    ...overrides,
  };
  return {
    deps,
    log,
    queue,
    /** Waits for everything handed to waitUntil so far. */
    settled: () => Promise.allSettled(background),
  };
}
