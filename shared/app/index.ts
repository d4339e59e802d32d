/**
 * The one module an app imports: everything app/, docs/building-an-app.md and
 * the examples use from the engine, re-exported. When the engine is published
 * as a package this is its main export; nothing else under shared/ is the
 * app's to import (test/node/app-door.test.ts holds that).
 */
export type { AppHomeOpenedEvent, AppMentionEvent, GenericMessageEvent } from "@slack/types";
export { EffectError, fatal, transient } from "../delivery/failure.ts";
export type { JsonObject, SlashCommand } from "../slack/inputs.ts";
export {
  type App,
  type AssistantDefinition,
  type AssistantHandler,
  type AssistantThreadEvent,
  type BlockAction,
  type BlockActionsBody,
  createApp,
  type EventOf,
  type Handled,
  type Handler,
  type HandlerContext,
  type HandlerResult,
  type OptionsRequest,
  type Pattern,
  type StepHandler,
  type SubmittedView,
  type Surface,
} from "./app.ts";
export type { AnswerOptions, AssistantThread } from "./assistant.ts";
export { type AppEffect, type AppEffectContext, defineEffect, type EffectOptions, type FollowUps, followUps } from "./effects.ts";
export {
  type AnyIntent,
  type Cancel,
  cancel,
  type Intent,
  type IntentOptions,
  MAX_ARGS_BYTES,
  MAX_CANCELS,
  MAX_INTENTS,
  respondTo,
  run,
  slack,
} from "./intents.ts";
export { type Manifest, type ManifestOptions, manifestOf } from "./manifest.ts";
export {
  type AppSettings,
  type PublicSettingValues,
  parseAppSettings,
  type SettingKind,
  type SettingSpec,
  type SettingsDeclaration,
  type SettingValue,
  type SettingValues,
  setting,
} from "./settings.ts";
export type { FunctionDefinition, FunctionExecutedPayload, FunctionParameter, Step, ValuesOf } from "./steps.ts";
