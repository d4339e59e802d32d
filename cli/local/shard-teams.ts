/**
 * Teams that land on each shard, for the local tools that must put traffic on
 * every shard (the chaos run, the local-run test): found with the rule the
 * Workers place a workspace by at its first sight (shared/shards/placement.ts,
 * route.ts), never hard-coded, so they stay right if the count changes. A team
 * already placed stays where it was (a kept local state, a shard added since).
 */
import { routingKeyOf, shardIndexOf } from "../../shared/shards/route.ts";
import { DEMO_TEAM, type Team } from "./slack-payloads.ts";

/** The shard the rule places a (non-enterprise) team on at its first sight, among `count` shards. */
export function shardOfTeam(teamId: string, count: number): number {
  return shardIndexOf(routingKeyOf({ teamId }), count);
}

/** One team per shard, index i on shard i: the first `<prefix><n>` (n = 0, 1, …) that lands there. */
export function teamsOnEveryShard(count: number, prefix = "T0SHARD"): Team[] {
  const teams: Array<Team | undefined> = Array.from({ length: count }, () => undefined);
  for (let n = 0; teams.includes(undefined); n++) {
    if (n > 10_000) throw new Error(`no team named ${prefix}<n> lands on every one of ${count} shards`);
    const teamId = `${prefix}${n}`;
    const shard = shardOfTeam(teamId, count);
    if (teams[shard] === undefined) teams[shard] = { teamId, appId: DEMO_TEAM.appId };
  }
  return teams as Team[];
}
