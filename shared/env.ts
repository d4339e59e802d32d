import type { OutboxMessage } from "./outbox/model.ts";

/**
 * What both Workers are bound to. The two wrangler files bind the same
 * database and queue (test/node/wrangler-config.test.ts holds them to it).
 *
 * Settings (vars and secrets) are not typed here one by one: they are read and
 * validated in one place, shared/settings.ts, which is what code depends on.
 * That is also why this file is written by hand rather than by `wrangler
 * types`: two Workers generate two global `Env` declarations that cannot share
 * one TypeScript program, and the generated queue type would be `Queue<unknown>`.
 */
export interface Env {
  readonly DB: D1Database;
  readonly OUTBOX_QUEUE: Queue<OutboxMessage>;
  readonly [setting: string]: unknown;
}
