import type { AppSettings } from "../app/settings.ts";
import { fatal } from "../delivery/failure.ts";
import type { IntendedEffect } from "../outbox/model.ts";
import type { JsonObject } from "../slack/inputs.ts";
import type { SlackWebApi } from "../slack/web-api.ts";
import type { StepState } from "../steps/execution.ts";
import type { EffectFetch } from "./outbound.ts";

/** What every effect may use, the same for every row. */
export interface EffectContext {
  readonly slack: SlackWebApi;
  /** Hosts a response_url may point at (RESPONSE_URL_HOSTS). */
  readonly responseUrlHosts: readonly string[];
  /** Per-call timeout; well inside the lease (shared/settings.ts checks it). */
  readonly timeoutMs: number;
  /**
   * The one fetch effects reach the network with. Injected, so the guard that
   * decides what an effect may reach and how much it reads plugs in here
   * (shared/effects/outbound.ts).
   */
  readonly fetch: EffectFetch;
  /**
   * The network edge: the one fetch every outbound call of the row goes
   * through — `slack` (and the installation's or workflow token's client the
   * row is performed with), `fetch`, a response_url. The Workers' entries pass
   * the real network (outbound.ts's networkEdge); the test kit, its fakes. An
   * effect that builds its own client (guardedFetch, slackWebApi) builds it on this.
   */
  readonly edge: typeof fetch;
  /** The app's declared settings as this deployment parsed them (shared/app/settings.ts); none when absent. */
  readonly appSettings?: AppSettings;
  /** A completion row's execution when its workflow token cannot be used (shared/steps/rows.ts); absent otherwise. */
  readonly step?: StepState;
}

/** EffectContext plus what belongs to this attempt at this row. */
export interface AttemptContext extends EffectContext {
  /** The row's idempotency key: stable across attempts; forward it where a service honours one. */
  readonly idempotencyKey: string;
  /** 1 for the first attempt. */
  readonly attempt: number;
  /** Aborted when the attempt's timeout (timeoutMs) runs out; for a long effect, when its lease does (shared/effects/lease.ts). */
  readonly signal: AbortSignal;
}

/**
 * An effect whose one attempt may run past EFFECT_TIMEOUT_SECONDS: it renews its lease (leaseOf(ctx):
 * shared/effects/lease.ts) as it goes,
 * and is ended at `maxMs` whatever it renewed. Never attempted at the ack (its ingress attempt has 30 s).
 */
export interface LongRunning {
  /** The attempt's longest time, renewals or not: well inside a consumer invocation's 15 minutes. */
  readonly maxMs: number;
  /**
   * The most D1 statements one attempt sends beyond its row's own (its claim, pacing, installation and finish):
   * its lease's renewals and its progress. Reserved from the consumer invocation's query budget while it runs
   * (shared/delivery/query-budget.ts); 0 when absent (an effect that writes nothing of its own).
   */
  readonly queries?: number;
}

export interface EffectDefinition {
  /** The outbox row's `effect` column. */
  readonly name: string;
  /**
   * Whether performing it twice is harmless by its shape. At-least-once means
   * a crash between the effect and its completion repeats it: a reaction or an
   * update absorbs that; a posted message shows up twice.
   */
  readonly idempotentByShape: boolean;
  /** A tighter attempt limit than MAX_ATTEMPTS, where Slack limits uses. */
  readonly maxAttempts?: number;
  /** A tighter timeout than EFFECT_TIMEOUT_SECONDS (never a longer one: the lease is sized by it). */
  readonly timeoutMs?: number;
  /** A long effect: its attempt is bounded by the lease it renews and `maxMs`, not by the timeout (shared/effects/lease.ts). */
  readonly long?: LongRunning;
  /**
   * Whether the ingress makes the first attempt right after the ack
   * (shared/delivery/first-attempt.ts): true for Slack methods, an app
   * effect's `inline` option (default false).
   */
  readonly inline?: boolean;
  /**
   * Performs the effect; returns what to keep in the row's `result` (or a
   * Completed, to also record follow-ups), or throws an EffectError.
   */
  perform(payload: JsonObject, context: AttemptContext): Promise<unknown>;
}

const COMPLETED: unique symbol = Symbol("ackbox.completed");

/** An effect's result together with the rows it asks for next (and the named rows it cancels), recorded with its completion. */
export interface Completed {
  readonly [COMPLETED]: true;
  readonly result: unknown;
  readonly followUps: readonly IntendedEffect[];
  /** Names of the row's workspace's rows to cancel in the same fenced batch (shared/outbox/cancel-named.ts). */
  readonly cancels: readonly string[];
}

export function completed(result: unknown, followUps: readonly IntendedEffect[], cancels: readonly string[] = []): Completed {
  return { [COMPLETED]: true, result, followUps, cancels };
}

export function isCompleted(value: unknown): value is Completed {
  return typeof value === "object" && value !== null && COMPLETED in value;
}

/** A required string field of a payload; a missing one is a bug in the routing, so it parks. */
export function requireString(payload: JsonObject, field: string, effect: string): string {
  const value = payload[field];
  if (typeof value !== "string" || value === "") throw fatal(`${effect}: payload has no ${field}`);
  return value;
}
