import { env } from "cloudflare:workers";
import { parseAppSettings } from "../../shared/app/settings.ts";
import { recordingLog } from "../../shared/log.ts";
import { parseSettings } from "../../shared/settings.ts";
import type { AckDeps } from "../../workers/ingress/ack.ts";
import { testApp } from "./test-app.ts";

/**
 * The ack path's dependencies over the real local D1 and queue, with a log
 * recorder, the engine's test app (test-app.ts) and a waitUntil that tests
 * can drain. Override any piece.
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
  const deps: AckDeps = {
    db: env.DB,
    queue: env.OUTBOX_QUEUE,
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
    /** Waits for everything handed to waitUntil so far. */
    settled: () => Promise.allSettled(background),
  };
}
