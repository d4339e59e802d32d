/**
 * Intents: what a handler (or an effect, as follow-ups) asks the pipeline to
 * do. Each becomes one outbox row, recorded before the ack (or with its
 * parent's completion) and performed after, at least once.
 *
 *   slack(method, args)        any Slack Web API method; args sent whole
 *   run(effect, args)          an effect of the app's own (defineEffect)
 *   respondTo(url, body, now)  a POST to a response_url (30 minutes, 5 uses)
 *   cancel(name)               not a row: ends the workspace's row of that name
 *                              if it is still pending and never attempted
 *
 * `{ name }` on any of the first three names its row for the workspace: one
 * row per name, whichever input (or effect) asks first; a later intent of the
 * same name is a repeat and records nothing (shared/outbox/model.ts, namedKey).
 * `{ at }` (epoch ms) or `{ after }` (seconds) makes it a timer: recorded now,
 * performed at or after that time (shared/outbox/model.ts, scheduleOf).
 */

import { RESPONSE_URL_LIFETIME_MS } from "../effects/respond.ts";
import { type IntendedEffect, MAX_TIMER_AHEAD_MS, timeProblem } from "../outbox/model.ts";
import type { JsonObject } from "../slack/inputs.ts";
import { isSlackMethodName } from "../slack/methods.ts";

export interface Intent {
  /** Unique within one input (or one effect's follow-ups); the row's idempotency key ends with it. */
  readonly key: string;
  /** A Slack method, "response_url", or the name of an effect the app defined. */
  readonly effect: string;
  readonly args: JsonObject;
  /** Not performed after this time (ms). */
  readonly expiresAt?: number;
  /** The row's name in its workspace (IntentOptions.name). */
  readonly name?: string;
  /** Not performed before this time (ms since the epoch): IntentOptions.at. */
  readonly at?: number;
  /** Not performed before this many seconds after it is recorded: IntentOptions.after. */
  readonly after?: number;
}

/** cancel(name): not a row, a request to end the workspace's row of that name (shared/outbox/cancel-named.ts). */
export interface Cancel {
  readonly cancel: string;
}

/** What a handler returns, and an effect as follow-ups: rows to record, and cancels. */
export type AnyIntent = Intent | Cancel;

export interface IntentOptions {
  /** Defaults to the method or effect name; give one when an input asks for the same effect twice. */
  readonly key?: string;
  readonly expiresAt?: number;
  /**
   * Names the row in its workspace (letters, digits and `_ . : -`, at most 128): e.g. `remind:<user>:<ts>`.
   * The first intent of a name records the row; any later one of the same name, from any input of the
   * workspace or an effect's follow-up, is a repeat and records nothing. `cancel(name)` ends it while it is
   * still pending. A name is used once: the row keeps it until it is pruned, cancelled or not.
   */
  readonly name?: string;
  /**
   * A timer: not performed before this time (ms since the epoch). Recorded now, in the same batch as ever;
   * performed at or after it, at least once, with the same retries and audit trail as any row. A time in the
   * past means now; more than a year ahead, or after `expiresAt`, is refused.
   */
  readonly at?: number;
  /**
   * A timer: not performed before this many seconds after the intent is recorded (the ack's time, or the
   * completion's for a follow-up). Not with `at`.
   */
  readonly after?: number;
}

/** The options an intent carries besides its key: copied only when given, so an intent has no undefined fields. */
function optionsOf(options: IntentOptions): Pick<Intent, "expiresAt" | "name" | "at" | "after"> {
  return {
    ...(options.expiresAt === undefined ? {} : { expiresAt: options.expiresAt }),
    ...(options.name === undefined ? {} : { name: options.name }),
    ...(options.at === undefined ? {} : { at: options.at }),
    ...(options.after === undefined ? {} : { after: options.after }),
  };
}

/** Any Slack Web API method, with its arguments passed through whole (blocks, metadata, unfurl flags…). */
export function slack(method: string, args: JsonObject, options: IntentOptions = {}): Intent {
  return { key: options.key ?? method, effect: method, args, ...optionsOf(options) };
}

/** An effect the app defined with defineEffect (and registered with app.effect). */
export function run<A extends JsonObject>(effect: { readonly name: string }, args: A, options: IntentOptions = {}): Intent {
  return { key: options.key ?? effect.name, effect: effect.name, args, ...optionsOf(options) };
}

/** A message to a slash command's or an interaction's response_url; Slack honours it for 30 minutes from `now`. */
export function respondTo(url: string, body: JsonObject, now: number, options: Omit<IntentOptions, "expiresAt"> = {}): Intent {
  return {
    key: options.key ?? "response_url",
    effect: "response_url",
    args: { url, body },
    ...optionsOf(options),
    expiresAt: now + RESPONSE_URL_LIFETIME_MS,
  };
}

/**
 * Ends the workspace's row named `name` if it is still pending and was never attempted — in the same batch as
 * the input that asks (or the fenced completion of the effect that returns it). A row already claimed, done or
 * dead is too late and left alone; a name no row has is nothing to cancel, not an error.
 */
export function cancel(name: string): Cancel {
  return { cancel: name };
}

/** Keys become part of an idempotency key; ">" separates a follow-up's from its parent's, so it is not allowed here. */
const KEY = /^[A-Za-z0-9_.:-]{1,64}$/;
/** A row's name: the same characters as a key ("%" and ">" never: shared/outbox/model.ts, namedKey), longer. */
const NAME = /^[A-Za-z0-9_.:-]{1,128}$/;

/**
 * Most intents one input (or one completion) may record, cancels included.
 * Each row is a statement in the ack's one D1 batch and 4 or 5 rows written, a
 * cancel three statements; an input that asks for more is a bug, better
 * refused than slowing every ack down.
 */
export const MAX_INTENTS = 25;
/**
 * Most cancels among them. A cancel is three statements of the batch (shared/outbox/cancel-named.ts), so the
 * largest completion is 1 + MAX_INTENTS + 2 × MAX_CANCELS statements: the consumer's query budget counts it
 * (shared/delivery/query-budget.ts). A reminder's Done button cancels one row; an input that calls off more than
 * five is refused like one that asks for too many rows.
 */
export const MAX_CANCELS = 5;

/**
 * Largest args of one intent, serialised. The payload lives in a D1 row (not
 * in the queue message, whose 128 KB limit does not apply), whose limit is
 * 2 MB; 256 KiB is above anything Slack accepts in one call (50 blocks of
 * 3,000 characters is about 150 KB; a message's text is at most 40,000) and
 * keeps the ack's batch, and every attempt's read of the row, small.
 */
export const MAX_ARGS_BYTES = 256 * 1024;

export type Checked =
  | { readonly ok: true; readonly effects: IntendedEffect[]; readonly cancels: string[] }
  | { readonly ok: false; readonly reason: string };

/**
 * Checks intents before anything is written: keys well formed and unique,
 * every effect one the pipeline can perform (and every Slack method one the
 * app declared with app.uses, so its manifest asks for the scopes), args
 * plain JSON within the size limit. One problem refuses them all: a partial record would be a silent loss.
 */
export function checkIntents(
  intents: readonly AnyIntent[],
  app: { isAppEffect(name: string): boolean; usesMethod(method: string): boolean },
  /** The time the intents are recorded at, when known (the ack's): a timer's bounds are checked against it. */
  now?: number,
): Checked {
  if (intents.length > MAX_INTENTS) return { ok: false, reason: `${intents.length} intents, more than ${MAX_INTENTS}` };
  const seen = new Set<string>();
  const names = new Set<string>();
  const effects: IntendedEffect[] = [];
  const cancels: string[] = [];
  for (const intent of intents) {
    // Each field read once: what is checked is what is stored, whatever a getter of the app's object would answer next.
    const { key, effect, args, expiresAt, name, at, after, cancel: cancelled } = (intent ?? {}) as Partial<Intent> & Partial<Cancel>;
    if (cancelled !== undefined) {
      const about = `cancel(${JSON.stringify(cancelled)})`;
      if (key !== undefined || effect !== undefined) return { ok: false, reason: `${about}: a cancel is not a row (no key or effect)` };
      if (typeof cancelled !== "string" || !NAME.test(cancelled)) return { ok: false, reason: `${about}: a name must match ${NAME}` };
      if (cancels.includes(cancelled)) return { ok: false, reason: `${about}: cancels the same row twice` };
      if (cancels.length >= MAX_CANCELS)
        return { ok: false, reason: `${about}: more than ${MAX_CANCELS} cancels in one input or completion` };
      cancels.push(cancelled);
      continue;
    }
    const about = `intent ${JSON.stringify(key)} (${String(effect)})`;
    if (typeof key !== "string" || !KEY.test(key)) return { ok: false, reason: `${about}: key must match ${KEY}` };
    if (seen.has(key)) return { ok: false, reason: `${about}: duplicate key; give each intent its own key` };
    seen.add(key);
    if (name !== undefined) {
      if (typeof name !== "string" || !NAME.test(name)) return { ok: false, reason: `${about}: name must match ${NAME}` };
      if (names.has(name)) return { ok: false, reason: `${about}: two intents name the row ${JSON.stringify(name)}` };
      names.add(name);
    }
    if (typeof effect !== "string" || !(effect === "response_url" || isSlackMethodName(effect) || app.isAppEffect(effect))) {
      return { ok: false, reason: `${about}: no effect named ${JSON.stringify(effect)} is registered (app.effect) or a Slack method` };
    }
    if (isSlackMethodName(effect) && !app.usesMethod(effect)) {
      return {
        ok: false,
        reason: `${about}: Slack method ${effect} is not declared: add app.uses(${JSON.stringify(effect)}) (the manifest's scopes come from it)`,
      };
    }
    // The args checked, then made one JSON text whose parse is what the row stores. A parse is plain JSON; only its
    // shape can differ from what was checked (a toJSON or getter answering otherwise on this second read).
    const problem = jsonProblem(args, "args");
    if (problem) return { ok: false, reason: `${about}: ${problem}` };
    const text = JSON.stringify(args);
    const payload: unknown = text === undefined ? undefined : JSON.parse(text);
    if (typeof payload !== "object" || payload === null || Array.isArray(payload))
      return { ok: false, reason: `${about}: args must be a JSON object` };
    const bytes = new TextEncoder().encode(text).byteLength;
    if (bytes > MAX_ARGS_BYTES) return { ok: false, reason: `${about}: args are ${bytes} bytes, more than ${MAX_ARGS_BYTES}` };
    if (expiresAt !== undefined && !Number.isFinite(expiresAt)) return { ok: false, reason: `${about}: expiresAt is not a time` };
    const timed = timerOf(at, after, expiresAt);
    if (typeof timed === "string") return { ok: false, reason: `${about}: ${timed}` };
    const late = now === undefined || timed === undefined ? undefined : timeProblem({ ...timed, expiresAt }, now);
    if (late) return { ok: false, reason: `${about}: ${late}` };
    effects.push({
      key,
      effect,
      payload: payload as JsonObject,
      ...(expiresAt === undefined ? {} : { expiresAt }),
      ...(name === undefined ? {} : { name }),
      ...timed,
    });
  }
  const both = cancels.find((n) => names.has(n));
  if (both !== undefined) return { ok: false, reason: `cancel(${JSON.stringify(both)}): the same intents also name that row` };
  return { ok: true, effects, cancels };
}

/**
 * A timer's time as the engine keeps it (at in ms, after in ms), nothing for an intent without one, or why it
 * cannot be one. What needs the time of recording (a year ahead, after the deadline) is timeProblem's.
 */
function timerOf(at: unknown, after: unknown, expiresAt: number | undefined): Pick<IntendedEffect, "at" | "afterMs"> | string | undefined {
  if (at !== undefined && after !== undefined) return "give at or after, not both";
  if (at !== undefined) {
    if (typeof at !== "number" || !Number.isFinite(at)) return "at is not a time (milliseconds since the epoch)";
    if (expiresAt !== undefined && at > expiresAt) return "at is after its deadline (expiresAt): it could only park";
    return { at };
  }
  if (after !== undefined) {
    if (typeof after !== "number" || !Number.isFinite(after)) return "after is not a number of seconds";
    if (after * 1000 > MAX_TIMER_AHEAD_MS) return `after is ${after} s, more than a year (the most a timer may wait)`;
    return { afterMs: Math.max(0, after * 1000) };
  }
  return undefined;
}

/**
 * The first thing in `value` that JSON would lose or refuse (undefined and
 * functions are dropped silently by JSON.stringify, NaN becomes null, a
 * BigInt or a cycle throws), or undefined if it is plain JSON. Args must be
 * an object, as Slack methods take.
 */
export function jsonProblem(value: unknown, path: string, depth = 0, seen: Set<object> = new Set()): string | undefined {
  if (depth === 0 && (typeof value !== "object" || value === null || Array.isArray(value))) return `${path} must be a JSON object`;
  if (depth > 64) return `${path} is nested more than 64 deep`;
  if (value === null || typeof value === "string" || typeof value === "boolean") return undefined;
  if (typeof value === "number") return Number.isFinite(value) ? undefined : `${path} is ${value}, not a JSON number`;
  if (typeof value !== "object") return `${path} is a ${typeof value}, not JSON`;
  if (seen.has(value)) return `${path} refers to itself`;
  const proto = Object.getPrototypeOf(value);
  if (!Array.isArray(value) && proto !== Object.prototype && proto !== null)
    return `${path} is a ${proto?.constructor?.name ?? "class instance"}, not a plain object`;
  seen.add(value);
  // Array.from visits a sparse array's holes (map would keep them, and the loop below could not read them).
  const entries = Array.isArray(value) ? Array.from(value, (v, i) => [String(i), v] as const) : Object.entries(value);
  for (const [key, child] of entries) {
    const problem = jsonProblem(child, Array.isArray(value) ? `${path}[${key}]` : `${path}.${key}`, depth + 1, seen);
    if (problem) return problem;
  }
  seen.delete(value);
  return undefined;
}
