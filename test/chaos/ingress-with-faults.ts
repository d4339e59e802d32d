/**
 * The ingress Worker with a fault seam, for the fault-injection suite
 * (scripts/chaos) and nothing else.
 *
 * It wraps the real entry and hands it a D1 binding whose batch() fails for
 * a share of calls — half before the batch runs (nothing written), half after
 * it committed (written, but the caller sees an error): the two ways a
 * durable write can fail. Either way the ingress must answer 500, and Slack's
 * redelivery must then succeed or find a duplicate.
 *
 * How it is guarded: the seam is not in the product at all. This file is a
 * separate Worker entry under test/, bundled only by scripts/chaos/build.ts
 * into .ackbox/chaos/; the deployed ingress is workers/ingress/index.ts (the
 * root wrangler.toml's main), which never imports it. The failure share is
 * compiled into the chaos bundle (esbuild `define`), not read from settings,
 * so no variable can switch it on in a deployment.
 */
import type { Env } from "../../shared/env.ts";
import ingress from "../../workers/ingress/index.ts";
import { AFTER_COMMIT, BEFORE_COMMIT } from "./faults.ts";

declare const CHAOS_D1_BATCH_FAILURE_SHARE: number;

function faultyBatches(db: D1Database, share: number): D1Database {
  return new Proxy(db, {
    get(target, prop) {
      if (prop === "batch") {
        return async (statements: D1PreparedStatement[]) => {
          const roll = Math.random();
          if (roll < share / 2) throw new Error(BEFORE_COMMIT);
          const results = await target.batch(statements);
          if (roll < share) throw new Error(AFTER_COMMIT);
          return results;
        };
      }
      const value = Reflect.get(target, prop);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

export default {
  fetch(request, env, ctx) {
    return ingress.fetch(request, { ...env, DB: faultyBatches(env.DB, CHAOS_D1_BATCH_FAILURE_SHARE) }, ctx);
  },
} satisfies ExportedHandler<Env>;
