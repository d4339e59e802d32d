/**
 * The demo's outage, then the backfill that closes it. Five messages are
 * posted in a watched channel "in Slack" (the stand-in is told each one, so
 * its conversations.history has them): the first and the last are delivered
 * as Slack delivers them; the three between arrive while the ingress refuses
 * every request with 401 (signed with a signing secret it does not have: the
 * outage after a secret change), so nothing of them is written and Slack, its
 * retries spent, would drop them. Then `npx ackbox backfill` (the CLI's own
 * code, in process, through the operator API) reads the window's history two
 * messages a page. Each of the five must get its one :eyes: (the reference
 * app's effect) and no second: the three recovered once, the two delivered
 * recognised by their fact and not handled again. The CLI's summary must say
 * the same (read 5, already handled 2, recorded 3).
 */
import { main } from "../../cli/main.ts";
import { needs } from "./demo-apps.ts";
import type { DemoScenario, IntendedCall } from "./scenario.ts";
import { channelMessage, eventCallback, type Posted, type Team } from "./slack-payloads.ts";
import { type StandinCall, tellStandinMessage } from "./slack-standin.ts";

export interface OutageDeps {
  readonly url: string;
  readonly standinUrl: string;
  readonly adminToken: string;
  /** The workspace the messages are posted in: the one whose token reads the history (auth.test's team). */
  readonly team: Team;
  /** A distributed app: the backfill names the team (--team) whose installation reads the history. */
  readonly distributed: boolean;
}

/** Messages a history page: the window's five take three pages, so the CLI follows next_cursor twice. */
const PAGE = 2;

export function outageScenario(deps: OutageDeps): DemoScenario {
  return {
    name: "outage, then backfill",
    needs: [needs.messageEyes],
    note: "3 of 5 messages refused (401) → ackbox backfill → each :eyes: once",
    async send(ctx) {
      const tss = Array.from({ length: 5 }, ctx.nextTs);
      const ids = tss.map((_, i) => ctx.eventId("O", i));
      const posted: Posted[] = [];
      const problems: string[] = [];
      for (const [i, ts] of tss.entries()) {
        const message = channelMessage({
          channel: ctx.channel,
          ts,
          text: `message ${i + 1} of 5 around an outage`,
          team: deps.team.teamId,
        });
        await tellStandinMessage(deps.standinUrl, ctx.channel, message);
        const request = eventCallback(message, ids[i] ?? "", deps.team);
        const delivered = i === 0 || i === tss.length - 1;
        const answer = delivered ? await ctx.post(request) : await ctx.postWithSecret(`${ctx.secret}-rotated`, request);
        posted.push(answer);
        problems.push(...ctx.statusProblems([answer], delivered ? 200 : 401));
      }
      ctx.say("5 channel messages, the middle 3 while the ingress refuses them (401)", posted);

      const out: string[] = [];
      const err: string[] = [];
      const code = await main({
        argv: [
          "backfill",
          "--url",
          deps.url,
          "--channel",
          ctx.channel,
          "--since",
          tss[0] ?? "",
          "--until",
          tss.at(-1) ?? "",
          ...(deps.distributed ? ["--team", deps.team.teamId] : []),
          "--limit",
          String(PAGE),
          "--interval",
          "0",
          "--json",
        ],
        env: { ACKBOX_ADMIN_TOKEN: deps.adminToken },
        out: (text) => out.push(text),
        err: (text) => err.push(text),
        isTty: false,
        localAdminToken: () => undefined,
      });
      const summary = parseJson(out.join("")) as Record<string, unknown> | undefined;
      const want = { pages: 3, read: 5, alreadyHandled: 2, recorded: 3, ignored: 0 };
      const got = Object.fromEntries(Object.keys(want).map((k) => [k, summary?.[k]]));
      if (code !== 0 || JSON.stringify(got) !== JSON.stringify(want))
        problems.push(
          `npx ackbox backfill exited ${code} with ${JSON.stringify(got)} (want ${JSON.stringify(want)}): ${err.join("").trim().slice(-200)}`,
        );

      const history = (c: StandinCall) =>
        c.method === "conversations.history" && c.params.channel === ctx.channel && c.params.oldest === tss[0];
      const intended: IntendedCall[] = [
        ...tss.map((ts, i) => ({
          label: `one :eyes: on ${ts} (${i === 0 || i === tss.length - 1 ? "delivered" : "backfilled"})`,
          count: 1,
          matches: (c: StandinCall) => c.method === "reactions.add" && c.params.timestamp === ts,
        })),
        { label: `conversations.history of ${ctx.channel}, ${want.pages} pages`, count: want.pages, matches: history },
        { label: "auth.test, once a page (whose history)", count: want.pages, matches: (c) => c.method === "auth.test" },
        {
          label: `conversations.info of ${ctx.channel}, once a run (what kind of channel)`,
          count: 1,
          matches: (c) => c.method === "conversations.info" && c.params.channel === ctx.channel,
        },
      ];
      return { posted, problems, ids, intended };
    },
  };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
