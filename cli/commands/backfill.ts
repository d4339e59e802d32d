/**
 * `ackbox backfill`: the messages of a window that Slack never delivered,
 * handled once each (shared/ops/backfill.ts does the work, one history page
 * per request). The CLI walks the pages with the cursor each answer gives,
 * waits --interval between them (conversations.history's limit: one request
 * a minute for an app outside the Slack Marketplace) and Retry-After when
 * Slack rate-limits anyway, shows progress on stderr and the summary at the end.
 * Running it again over the same window records nothing twice.
 */
import type { BackfillAnswer, BackfillBody, BackfillChannelType, BackfillPageAnswer } from "../../shared/ops/backfill-answer.ts";
import type { Context } from "../context.ts";
import { CliError, EXIT, type ExitCode } from "../exit.ts";

export interface BackfillOptions {
  readonly channel: string;
  readonly team?: string | undefined;
  /** The org of an org-wide install that reads the team's history. */
  readonly enterprise?: string | undefined;
  /** Slack ts strings. */
  readonly oldest: string;
  readonly latest?: string | undefined;
  readonly limit: number;
  readonly intervalSeconds: number;
  readonly dryRun: boolean;
}

/** Waits on a 429 before giving up on a page: Slack's own limit makes a few in a row normal, dozens a sign of another caller. */
const MAX_WAITS_PER_PAGE = 10;

export async function backfillCommand(ctx: Context, options: BackfillOptions): Promise<ExitCode> {
  const totals = { pages: 0, read: 0, alreadyHandled: 0, recorded: 0, ignored: 0 };
  const refused: BackfillPageAnswer["refused"] = [];
  const verb = options.dryRun ? "would record" : "recorded";
  let cursor: string | undefined;
  // The channel's type, as the first page answered it: passed on, so Slack is asked it once a run (conversations.info).
  let channelType: BackfillChannelType | undefined;
  // Every cursor given so far: an answer that gives one again would walk the same pages for ever.
  const seen = new Set<string>();
  let waits = 0;
  for (;;) {
    const body: BackfillBody = {
      channel: options.channel,
      oldest: options.oldest,
      limit: options.limit,
      dryRun: options.dryRun,
      ...(options.team ? { team: options.team } : {}),
      ...(options.enterprise ? { enterprise: options.enterprise } : {}),
      ...(options.latest ? { latest: options.latest } : {}),
      ...(cursor ? { cursor } : {}),
      ...(channelType ? { channelType } : {}),
    };
    const answer = await ctx.client.post<BackfillAnswer>("/admin/backfill", body);
    if ("retryAfterSeconds" in answer) {
      waits += 1;
      if (waits > MAX_WAITS_PER_PAGE) {
        throw new CliError(
          `Slack rate-limited conversations.history ${MAX_WAITS_PER_PAGE} times in a row; run it again later (nothing is done twice)`,
          EXIT.failed,
        );
      }
      ctx.err(
        `backfill: Slack rate-limited conversations.history: waiting ${answer.retryAfterSeconds} s (Retry-After), then page ${totals.pages + 1} again`,
      );
      await ctx.sleep(answer.retryAfterSeconds * 1000);
      continue;
    }
    waits = 0;
    channelType = answer.channelType;
    totals.pages += 1;
    totals.read += answer.read;
    totals.alreadyHandled += answer.alreadyHandled;
    totals.recorded += answer.recorded;
    totals.ignored += answer.ignored;
    refused.push(...answer.refused);
    ctx.err(
      `backfill: page ${totals.pages}: ${answer.read} message${answer.read === 1 ? "" : "s"} read; ${answer.alreadyHandled} already handled, ${answer.recorded} ${verb}, ${answer.ignored} ignored by the app${answer.refused.length > 0 ? `, ${answer.refused.length} refused` : ""}`,
    );
    for (const r of answer.refused) ctx.err(`backfill:   ${r.type} ${r.ts} refused by the app: ${r.reason}`);
    if (!answer.nextCursor) break;
    if (seen.has(answer.nextCursor)) {
      throw new CliError(
        `backfill: page ${totals.pages} gave a cursor already walked; stopped rather than read the same pages again (what was recorded stays; a re-run does nothing twice)`,
        EXIT.failed,
      );
    }
    seen.add(answer.nextCursor);
    cursor = answer.nextCursor;
    ctx.err(`backfill: next page in ${options.intervalSeconds} s (--interval)`);
    await ctx.sleep(options.intervalSeconds * 1000);
  }
  const summary = {
    channel: options.channel,
    since: options.oldest,
    until: options.latest ?? null,
    dryRun: options.dryRun,
    ...totals,
    refused,
  };
  if (ctx.json) {
    ctx.out(`${JSON.stringify(summary)}\n`);
  } else {
    const window = `${options.channel} from ${options.oldest}${options.latest ? ` to ${options.latest}` : " to now"}`;
    ctx.out(
      [
        `backfill${options.dryRun ? " (dry run: nothing written)" : ""} of ${window}: ${totals.pages} page${totals.pages === 1 ? "" : "s"}`,
        `  read              ${totals.read} messages`,
        `  already handled   ${totals.alreadyHandled} events (delivered, or backfilled before)`,
        `  ${options.dryRun ? "would record    " : "recorded        "}  ${totals.recorded} events`,
        `  ignored by app    ${totals.ignored} events`,
        ...(refused.length > 0 ? [`  refused by app    ${refused.length} events (see above)`] : []),
        "",
      ].join("\n"),
    );
  }
  return refused.length > 0 ? EXIT.failed : EXIT.ok;
}

/** A Slack ts as given, or an ISO 8601 time as one ("2025-11-30T12:00:00Z" → "1764504000.000000"). */
export function slackTsOf(flag: string, text: string): string {
  if (/^\d{9,10}(\.\d{1,6})?$/.test(text)) return text;
  const ms = /^\d{4}-\d{2}-\d{2}(T|$)/.test(text) ? Date.parse(text) : Number.NaN;
  if (Number.isNaN(ms)) {
    throw new CliError(
      `${flag} wants an ISO 8601 time (2026-11-30T12:00:00Z) or a Slack ts (1764504000.000100), got ${JSON.stringify(text)}`,
      EXIT.usage,
    );
  }
  return (ms / 1000).toFixed(6);
}
