/**
 * `ackbox dead list` and `ackbox dead replay`: what is stuck and why, and
 * the fix. Filters are the API's: --effect, --error (substring), --team,
 * --since, --until (epoch ms, ISO 8601, or an age: 15m, 2h, 7d), also
 * accepted as --filter key=value.
 */
import type { DeadPage, DeadRow, ReplayAnswer } from "../api.ts";
import type { Context } from "../context.ts";
import { CliError, EXIT, type ExitCode } from "../exit.ts";
import { table, when } from "../format.ts";

export interface Filter {
  effect?: string;
  error?: string;
  team?: string;
  since?: string;
  until?: string;
}

export const FILTER_KEYS = ["effect", "error", "team", "since", "until"] as const;

/** Merges --effect/--error/… and --filter k=v[,k=v] into one filter; a key given twice is an error. */
export function filterOf(flags: Partial<Record<(typeof FILTER_KEYS)[number], string>>, filterArgs: readonly string[]): Filter {
  const filter: Filter = {};
  const set = (key: string, value: string) => {
    if (!(FILTER_KEYS as readonly string[]).includes(key)) {
      throw new CliError(`--filter: unknown key ${JSON.stringify(key)} (want ${FILTER_KEYS.join(", ")})`, EXIT.usage);
    }
    const k = key as keyof Filter;
    if (filter[k] !== undefined) throw new CliError(`filter ${key} given twice`, EXIT.usage);
    filter[k] = value;
  };
  for (const key of FILTER_KEYS) if (flags[key] !== undefined) set(key, flags[key]);
  for (const arg of filterArgs) {
    for (const part of arg.split(",")) {
      const eq = part.indexOf("=");
      if (eq <= 0) throw new CliError(`--filter wants key=value, got ${JSON.stringify(part)}`, EXIT.usage);
      set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
    }
  }
  return filter;
}

export async function deadListCommand(
  ctx: Context,
  filter: Filter,
  limit: string | undefined,
  cursor: string | undefined,
): Promise<ExitCode> {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(filter)) if (value !== undefined) query.set(key, value);
  if (limit !== undefined) query.set("limit", limit);
  if (cursor !== undefined) query.set("cursor", cursor);
  const page = await ctx.client.get<DeadPage>(`/admin/dead${query.size > 0 ? `?${query}` : ""}`);
  if (ctx.json) {
    ctx.out(`${JSON.stringify(page)}\n`);
    return EXIT.ok;
  }
  if (page.rows.length === 0) ctx.out("no dead rows match\n");
  else {
    ctx.out(
      `${table(page.rows, [
        // The ref is what replay takes: "<shard>:<id>" with several shards, the id with one.
        { title: page.shardCount > 1 ? "ref" : "id", value: (r) => r.ref, align: "right" },
        ...(page.shardCount > 1 ? [{ title: "shard", value: (r: DeadRow) => r.shard, align: "right" as const }] : []),
        { title: "died (UTC)", value: (r) => when(r.diedAt) },
        { title: "effect", value: (r) => r.effect },
        { title: "team", value: (r) => r.teamId },
        { title: "attempts", value: (r) => r.attempts, align: "right" },
        { title: "event / operation", value: (r) => r.receiptId, max: 40 },
        // A row whose effect may have happened says so: a filter replay leaves it out (name it by id).
        { title: "last error", value: (r) => (r.maybePerformed ? `[may have been performed] ${r.lastError ?? ""}` : r.lastError), max: 90 },
      ])}\n`,
    );
  }
  if (page.nextCursor) ctx.out(`more: npx ackbox dead list --cursor ${page.nextCursor} (with the same filters)\n`);
  return EXIT.ok;
}

export interface ReplayOptions {
  /** Row refs as given: "<shard>:<id>", or a plain id (one shard); the API checks them against SHARD_COUNT. */
  readonly ids: readonly string[];
  readonly filter: Filter | undefined;
  readonly dryRun: boolean;
  readonly limit: number | undefined;
  readonly cursor: string | undefined;
}

export async function deadReplayCommand(ctx: Context, options: ReplayOptions): Promise<ExitCode> {
  const body =
    options.ids.length > 0
      ? // A plain id goes as a number, as before sharding; a ref as its text.
        { ids: options.ids.map((ref) => (/^\d+$/.test(ref) ? Number(ref) : ref)), dryRun: options.dryRun }
      : {
          filter: options.filter ?? {},
          dryRun: options.dryRun,
          ...(options.limit === undefined ? {} : { limit: options.limit }),
          ...(options.cursor === undefined ? {} : { cursor: options.cursor }),
        };
  const answer = await ctx.client.post<ReplayAnswer>("/admin/replay", body);
  if (ctx.json) {
    ctx.out(`${JSON.stringify(answer)}\n`);
    return EXIT.ok;
  }
  const verb = answer.dryRun ? "dry run: would replay" : "replayed";
  ctx.out(`${verb} ${answer.count} dead row(s)${answer.steps > 1 ? ` in ${answer.steps} steps` : ""}\n`);
  if (answer.replayed.length > 0) {
    ctx.out(
      `${table(answer.replayed, [
        { title: answer.shardCount > 1 ? "ref" : "id", value: (r) => r.ref, align: "right" },
        { title: "effect", value: (r) => r.effect },
        { title: "event / operation", value: (r) => r.receiptId, max: 40 },
        { title: "delay", value: (r) => `${r.delaySeconds} s`, align: "right" },
        { title: "died of", value: (r) => r.lastError, max: 80 },
      ])}\n`,
    );
  }
  const maybe = answer.skipped.filter((s) => s.reason === "maybe_performed");
  const notDead = answer.skipped.filter((s) => s.reason !== "maybe_performed");
  if (notDead.length > 0) {
    ctx.out(`skipped (not dead, untouched): ${notDead.map((s) => `${s.ref} (${s.reason})`).join(", ")}\n`);
  }
  if (maybe.length > 0) {
    ctx.out(`left out, their effect may have happened (replay one by its id if it did not): ${maybe.map((s) => s.ref).join(", ")}\n`);
  }
  if (answer.shardCount > 1) {
    const verbShort = answer.dryRun ? "would replay" : "replayed";
    ctx.out(`per shard: ${answer.perShard.map((p) => `shard ${p.shard} ${verbShort} ${p.replayed}, skipped ${p.skipped}`).join("; ")}\n`);
  }
  if (!answer.dryRun && answer.count > 0) {
    ctx.out(
      `queue: ${answer.enqueue.sent} sent${answer.enqueue.failed > 0 ? `, ${answer.enqueue.failed} failed (left for the next sweep, not lost)` : ""}\n`,
    );
  }
  if (answer.more) {
    const again = answer.nextCursor ? ` --cursor ${answer.nextCursor}` : "";
    ctx.out(`more dead rows may match (at most ${answer.maxPerCall} per call): run it again${again}\n`);
  }
  return EXIT.ok;
}
