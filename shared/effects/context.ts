import type { Settings } from "../settings.ts";
import { slackWebApi } from "../slack/web-api.ts";
import type { EffectContext } from "./effect.ts";
import { DEFAULT_MAX_BODY_BYTES, guardedFetch } from "./outbound.ts";

/**
 * The one place an effect's context is built from settings: the consumer and
 * the ingress's first attempt at the ack both call it, so how an effect
 * reaches Slack (its token, its base URL) and the network is decided once.
 * `timeoutMs` lets the ingress bound an inline attempt tighter than the
 * consumer's EFFECT_TIMEOUT_SECONDS.
 */
export function effectContextOf(
  settings: Pick<Settings, "slackBotToken" | "slackApiUrl" | "responseUrlHosts" | "effectTimeoutMs">,
  timeoutMs = settings.effectTimeoutMs,
): EffectContext {
  return {
    slack: slackWebApi(settings.slackBotToken, settings.slackApiUrl),
    responseUrlHosts: settings.responseUrlHosts,
    timeoutMs,
    // What an app's own effects may reach, and how much they read: shared/effects/outbound.ts.
    fetch: guardedFetch({ hosts: ["*"], timeoutMs, maxBodyBytes: DEFAULT_MAX_BODY_BYTES }, "fetch"),
  };
}
