import type { AppSettings } from "../app/settings.ts";
import type { QueryBudget } from "../delivery/query-budget.ts";
import { type TokenKeys, tokenKeys } from "../installations/crypto.ts";
import { type SlackForRow, slackForRow } from "../installations/resolve.ts";
import { singleWorkspaceSlack } from "../installations/single-workspace.ts";
import { consoleLog, type Log } from "../log.ts";
import { newClaimToken } from "../outbox/claim.ts";
import type { ClaimedRow } from "../outbox/model.ts";
import type { Settings } from "../settings.ts";
import { slackWebApi } from "../slack/web-api.ts";
import { withWorkflowTokens } from "../steps/rows.ts";
import type { EffectContext } from "./effect.ts";
import { DEFAULT_MAX_BODY_BYTES, guardedFetch } from "./outbound.ts";

/**
 * The one place an effect's context is built from settings: the consumer and
 * the ingress's first attempt at the ack both call it, so how an effect
 * reaches Slack (its token, its base URL) and the network is decided once.
 * `timeoutMs` lets the ingress bound an inline attempt tighter than the
 * consumer's EFFECT_TIMEOUT_SECONDS. `appSettings`: the app's own
 * (shared/app/settings.ts), which its effects read. `edge`: the fetch every
 * call goes out through (EffectContext.edge), the same as slackForOf's.
 */
export function effectContextOf(
  settings: Pick<Settings, "slackBotToken" | "slackApiUrl" | "responseUrlHosts" | "effectTimeoutMs">,
  timeoutMs: number,
  appSettings: AppSettings | undefined,
  edge: typeof fetch,
): EffectContext {
  return {
    ...(appSettings ? { appSettings } : {}),
    slack: slackWebApi(settings.slackBotToken, settings.slackApiUrl, edge),
    responseUrlHosts: settings.responseUrlHosts,
    timeoutMs,
    // What an app's own effects may reach, and how much they read: shared/effects/outbound.ts.
    fetch: guardedFetch({ hosts: ["*"], timeoutMs, maxBodyBytes: DEFAULT_MAX_BODY_BYTES }, "fetch", edge),
    edge,
  };
}

/** The keys imported once per settings object (one per isolate), not per row. */
const importedKeys = new WeakMap<object, ReturnType<typeof tokenKeys>>();

/** TOKEN_ENCRYPTION_KEY's keys, imported once per settings object; undefined when it is not set. */
export function tokenKeysOf(settings: Partial<Pick<Settings, "tokenKey" | "oauth">>): (() => Promise<TokenKeys>) | undefined {
  const oauth = settings.oauth;
  const key = settings.tokenKey ?? (oauth ? { current: oauth.tokenKey, previous: oauth.previousTokenKey } : undefined);
  if (!key) return undefined;
  return () => {
    let imported = importedKeys.get(settings);
    if (!imported) {
      imported = tokenKeys(key.current, key.previous);
      importedKeys.set(settings, imported);
    }
    return imported;
  };
}

/**
 * The Slack client each row is performed with, for both Workers (the
 * consumer, and the ingress's first attempt at the ack): a distributed app's
 * team installation, read from `home` (shard 0, where every installation
 * lives) when the row is performed, refreshed under the installation's
 * rotation lease if its token is expiring (shared/installations/resolve.ts) —
 * by the consumer only;
 * `rowDb` is the row's own shard, for its receipt's org. In single-workspace
 * mode SLACK_BOT_TOKEN, and a refused one makes rows wait rather than die (no
 * D1 read; shared/installations/single-workspace.ts). Either way a row of a
 * custom step execution goes with the execution's workflow token while it
 * lives (shared/steps/rows.ts: one read on the row's shard, for those rows only).
 */
export function slackForOf(
  home: D1Database,
  settings: Pick<Settings, "oauth" | "slackBotToken" | "slackApiUrl"> & Partial<Pick<Settings, "tokenKey">>,
  rowDb: D1Database = home,
  /**
   * edge: the fetch the row's client (and a token's refresh) goes out through — the EffectContext's edge.
   * refresh: false (the ingress): a rotating token is used while valid and never refreshed here.
   * budget: the consumer invocation's query count; past its stop an expired token is not waited for.
   */
  {
    edge,
    refresh = true,
    budget,
    log = consoleLog,
    clock = Date.now,
  }: {
    readonly edge: typeof fetch;
    readonly refresh?: boolean;
    readonly budget?: QueryBudget;
    readonly log?: Log;
    /** Whether a workflow token has expired is read from it (tests move it; the Workers pass none: Date.now). */
    readonly clock?: () => number;
  },
): (row: ClaimedRow) => Promise<SlackForRow> {
  const installation = installationSlackOf(home, settings, rowDb, refresh, budget, edge);
  const steps = { db: rowDb, keys: tokenKeysOf(settings), slackApiUrl: settings.slackApiUrl, edge, clock, log };
  return withWorkflowTokens(installation, steps);
}

/** The installation's token (or SLACK_BOT_TOKEN's) a row is performed with. */
function installationSlackOf(
  home: D1Database,
  settings: Pick<Settings, "oauth" | "slackBotToken" | "slackApiUrl"> & Partial<Pick<Settings, "tokenKey">>,
  rowDb: D1Database,
  refresh: boolean,
  budget: QueryBudget | undefined,
  edge: typeof fetch,
): (row: ClaimedRow) => Promise<SlackForRow> {
  const oauth = settings.oauth;
  if (!oauth) return singleWorkspaceSlack(settings.slackBotToken ?? "", settings.slackApiUrl, edge);
  // OAuth settings hold TOKEN_ENCRYPTION_KEY: there are keys.
  const keys = tokenKeysOf(settings) ?? (() => tokenKeys(oauth.tokenKey, oauth.previousTokenKey));
  const teamless = settings.slackBotToken ? slackWebApi(settings.slackBotToken, settings.slackApiUrl, edge) : undefined;
  return slackForRow({
    db: home,
    rowDb,
    keys,
    slackApiUrl: settings.slackApiUrl,
    edge,
    teamless,
    ...(refresh ? { rotation: { clientId: oauth.clientId, clientSecret: oauth.clientSecret, newToken: newClaimToken } } : {}),
    clock: Date.now,
    sleep: (ms: number) => scheduler.wait(ms),
    ...(budget ? { budget } : {}),
  });
}
