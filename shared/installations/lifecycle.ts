/**
 * Uninstall and revoke, recorded like any event and acted on by the consumer.
 *
 * At the ingress (`withInstallationLifecycle`, a distributed app only):
 * `app_uninstalled` and `tokens_revoked` (with bot tokens among the revoked)
 * add one engine intent, `installation.removed`, to whatever the app's own
 * handlers asked for, so the receipt and the row are written in the ack's one
 * batch — durable, and idempotent on the event_id like every event.
 *
 * At the consumer (`installationRemovedEffect`): deletes the team's (or, for
 * an org-wide uninstall, the enterprise's) installation, then parks that
 * team's pending rows dead with the reason, PARK_STEP rows per statement; a
 * full step asks for the next as a follow-up (recorded with its completion),
 * so a large backlog is parked in bounded steps. Repeating it changes
 * nothing: the installation is gone and no pending row is left.
 *
 * A later event for that team is recorded as usual; its rows WAIT ("no
 * installation for team …") rather than being ignored: a re-install is how
 * an admin undoes an uninstall, and it resumes them with nothing lost.
 */
import type { Routing } from "../app/app.ts";
import { completed, type EffectDefinition } from "../effects/effect.ts";
import type { EffectRegistry } from "../effects/registry.ts";
import type { IntendedEffect } from "../outbox/model.ts";
import { isObject, type JsonObject, type RecordableInput } from "../slack/inputs.ts";

export const INSTALLATION_REMOVED = "installation.removed";
/** Pending rows one step parks: one statement, well inside a Worker's limits. */
export const PARK_STEP = 500;

const text = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined);

/** The lifecycle intent an event calls for, if any. */
export function lifecycleIntent(input: RecordableInput): IntendedEffect | undefined {
  if (input.surface !== "event") return undefined;
  const event = input.event as unknown as JsonObject;
  const type = event.type;
  if (type !== "app_uninstalled" && type !== "tokens_revoked") return undefined;
  if (type === "tokens_revoked") {
    const tokens = isObject(event.tokens) ? event.tokens : {};
    // Only user tokens revoked: ackbox stores none, so nothing changes.
    if (!Array.isArray(tokens.bot) || tokens.bot.length === 0) return undefined;
  }
  if (!input.teamId) return undefined;
  return { key: "installation", effect: INSTALLATION_REMOVED, payload: { team_id: input.teamId, reason: type, step: 1 } };
}

/** The app's routing with the lifecycle intent added (a distributed app only: `enabled`). */
export function withInstallationLifecycle(routing: Routing, input: RecordableInput, enabled: boolean): Routing {
  if (!enabled || routing.action === "refuse") return routing;
  const intent = lifecycleIntent(input);
  if (!intent) return routing;
  if (routing.action === "ignore") return { action: "record", effects: [intent], handler: "engine: installation lifecycle" };
  return { ...routing, effects: [...routing.effects, intent] };
}

/** The engine effect, performed by the consumer: it needs the database, so it closes over it. */
export function installationRemovedEffect(db: D1Database, clock: () => number): EffectDefinition {
  return {
    name: INSTALLATION_REMOVED,
    idempotentByShape: true,
    async perform(payload) {
      const teamId = text(payload.team_id);
      const reason = text(payload.reason) ?? "app_uninstalled";
      const step = typeof payload.step === "number" ? payload.step : 1;
      if (!teamId) return { removed: 0, parked: 0 };
      const now = clock();
      const why = `installation removed: ${reason} for team ${teamId} (re-install the app there, then replay)`;
      const [removed, parked] = await db.batch([
        db.prepare("DELETE FROM installations WHERE install_key = ?1").bind(`T:${teamId}`),
        db
          .prepare(
            `UPDATE outbox SET status = 'dead', last_error = ?2, completed_at = ?3, updated_at = ?3, sweep_at = NULL
              WHERE id IN (SELECT id FROM outbox WHERE team_id = ?1 AND status = 'pending' AND effect != ?4 LIMIT ?5)`,
          )
          .bind(teamId, why, now, INSTALLATION_REMOVED, PARK_STEP),
      ]);
      const result = { removed: removed?.meta.changes ?? 0, parked: parked?.meta.changes ?? 0, step };
      if (result.parked < PARK_STEP) return result;
      // A full step: the next one is a follow-up, recorded with this completion.
      return completed(result, [
        { key: `step${step + 1}`, effect: INSTALLATION_REMOVED, payload: { team_id: teamId, reason, step: step + 1 } },
      ]);
    },
  };
}

/** The app's effects, and the engine's lifecycle effect. */
export function withLifecycleEffect(effects: EffectRegistry, effect: EffectDefinition): EffectRegistry {
  return {
    get: (name) => (name === effect.name ? effect : effects.get(name)),
    attemptLimits: () => effects.attemptLimits(),
  };
}
