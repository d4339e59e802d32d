/**
 * The demo's distributed part (a run with SLACK_CLIENT_ID: `npm start --
 * --distributed`), all against the local Slack stand-in:
 *
 * 1. **install T0DEMO**: a browser's OAuth install — GET /slack/install, the
 *    stand-in's authorize page, GET /slack/oauth_redirect with the state
 *    cookie — before the built-in scenarios, which then must each reach Slack
 *    with T0DEMO's own token (their intended calls say so).
 * 2. **second workspace, rotating token**: T0DEMOB installs with a rotating
 *    token already due for its refresh (the stand-in's `expires_in`), and at
 *    once `rotationEvents` mentions arrive together: every reply carries a
 *    T0DEMOB token that Slack accepted, and exactly one oauth.v2.access
 *    refresh_token call was made among all the workers that met the token.
 * 3. **uninstall**: the stand-in revokes T0DEMOB's tokens (what Slack does at
 *    an uninstall), a mention arrives and its one call is refused
 *    token_revoked — the installation is blocked, the row waits, and the
 *    backlog names the team; then `app_uninstalled` arrives: the waiting row
 *    is parked dead with the reason and the installation is gone.
 *
 * The stand-in records whose token each call carried (never the token); the
 * verdict checks it through the same exact matcher as every scenario.
 */
import type { BacklogAnswer } from "../../shared/ops/backlog-answer.ts";
import { needs } from "./demo-apps.ts";
import type { DemoScenario, IntendedCall } from "./scenario.ts";
import { appMention, DEMO_TEAM, eventCallback, type Posted, type Team } from "./slack-payloads.ts";
import { fetchStandinCalls, type StandinCall } from "./slack-standin.ts";

export const SECOND_TEAM: Team = { teamId: "T0DEMOB", appId: DEMO_TEAM.appId };
/**
 * The rotating token's first life: one second, over before the mentions arrive. The ingress never spends a
 * refresh token, so it hands the rows to the consumer, whose lanes meet the expired token together and
 * refresh it once, under the installation's lease. (A token still inside its refresh window is used as it
 * is, at the ingress and the consumer alike, until the cron refreshes it.)
 */
export const DUE_TOKEN_SECONDS = 1;

/** What the distributed scenarios need beyond a scenario's context. */
export interface DistributedDeps {
  readonly url: string;
  readonly standinUrl: string;
  readonly adminToken: string;
  readonly timeoutMs: number;
}

/** Is the run a distributed app? /slack/install redirects to Slack in one, and answers 404 in single-workspace mode. */
export async function isDistributed(url: string): Promise<boolean> {
  const response = await fetch(`${url}/slack/install`, { redirect: "manual", signal: AbortSignal.timeout(5000) });
  await response.body?.cancel();
  if (response.status === 302) return true;
  if (response.status === 404) return false;
  throw new Error(`GET ${url}/slack/install answered ${response.status}: neither an install redirect nor single-workspace mode`);
}

/** A call made with a token the stand-in issued to `team` (never the token itself: whose it is). */
export const withTokenOf = (team: string, call: StandinCall): boolean => call.token?.issuedTo === team;

/**
 * In a distributed run every Web API call of a built-in scenario must carry
 * T0DEMO's own token: the intended calls are narrowed to that (a call with
 * another token fails the demo as unintended, its intention as missing).
 */
export function requireTeamToken(intended: IntendedCall, team: string): IntendedCall {
  return {
    ...intended,
    label: `${intended.label} (with ${team}'s token)`,
    matches: (call) => intended.matches(call) && (call.kind !== "api" || withTokenOf(team, call)),
  };
}

/** The browser's part of an install: follows the redirects, keeps the state cookie, reads the result page. */
export async function installAs(
  url: string,
  standinUrl: string,
  team: string,
  authorize: Readonly<Record<string, string>> = {},
): Promise<string[]> {
  const problems: string[] = [];
  const start = await fetch(`${url}/slack/install`, { redirect: "manual", signal: AbortSignal.timeout(5000) });
  await start.body?.cancel();
  const location = start.headers.get("location") ?? "";
  const cookie = (start.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
  if (start.status !== 302 || !location.startsWith(`${standinUrl}/oauth/v2/authorize?`))
    return [
      `GET /slack/install answered ${start.status}, location ${location.slice(0, 80) || "-"} (want 302 to the stand-in's authorize page)`,
    ];
  if (!cookie.startsWith("ackbox_oauth_state=")) problems.push("GET /slack/install set no state cookie");
  // On Slack's page the user picks the workspace (and the app's settings decide rotation): here, query parameters.
  const page = new URL(location);
  page.searchParams.set("team", team);
  for (const [name, value] of Object.entries(authorize)) page.searchParams.set(name, value);
  const approved = await fetch(page, { redirect: "manual", signal: AbortSignal.timeout(5000) });
  await approved.body?.cancel();
  const back = approved.headers.get("location") ?? "";
  if (approved.status !== 302 || !back.startsWith(`${url}/slack/oauth_redirect?`))
    return [...problems, `the authorize page answered ${approved.status} (want 302 back to ${url}/slack/oauth_redirect)`];
  const done = await fetch(back, { headers: { cookie }, redirect: "manual", signal: AbortSignal.timeout(10_000) });
  const html = await done.text();
  if (done.status !== 200 || !html.includes(`Installed in workspace ${team}`))
    problems.push(
      `GET /slack/oauth_redirect answered ${done.status}: ${html
        .replace(/<[^>]+>/g, " ")
        .trim()
        .slice(0, 120)}`,
    );
  return problems;
}

/** The two intended calls of one install: the authorize page for the team, and the code traded for its token. */
function installCalls(team: string): IntendedCall[] {
  return [
    {
      label: `authorize page approved for ${team}`,
      count: 1,
      matches: (c) => c.method === "oauth.authorize" && c.params.team === team,
    },
    {
      label: `oauth.v2.access (authorization_code) for ${team}`,
      count: 1,
      matches: (c) =>
        c.method === "oauth.v2.access" &&
        c.params.grant_type === "authorization_code" &&
        (c.answer.body as { team?: { id?: string } }).team?.id === team,
    },
  ];
}

/** The first install, before the built-in scenarios: their team, with a token that does not rotate. */
export function installScenario(deps: DistributedDeps): DemoScenario {
  return {
    name: "OAuth install",
    note: `${DEMO_TEAM.teamId} installs through /slack/install (the built-ins then use its token)`,
    async send() {
      const problems = await installAs(deps.url, deps.standinUrl, DEMO_TEAM.teamId);
      problems.push(...(await installationProblems(deps, DEMO_TEAM.teamId, true)));
      return { posted: [], problems, intended: installCalls(DEMO_TEAM.teamId), ids: [] };
    },
  };
}

export function rotationScenario(deps: DistributedDeps, events: number): DemoScenario {
  const team = SECOND_TEAM.teamId;
  return {
    name: "rotation under load",
    needs: [needs.mentionReply],
    note: `${team} installs (rotating token, expired), ${events} mentions at once → 1 refresh`,
    async send(ctx) {
      const problems = await installAs(deps.url, deps.standinUrl, team, { rotate: "1", expires_in: String(DUE_TOKEN_SECONDS) });
      await new Promise((resolve) => setTimeout(resolve, DUE_TOKEN_SECONDS * 1000 + 500));
      const tss = Array.from({ length: events }, ctx.nextTs);
      const ids = tss.map((_, i) => ctx.eventId("Q", i));
      // At once: the consumer meets the due token with several rows in flight, and only the lease holder refreshes.
      const posted = await Promise.all(tss.map((ts, i) => ctx.post(mentionIn(SECOND_TEAM, ts, ids[i] ?? ""))));
      ctx.say(`install into ${team} with a rotating token that has expired, then ${events} mention(s) at once`, posted);
      // Done before the uninstall revokes the team's tokens: every reply has come (or the demo's timeout passed).
      const replies = await waitFor(deps, async () => {
        const calls = (await fetchStandinCalls(deps.standinUrl)).calls.filter(
          (c) => c.method === "chat.postMessage" && tss.includes(c.params.thread_ts ?? ""),
        );
        return calls.length >= events ? calls : undefined;
      });
      // Which token each reply carried: the first (still valid while its refresh is under way) or the refreshed one.
      const byToken = countBy((replies ?? []).map((c) => (c.token ? `#${c.token.n}` : "no issued token")));
      return {
        posted,
        problems: [...problems, ...ctx.statusProblems(posted)],
        note: `${team}: ${events} mentions at once → 1 refresh; replies by token ${Object.entries(byToken)
          .map(([token, n]) => `${token}×${n}`)
          .join(" ")}`,
        ids,
        intended: [
          ...installCalls(team),
          {
            label: `exactly one refresh of ${team}'s token (oauth.v2.access grant_type=refresh_token)`,
            count: 1,
            matches: (c) =>
              c.method === "oauth.v2.access" &&
              c.params.grant_type === "refresh_token" &&
              (c.answer.body as { team?: { id?: string } }).team?.id === team,
          },
          ...tss.map((ts) => ({
            label: `reply in ${team} thread ${ts} with a valid ${team} token`,
            count: 1,
            matches: (c: StandinCall) =>
              c.method === "chat.postMessage" &&
              c.params.thread_ts === ts &&
              withTokenOf(team, c) &&
              (c.answer.body as { ok?: boolean }).ok === true,
          })),
        ],
      };
    },
  };
}

export function uninstallScenario(deps: DistributedDeps): DemoScenario {
  const team = SECOND_TEAM.teamId;
  return {
    name: "uninstall",
    needs: [needs.mentionReply],
    note: `${team}'s token revoked → row waits, team blocked; app_uninstalled → parked, installation gone`,
    async send(ctx) {
      const problems: string[] = [];
      const revoked = await fetch(`${deps.standinUrl}/_standin/revoke?team=${team}`, { method: "POST", signal: AbortSignal.timeout(5000) });
      if (revoked.status !== 200) problems.push(`the stand-in did not revoke ${team}'s tokens (${revoked.status})`);
      await revoked.body?.cancel();
      const ts = ctx.nextTs();
      const waiting = ctx.eventId("U", 0);
      const uninstalled = ctx.eventId("U", 1);
      const posted: Posted[] = [await ctx.post(mentionIn(SECOND_TEAM, ts, waiting))];

      // The one refused call blocks the installation; the row waits for it (pending, no attempt spent).
      const blocked = await waitFor(deps, async () => {
        const row = (await adminGet<Trail>(deps, `/admin/events/${waiting}`))?.rows?.[0];
        return row?.status === "pending" && /blocked/.test(row.lastError ?? "") ? row : undefined;
      });
      if (!blocked) problems.push(`${waiting}: its row did not wait for the blocked installation of ${team}`);
      else if (blocked.attempts !== 0) problems.push(`${waiting}: waiting for the installation spent ${blocked.attempts} attempt(s)`);
      const backlog = await adminGet<BacklogAnswer>(deps, "/admin/backlog");
      const named = backlog?.blockedTeams.find((b) => b.teamId === team);
      if (named?.state !== "blocked" || named.rows < 1)
        problems.push(`GET /admin/backlog does not name ${team} as blocked with its waiting row (${JSON.stringify(named ?? null)})`);

      posted.push(await ctx.post(eventCallback({ type: "app_uninstalled", event_ts: ts }, uninstalled, SECOND_TEAM)));
      ctx.say(`${team}'s tokens revoked, 1 mention (waits), then app_uninstalled`, posted);
      const parked = await waitFor(deps, async () => {
        const row = (await adminGet<Trail>(deps, `/admin/events/${waiting}`))?.rows?.[0];
        return row?.status === "dead" ? row : undefined;
      });
      const reason = `installation removed: app_uninstalled for team ${team}`;
      if (!parked) problems.push(`${waiting}: not parked after app_uninstalled`);
      else if (!parked.lastError?.startsWith(reason))
        problems.push(`${waiting}: parked with ${JSON.stringify(parked.lastError)}, want "${reason} …"`);
      problems.push(...(await installationProblems(deps, team, false)));
      return {
        posted,
        problems: [...problems, ...ctx.statusProblems(posted)],
        ids: [waiting, uninstalled],
        intended: [
          {
            label: `one call in ${team} thread ${ts}, refused token_revoked (then none: the row waits)`,
            count: 1,
            matches: (c) =>
              c.method === "chat.postMessage" &&
              c.params.thread_ts === ts &&
              withTokenOf(team, c) &&
              (c.answer.body as { error?: string }).error === "token_revoked",
          },
        ],
      };
    },
  };
}

function mentionIn(team: Team, ts: string, id: string) {
  const channel = `C${team.teamId.slice(1)}`; // T0DEMOB → C0DEMOB
  return eventCallback({ ...appMention({ channel, ts }), team: team.teamId }, id, team);
}

interface Trail {
  rows?: { id: number; status: string; attempts: number; lastError: string | null }[];
}

async function installationProblems(deps: DistributedDeps, team: string, present: boolean): Promise<string[]> {
  const answer = await adminGet<{ installations?: { installKey: string }[] }>(deps, "/admin/installations");
  if (!answer?.installations) return ["GET /admin/installations did not answer"];
  const found = answer.installations.some((i) => i.installKey === `T:${team}`);
  if (found === present) return [];
  return [present ? `no installation of ${team} after its install` : `the installation of ${team} is still there after app_uninstalled`];
}

async function adminGet<T>(deps: DistributedDeps, path: string): Promise<T | undefined> {
  const response = await fetch(`${deps.url}${path}`, {
    headers: { authorization: `Bearer ${deps.adminToken}` },
    signal: AbortSignal.timeout(5000),
  }).catch(() => undefined);
  if (response?.status !== 200) {
    await response?.body?.cancel();
    return undefined;
  }
  return (await response.json()) as T;
}

function countBy(items: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) counts[item] = (counts[item] ?? 0) + 1;
  return counts;
}

/** Polls until `check` finds what it wants, or the demo's timeout passes (bounded: never forever). */
async function waitFor<T>(deps: DistributedDeps, check: () => Promise<T | undefined>): Promise<T | undefined> {
  const deadline = Date.now() + deps.timeoutMs;
  for (;;) {
    const found = await check();
    if (found !== undefined || Date.now() > deadline) return found;
    await new Promise((r) => setTimeout(r, 250));
  }
}
