/**
 * Effects of the app's own: `defineEffect(name, perform, options)`.
 *
 * perform(args, ctx) may call anything — another service through ctx.fetch
 * (the effect's timeout and abort are wired into it), Slack through
 * ctx.slack — and runs after the ack, at least once: forward
 * ctx.idempotencyKey (stable across attempts) where the other service honours
 * an Idempotency-Key. It returns a result kept in the row, or
 * `followUps(result, intents)`: further intents, recorded in the same fenced
 * write as this effect's completion (shared/delivery/deliver.ts).
 *
 * Thrown errors: an EffectError says what it is (fatal / transient /
 * rate_limited, shared/delivery/failure.ts); anything else is transient
 * (retried with backoff) unless options.isFatal says otherwise.
 *
 * Settings: `options.settings` declares what the effect reads
 * (shared/app/settings.ts), so registering it declares them for the app;
 * ctx.settings has them typed, secrets included. A secret never leaves
 * through the effect: its value is replaced by `[secret NAME]` in a thrown
 * error's message (which goes to the row, the log and /admin answers) and in
 * the result kept in the row; a follow-up whose args carry it is refused (it
 * would be written to a row and sent to a queue) and the row parks.
 */

import { EffectError, fatal, fatalAfterPerforming } from "../delivery/failure.ts";
import { type AttemptContext, completed, type EffectDefinition } from "../effects/effect.ts";
import type { EffectFetch } from "../effects/outbound.ts";
import type { JsonObject } from "../slack/inputs.ts";
import { semanticsOf } from "../slack/methods.ts";
import { refusal } from "../slack/web-api.ts";
import { type AnyIntent, checkIntents } from "./intents.ts";
import {
  type AppSettings,
  NO_APP_SETTINGS,
  type NoSettings,
  parseAppSettings,
  redactSecrets,
  type SettingsDeclaration,
  type SettingValues,
  secretIn,
} from "./settings.ts";

export interface EffectOptions<D extends SettingsDeclaration = SettingsDeclaration> {
  /** The settings perform reads (ctx.settings): declared for the app when the effect is registered. */
  readonly settings?: D;
  /** Whether performing it twice is harmless (default false: assume a repeat is visible). */
  readonly idempotentByShape?: boolean;
  /** At most this many attempts (and never more than MAX_ATTEMPTS). */
  readonly maxAttempts?: number;
  /** Per-attempt timeout; at most EFFECT_TIMEOUT_SECONDS, which sizes the lease. */
  readonly timeoutMs?: number;
  /** Errors perform throws that a retry cannot cure: the row parks at once. */
  readonly isFatal?: (error: unknown) => boolean;
  /** Slack methods perform calls through ctx.slack: declared, like a handler's, for the manifest's scopes. */
  readonly slackMethods?: readonly string[];
  /**
   * Whether the ingress makes the first attempt right after the ack
   * (shared/delivery/first-attempt.ts). Default false for an app's effects;
   * Slack methods are always true.
   */
  readonly inline?: boolean;
}

export interface AppEffectContext<D extends SettingsDeclaration = NoSettings> {
  /** The settings options.settings declared, typed by kind, secrets included. */
  readonly settings: SettingValues<D>;
  /**
   * fetch with this attempt's timeout and abort wired in, under the outbound
   * rules (shared/effects/outbound.ts): a URL (not a Request), https on the
   * default port (plain http only to loopback, i.e. the local run), redirects
   * not followed, at most 64 KiB of the answer read.
   */
  readonly fetch: EffectFetch;
  /** Slack, with the semantics table applied: ok → the answer; alreadyDone → { ok: true, already }; else throws classified. */
  readonly slack: { call(method: string, args: JsonObject): Promise<JsonObject> };
  /** The row's idempotency key, stable across attempts. */
  readonly idempotencyKey: string;
  /** 1 for the first attempt. */
  readonly attempt: number;
  /** Aborted at the timeout. */
  readonly signal: AbortSignal;
}

const FOLLOW_UPS: unique symbol = Symbol("ackbox.followUps");

export interface FollowUps {
  readonly [FOLLOW_UPS]: true;
  readonly result: JsonObject | null;
  readonly intents: readonly AnyIntent[];
}

/**
 * A result and the intents to record with this effect's completion (their keys derive from this row's, a named
 * one's from its name), cancels included: all in the completion's fenced batch, so a completion the fence
 * rejects records and cancels nothing.
 */
export function followUps(result: JsonObject | null, intents: readonly AnyIntent[]): FollowUps {
  return { [FOLLOW_UPS]: true, result, intents };
}

export interface AppEffect<A extends JsonObject = JsonObject> {
  readonly name: string;
  readonly options: EffectOptions;
  /** A method, so an AppEffect of specific args registers where any is expected (args are checked at the ingress, not by type). */
  // biome-ignore lint/suspicious/noExplicitAny: any effect's context, whatever settings it declared.
  perform(args: A, ctx: AppEffectContext<any>): Promise<JsonObject | null | undefined | FollowUps>;
}

/** A custom effect's name: no dot, so it can never be mistaken for (or shadow) a Slack method. */
const EFFECT_NAME = /^[a-z][a-z0-9_-]{0,63}$/;

export function defineEffect<A extends JsonObject, const D extends SettingsDeclaration = NoSettings>(
  name: string,
  perform: (args: A, ctx: AppEffectContext<D>) => Promise<JsonObject | null | undefined | FollowUps>,
  options: EffectOptions<D> = {},
): AppEffect<A> {
  if (!EFFECT_NAME.test(name) || name === "response_url") {
    throw new Error(`effect name ${JSON.stringify(name)} must match ${EFFECT_NAME} (no dot: dotted names are Slack methods)`);
  }
  return { name, perform, options };
}

/** The engine's view of an app effect: its perform, with follow-ups checked like a handler's intents. */
export function toDefinition(
  effect: AppEffect,
  app: { isAppEffect(name: string): boolean; usesMethod(method: string): boolean },
): EffectDefinition {
  const { options } = effect;
  return {
    name: effect.name,
    idempotentByShape: options.idempotentByShape ?? false,
    inline: options.inline ?? false,
    ...(options.maxAttempts === undefined ? {} : { maxAttempts: options.maxAttempts }),
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    async perform(payload, ctx: AttemptContext) {
      const settings = ctx.appSettings ?? defaultsOf(effect);
      let outcome: Awaited<ReturnType<AppEffect["perform"]>>;
      try {
        outcome = await effect.perform(payload, appContext(ctx, effect, settings));
      } catch (error) {
        if (!(error instanceof EffectError) && options.isFatal?.(error)) {
          throw withoutSecrets(fatal(`${effect.name}: ${error instanceof Error ? error.message : String(error)}`), settings);
        }
        throw withoutSecrets(error, settings);
      }
      // Reading what it returned runs the app's code too (a getter, a toJSON): a throw there comes after the effect
      // was performed, so it parks as a refusal does (a retry would perform it again), its message redacted.
      let resultText: string | undefined;
      let checked: ReturnType<typeof checkIntents> | undefined;
      try {
        if (isFollowUps(outcome)) {
          resultText = jsonTextOf(outcome.result);
          checked = checkIntents(outcome.intents, app);
        } else resultText = jsonTextOf(outcome);
      } catch (error) {
        throw withoutSecrets(
          fatalAfterPerforming(`${effect.name}: performed, but what it returned could not be read: ${messageOf(error)}`),
          settings,
        );
      }
      if (!checked) return resultWithoutSecrets(resultText, settings);
      // A follow-up is written to a row whole — its key (the row's idempotency key), name, effect name and args —
      // and a cancel's name to outbox_cancels, so no part of one may carry a secret. Read in the checked intents
      // (JSON: stringify cannot throw), or in the refusal's reason, which quotes keys and names.
      const secret = secretIn(checked.ok ? JSON.stringify([checked.effects, checked.cancels]) : checked.reason, settings.secrets);
      if (secret)
        throw fatalAfterPerforming(
          `${effect.name}: follow-ups refused: they carry the secret ${secret}, and a follow-up is written to a row`,
        );
      // Performed, but what it asks for next cannot be recorded: park it where
      // an operator sees it, rather than complete a chain with a hole in it.
      if (!checked.ok) throw fatalAfterPerforming(`${effect.name}: follow-ups refused: ${checked.reason}`);
      return completed(resultWithoutSecrets(resultText, settings), checked.effects, checked.cancels);
    },
  };
}

/**
 * A result as one JSON text, read once (no result, or one that serialises to nothing, is undefined), or a throw from
 * the app's own code (a toJSON, a getter) or from a cycle.
 */
function jsonTextOf(result: JsonObject | null | undefined): string | undefined {
  return result === undefined || result === null ? undefined : JSON.stringify(result);
}

/** A thrown value's message, which is the app's code too (a getter): a fixed text if reading it throws. */
function messageOf(error: unknown): string {
  try {
    return error instanceof Error ? error.message : String(error);
  } catch {
    return "(its error could not be read either)";
  }
}

function isFollowUps(value: unknown): value is FollowUps {
  return typeof value === "object" && value !== null && FOLLOW_UPS in value;
}

/**
 * What an effect reads when it is performed without the deployment's parsed settings (a harness that builds its
 * own context): its declaration's defaults. Both Workers always pass the parsed ones (shared/effects/context.ts).
 */
function defaultsOf(effect: AppEffect): AppSettings {
  const parsed = parseAppSettings(effect.options.settings ?? {}, {});
  return parsed.ok ? parsed.settings : NO_APP_SETTINGS;
}

/** The error as thrown, its message (and name) with every secret's value replaced; its class and classification kept. */
function withoutSecrets(error: unknown, settings: AppSettings): unknown {
  if (settings.secrets.length === 0) return error;
  if (error instanceof EffectError) {
    const message = redactSecrets(error.failure.message, settings.secrets);
    return message === error.failure.message ? error : new EffectError({ ...error.failure, message });
  }
  if (error instanceof Error) {
    const text = `${error.name}\n${error.message}`;
    if (secretIn(text, settings.secrets) === undefined) return error;
    // A new error, not the old one edited: its stack and cause still carry the value.
    const clean = new Error(redactSecrets(error.message, settings.secrets));
    clean.name = redactSecrets(error.name, settings.secrets);
    return clean;
  }
  return typeof error === "string" ? redactSecrets(error, settings.secrets) : error;
}

/** The result the row stores: the parse of its one JSON text, with every secret's value replaced. */
function resultWithoutSecrets(text: string | undefined, settings: AppSettings): JsonObject | null {
  if (text === undefined) return null;
  if (settings.secrets.length === 0 || secretIn(text, settings.secrets) === undefined) return JSON.parse(text) as JsonObject | null;
  try {
    return JSON.parse(redactSecrets(text, settings.secrets)) as JsonObject;
  } catch {
    // A value that spans the JSON's own punctuation: keep nothing of it rather than guess.
    return { redacted: "the result carried a secret" };
  }
}

function appContext(ctx: AttemptContext, effect: AppEffect, settings: AppSettings): AppEffectContext<SettingsDeclaration> {
  return {
    settings: settings.all as AppEffectContext<SettingsDeclaration>["settings"],
    fetch: ctx.fetch,
    idempotencyKey: ctx.idempotencyKey,
    attempt: ctx.attempt,
    signal: ctx.signal,
    slack: {
      async call(method, args) {
        if (!effect.options.slackMethods?.includes(method)) {
          throw fatal(`${effect.name}: calls Slack method ${method}, which its slackMethods option does not declare`);
        }
        const answer = await ctx.slack.call(method, args, ctx.timeoutMs, ctx.signal);
        if (answer.ok) return answer.body;
        const semantics = semanticsOf(method);
        if (semantics.alreadyDone?.includes(answer.error)) return { ok: true, already: answer.error };
        throw refusal(method, answer.error, semantics.retryable);
      },
    },
  };
}
