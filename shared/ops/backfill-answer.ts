/**
 * POST /admin/backfill's answer: the contract between the Worker
 * (workers/ingress/admin/backfill.ts) and the CLI (cli/commands/backfill.ts).
 * Plain types, no Workers runtime types.
 */

/**
 * Most messages a page: the most whose worst case stays well inside D1's 1 000 queries per invocation
 * (shared/ops/backfill.ts, pageWorstQueries; test/ingress/admin.backfill.test.ts counts it). The CLI's default,
 * 15, is the most an app outside the Slack Marketplace gets a page anyway.
 */
export const BACKFILL_PAGE_MAX = 16;

/** What kind of conversation the channel is, as a live message event's channel_type says it (conversations.info). */
export type BackfillChannelType = "channel" | "group" | "im" | "mpim";
export const BACKFILL_CHANNEL_TYPES: readonly BackfillChannelType[] = ["channel", "group", "im", "mpim"];

/** The request body. Times are Slack ts strings ("1764504000.000100"), both ends inclusive. */
export interface BackfillBody {
  channel: string;
  /** Whose installation reads the history, in a distributed app. */
  team?: string;
  /** The team's org, when the installation that reads it is the org's org-wide one. */
  enterprise?: string;
  oldest: string;
  latest?: string;
  /** The previous page's nextCursor. */
  cursor?: string;
  /** Messages per page, 1 to BACKFILL_PAGE_MAX (default 15: the most a non-Marketplace app gets). */
  limit?: number;
  dryRun?: boolean;
  /**
   * The channel's type as an earlier page of this run answered it: the ingress asks Slack (conversations.info)
   * only when it is not given, so a run asks once per channel.
   */
  channelType?: BackfillChannelType;
}

/** One page read: counts of events (a message that mentions the bot is two: its message and its app_mention). */
export interface BackfillPageAnswer {
  channel: string;
  dryRun: boolean;
  /** Messages on this page. */
  read: number;
  /** Events whose rows were there already: delivered live, or by an earlier backfill. */
  alreadyHandled: number;
  /** Events recorded now (dry run: that would be). */
  recorded: number;
  /** Events the app has no handler for or ignores (a bot's message). */
  ignored: number;
  /** Events whose handler refused: nothing written for them. */
  refused: { ts: string; type: string; reason: string }[];
  /** The next page's cursor, or null: the window is done. */
  nextCursor: string | null;
  /** The channel's type the events were routed as (live events' channel_type): pass it with the next page. */
  channelType: BackfillChannelType;
}

/** Slack rate-limited the read: nothing was read or written; ask for the same page after this many seconds. */
export interface BackfillWaitAnswer {
  channel: string;
  dryRun: boolean;
  retryAfterSeconds: number;
}

export type BackfillAnswer = BackfillPageAnswer | BackfillWaitAnswer;

/** POST /admin/backfill/channels' body: a page of the conversations the bot is a member of, for `--all-channels`. */
export interface BackfillChannelsBody {
  team?: string;
  /** The workspace's Enterprise Grid org, when the app is installed org-wide there (as BackfillBody's). */
  enterprise?: string;
  /** The previous page's nextCursor. */
  cursor?: string;
}

/** One page of the bot's conversations (users.conversations), each with its type, so a backfill of it asks Slack nothing more. */
export interface BackfillChannelsPage {
  channels: { id: string; channelType: BackfillChannelType }[];
  /** Conversations on the page whose kind Slack did not say: not backfilled, named. */
  unknown: string[];
  nextCursor: string | null;
}

export type BackfillChannelsAnswer = BackfillChannelsPage | { retryAfterSeconds: number };
