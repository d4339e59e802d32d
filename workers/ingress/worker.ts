/**
 * The ingress Worker over an app: a project's entry is `export default ingress(app)`
 * (workers/ingress/index.ts). Thin: it dispatches on the path and builds the ack
 * path's dependencies (http.ts); the ack path itself is ack.ts. Each request
 * is counted in progress until it is answered: the first attempt's inline rows
 * start while at most INLINE_MAX_REQUESTS are (isolate.ts).
 */
import type { SlackApp } from "../../shared/app/app.ts";
import { networkEdge } from "../../shared/effects/outbound.ts";
import type { Env } from "../../shared/env.ts";
import { consoleLog } from "../../shared/log.ts";
import { handleHttp } from "./http.ts";
import { inlineGate } from "./isolate.ts";

/** What an ingress is built with besides the app. */
export interface IngressOptions {
  /** The fetch every outbound call goes out through (EffectContext.edge): the real network unless a test kit's fakes. */
  readonly edge?: typeof fetch;
}

export function ingress(app: SlackApp, { edge = networkEdge }: IngressOptions = {}) {
  return {
    async fetch(request, env, ctx) {
      const now = Date.now();
      const answered = inlineGate.requestStarted(now);
      try {
        return await handleHttp(request, env, ctx, now, consoleLog, app, edge);
      } finally {
        answered();
      }
    },
  } satisfies ExportedHandler<Env>;
}
