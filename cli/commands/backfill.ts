/**
 * `ackbox backfill`: the messages of a window that Slack never delivered,
 * handled once each (shared/ops/backfill.ts does the work, one history page
 * per request). The CLI walks the pages with the cursor each answer gives,
 * waits --interval between them (conversations.history's limit: one request
 * a minute for an app outside the Slack Marketplace) and Retry-After when
 * Slack rate-limits anyway, shows progress on stderr and the summary at the end.
 * Running it again over the same window records nothing twice.
 *
 * --all-channels walks every conversation the bot is a member of (POST
 * /admin/backfill/channels, users.conversations): a delivery gap is a
 * workspace's, not a channel's. Every history read, across channels too, is
 * --interval after the previous one; a channel the bot may not read is
 * skipped and named, and the run goes on.
 */
import type {
  BackfillAnswer,
  BackfillBody,
  BackfillChannelsAnswer,
  BackfillChannelsBody,
  BackfillChannelType,
  BackfillPageAnswer,
} from "../../shared/ops/backfill-answer.ts";
import type { Context } from "../context.ts";
import { CliError, EXIT, type ExitCode } from "../exit.ts";

export interface BackfillOptions {
  /** One channel; undefined with allChannels: every conversation the bot is a member of. */
  readonly channel?: string | undefined;
  readonly allChannels?: boolean;
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

interface Totals {
  pages: number;
  read: number;
  alreadyHandled: number;
  recorded: number;
  ignored: number;
}

/** One run's state: its tallies, the refusals, and whether a history page has been read yet (the pacing). */
interface Run {
  readonly options: BackfillOptions;
  readonly totals: Totals;
  readonly refused: (BackfillPageAnswer["refused"][number] & { channel: string })[];
  historyRead: boolean;
}

export async function backfillCommand(ctx: Context, options: BackfillOptions): Promise<ExitCode> {
  const run: Run = { options, totals: { pages: 0, read: 0, alreadyHandled: 0, recorded: 0, ignored: 0 }, refused: [], historyRead: false };
  const failed: { channel: string; reason: string }[] = [];
  let channels: { id: string; channelType?: BackfillChannelType }[];
  if (options.allChannels) {
    channels = await listChannels(ctx, options);
    ctx.err(`backfill: ${channels.length} conversation${channels.length === 1 ? "" : "s"} the bot is a member of`);
  } else channels = [{ id: options.channel ?? "" }];
  for (const [i, channel] of channels.entries()) {
    if (options.allChannels) ctx.err(`backfill: channel ${i + 1} of ${channels.length}: ${channel.id}`);
    try {
      await backfillChannel(ctx, run, channel.id, channel.channelType);
    } catch (error) {
      // One channel the bot cannot read (a scope, a kind it may not read) does not stop the others of the run.
      if (!options.allChannels || !(error instanceof CliError) || error.code !== EXIT.usage) throw error;
      failed.push({ channel: channel.id, reason: error.message });
      ctx.err(`backfill:   ${channel.id} skipped: ${error.message}`);
    }
  }
  report(ctx, run, channels.length, failed);
  return run.refused.length > 0 || failed.length > 0 ? EXIT.failed : EXIT.ok;
}

/** Every conversation the bot is a member of, page by page (POST /admin/backfill/channels), each with its type. */
async function listChannels(ctx: Context, options: BackfillOptions): Promise<{ id: string; channelType: BackfillChannelType }[]> {
  const all: { id: string; channelType: BackfillChannelType }[] = [];
  const seen = new Set<string>();
  let cursor: string | undefined;
  let waits = 0;
  for (;;) {
    const body: BackfillChannelsBody = {
      ...(options.team ? { team: options.team } : {}),
      ...(options.enterprise ? { enterprise: options.enterprise } : {}),
      ...(cursor ? { cursor } : {}),
    };
    const answer = await ctx.client.post<BackfillChannelsAnswer>("/admin/backfill/channels", body);
    if ("retryAfterSeconds" in answer) {
      waits = await waitOut(ctx, waits, answer.retryAfterSeconds, "users.conversations", "the list of channels");
      continue;
    }
    waits = 0;
    all.push(...answer.channels);
    for (const id of answer.unknown) ctx.err(`backfill: ${id} skipped: Slack did not say what kind of conversation it is`);
    if (!answer.nextCursor) return all;
    if (seen.has(answer.nextCursor))
      throw new CliError("backfill: the list of channels gave a cursor already walked; stopped", EXIT.failed);
    seen.add(answer.nextCursor);
    cursor = answer.nextCursor;
  }
}

/** One channel's window, page by page with the cursor each answer gives, every history read --interval after the run's previous. */
async function backfillChannel(ctx: Context, run: Run, channel: string, known: BackfillChannelType | undefined): Promise<void> {
  const { options, totals } = run;
  const verb = options.dryRun ? "would record" : "recorded";
  let cursor: string | undefined;
  // The channel's type, as the listing or the first page answered it: passed on, so Slack is asked it once a run.
  let channelType = known;
  // Every cursor given so far: an answer that gives one again would walk the same pages for ever.
  const seen = new Set<string>();
  let waits = 0;
  for (;;) {
    if (run.historyRead) {
      ctx.err(`backfill: next page in ${options.intervalSeconds} s (--interval)`);
      await ctx.sleep(options.intervalSeconds * 1000);
    }
    const body: BackfillBody = {
      channel,
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
      waits = await waitOut(ctx, waits, answer.retryAfterSeconds, "conversations.history", `page ${totals.pages + 1}`);
      run.historyRead = false; // the wait was Slack's: the same page again, at once after it
      continue;
    }
    waits = 0;
    run.historyRead = true;
    channelType = answer.channelType;
    totals.pages += 1;
    totals.read += answer.read;
    totals.alreadyHandled += answer.alreadyHandled;
    totals.recorded += answer.recorded;
    totals.ignored += answer.ignored;
    run.refused.push(...answer.refused.map((r) => ({ ...r, channel })));
    ctx.err(
      `backfill: page ${totals.pages}: ${answer.read} message${answer.read === 1 ? "" : "s"} read; ${answer.alreadyHandled} already handled, ${answer.recorded} ${verb}, ${answer.ignored} ignored by the app${answer.refused.length > 0 ? `, ${answer.refused.length} refused` : ""}`,
    );
    for (const r of answer.refused) ctx.err(`backfill:   ${r.type} ${r.ts} refused by the app: ${r.reason}`);
    if (!answer.nextCursor) return;
    if (seen.has(answer.nextCursor)) {
      throw new CliError(
        `backfill: page ${totals.pages} gave a cursor already walked; stopped rather than read the same pages again (what was recorded stays; a re-run does nothing twice)`,
        EXIT.failed,
      );
    }
    seen.add(answer.nextCursor);
    cursor = answer.nextCursor;
  }
}

/** A 429's Retry-After, waited out; past MAX_WAITS_PER_PAGE in a row, the run stops. Returns the waits so far. */
async function waitOut(ctx: Context, waits: number, seconds: number, method: string, what: string): Promise<number> {
  if (waits + 1 > MAX_WAITS_PER_PAGE) {
    throw new CliError(
      `Slack rate-limited ${method} ${MAX_WAITS_PER_PAGE} times in a row; run it again later (nothing is done twice)`,
      EXIT.failed,
    );
  }
  ctx.err(`backfill: Slack rate-limited ${method}: waiting ${seconds} s (Retry-After), then ${what} again`);
  await ctx.sleep(seconds * 1000);
  return waits + 1;
}

function report(ctx: Context, run: Run, channels: number, failed: readonly { channel: string; reason: string }[]): void {
  const { options, totals, refused } = run;
  const where = options.allChannels ? "all-channels" : (options.channel ?? "");
  const summary = {
    channel: options.allChannels ? null : (options.channel ?? null),
    ...(options.allChannels ? { channels, skipped: failed } : {}),
    since: options.oldest,
    until: options.latest ?? null,
    dryRun: options.dryRun,
    ...totals,
    refused: options.allChannels ? refused : refused.map(({ channel: _, ...r }) => r),
  };
  if (ctx.json) {
    ctx.out(`${JSON.stringify(summary)}\n`);
    return;
  }
  const window = `${options.allChannels ? `${channels} conversations` : where} from ${options.oldest}${options.latest ? ` to ${options.latest}` : " to now"}`;
  ctx.out(
    [
      `backfill${options.dryRun ? " (dry run: nothing written)" : ""} of ${window}: ${totals.pages} page${totals.pages === 1 ? "" : "s"}`,
      `  read              ${totals.read} messages`,
      `  already handled   ${totals.alreadyHandled} events (delivered, or backfilled before)`,
      `  ${options.dryRun ? "would record    " : "recorded        "}  ${totals.recorded} events`,
      `  ignored by app    ${totals.ignored} events`,
      ...(refused.length > 0 ? [`  refused by app    ${refused.length} events (see above)`] : []),
      ...(failed.length > 0 ? [`  skipped           ${failed.length} conversations the bot could not read (see above)`] : []),
      "",
    ].join("\n"),
  );
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
