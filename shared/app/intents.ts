/**
 * Intents: what a handler (or an effect, as follow-ups) asks the pipeline to
 * do. Each becomes one outbox row, recorded before the ack (or with its
 * parent's completion) and performed after, at least once.
 *
 *   slack(method, args)        any Slack Web API method; args sent whole
 *   run(effect, args)          an effect of the app's own (defineEffect)
 *   respondTo(url, body, now)  a POST to a response_url (30 minutes, 5 uses)
 */

import { RESPONSE_URL_LIFETIME_MS } from "../effects/respond.ts";
import type { IntendedEffect } from "../outbox/model.ts";
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
}

export interface IntentOptions {
  /** Defaults to the method or effect name; give one when an input asks for the same effect twice. */
  readonly key?: string;
  readonly expiresAt?: number;
}

/** Any Slack Web API method, with its arguments passed through whole (blocks, metadata, unfurl flags…). */
export function slack(method: string, args: JsonObject, options: IntentOptions = {}): Intent {
  return { key: options.key ?? method, effect: method, args, ...(options.expiresAt === undefined ? {} : { expiresAt: options.expiresAt }) };
}

/** An effect the app defined with defineEffect (and registered with app.effect). */
export function run<A extends JsonObject>(effect: { readonly name: string }, args: A, options: IntentOptions = {}): Intent {
  return {
    key: options.key ?? effect.name,
    effect: effect.name,
    args,
    ...(options.expiresAt === undefined ? {} : { expiresAt: options.expiresAt }),
  };
}

/** A message to a slash command's or an interaction's response_url; Slack honours it for 30 minutes from `now`. */
export function respondTo(url: string, body: JsonObject, now: number, options: Omit<IntentOptions, "expiresAt"> = {}): Intent {
  return { key: options.key ?? "response_url", effect: "response_url", args: { url, body }, expiresAt: now + RESPONSE_URL_LIFETIME_MS };
}

/** Keys become part of an idempotency key; ">" separates a follow-up's from its parent's, so it is not allowed here. */
const KEY = /^[A-Za-z0-9_.:-]{1,64}$/;

/**
 * Most intents one input (or one completion) may record. Each is a statement
 * in the ack's one D1 batch and 3 rows written; an input that asks for more is
 * a bug, better refused than slowing every ack down.
 */
export const MAX_INTENTS = 25;

/**
 * Largest args of one intent, serialised. The payload lives in a D1 row (not
 * in the queue message, whose 128 KB limit does not apply), whose limit is
 * 2 MB; 256 KiB is above anything Slack accepts in one call (50 blocks of
 * 3,000 characters is about 150 KB; a message's text is at most 40,000) and
 * keeps the ack's batch, and every attempt's read of the row, small.
 */
export const MAX_ARGS_BYTES = 256 * 1024;

export type Checked = { readonly ok: true; readonly effects: IntendedEffect[] } | { readonly ok: false; readonly reason: string };

/**
 * Checks intents before anything is written: keys well formed and unique,
 * every effect one the pipeline can perform (and every Slack method one the
 * app declared with app.uses, so its manifest asks for the scopes), args
 * plain JSON within the size limit. One problem refuses them all: a partial record would be a silent loss.
 */
export function checkIntents(
  intents: readonly Intent[],
  app: { isAppEffect(name: string): boolean; usesMethod(method: string): boolean },
): Checked {
  if (intents.length > MAX_INTENTS) return { ok: false, reason: `${intents.length} intents, more than ${MAX_INTENTS}` };
  const seen = new Set<string>();
  const effects: IntendedEffect[] = [];
  for (const intent of intents) {
    // Each field read once: what is checked is what is stored, whatever a getter of the app's object would answer next.
    const { key, effect, args, expiresAt } = intent ?? ({} as Partial<Intent>);
    const about = `intent ${JSON.stringify(key)} (${String(effect)})`;
    if (typeof key !== "string" || !KEY.test(key)) return { ok: false, reason: `${about}: key must match ${KEY}` };
    if (seen.has(key)) return { ok: false, reason: `${about}: duplicate key; give each intent its own key` };
    seen.add(key);
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
    effects.push({ key, effect, payload: payload as JsonObject, ...(expiresAt === undefined ? {} : { expiresAt }) });
  }
  return { ok: true, effects };
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
