/**
 * Which installation a Slack request belongs to: the fields Slack documents
 * for each surface, org-wide Enterprise Grid installs included.
 *
 * - Events API (event_callback): `authorizations[0]` names the installation
 *   the event was delivered for — {team_id, enterprise_id,
 *   is_enterprise_install}. The envelope's `team_id` is the workspace the
 *   event happened in, which in a shared channel can be another
 *   organisation's: only the authorization is the app's own install. The
 *   envelope (`team_id`, `enterprise_id`, then `context_team_id`,
 *   `context_enterprise_id`) is the fallback for payloads without one.
 * - Slash commands (form): `team_id`, `enterprise_id`, `is_enterprise_install`
 *   ("true"/"false").
 * - Interactivity (payload JSON): `team.id` (null in some org-wide
 *   payloads), `enterprise.id`, `is_enterprise_install`.
 *
 * The answer is what installations are looked up by
 * (shared/installations/store.ts): 'T:<team>' first, then 'E:<enterprise>'.
 */
import { isObject, type JsonObject } from "../slack/inputs.ts";

export interface InstallationTeam {
  readonly teamId: string | undefined;
  readonly enterpriseId: string | undefined;
  readonly isEnterpriseInstall: boolean;
}

const text = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined);
const idOf = (value: unknown): string | undefined => (isObject(value) ? text(value.id) : undefined);

/** From an Events API envelope (the whole JSON body). */
export function teamOfEvent(envelope: JsonObject): InstallationTeam {
  const authorization = Array.isArray(envelope.authorizations) ? envelope.authorizations.find(isObject) : undefined;
  if (authorization) {
    const isEnterpriseInstall = authorization.is_enterprise_install === true;
    return {
      teamId: isEnterpriseInstall ? undefined : text(authorization.team_id),
      enterpriseId: text(authorization.enterprise_id),
      isEnterpriseInstall,
    };
  }
  return {
    teamId: text(envelope.team_id) ?? text(envelope.context_team_id),
    enterpriseId: text(envelope.enterprise_id) ?? text(envelope.context_enterprise_id),
    isEnterpriseInstall: false,
  };
}

/** From a slash command's form fields. */
export function teamOfCommand(form: URLSearchParams): InstallationTeam {
  const isEnterpriseInstall = form.get("is_enterprise_install") === "true";
  return {
    teamId: isEnterpriseInstall ? undefined : text(form.get("team_id")),
    enterpriseId: text(form.get("enterprise_id")),
    isEnterpriseInstall,
  };
}

/** From an interactivity payload. */
export function teamOfInteraction(payload: JsonObject): InstallationTeam {
  const isEnterpriseInstall = payload.is_enterprise_install === true;
  return {
    teamId: isEnterpriseInstall ? undefined : (idOf(payload.team) ?? text(payload.team_id)),
    enterpriseId: idOf(payload.enterprise) ?? text(payload.enterprise_id),
    isEnterpriseInstall,
  };
}
