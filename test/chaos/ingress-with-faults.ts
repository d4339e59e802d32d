/**
 * The ingress Worker with a fault seam, for the fault-injection suite
 * (scripts/chaos) and nothing else.
 *
 * It wraps the real entry and hands it D1 bindings (every shard's: DB, DB_1,
 * …) whose first batch() of a request, on whichever shard — the durable write
 * on the team's shard, or, at a workspace's first sight in the isolate, the
 * placement's round trip to shard 0 — fails when the chaos sender asked for it (the x-chaos-write-fault
 * header, set from the run's seeded fault plan, scripts/chaos/plan.ts):
 * "before_commit" fails before the batch runs (nothing written),
 * "after_commit" after it committed (written, but the caller sees an error) —
 * the two ways a durable write can fail. Either way the ingress must answer
 * 500, and Slack's redelivery must then succeed or find a duplicate. The plan
 * lives with the sender, not here, so the same seed injects the same faults
 * into the same deliveries in every run, whatever order they arrive in.
 *
 * How it is guarded: the seam is not in the product at all. This file is a
 * separate Worker entry under test/, bundled only by scripts/chaos/chaos.ts
 * into .ackbox/chaos/ (beside the consumer over the same app, cli/local/app-entries.ts);
 * the deployed ingress is workers/ingress/index.ts (the root wrangler.toml's main), which never imports it, so no header or
 * variable can switch a fault on in a deployment.
 */
import { app } from "../../examples/reference/index.ts";
import type { Env } from "../../shared/env.ts";
import { shardBindingName } from "../../shared/shards/bindings.ts";
import { ingress as ingressOver } from "../../workers/ingress/worker.ts";
import { AFTER_COMMIT, BEFORE_COMMIT } from "./faults.ts";

/** The app the chaos run's traffic is written for: the reference app as shipped (examples/reference/index.ts), whatever app/index.ts is. */
const ingress = ingressOver(app);

const WRITE_FAULT_HEADER = "x-chaos-write-fault";

/** One fault per request, spent by the first batch() on any shard. */
function faultyBatch(db: D1Database, fault: { pending: string | null }): D1Database {
  return new Proxy(db, {
    get(target, prop) {
      if (prop === "batch") {
        return async (statements: D1PreparedStatement[]) => {
          const injected = fault.pending;
          fault.pending = null;
          if (injected === "before_commit") throw new Error(BEFORE_COMMIT);
          const results = await target.batch(statements);
          if (injected === "after_commit") throw new Error(AFTER_COMMIT);
          return results;
        };
      }
      const value = Reflect.get(target, prop);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

export default {
  async fetch(request, env, ctx) {
    const fault = { pending: request.headers.get(WRITE_FAULT_HEADER) };
    const shards: Record<string, D1Database> = {};
    const bindings = env as unknown as Record<string, unknown>;
    for (let index = 0; bindings[shardBindingName(index)] !== undefined; index++) {
      shards[shardBindingName(index)] = faultyBatch(bindings[shardBindingName(index)] as D1Database, fault);
    }
    const response = await ingress.fetch(request, { ...env, ...shards }, ctx);
    if (fault.pending === null) return response;
    // Asked for, never spent: the request made no D1 batch (nothing to record). The sender counts no fault for it.
    const marked = new Response(response.body, response);
    marked.headers.set(WRITE_FAULT_HEADER, "unspent");
    return marked;
  },
} satisfies ExportedHandler<Env>;
