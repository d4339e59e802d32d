import type { AppSettings } from "../app/settings.ts";
import type { QueryBudget } from "../delivery/query-budget.ts";
import { tokenKeys } from "../installations/crypto.ts";
import { type SlackForRow, slackForRow } from "../installations/resolve.ts";
import { singleWorkspaceSlack } from "../installations/single-workspace.ts";
import { newClaimToken } from "../outbox/claim.ts";
import type { ClaimedRow } from "../outbox/model.ts";
import type { Settings } from "../settings.ts";
import { slackWebApi } from "../slack/web-api.ts";
import type { EffectContext } from "./effect.ts";
import { DEFAULT_MAX_BODY_BYTES, guardedFetch } from "./outbound.ts";

/**
 * The one place an effect's context is built from settings: the consumer and
 * the ingress's first attempt at the ack both call it, so how an effect
 * reaches Slack (its token, its base URL) and the network is decided once.
 * `timeoutMs` lets the ingress bound an inline attempt tighter than the
 * consumer's EFFECT_TIMEOUT_SECONDS. `appSettings`: the app's own
 * (shared/app/settings.ts), which its effects read.
 */
export function effectContextOf(
  settings: Pick<Settings, "slackBotToken" | "slackApiUrl" | "responseUrlHosts" | "effectTimeoutMs">,
  timeoutMs = settings.effectTimeoutMs,
  appSettings?: AppSettings,
): EffectContext {
  return {
    ...(appSettings ? { appSettings } : {}),
    slack: slackWebApi(settings.slackBotToken, settings.slackApiUrl),
    responseUrlHosts: settings.responseUrlHosts,
    timeoutMs,
    // What an app's own effects may reach, and how much they read: shared/effects/outbound.ts.
    fetch: guardedFetch({ hosts: ["*"], timeoutMs, maxBodyBytes: DEFAULT_MAX_BODY_BYTES }, "fetch"),
  };
}

/** The keys imported once per settings object (one per isolate), not per row. */
const importedKeys = new WeakMap<object, ReturnType<typeof tokenKeys>>();

/**
 * The Slack client each row is performed with, for both Workers (the
 * consumer, and the ingress's first attempt at the ack): a distributed app's
 * team installation, read from `home` (shard 0, where every installation
 * lives) when the row is performed, refreshed under the installation's
 * rotation lease if its token is expiring (shared/installations/resolve.ts) —
 * by the consumer only;
 * `rowDb` is the row's own shard, for its receipt's org. In single-workspace
 * mode SLACK_BOT_TOKEN, and a refused one makes rows wait rather than die (no
 * D1 read; shared/installations/single-workspace.ts).
 */
export function slackForOf(
  home: D1Database,
  settings: Pick<Settings, "oauth" | "slackBotToken" | "slackApiUrl">,
  rowDb: D1Database = home,
  /**
   * refresh: false (the ingress): a rotating token is used while valid and never refreshed here.
   * budget: the consumer invocation's query count; past its stop an expired token is not waited for.
   */
  { refresh = true, budget }: { readonly refresh?: boolean; readonly budget?: QueryBudget } = {},
): (row: ClaimedRow) => Promise<SlackForRow> {
  const oauth = settings.oauth;
  if (!oauth) return singleWorkspaceSlack(settings.slackBotToken ?? "", settings.slackApiUrl);
  const keys = () => {
    let imported = importedKeys.get(settings);
    if (!imported) {
      imported = tokenKeys(oauth.tokenKey, oauth.previousTokenKey);
      importedKeys.set(settings, imported);
    }
    return imported;
  };
  const teamless = settings.slackBotToken ? slackWebApi(settings.slackBotToken, settings.slackApiUrl) : undefined;
  return slackForRow({
    db: home,
    rowDb,
    keys,
    slackApiUrl: settings.slackApiUrl,
    teamless,
    ...(refresh ? { rotation: { clientId: oauth.clientId, clientSecret: oauth.clientSecret, newToken: newClaimToken } } : {}),
    clock: Date.now,
    sleep: (ms: number) => scheduler.wait(ms),
    ...(budget ? { budget } : {}),
  });
}
