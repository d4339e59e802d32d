/**
 * The ingress Worker. Thin: it dispatches on the path and builds the ack
 * path's dependencies; the ack path itself is ack.ts.
 */
import type { Env } from "../../shared/env.ts";
import { handleHttp } from "./http.ts";

export default {
  async fetch(request, env, ctx) {
    return handleHttp(request, env, ctx, Date.now());
  },
} satisfies ExportedHandler<Env>;
