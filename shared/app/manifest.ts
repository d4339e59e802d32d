/**
 * A Slack app manifest (https://docs.slack.dev/reference/app-manifest),
 * derived from what the app registers, so the app and its Slack configuration
 * cannot drift: event subscriptions from event()/message() (message.* for the
 * conversations each message handler hears), slash commands from command(),
 * shortcuts, interactivity and the options URL (all on the one Request URL,
 * /slack/events), custom steps from function() with their parameters, the
 * assistant view when the app is an assistant, and the bot scopes its
 * declared Slack methods (shared/slack/methods.ts), events, commands and
 * app.manifest({ scopes }) need. In distributed mode (OAuth installs) it adds
 * the redirect URL and the events the engine handles itself: app_uninstalled
 * and tokens_revoked (shared/installations/lifecycle.ts).
 *
 * Fields and their shapes: Slack's manifest schema (slackapi/manifest-schema,
 * manifest.schema.2.0.0.json); test/node/manifest.test.ts and
 * app/manifest.test.ts hold the output to it.
 */
import { semanticsOf } from "../slack/methods.ts";
import { type App, DEFAULT_MESSAGE_CHANNEL_TYPES, type FunctionParameter } from "./app.ts";

/** Event type → the bot event(s) to subscribe to, and the scopes that subscription needs. */
const EVENTS: Readonly<Record<string, { readonly subscribe: readonly string[]; readonly scopes: readonly string[] }>> = {
  app_mention: { subscribe: ["app_mention"], scopes: ["app_mentions:read"] },
  // The :read scope beside each: a backfill (shared/ops/backfill.ts) asks conversations.info what kind of
  // conversation a channel is, and lists the bot's channels with users.conversations; both need it.
  "message.channels": { subscribe: ["message.channels"], scopes: ["channels:history", "channels:read"] },
  "message.groups": { subscribe: ["message.groups"], scopes: ["groups:history", "groups:read"] },
  "message.im": { subscribe: ["message.im"], scopes: ["im:history", "im:read"] },
  "message.mpim": { subscribe: ["message.mpim"], scopes: ["mpim:history", "mpim:read"] },
  app_home_opened: { subscribe: ["app_home_opened"], scopes: [] },
  reaction_added: { subscribe: ["reaction_added"], scopes: ["reactions:read"] },
  reaction_removed: { subscribe: ["reaction_removed"], scopes: ["reactions:read"] },
  member_joined_channel: { subscribe: ["member_joined_channel"], scopes: ["channels:read"] },
  link_shared: { subscribe: ["link_shared"], scopes: ["links:read"] },
  app_uninstalled: { subscribe: ["app_uninstalled"], scopes: [] },
  tokens_revoked: { subscribe: ["tokens_revoked"], scopes: [] },
  // Slack's docs: no scope for the events themselves; the assistant view needs assistant:write (added with it).
  assistant_thread_started: { subscribe: ["assistant_thread_started"], scopes: [] },
  assistant_thread_context_changed: { subscribe: ["assistant_thread_context_changed"], scopes: [] },
  function_executed: { subscribe: ["function_executed"], scopes: [] },
  // The user's stop button on an answer being written (Slack's agent_session_stopped reference: chat:write).
  agent_session_stopped: { subscribe: ["agent_session_stopped"], scopes: ["chat:write"] },
};

/** A message handler that names no conversations hears public channels, as before channelTypes existed. */
const ASSISTANT_EVENTS = ["assistant_thread_started", "assistant_thread_context_changed"];

export interface ManifestOptions {
  /** The ingress's public base URL, e.g. https://ackbox.example.workers.dev */
  readonly url: string;
  readonly name?: string;
  /**
   * A distributed app (SLACK_CLIENT_ID: OAuth installs, a token per workspace): the redirect URL, and
   * app_uninstalled / tokens_revoked, which the engine handles for every installation.
   */
  readonly distributed?: boolean;
}

export interface Manifest {
  readonly manifest: Record<string, unknown>;
  /** What the manifest could not derive (a RegExp command without names, a method or event with no known scope). */
  readonly warnings: readonly string[];
  /** What the app needs that no manifest field sets (an app with custom steps: an org-level install). */
  readonly notes: readonly string[];
}

export function manifestOf(app: App, options: ManifestOptions): Manifest {
  const base = options.url.replace(/\/+$/, "");
  const requestUrl = `${base}/slack/events`;
  const name = options.name ?? "ackbox";
  const extras = app.manifestExtras;
  const warnings: string[] = [];
  const scopes = new Set<string>(extras.scopes ?? []);
  const botEvents = new Set<string>();
  const commands: Record<string, unknown>[] = [];
  const shortcuts: Record<string, unknown>[] = [];
  const functions: Record<string, unknown> = {};
  let interactive = false;
  let options_ = false;
  let home = false;

  const subscribe = (type: string) => {
    const known = EVENTS[type];
    if (!known) {
      botEvents.add(type);
      warnings.push(`event ${type}: no scope known for it; check Slack's docs and add it to shared/app/manifest.ts`);
      return;
    }
    for (const e of known.subscribe) botEvents.add(e);
    for (const s of known.scopes) scopes.add(s);
  };

  for (const r of app.registrations) {
    const names = r.hint.names ?? (typeof r.pattern === "string" ? [r.pattern] : []);
    switch (r.surface) {
      case "event":
        if (r.hint.function) {
          const { callbackId, title, description, inputs = {}, outputs = {} } = r.hint.function;
          functions[callbackId] = {
            title,
            description: description ?? title,
            input_parameters: parameters(inputs),
            output_parameters: parameters(outputs),
          };
          subscribe("function_executed");
          break;
        }
        for (const type of names) {
          if (type === "app_home_opened") home = true;
          if (type === "message")
            for (const channelType of r.hint.channelTypes ?? DEFAULT_MESSAGE_CHANNEL_TYPES) subscribe(`message.${channelType}`);
          else subscribe(type);
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

  // An assistant: its view, its thread events, and the user's messages in its threads, which arrive as message.im.
  const assistantHandled = ASSISTANT_EVENTS.some((type) => botEvents.has(type));
  if (assistantHandled && !extras.assistant) {
    warnings.push('assistant events are handled but no assistant view is declared: app.manifest({ assistant: { description: "…" } })');
  }
  const declared = extras.assistant;
  const assistant =
    declared !== undefined
      ? { ...declared, description: declared.description || `${name} assistant` }
      : assistantHandled
        ? { description: `${name} assistant` }
        : undefined;
  if (assistant) {
    for (const type of ASSISTANT_EVENTS) subscribe(type);
    subscribe("message.im");
    scopes.add("assistant:write");
  }
  if (options.distributed) {
    subscribe("app_uninstalled");
    subscribe("tokens_revoked");
  }
  for (const method of app.slackMethods) {
    const needed = semanticsOf(method).scopes;
    if (needed.length === 0 && !method.startsWith("views.") && !method.startsWith("functions.") && method !== "conversations.replies") {
      warnings.push(`Slack method ${method}: no scope known; add it to shared/slack/methods.ts`);
    }
    for (const s of needed) scopes.add(s);
  }
  // A user can write to the app only with the Messages tab on (and not read-only): message.im needs it.
  const messagesTab = botEvents.has("message.im");
  const hasFunctions = Object.keys(functions).length > 0;
  // Slack's custom steps guide (Bolt): an app with custom steps opts in to org-ready apps (org_deploy_enabled, set
  // below) and is installed at the organisation level; its functions run on the app's own host ("remote").
  const notes = hasFunctions
    ? [
        `custom steps (${Object.keys(functions).join(", ")}): Slack requires the app to be org-ready (org_deploy_enabled, set here) and installed at the organisation level by an org admin; Slack's workflow steps guide says how such an app may be distributed`,
      ]
    : [];

  const manifest = {
    _metadata: { major_version: 2, minor_version: 1 },
    display_information: { name },
    features: {
      bot_user: { display_name: name, always_online: false },
      ...(home || messagesTab
        ? { app_home: { home_tab_enabled: home, messages_tab_enabled: messagesTab, messages_tab_read_only_enabled: false } }
        : {}),
      ...(commands.length > 0 ? { slash_commands: commands } : {}),
      ...(shortcuts.length > 0 ? { shortcuts } : {}),
      ...(assistant
        ? {
            assistant_view: {
              assistant_description: assistant.description,
              ...(assistant.suggestedPrompts?.length ? { suggested_prompts: assistant.suggestedPrompts } : {}),
            },
          }
        : {}),
    },
    oauth_config: {
      ...(options.distributed ? { redirect_urls: [`${base}/slack/oauth_redirect`] } : {}),
      scopes: { bot: [...scopes].sort() },
    },
    settings: {
      ...(botEvents.size > 0 ? { event_subscriptions: { request_url: requestUrl, bot_events: [...botEvents].sort() } } : {}),
      ...(interactive
        ? { interactivity: { is_enabled: true, request_url: requestUrl, ...(options_ ? { message_menu_options_url: requestUrl } : {}) } }
        : {}),
      // Custom steps need an org-ready app, and a function runtime that is the app's own (Slack's custom steps guide).
      org_deploy_enabled: hasFunctions,
      socket_mode_enabled: false,
      token_rotation_enabled: false,
      ...(hasFunctions ? { function_runtime: "remote" } : {}),
    },
    ...(hasFunctions ? { functions } : {}),
  };
  return { manifest, warnings, notes };
}

/** A function's parameters as the manifest writes them: `properties` by name, and the names of the required ones. */
function parameters(given: Readonly<Record<string, FunctionParameter>>): Record<string, unknown> {
  const properties = Object.fromEntries(
    Object.entries(given).map(([key, { required: _, ...parameter }]) => [key, { ...parameter, title: parameter.title ?? key }]),
  );
  const required = Object.entries(given).flatMap(([key, parameter]) => (parameter.required ? [key] : []));
  return { properties, ...(required.length > 0 ? { required } : {}) };
}

/**
 * The bot scopes the app's manifest asks for: what an OAuth install requests
 * when SLACK_SCOPES is empty. An app seen only through the engine's narrow
 * interface (SlackApp, no registrations) derives none.
 */
export function botScopesOf(app: object): string[] {
  if (!("registrations" in app && "slackMethods" in app)) return [];
  const { manifest } = manifestOf(app as App, { url: "https://ackbox.invalid", distributed: true });
  return (manifest.oauth_config as { scopes: { bot: string[] } }).scopes.bot;
}
