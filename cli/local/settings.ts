/**
 * The settings a local run hands to both Workers, and where each came from.
 *
 * Order, later wins: the root `.dev.vars` (if any) → the process environment,
 * for every name in shared/settings.ts's SETTINGS and every setting the app
 * declares (shared/app/settings.ts) → local defaults for what is still unset.
 * Tunables left unset fall through to the wrangler files' [vars] and the
 * code's defaults. The result is validated with the Workers' own
 * parseSettings and parseAppSettings, so a bad or missing value stops
 * `npm start` with the same message a Worker would log, instead of a 500 at
 * the first request.
 */
import { parseAppSettings, type SettingsDeclaration } from "../../shared/app/settings.ts";
import { parseSettings, SETTINGS } from "../../shared/settings.ts";

/**
 * The signing secret of the local run when none is set. Public on purpose:
 * `npm run demo` signs with it. A run that talks to the real Slack (a
 * SLACK_BOT_TOKEN is set) refuses to start with it.
 */
export const LOCAL_SIGNING_SECRET = "ackbox-local-signing-secret";
/** The bot token the consumer sends to a stand-in or a fake Slack when none is set (the consumer refuses to run without one). */
export const LOCAL_BOT_TOKEN = "xoxb-ackbox-local";
/** The client id `npm start -- --distributed` sets when none is: the stand-in accepts any. */
export const LOCAL_CLIENT_ID = "ackbox-local-client";
/** The client secret a distributed local run sends to the stand-in when none is set (public: the stand-in checks only that one is sent). */
export const LOCAL_CLIENT_SECRET = "ackbox-local-client-secret";
/** The model name a local run sends the stand-in's fake model (which requires one, as OpenAI does) when it asks that model. */
export const LOCAL_MODEL_NAME = "ackbox-standin";
/** Slack's host plus loopback, so the stand-in and tests can be a slash command's response_url. */
export const LOCAL_RESPONSE_URL_HOSTS = "hooks.slack.com,127.0.0.1,localhost";

export type Source = ".dev.vars" | "environment" | "local default" | "stand-in";

export interface LocalSettings {
  /** What the merged .dev.vars holds: every value set by a file, the environment or a local default. */
  readonly values: Readonly<Record<string, string>>;
  readonly sources: Readonly<Record<string, Source>>;
  /** No SLACK_BOT_TOKEN and no SLACK_API_URL: effects go to the local stand-in. */
  readonly useStandin: boolean;
  readonly warnings: readonly string[];
  /** The app's secrets' names: shown as hidden, like the engine's (displayValue). */
  readonly appSecrets: ReadonlySet<string>;
  /** Every setting the app declares: a value neither it nor the engine declares is of no known kind, and hidden. */
  readonly appDeclared: ReadonlySet<string>;
}

export class SettingsError extends Error {
  readonly problems: readonly string[];
  constructor(problems: readonly string[]) {
    super(`settings are not usable:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "SettingsError";
    this.problems = problems;
  }
}

const SETTING_NAMES: ReadonlySet<string> = new Set(SETTINGS.map((s) => s.name));
const SECRET_NAMES: ReadonlySet<string> = new Set(SETTINGS.filter((s) => s.secret).map((s) => s.name));

export const isSecret = (name: string, appSecrets: ReadonlySet<string> = new Set()): boolean =>
  SECRET_NAMES.has(name) || appSecrets.has(name) || /SECRET|TOKEN|PASSWORD|PRIVATE|_KEY$/i.test(name);

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Merges the sources. `standinApiUrl` is where the stand-in will listen, if it
 * is used (decide first with `wantsStandin`, start it, then call this).
 */
export function resolveLocalSettings(input: {
  readonly devVars: Readonly<Record<string, string>>;
  readonly env: Env;
  readonly standinApiUrl?: string;
  /** The run's generated ADMIN_TOKEN, asked for only when none is set (the operator API is on in every local run). */
  readonly localAdminToken?: () => string;
  /** The run's generated TOKEN_ENCRYPTION_KEY, asked for only when no key is set. */
  readonly localTokenKey?: () => string;
  /**
   * The key the stand-in's fake model was started with (run-info.ts, ensureLocalModelKey), asked for only when the
   * assistant asks that model (wantsStandinModel). Without one, no MODEL_API_KEY is set: a stand-in given no key takes any.
   */
  readonly localModelKey?: () => string;
  /** The ingress's URL (http://127.0.0.1:<port>): a distributed run against the stand-in redirects the install there. */
  readonly ingressUrl?: string;
  /** The settings the app declares (app.declaredSettings): read from the environment too, and checked. */
  readonly appSettings?: SettingsDeclaration;
}): LocalSettings {
  const declared = input.appSettings ?? {};
  const values: Record<string, string> = {};
  const sources: Record<string, Source> = {};
  const warnings: string[] = [];
  const set = (name: string, value: string, source: Source) => {
    values[name] = value;
    sources[name] = source;
  };

  // The root file is passed through whole: an app's own variables reach the Workers too.
  for (const [name, value] of Object.entries(input.devVars)) set(name, value, ".dev.vars");
  for (const name of [...SETTING_NAMES, ...Object.keys(declared)]) {
    const value = input.env[name];
    if (value !== undefined) set(name, value, "environment");
  }
  const has = (name: string) => (values[name] ?? "").trim() !== "";

  const problems: string[] = [];
  const useStandin = !has("SLACK_BOT_TOKEN") && !has("SLACK_API_URL");
  if (useStandin) {
    if (!input.standinApiUrl)
      throw new Error("resolveLocalSettings: the stand-in's URL is needed when no SLACK_BOT_TOKEN or SLACK_API_URL is set");
    set("SLACK_API_URL", input.standinApiUrl, "stand-in");
    // The example app's answer service (examples/ask/app.ts) is faked by the stand-in too, when the app runs the example.
    if ("EXAMPLE_ANSWER_URL" in declared && !has("EXAMPLE_ANSWER_URL"))
      set("EXAMPLE_ANSWER_URL", input.standinApiUrl.replace(/\/api\/?$/, "/example/answer"), "stand-in");
    // An assistant (app.assistant declares MODEL_URL) with no model of its own asks the stand-in's fake model, so it
    // answers out of the box; MODEL_URL set (.dev.vars or the environment) is left alone, key and name with it.
    if ("MODEL_URL" in declared && !has("MODEL_URL")) {
      const yours = ["MODEL_API_KEY", "MODEL_NAME"].filter(has);
      if (yours.length > 0)
        warnings.push(
          `${yours.join(" and ")} ${yours.length > 1 ? "are" : "is"} set but MODEL_URL is not: the assistant asks the stand-in's fake model, ` +
            "with the run's own key and name; set MODEL_URL to ask yours",
        );
      set("MODEL_URL", standinModelUrl(input.standinApiUrl), "stand-in");
      set("MODEL_NAME", LOCAL_MODEL_NAME, "local default");
      delete values.MODEL_API_KEY;
      delete sources.MODEL_API_KEY;
      if (input.localModelKey) set("MODEL_API_KEY", input.localModelKey(), "local default");
    }
  } else if (has("SLACK_BOT_TOKEN") && !has("SLACK_API_URL") && !has("SLACK_SIGNING_SECRET")) {
    problems.push(
      "SLACK_BOT_TOKEN is set, so effects go to the real Slack: set SLACK_SIGNING_SECRET to your app's signing secret as well " +
        "(the local default secret is public, and Slack signs with yours anyway)",
    );
  }
  if (!has("SLACK_BOT_TOKEN")) set("SLACK_BOT_TOKEN", LOCAL_BOT_TOKEN, "local default");
  if (!has("SLACK_SIGNING_SECRET")) set("SLACK_SIGNING_SECRET", LOCAL_SIGNING_SECRET, "local default");
  if (!has("ADMIN_TOKEN") && input.localAdminToken) set("ADMIN_TOKEN", input.localAdminToken(), "local default");
  // The encryption key of installations' tokens (a distributed app) and of custom steps' workflow tokens is
  // generated once into the run folder, like the ADMIN_TOKEN. A distributed app (SLACK_CLIENT_ID set) against the
  // stand-in gets local defaults for the client secret and the redirect URL too (a real Slack app needs its own
  // secret and the redirect URL registered with it, so those are never guessed for it).
  if (!has("TOKEN_ENCRYPTION_KEY") && input.localTokenKey) set("TOKEN_ENCRYPTION_KEY", input.localTokenKey(), "local default");
  if (has("SLACK_CLIENT_ID")) {
    if (useStandin && !has("SLACK_CLIENT_SECRET")) set("SLACK_CLIENT_SECRET", LOCAL_CLIENT_SECRET, "local default");
    if (useStandin && !has("SLACK_REDIRECT_URL") && input.ingressUrl)
      set("SLACK_REDIRECT_URL", `${input.ingressUrl}/slack/oauth_redirect`, "local default");
  }
  if (values.RESPONSE_URL_HOSTS === undefined) set("RESPONSE_URL_HOSTS", LOCAL_RESPONSE_URL_HOSTS, "local default");
  else if (useStandin && !/(^|,)\s*(127\.0\.0\.1|localhost|\*)\s*(,|$)/.test(values.RESPONSE_URL_HOSTS)) {
    warnings.push("RESPONSE_URL_HOSTS has no 127.0.0.1: slash command replies to the local stand-in will be parked as dead");
  }

  const parsed = parseSettings(values);
  if (!parsed.ok) problems.push(...parsed.errors);
  const app = parseAppSettings(declared, values);
  if (!app.ok) problems.push(...app.errors.map((error) => `${error} (the app's setting: set it in .dev.vars or the environment)`));
  if (problems.length > 0) throw new SettingsError(problems);
  const appSecrets = new Set(Object.entries(declared).flatMap(([name, spec]) => (spec.kind === "secret" ? [name] : [])));
  return { values, sources, useStandin, warnings, appSecrets, appDeclared: new Set(Object.keys(declared)) };
}

/** Would these sources send effects to the stand-in? (Decided before the stand-in starts.) */
export function wantsStandin(devVars: Readonly<Record<string, string>>, env: Env): boolean {
  const value = (name: string) => (env[name] ?? devVars[name] ?? "").trim();
  return value("SLACK_BOT_TOKEN") === "" && value("SLACK_API_URL") === "";
}

/**
 * Would these sources have the assistant ask the stand-in's fake model? The stand-in is used, the app has an
 * assistant (it declares MODEL_URL) and no MODEL_URL is set. Decided before the stand-in starts (it is given the
 * model's key then), exactly as resolveLocalSettings decides it after.
 */
export function wantsStandinModel(devVars: Readonly<Record<string, string>>, env: Env, declared: SettingsDeclaration = {}): boolean {
  const value = (name: string) => (env[name] ?? devVars[name] ?? "").trim();
  return wantsStandin(devVars, env) && "MODEL_URL" in declared && value("MODEL_URL") === "";
}

/** Where the stand-in serves its fake model (POST <MODEL_URL>/chat/completions), from its Web API URL (<stand-in>/api/). */
export function standinModelUrl(standinApiUrl: string): string {
  return standinApiUrl.replace(/\/api\/?$/, "/model/v1");
}

/** The signing secret a local run with these sources uses: what the demo signs with. */
export function localSigningSecret(devVars: Readonly<Record<string, string>>, env: Env): string {
  const value = (env.SLACK_SIGNING_SECRET ?? devVars.SLACK_SIGNING_SECRET ?? "").trim();
  return value === "" ? LOCAL_SIGNING_SECRET : value;
}

/** The banner's label for a value that no declaration describes. */
export const UNDECLARED_VALUE = "(set, hidden: neither the engine nor the app declares it)";

/**
 * A setting's value as the banner may show it: never a secret's, and never one of no known kind (a .dev.vars
 * line neither the engine nor the app declares may be a credential by any name, or a typo of a setting).
 */
export function displayValue(
  name: string,
  value: string,
  app: { readonly secrets: ReadonlySet<string>; readonly declared: ReadonlySet<string> } = { secrets: new Set(), declared: new Set() },
): string {
  if (value === "") return "(empty)";
  if (isSecret(name, app.secrets)) return "(set, hidden)";
  return SETTING_NAMES.has(name) || app.declared.has(name) ? value : UNDECLARED_VALUE;
}
