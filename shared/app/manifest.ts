/**
 * A Slack app manifest (https://api.slack.com/reference/manifests), derived
 * from what the app registers, so the app and its Slack configuration cannot
 * drift: event subscriptions from event()/message(), slash commands from
 * command(), shortcuts, interactivity and the options URL (all on the one
 * Request URL, /slack/events), and the bot scopes its declared Slack methods
 * (shared/slack/methods.ts), events and commands need.
 */
import { semanticsOf } from "../slack/methods.ts";
import type { App } from "./app.ts";

/** Event type → the bot event(s) to subscribe to, and the scopes that subscription needs. */
const EVENTS: Readonly<Record<string, { readonly subscribe: readonly string[]; readonly scopes: readonly string[] }>> = {
  app_mention: { subscribe: ["app_mention"], scopes: ["app_mentions:read"] },
  // A message handler hears public channels by default; name others with the hint { names: ["message.im", …] }.
  message: { subscribe: ["message.channels"], scopes: ["channels:history"] },
  "message.channels": { subscribe: ["message.channels"], scopes: ["channels:history"] },
  "message.groups": { subscribe: ["message.groups"], scopes: ["groups:history"] },
  "message.im": { subscribe: ["message.im"], scopes: ["im:history"] },
  "message.mpim": { subscribe: ["message.mpim"], scopes: ["mpim:history"] },
  app_home_opened: { subscribe: ["app_home_opened"], scopes: [] },
  reaction_added: { subscribe: ["reaction_added"], scopes: ["reactions:read"] },
  reaction_removed: { subscribe: ["reaction_removed"], scopes: ["reactions:read"] },
  member_joined_channel: { subscribe: ["member_joined_channel"], scopes: ["channels:read"] },
  link_shared: { subscribe: ["link_shared"], scopes: ["links:read"] },
  app_uninstalled: { subscribe: ["app_uninstalled"], scopes: [] },
  tokens_revoked: { subscribe: ["tokens_revoked"], scopes: [] },
};

export interface ManifestOptions {
  /** The ingress's public base URL, e.g. https://ackbox.example.workers.dev */
  readonly url: string;
  readonly name?: string;
}

export interface Manifest {
  readonly manifest: Record<string, unknown>;
  /** What the manifest could not derive (a RegExp command without names, a method or event with no known scope). */
  readonly warnings: readonly string[];
}

export function manifestOf(app: App, options: ManifestOptions): Manifest {
  const requestUrl = `${options.url.replace(/\/+$/, "")}/slack/events`;
  const name = options.name ?? "ackbox";
  const warnings: string[] = [];
  const scopes = new Set<string>();
  const botEvents = new Set<string>();
  const commands: Record<string, unknown>[] = [];
  const shortcuts: Record<string, unknown>[] = [];
  let interactive = false;
  let options_ = false;
  let home = false;

  for (const r of app.registrations) {
    const names = r.hint.names ?? (typeof r.pattern === "string" ? [r.pattern] : []);
    switch (r.surface) {
      case "event":
        for (const type of names) {
          const known = EVENTS[type];
          if (type === "app_home_opened") home = true;
          if (!known) {
            botEvents.add(type);
            warnings.push(`event ${type}: no scope known for it; check Slack's docs and add it to shared/app/manifest.ts`);
            continue;
          }
          for (const e of known.subscribe) botEvents.add(e);
          for (const s of known.scopes) scopes.add(s);
        }
        break;
      case "command":
        scopes.add("commands");
        if (names.length === 0) warnings.push(`${r.label}: a RegExp matches commands the manifest cannot name; give { names: ["/…"] }`);
        for (const command of names) {
          commands.push({
            command,
            url: requestUrl,
            description: r.hint.description ?? command,
            ...(r.hint.usageHint ? { usage_hint: r.hint.usageHint } : {}),
            should_escape: false,
          });
        }
        break;
      case "shortcut":
      case "message_shortcut":
        interactive = true;
        scopes.add("commands");
        if (names.length === 0) warnings.push(`${r.label}: a RegExp callback_id cannot be declared; give { names: ["…"] }`);
        for (const callbackId of names) {
          shortcuts.push({
            name: r.hint.title ?? callbackId,
            type: r.surface === "shortcut" ? "global" : "message",
            callback_id: callbackId,
            description: r.hint.description ?? callbackId,
          });
        }
        break;
      case "options":
        interactive = true;
        options_ = true;
        break;
      default:
        interactive = true;
    }
  }
  for (const method of app.slackMethods) {
    const needed = semanticsOf(method).scopes;
    if (needed.length === 0 && !method.startsWith("views.") && !method.startsWith("functions.")) {
      warnings.push(`Slack method ${method}: no scope known; add it to shared/slack/methods.ts`);
    }
    for (const s of needed) scopes.add(s);
  }

  const manifest = {
    display_information: { name },
    features: {
      bot_user: { display_name: name, always_online: false },
      ...(home ? { app_home: { home_tab_enabled: true, messages_tab_enabled: false, messages_tab_read_only_enabled: false } } : {}),
      ...(commands.length > 0 ? { slash_commands: commands } : {}),
      ...(shortcuts.length > 0 ? { shortcuts } : {}),
    },
    oauth_config: { scopes: { bot: [...scopes].sort() } },
    settings: {
      ...(botEvents.size > 0 ? { event_subscriptions: { request_url: requestUrl, bot_events: [...botEvents].sort() } } : {}),
      ...(interactive
        ? { interactivity: { is_enabled: true, request_url: requestUrl, ...(options_ ? { message_menu_options_url: requestUrl } : {}) } }
        : {}),
      org_deploy_enabled: false,
      socket_mode_enabled: false,
      token_rotation_enabled: false,
    },
  };
  return { manifest, warnings };
}

/**
 * The bot scopes the app's manifest asks for: what an OAuth install requests
 * when SLACK_SCOPES is empty. An app seen only through the engine's narrow
 * interface (SlackApp, no registrations) derives none.
 */
export function botScopesOf(app: object): string[] {
  if (!("registrations" in app && "slackMethods" in app)) return [];
  const { manifest } = manifestOf(app as App, { url: "https://ackbox.invalid" });
  return (manifest.oauth_config as { scopes: { bot: string[] } }).scopes.bot;
}
