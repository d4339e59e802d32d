/**
 * The queue's backlog as Cloudflare's GraphQL Analytics API reports it:
 * dataset queueBacklogAdaptiveGroups (avg { messages bytes }, dimensions
 * datetimeMinute and queueId), the shape of Cloudflare's documented example
 * "Get average queue backlog over time period" (developers.cloudflare.com,
 * Queues › Observability › Metrics).
 *
 * Asked only when CLOUDFLARE_ACCOUNT_ID and CLOUDFLARE_API_TOKEN are set (a
 * token with Account Analytics Read). CLOUDFLARE_QUEUE_ID narrows it to one
 * queue (`npx wrangler queues info ackbox-outbox` shows the id); without it
 * every queue of the account is listed. CLOUDFLARE_GRAPHQL_URL overrides the
 * endpoint (tests point it at a local fake).
 *
 * This is a second opinion beside the outbox table, so a failure here is
 * reported in the output and never fails the command.
 */

export const DEFAULT_GRAPHQL_URL = "https://api.cloudflare.com/client/v4/graphql";
/** How far back to ask: the dataset is sampled per minute; the newest minute per queue is shown. */
export const LOOKBACK_MS = 30 * 60_000;

const SELECTION = `
        avg {
          messages
          bytes
        }
        dimensions {
          datetimeMinute
          queueId
        }`;

export const QUEUE_BACKLOG_QUERY = `query QueueBacklog($accountTag: string!, $queueId: string!, $datetimeStart: Time!, $datetimeEnd: Time!) {
  viewer {
    accounts(filter: { accountTag: $accountTag }) {
      queueBacklogAdaptiveGroups(
        limit: 100
        filter: { queueId: $queueId, datetime_geq: $datetimeStart, datetime_leq: $datetimeEnd }
        orderBy: [datetimeMinute_DESC]
      ) {${SELECTION}
      }
    }
  }
}`;

export const ALL_QUEUES_BACKLOG_QUERY = `query QueueBacklog($accountTag: string!, $datetimeStart: Time!, $datetimeEnd: Time!) {
  viewer {
    accounts(filter: { accountTag: $accountTag }) {
      queueBacklogAdaptiveGroups(
        limit: 1000
        filter: { datetime_geq: $datetimeStart, datetime_leq: $datetimeEnd }
        orderBy: [datetimeMinute_DESC]
      ) {${SELECTION}
      }
    }
  }
}`;

export interface QueueBacklogPoint {
  readonly queueId: string;
  readonly minute: string;
  readonly messages: number;
  readonly bytes: number;
}

export type AnalyticsResult =
  | { readonly available: true; readonly source: string; readonly since: string; readonly queues: readonly QueueBacklogPoint[] }
  | { readonly available: false; readonly reason: string };

export interface AnalyticsEnv {
  readonly CLOUDFLARE_ACCOUNT_ID?: string | undefined;
  readonly CLOUDFLARE_API_TOKEN?: string | undefined;
  readonly CLOUDFLARE_QUEUE_ID?: string | undefined;
  readonly CLOUDFLARE_GRAPHQL_URL?: string | undefined;
}

/** Whether the environment asks for the analytics at all. */
export function analyticsConfigured(env: AnalyticsEnv): boolean {
  return Boolean(env.CLOUDFLARE_ACCOUNT_ID && env.CLOUDFLARE_API_TOKEN);
}

export async function queueBacklogAnalytics(
  env: AnalyticsEnv,
  now: number,
  timeoutMs: number,
  fetcher: typeof fetch = fetch,
): Promise<AnalyticsResult> {
  const endpoint = env.CLOUDFLARE_GRAPHQL_URL || DEFAULT_GRAPHQL_URL;
  const queueId = env.CLOUDFLARE_QUEUE_ID || undefined;
  const variables: Record<string, string> = {
    accountTag: env.CLOUDFLARE_ACCOUNT_ID ?? "",
    datetimeStart: new Date(now - LOOKBACK_MS).toISOString(),
    datetimeEnd: new Date(now).toISOString(),
    ...(queueId ? { queueId } : {}),
  };
  let response: Response;
  try {
    response = await fetcher(endpoint, {
      method: "POST",
      headers: { authorization: `Bearer ${env.CLOUDFLARE_API_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ query: queueId ? QUEUE_BACKLOG_QUERY : ALL_QUEUES_BACKLOG_QUERY, variables }),
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (error) {
    return { available: false, reason: `cannot reach ${endpoint}: ${error instanceof Error ? error.message : String(error)}` };
  }
  let body: unknown;
  try {
    body = await response.json();
  } catch {
    return { available: false, reason: `${endpoint} answered HTTP ${response.status} without JSON` };
  }
  const errors = (body as { errors?: { message?: string }[] | null }).errors;
  if (Array.isArray(errors) && errors.length > 0) {
    return { available: false, reason: `GraphQL: ${errors.map((e) => e.message ?? "error").join("; ")}` };
  }
  if (!response.ok) return { available: false, reason: `${endpoint} answered HTTP ${response.status}` };
  const groups = (body as { data?: { viewer?: { accounts?: { queueBacklogAdaptiveGroups?: unknown[] }[] } } }).data?.viewer?.accounts?.[0]
    ?.queueBacklogAdaptiveGroups;
  if (!Array.isArray(groups)) return { available: false, reason: "the answer has no queueBacklogAdaptiveGroups" };

  // Newest minute per queue (the query orders newest first; sort anyway).
  const latest = new Map<string, QueueBacklogPoint>();
  for (const group of groups as {
    avg?: { messages?: number; bytes?: number };
    dimensions?: { datetimeMinute?: string; queueId?: string };
  }[]) {
    const id = group.dimensions?.queueId ?? queueId ?? "?";
    const minute = group.dimensions?.datetimeMinute ?? "";
    const point = { queueId: id, minute, messages: Number(group.avg?.messages ?? 0), bytes: Number(group.avg?.bytes ?? 0) };
    const seen = latest.get(id);
    if (!seen || point.minute > seen.minute) latest.set(id, point);
  }
  return {
    available: true,
    source: endpoint,
    since: variables.datetimeStart ?? "",
    queues: [...latest.values()].sort((a, b) => a.queueId.localeCompare(b.queueId)),
  };
}
