/**
 * What the ingress saw of each workspace, for the delivery gaps
 * (shared/ops/backfill-gaps.ts): when Slack last reached it for a team, and
 * whether requests naming the team were refused by their signature since.
 *
 * Slack retries an event it could not deliver for about five minutes and then
 * drops it. A silence longer than that in a workspace whose app hears every
 * message may be lost events; one during which requests naming the team were
 * refused by their signature (a rotated signing secret, a bad deploy) is. So
 * the measure is every request the ingress answers — recorded, duplicate,
 * ignored by the app or answered inline, per team, never per channel, and not
 * only those that record rows (two mentions seven minutes apart in a channel
 * where the app answers only mentions were a "gap" when it was).
 *
 * What it costs, with many isolates and a remote D1: nothing on the ack's
 * path. Each isolate writes at most once per team, minute and kind (seen,
 * refused: two in a minute of a signing-secret change, one otherwise), after
 * the answer (waitUntil, a turn later), on shard 0 where the installations
 * are. A "seen" write is one batch of two statements: the gap check (1 row
 * read, 1 written only when a silence ends) and the team's upsert (1 row
 * written, WITHOUT ROWID). A "refused" write is one UPDATE of a team already
 * seen (0 rows written but the first since it was last seen), and an isolate
 * counts at most REFUSED_TEAMS_PER_MINUTE teams a minute of those, since their
 * team id is the unverified body's. With I isolates and T teams active in a
 * minute, at most I × T seen writes that minute; one row per team, never pruned
 * (as installations are not).
 *
 * The price of writing once a minute: an isolate's seen_at is the first
 * request of a minute it saw, so the last request before a silence may be up
 * to a minute after it. A gap is recorded only for a silence certainly longer
 * than Slack's retry window (SLACK_RETRY_WINDOW_MS + RESOLUTION_MS), and it is
 * reported from that seen_at, which is never later than the silence began.
 */
import { describeError, type Log } from "../log.ts";
import { parseSlackBody } from "../slack/inputs.ts";

/**
 * How long Slack keeps retrying an event it could not deliver: three retries,
 * the last about five minutes after the first failure. A team silent for
 * longer may have lost events to an outage: delivery_gaps records the silence.
 */
export const SLACK_RETRY_WINDOW_MS = 6 * 60_000;
/** What an isolate's writes resolve: the first request of each minute it sees a team in. */
export const RESOLUTION_MS = 60_000;
/** Teams named by requests refused by their signature that one isolate records in a minute: the rest are not. */
export const REFUSED_TEAMS_PER_MINUTE = 10;

export type ActivityKind = "seen" | "refused";

/**
 * This isolate's memory of what it wrote this minute (workers/ingress/isolate.ts
 * holds one): due() answers true once per team, kind and minute, and never
 * for more than REFUSED_TEAMS_PER_MINUTE refused teams a minute. It forgets
 * the minute before as soon as a new one starts, so it holds at most the
 * teams of one minute.
 */
export class ActivityMeter {
  #minute = Number.NEGATIVE_INFINITY;
  readonly #written = new Set<string>();
  #refusedTeams = 0;

  due(kind: ActivityKind, teamId: string, now: number): boolean {
    const minute = Math.floor(now / RESOLUTION_MS);
    if (minute > this.#minute) {
      this.#minute = minute;
      this.#written.clear();
      this.#refusedTeams = 0;
    } else if (minute < this.#minute) return false; // a request timed before the minute already forgotten
    const key = `${kind}:${teamId}`;
    if (this.#written.has(key)) return false;
    if (kind === "refused") {
      if (this.#refusedTeams >= REFUSED_TEAMS_PER_MINUTE) return false;
      this.#refusedTeams += 1;
    }
    this.#written.add(key);
    return true;
  }
}

/**
 * A silence that this request ends, longer than certainly covers Slack's
 * retry window (?3): from the team's last seen request to this one, with the
 * first refusal by signature in between, if any. Runs before the upsert in
 * the same batch, so it reads the time before this request moves it; a second
 * isolate ending the same silence finds it moved, and writes none. Rows read:
 * 1; written: 0, or 1 when a silence ends.
 */
const recordGap = `
INSERT INTO delivery_gaps (gap_until, team_id, gap_from, enterprise_id, refused_from)
SELECT ?2, team_id, seen_at, ?4, CASE WHEN refused_from >= seen_at THEN refused_from END FROM team_activity
 WHERE team_id = ?1 AND ?2 - seen_at > ?3
ON CONFLICT DO NOTHING`;

/**
 * The team's last seen time, and the org of the org-wide install its request reached (NULL: its own install);
 * a refusal before it is no longer news. Rows written: 1.
 */
const touchSeen = `
INSERT INTO team_activity (team_id, seen_at, enterprise_id) VALUES (?1, ?2, ?3)
ON CONFLICT (team_id) DO UPDATE
   SET seen_at = max(seen_at, excluded.seen_at),
       enterprise_id = CASE WHEN excluded.seen_at >= seen_at THEN excluded.enterprise_id ELSE enterprise_id END,
       refused_from = CASE WHEN excluded.seen_at >= seen_at THEN NULL ELSE refused_from END`;

/** The first refusal by signature since the team was last seen. Rows written: 1 for the first, 0 after. */
const markRefused = `
UPDATE team_activity SET refused_from = ?2 WHERE team_id = ?1 AND refused_from IS NULL AND ?2 >= seen_at`;

/** What the ingress saw: of which team, and, for a request that reached an org-wide install, of which org. */
export interface Seen {
  readonly teamId: string;
  readonly enterpriseId?: string | undefined;
}

/** Writes what the ingress saw of a team at `now`; never throws (a lost write is a gap that looks longer). */
export async function recordActivity(db: D1Database, kind: ActivityKind, who: Seen, now: number, log: Log): Promise<void> {
  const { teamId } = who;
  try {
    if (kind === "seen") {
      const org = who.enterpriseId ?? null;
      await db.batch([
        db.prepare(recordGap).bind(teamId, now, SLACK_RETRY_WINDOW_MS + RESOLUTION_MS, org),
        db.prepare(touchSeen).bind(teamId, now, org),
      ]);
    } else await db.prepare(markRefused).bind(teamId, now).run();
  } catch (error) {
    log("warn", "could not record the ingress's activity (a delivery gap may look longer)", {
      team: teamId,
      kind,
      error: describeError(error),
    });
  }
}

const TEAM_ID = /^[TE][A-Z0-9]{2,31}$/;

/**
 * The team a request refused by its signature says it is from: its body, parsed as an authenticated one would be,
 * unverified (so never trusted for more than a hint of an outage: it only marks a team already seen). Undefined
 * when it names none, or nothing shaped like a team id.
 */
export function teamOfUnverified(contentType: string | null, body: string): string | undefined {
  const parsed = parseSlackBody(contentType, body);
  if (!parsed.ok || parsed.input.surface === "url_verification" || parsed.input.surface === "unhandled") return undefined;
  const team = parsed.input.teamId;
  return team !== undefined && TEAM_ID.test(team) ? team : undefined;
}
