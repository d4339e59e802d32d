/**
 * What a demo scenario is: what it sends, and the calls it intends at the
 * stand-in. Its own module, so the demo (demo.ts) and the distributed
 * scenarios (demo-distributed.ts) both build on it without importing each
 * other.
 */
import type { SlackApp } from "../../shared/app/app.ts";
import type { Posted, SlackRequest } from "./slack-payloads.ts";
import type { StandinCall } from "./slack-standin.ts";

/** One call the demo intends the stand-in to receive: exactly `count` calls must match (0: must never happen). */
export interface IntendedCall {
  readonly label: string;
  readonly count: number;
  readonly matches: (call: StandinCall) => boolean;
  /**
   * With `count` 0: from none to this many calls may match, and they are not counted among the effects (an
   * answer's appends, as many as its buffering made of the model's timing). The scenario checks what they did
   * by other means (the message they built, at the stand-in); more than `upTo` fails the demo.
   */
  readonly upTo?: number;
  /** false: not an effect arriving after its request (an answer's last call, seconds later): left out of the latency figure. */
  readonly timed?: boolean;
}

/** What a scenario's sending produced. */
export interface ScenarioRun {
  readonly posted: readonly Posted[];
  /** Wrong statuses or immediate replies. */
  readonly problems: readonly string[];
  readonly intended: readonly IntendedCall[];
  /** The event ids and operation ids it sent (printed for the runbook). */
  readonly ids: readonly string[];
  /** Overrides the scenario's note (e.g. with the immediate reply it got). */
  readonly note?: string;
}

/** What a scenario may use: the ingress, a signed post, fresh ids, the run's channel. */
export interface ScenarioContext {
  readonly run: string;
  readonly channel: string;
  readonly responseBase: string;
  readonly post: (request: SlackRequest) => Promise<Posted>;
  readonly postWithSecret: (secret: string, request: SlackRequest) => Promise<Posted>;
  readonly secret: string;
  /** A fresh message ts. */
  readonly nextTs: () => string;
  /** An event_id unique to this run: Ev0DEMO<run><kind><i>. */
  readonly eventId: (kind: string, i: number) => string;
  readonly say: (name: string, posted: readonly Posted[]) => void;
  readonly statusProblems: (posted: readonly Posted[], want?: number) => string[];
}

/** Why a scenario cannot run against an app (what the app does not do), or undefined when it can. */
export type Need = (app: SlackApp) => string | undefined;

/** One scenario: a name, what it must do in words, and how to send it. */
export interface DemoScenario {
  readonly name: string;
  readonly note: string;
  /** The labelled failure (its effect is meant to fail). */
  readonly failure?: boolean;
  /**
   * What it needs the running app to do (cli/local/demo-apps.ts): the
   * demo asks the app before sending and skips, saying why, a scenario the
   * app does not answer. None: it runs against any app.
   */
  readonly needs?: readonly Need[];
  send(ctx: ScenarioContext): Promise<ScenarioRun>;
}
