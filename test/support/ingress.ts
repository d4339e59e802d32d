import { env } from "cloudflare:workers";
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
  const deps: AckDeps = {
    db: env.DB,
    queue: env.OUTBOX_QUEUE,
    settings: parsed.settings,
    log,
    app: testApp(),
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
