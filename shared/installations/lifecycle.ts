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
 * an org-wide uninstall, the org's 'E:<enterprise>') installation on shard 0
 * — only if it was not written after the event (`at`, the event's time): a
 * removal performed late, after a re-install, must not delete the new one —
 * then parks the live rows it served (pending or in flight), recorded before
 * the event, on the workspace's one home (the removal's own row is recorded
 * there: shared/shards/placement.ts), dead with the reason, PARK_STEP rows per statement; a full step asks
 * for the next as a follow-up (recorded with its completion), so a large
 * backlog is parked in bounded steps. Repeating it changes nothing: the installation is gone and
 * no live row of before the event is left.
 *
 * A later event for that team is recorded as usual; its rows WAIT ("no
 * installation for team …") rather than being ignored: a re-install is how
 * an admin undoes an uninstall, and it resumes them with nothing lost.
 */
import type { Routing } from "../app/app.ts";
import { fatal } from "../delivery/failure.ts";
import { completed, type EffectDefinition } from "../effects/effect.ts";
import { type EffectRegistry, withEffect } from "../effects/registry.ts";
import type { IntendedEffect } from "../outbox/model.ts";
import { isObject, type JsonObject, type RecordableInput } from "../slack/inputs.ts";

export const INSTALLATION_REMOVED = "installation.removed";
/** Pending rows one step parks: one statement, well inside a Worker's limits. */
export const PARK_STEP = 500;

const text = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined);

/**
 * When the removal happened, for the fence: the event's time (Slack's
 * event_time, to the end of its second) but never after the ingress received
 * it. An installation written after it (a re-install) is not the one removed.
 */
export function removedAt(eventTime: number | undefined, receivedAt: number): number {
  return eventTime === undefined ? receivedAt : Math.min(receivedAt, eventTime * 1000 + 999);
}

/** The lifecycle intent an event calls for, if any. `receivedAt`: the ingress's time of receipt. */
export function lifecycleIntent(input: RecordableInput, receivedAt: number): IntendedEffect | undefined {
  if (input.surface !== "event") return undefined;
  const event = input.event as unknown as JsonObject;
  const type = event.type;
  if (type !== "app_uninstalled" && type !== "tokens_revoked") return undefined;
  if (type === "tokens_revoked") {
    const tokens = isObject(event.tokens) ? event.tokens : {};
    // Only user tokens revoked: ackbox stores none, so nothing changes.
    if (!Array.isArray(tokens.bot) || tokens.bot.length === 0) return undefined;
  }
  const orgWide = input.isEnterpriseInstall === true && input.enterpriseId !== undefined;
  if (!orgWide && !input.teamId) return undefined;
  return {
    key: "installation",
    effect: INSTALLATION_REMOVED,
    payload: {
      team_id: input.teamId ?? null,
      enterprise_id: input.enterpriseId ?? null,
      org_wide: orgWide,
      reason: type,
      at: removedAt(input.eventTime, receivedAt),
      step: 1,
    },
  };
}

/** The app's routing with the lifecycle intent added (a distributed app only: `enabled`). */
export function withInstallationLifecycle(routing: Routing, input: RecordableInput, enabled: boolean, receivedAt: number): Routing {
  if (!enabled || routing.action === "refuse") return routing;
  const intent = lifecycleIntent(input, receivedAt);
  if (!intent) return routing;
  if (routing.action === "ignore") return { action: "record", effects: [intent], handler: "engine: installation lifecycle" };
  return { ...routing, effects: [...routing.effects, intent] };
}

/**
 * Deletes the installation only if nothing wrote it after the removal (?2):
 * a removal performed late (a queue backlog, a retry, the sweep's re-send,
 * `ackbox replay`) after a re-install leaves the new installation alone.
 */
const deleteInstallation = "DELETE FROM installations WHERE install_key = ?1 AND updated_at <= ?2";

/**
 * Parks the live rows the removed installation served, recorded before the
 * removal (?3) — a later event's rows wait for a re-install instead — and only
 * while no installation serves them (run after the delete, in one batch: a
 * re-install's team keeps its rows, which go out with the new token). A
 * workspace removal: the team's rows (?1). An org-wide one: the rows whose
 * receipt names the org (?2).
 *
 * Leased rows too, their claim cleared: a row in flight at the uninstall meets
 * Slack's token_revoked and would otherwise come back to wait — and go out
 * with the new token if the team re-installed within the wait, days after the
 * admin removed the app. Its holder's fenced finish then changes nothing. A
 * row whose call Slack took just before the revocation (its answer lost to
 * the park) is then dead although delivered: a leased row is parked
 * maybe_performed (migration 0010), so a filter replay leaves it out and only
 * an operator naming it by id sends it again. So is a pending row attempted
 * before (attempts > 0: an earlier attempt timed out or got an unknown answer,
 * and Slack may have performed it), by the one rule (shared/delivery/decide.ts,
 * mayHavePerformed; waits and 429s give their attempt back, so they do not
 * count); a pending row never attempted cannot have been performed.
 */
const parkRows = `
UPDATE outbox SET status = 'dead', last_error = ?4, completed_at = ?5, updated_at = ?5, sweep_at = NULL,
                  maybe_performed = CASE WHEN status = 'leased' OR attempts > 0 THEN 1 ELSE maybe_performed END,
                  claim_token = NULL, claim_expires_at = NULL
 WHERE id IN (
   SELECT o.id FROM outbox o LEFT JOIN receipts r ON r.id = o.receipt_id
    WHERE o.status IN ('pending', 'leased') AND o.created_at <= ?3 AND o.effect != ?6
      AND (CASE WHEN ?2 IS NULL THEN o.team_id = ?1 ELSE r.enterprise_id = ?2 END)
      AND NOT EXISTS (SELECT 1 FROM installations i WHERE i.install_key IN ('T:' || o.team_id, 'E:' || r.enterprise_id))
    LIMIT ?7)`;

/** The engine effect, performed by the consumer: it needs the database, so it closes over it. */
export function installationRemovedEffect(
  db: D1Database,
  clock: () => number,
  /** Shard 0, where installations live (docs/scaling.md, "Where installations live"); `db` is the row's shard. */
  home: D1Database = db,
): EffectDefinition {
  return {
    name: INSTALLATION_REMOVED,
    idempotentByShape: true,
    async perform(payload) {
      const teamId = text(payload.team_id);
      const enterpriseId = text(payload.enterprise_id);
      const orgWide = payload.org_wide === true && enterpriseId !== undefined;
      const reason = text(payload.reason) ?? "app_uninstalled";
      const step = typeof payload.step === "number" ? payload.step : 1;
      const at = payload.at;
      // Without the removal's time it cannot be told from a re-install: refused, for an operator to look at.
      if (typeof at !== "number" || !Number.isFinite(at)) throw fatal(`${INSTALLATION_REMOVED}: payload has no time (at)`);
      if (!orgWide && !teamId) return { removed: 0, parked: 0, step };
      const installKey = orgWide ? `E:${enterpriseId}` : `T:${teamId}`;
      const now = clock();
      const who = orgWide ? `org ${enterpriseId} (org-wide install)` : `team ${teamId}`;
      const why = `installation removed: ${reason} for ${who} (re-install the app there, then replay)`;
      const park = db.prepare(parkRows).bind(teamId ?? null, orgWide ? enterpriseId : null, at, why, now, INSTALLATION_REMOVED, PARK_STEP);
      const removeHere = async () => {
        const [removed, parked] = await db.batch([db.prepare(deleteInstallation).bind(installKey, at), park]);
        return { removed: removed?.meta.changes ?? 0, parked: parked?.meta.changes ?? 0 };
      };
      // The rows are on the workspace's one home, this row's shard (shared/shards/placement.ts); the installation on
      // shard 0. Written after the removal there (a re-install), the rows it serves are not parked.
      const removeOnHome = async () => {
        const removed = (await home.prepare(deleteInstallation).bind(installKey, at).run()).meta.changes ?? 0;
        const kept = await home.prepare("SELECT 1 AS found FROM installations WHERE install_key = ?1").bind(installKey).first("found");
        return { removed, parked: kept === 1 ? 0 : ((await park.run()).meta.changes ?? 0) };
      };
      const done = home === db ? await removeHere() : await removeOnHome();
      const result = { removed: done.removed, parked: done.parked, step };
      if (done.parked < PARK_STEP) return result;
      // A full step: the next one is a follow-up, recorded with this completion.
      return completed(result, [{ key: `step${step + 1}`, effect: INSTALLATION_REMOVED, payload: { ...payload, step: step + 1 } }]);
    },
  };
}

/** The app's effects, and the engine's lifecycle effect. */
export function withLifecycleEffect(effects: EffectRegistry, effect: EffectDefinition): EffectRegistry {
  return withEffect(effects, effect);
}
