/**
 * An app's own settings and secrets, declared beside its handlers:
 *
 *   app.settings({
 *     ANSWER_URL: setting.url({ description: "The answer service", required: true }),
 *     ANSWER_API_KEY: setting.secret({ description: "Its API key", required: true }),
 *     MAX_TOPICS: setting.number({ description: "Topics listed", default: 5, min: 1, max: 20 }),
 *   })
 *
 * Read like the engine's (shared/settings.ts): strings from `.dev.vars` and
 * the environment in a local run, `[vars]` and secrets when deployed, checked
 * all at once at start — a missing required one stops `npm start`, and makes
 * the Workers answer 500 with a log line naming it. Listed by
 * `.dev.vars.example` and `npm run setup`.
 *
 * Handed over typed: `ctx.settings.MAX_TOPICS` is a number. Handlers get every
 * setting but the secrets (a handler's output is written to a row and
 * answered to Slack, and it does no I/O that would need a key); effects get
 * all of them, and what an effect leaves behind — its error, its result, its
 * follow-ups — is checked for the secrets' values (shared/app/effects.ts).
 * An error names a setting and its rule, never a secret's value.
 */
import { SETTINGS } from "../settings.ts";

export type SettingKind = "text" | "url" | "number" | "list" | "secret";
export type SettingValue = string | number | readonly string[] | undefined;

declare const VALUE: unique symbol;

export interface SettingSpec<V extends SettingValue = SettingValue, K extends SettingKind = SettingKind> {
  readonly kind: K;
  readonly description: string;
  readonly required: boolean;
  /** The default as a `.dev.vars` line writes it ("" = none). */
  readonly default: string;
  readonly min?: number;
  readonly max?: number;
  /** Type only: what a handler or effect reads. */
  readonly [VALUE]?: V;
}

export type SettingsDeclaration = Readonly<Record<string, SettingSpec>>;
/** No settings declared (yet): the start of the intersection app.settings(...) grows. */
export type NoSettings = Record<never, never>;

/** Every declared setting's value, typed by its kind: what an effect reads. */
export type SettingValues<D> = { readonly [N in keyof D]: D[N] extends SettingSpec<infer V> ? V : never };
/** The same without the secrets: what a handler reads. */
export type PublicSettingValues<D> = {
  readonly [N in keyof D as D[N] extends SettingSpec<SettingValue, "secret"> ? never : N]: D[N] extends SettingSpec<infer V> ? V : never;
};

interface Common {
  readonly description: string;
  readonly required?: boolean;
}
/** Required or defaulted: always there. Else it may be unset. */
type Present<O, V> = O extends { readonly required: true } ? V : O extends { readonly default: unknown } ? V : V | undefined;

const spec = <V extends SettingValue, K extends SettingKind>(
  kind: K,
  options: Common & { readonly min?: number; readonly max?: number },
  defaultText: string,
): SettingSpec<V, K> => {
  return {
    kind,
    description: options.description,
    required: options.required === true,
    default: defaultText,
    ...(options.min === undefined ? {} : { min: options.min }),
    ...(options.max === undefined ? {} : { max: options.max }),
  };
};

/** The kinds a setting may be declared as. */
export const setting = {
  /** Any text, trimmed. */
  text: <const O extends Common & { readonly default?: string }>(options: O) =>
    spec<Present<O, string>, "text">("text", options, options.default ?? ""),
  /** An http(s) URL. */
  url: <const O extends Common & { readonly default?: string }>(options: O) =>
    spec<Present<O, string>, "url">("url", options, options.default ?? ""),
  /** A number, within min and max when given. */
  number: <const O extends Common & { readonly default?: number; readonly min?: number; readonly max?: number }>(options: O) =>
    spec<Present<O, number>, "number">("number", options, options.default === undefined ? "" : String(options.default)),
  /** Comma-separated items, empty ones dropped; unset is the empty list (required: at least one). */
  list: (options: Common & { readonly default?: readonly string[] }) =>
    spec<readonly string[], "list">("list", options, (options.default ?? []).join(",")),
  /**
   * A credential: never in a log line, a row, a queue message or an answer. No default (a default would be in
   * the code); at least 8 characters, so that looking for it in what an effect leaves behind means something.
   */
  secret: <const O extends Common>(options: O) => spec<Present<O, string>, "secret">("secret", options, ""),
} as const;

const NAME = /^[A-Z][A-Z0-9_]{0,63}$/;
const ENGINE_NAMES: ReadonlySet<string> = new Set(SETTINGS.map((s) => s.name));
const MIN_SECRET_LENGTH = 8;
const HTTP_URL = /^https?:\/\/[^/\s]+/;

/** Adds `more` to `declared`; a bad name, an engine setting's name or a second, different declaration throws. */
export function mergeDeclarations(declared: SettingsDeclaration, more: SettingsDeclaration): SettingsDeclaration {
  const merged: Record<string, SettingSpec> = { ...declared };
  for (const [name, next] of Object.entries(more)) {
    if (!NAME.test(name)) throw new Error(`setting ${JSON.stringify(name)}: a name is upper case, digits and _ (like ANSWER_URL)`);
    if (ENGINE_NAMES.has(name)) throw new Error(`setting ${name} is the engine's (shared/settings.ts): give the app's its own name`);
    const known = merged[name];
    if (known && JSON.stringify(known) !== JSON.stringify(next))
      throw new Error(`setting ${name} is declared twice, differently (${known.kind} and ${next.kind})`);
    if (next.required && next.default !== "") throw new Error(`setting ${name}: a required setting has no default (one or the other)`);
    if (next.kind === "secret" && next.default !== "")
      throw new Error(`setting ${name}: a secret has no default (it would be in the code)`);
    if (next.default !== "") {
      const problem = problemOf(name, next, next.default);
      if (problem) throw new Error(`setting ${name}: its default: ${problem}`);
    }
    merged[name] = next;
  }
  return merged;
}

/** The parsed values of one deployment's settings, split by who may see them. */
export interface AppSettings {
  /** Every declared setting: what effects get. */
  readonly all: Readonly<Record<string, SettingValue>>;
  /** Without the secrets: what handlers get. */
  readonly public: Readonly<Record<string, SettingValue>>;
  /** The secrets that are set, by name: what an effect's error, result and follow-ups are checked for. */
  readonly secrets: readonly { readonly name: string; readonly value: string }[];
}

export const NO_APP_SETTINGS: AppSettings = { all: {}, public: {}, secrets: [] };

export type AppSettingsResult = { readonly ok: true; readonly settings: AppSettings } | { readonly ok: false; readonly errors: string[] };

/** Reads and checks every declared setting from the Worker's env (or a local run's merged values). All problems at once. */
export function parseAppSettings(declared: SettingsDeclaration, raw: Readonly<Record<string, unknown>>): AppSettingsResult {
  const errors: string[] = [];
  const all: Record<string, SettingValue> = {};
  const publicValues: Record<string, SettingValue> = {};
  const secrets: { name: string; value: string }[] = [];
  for (const [name, s] of Object.entries(declared)) {
    const given = raw[name];
    if (given !== undefined && given !== null && typeof given !== "string") {
      errors.push(`${name} must be a string`);
      continue;
    }
    const text = (given ?? "").trim() || s.default;
    if (text === "") {
      if (s.required) errors.push(`${name} is required: ${s.description}`);
      all[name] = s.kind === "list" ? [] : undefined;
    } else {
      const problem = problemOf(name, s, text);
      if (problem) {
        errors.push(problem);
        continue;
      }
      all[name] = typedValue(s, text);
      if (s.kind === "list" && s.required && (all[name] as string[]).length === 0) errors.push(`${name} is required: ${s.description}`);
    }
    if (s.kind === "secret") {
      if (text !== "") secrets.push({ name, value: text });
    } else {
      publicValues[name] = all[name];
    }
  }
  return errors.length === 0 ? { ok: true, settings: { all, public: publicValues, secrets } } : { ok: false, errors };
}

/** What is wrong with `text` as this setting, or undefined. A secret's value is never quoted. */
function problemOf(name: string, s: SettingSpec, text: string): string | undefined {
  switch (s.kind) {
    case "url":
      return HTTP_URL.test(text) ? undefined : `${name} must be an http(s) URL, got ${JSON.stringify(text)}`;
    case "number": {
      const value = Number(text);
      const range = `${s.min === undefined ? "" : ` from ${s.min}`}${s.max === undefined ? "" : ` to ${s.max}`}`;
      if (!Number.isFinite(value) || (s.min !== undefined && value < s.min) || (s.max !== undefined && value > s.max))
        return `${name} must be a number${range}, got ${JSON.stringify(text)}`;
      return undefined;
    }
    case "secret":
      return text.length >= MIN_SECRET_LENGTH ? undefined : `${name} must be at least ${MIN_SECRET_LENGTH} characters (it is a secret)`;
    default:
      return undefined;
  }
}

function typedValue(s: SettingSpec, text: string): SettingValue {
  if (s.kind === "number") return Number(text);
  if (s.kind === "list")
    return text
      .split(",")
      .map((item) => item.trim())
      .filter((item) => item !== "");
  return text;
}

const parsed = new WeakMap<object, WeakMap<object, AppSettingsResult>>();

/** parseAppSettings, once per `env` object and declaration (one per isolate in practice). */
export function appSettingsOf(declared: SettingsDeclaration, env: object): AppSettingsResult {
  let byDeclaration = parsed.get(env);
  if (!byDeclaration) {
    byDeclaration = new WeakMap();
    parsed.set(env, byDeclaration);
  }
  let result = byDeclaration.get(declared);
  if (!result) {
    result = parseAppSettings(declared, env as Readonly<Record<string, unknown>>);
    byDeclaration.set(declared, result);
  }
  return result;
}

/**
 * The forms a secret's value takes on its way into a message an effect could echo: as it is, JSON-escaped,
 * in a URL (encodeURIComponent, and a form's `+` for a space) and base64 of the value alone (padding aside).
 * A part of the value, the value inside a longer base64 (a Basic `user:secret`), or another encoding, is not
 * recognised (docs/building-an-app.md).
 */
function formsOf(value: string): ReadonlySet<string> {
  const forms = [
    value,
    JSON.stringify(value).slice(1, -1),
    encodeURIComponent(value),
    new URLSearchParams({ v: value }).toString().slice(2),
  ];
  try {
    forms.push(btoa(value).replace(/=+$/, ""));
  } catch {
    // Not Latin-1: btoa cannot encode it, and neither could a Basic header.
  }
  return new Set(forms.filter((form) => form.length > 0));
}

/** Where in `text` a secret's value appears, in any of its forms (formsOf): the first such secret's name. */
export function secretIn(text: string, secrets: AppSettings["secrets"]): string | undefined {
  for (const { name, value } of secrets) for (const form of formsOf(value)) if (text.includes(form)) return name;
  return undefined;
}

/**
 * `text` with each secret's value, in any of its forms, replaced by its name: `[secret ANSWER_API_KEY]`. The
 * longest forms first, so a secret that contains another is replaced whole, not cut at the shorter one.
 */
export function redactSecrets(text: string, secrets: AppSettings["secrets"]): string {
  const forms = secrets.flatMap(({ name, value }) => [...formsOf(value)].map((form) => ({ name, form })));
  forms.sort((a, b) => b.form.length - a.form.length);
  let out = text;
  for (const { name, form } of forms) out = out.split(form).join(`[secret ${name}]`);
  return out;
}
