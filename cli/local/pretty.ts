/**
 * `npm start`'s readable output: the Workers log one JSON object per line
 * (shared/log.ts); this turns each into one short line a person can follow —
 * every request's verdict, the enqueue, each delivery, retry and dead row,
 * each sweep that did something — and drops wrangler's start-up chatter
 * (the full output is kept in the run's wrangler.log).
 */

export interface WorkerRecord {
  /** The Worker that logged it, from wrangler's `[name]` prefix (undefined when there is none). */
  readonly worker: string | undefined;
  readonly level: string;
  readonly msg: string;
  readonly fields: Readonly<Record<string, unknown>>;
}

export type OutputLine =
  | { readonly kind: "record"; readonly record: WorkerRecord }
  | { readonly kind: "wrangler"; readonly text: string; readonly noise: boolean };

// biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escapes are control characters.
const ANSI = /\u001b\[[0-9;?]*[ -/]*[@-~]/g;

export const stripAnsi = (text: string): string => text.replace(ANSI, "");

/** Lines of wrangler's own start-up and per-request output that the summaries replace. */
const NOISE: readonly RegExp[] = [
  /^\s*$/,
  // Per-request and per-batch lines (GET /healthz 200, QUEUE ackbox-outbox 2/2, …): the records say more.
  /^\[wrangler:info\] [A-Z]+ /,
  /^\[wrangler:info\] Ready on /,
  /^Using (secrets|vars) defined in /,
  /has access to the following bindings:$/,
  /^Your Worker has access to the following bindings:/,
  /^Binding\s+Resource/,
  /^env\.\S+ /,
  /^⎔ (Starting|Reloading) local server/,
  /Scheduled Workers are not automatically triggered during local development/,
  /To manually trigger a scheduled event, run:/,
  /\/cdn-cgi\/local\/scheduled/,
  /cron-triggers\/#test-cron-triggers-locally/,
  /^No bindings found\.$/,
];

export function parseOutputLine(line: string): OutputLine {
  const text = stripAnsi(line).replace(/\s+$/, "");
  // console.warn and console.error lines come as "▲ [WARNING] {…}" and "✘ [ERROR] {…}", without the Worker's name.
  const match = /^(?:[▲✘] \[(?:WARNING|ERROR)\] )?(?:\[([\w.-]+)\] )?(\{.*\})$/.exec(text);
  if (match?.[2] !== undefined) {
    try {
      const json = JSON.parse(match[2]) as Record<string, unknown>;
      if (typeof json.msg === "string" && typeof json.level === "string") {
        const { level, msg, ...fields } = json;
        return { kind: "record", record: { worker: match[1], level: level as string, msg: msg as string, fields } };
      }
    } catch {
      // Not a log record: shown as wrangler output.
    }
  }
  return { kind: "wrangler", text, noise: NOISE.some((pattern) => pattern.test(text)) };
}

export interface Style {
  readonly dim: (s: string) => string;
  readonly green: (s: string) => string;
  readonly yellow: (s: string) => string;
  readonly red: (s: string) => string;
  readonly cyan: (s: string) => string;
  readonly bold: (s: string) => string;
}

const wrap = (open: number, close: number) => (s: string) => `\u001b[${open}m${s}\u001b[${close}m`;
export const COLOR: Style = {
  dim: wrap(2, 22),
  green: wrap(32, 39),
  yellow: wrap(33, 39),
  red: wrap(31, 39),
  cyan: wrap(36, 39),
  bold: wrap(1, 22),
};
const identity = (s: string) => s;
export const PLAIN: Style = { dim: identity, green: identity, yellow: identity, red: identity, cyan: identity, bold: identity };

/** Colors when the stream is a terminal and NO_COLOR is not set. */
export function styleFor(stream: { isTTY?: boolean }, env: Readonly<Record<string, string | undefined>> = process.env): Style {
  return stream.isTTY && !env.NO_COLOR ? COLOR : PLAIN;
}

/**
 * One record as one line, or undefined for a record not worth a line
 * (debug-level ones, unless `verbose`).
 */
export function formatRecord(record: WorkerRecord, style: Style = PLAIN, verbose = false): string | undefined {
  const f = record.fields;
  const tag = (label: string) => label.padEnd(10);
  const row = (id: unknown, effect: unknown) => `#${String(id)} ${String(effect ?? "")}`.trim();
  switch (record.msg) {
    case "slack request": {
      const verdict = String(f.verdict ?? "?");
      // Operation ids already name their surface ("command:T0:…"); event ids do not.
      const what =
        typeof f.id === "string" && f.id.startsWith(`${String(f.surface)}:`) ? f.id : [f.surface, f.id].filter((x) => x != null).join(" ");
      const retry = f.retry_num ? ` ${style.yellow(`(Slack retry #${f.retry_num}${f.retry_reason ? `: ${f.retry_reason}` : ""})`)}` : "";
      const ms = typeof f.ms === "number" ? style.dim(` ${f.ms} ms`) : "";
      switch (verdict) {
        case "accepted": {
          const ids = Array.isArray(f.outbox_ids) ? f.outbox_ids : [];
          // Where the rows went after the answer: the ingress's first attempt, or the queue (and why, past a bound).
          const attempt = f.first_attempt;
          const path =
            attempt === "inline"
              ? "first attempt"
              : attempt === "in_flight" || attempt === "not_claimable"
                ? `queue (${attempt.replace("_", " ")})`
                : "queue";
          const rows = ids.length > 0 ? ` → outbox ${ids.map((id) => `#${id}`).join(", ")} → ${path}` : "";
          return `${style.green("← accepted")}  ${what}${rows}${retry}${ms}`;
        }
        case "duplicate":
          return `${style.cyan("← duplicate")} ${what}: already recorded, nothing new${retry}${ms}`;
        case "ignored":
          return `${style.dim("← ignored")}   ${what ? `${what}: ` : ""}${String(f.reason ?? "")}${retry}${ms}`;
        case "answered":
          return `${style.dim("← answered")}  ${what}: ${String(f.handler ?? "")} answered inline, nothing written${retry}${ms}`;
        case "url_verification":
          return `← url_verification answered (challenge)${ms}`;
        default:
          return `${style.red(`← ${f.status ?? ""} ${verdict}`)} ${what ? `${what}: ` : ""}${String(f.reason ?? "")}${retry}${ms}`;
      }
    }
    case "delivered":
      return `${style.green(tag("✓ delivered"))} ${row(f.outbox_id, f.effect)} (attempt ${f.attempt ?? "?"}${typeof f.ms === "number" ? `, ${f.ms} ms` : ""})${
        Array.isArray(f.follow_up_ids) ? ` → follow-ups ${f.follow_up_ids.map((id) => `#${id}`).join(", ")} → queue` : ""
      }`;
    case "will retry": {
      const delay = typeof f.delay_ms === "number" ? ` in ${(f.delay_ms / 1000).toFixed(1)} s` : "";
      return `${style.yellow(tag("↻ retry"))} ${row(f.outbox_id, f.effect)}${delay} after attempt ${f.attempt ?? "?"}: ${String(f.reason ?? "")}`;
    }
    case "parked as dead":
      return `${style.red(tag("✗ dead"))} ${row(f.outbox_id, f.effect)} after attempt ${f.attempt ?? "?"}: ${String(f.reason ?? "")}`;
    case "dead-lettered row parked":
      return `${style.red(tag("✗ dead"))} #${f.outbox_id} (dead-letter queue): ${String(f.reason ?? "")}`;
    case "sweep": {
      const pruned = (f.pruned ?? {}) as Record<string, number>;
      const prunedTotal = Object.values(pruned).reduce((sum, n) => sum + (Number(n) || 0), 0);
      const reenqueued = Number(f.reenqueued ?? 0);
      const failed = Number(f.enqueueFailed ?? 0);
      if (!verbose && reenqueued === 0 && failed === 0 && prunedTotal === 0) return undefined;
      const parts = [`re-enqueued ${reenqueued} stale row(s)`];
      if (failed > 0) parts.push(style.red(`${failed} could not be enqueued`));
      if (prunedTotal > 0)
        parts.push(
          `pruned ${Object.entries(pruned)
            .filter(([, n]) => n > 0)
            .map(([k, n]) => `${n} ${k}`)
            .join(", ")}`,
        );
      return `${style.cyan(tag("⟳ sweep"))} ${parts.join("; ")}`;
    }
    case "enqueue failed; rows left for the sweep":
      return `${style.yellow(tag("! enqueue"))} failed for ${formatIds(f.ids)}; the sweep will send them: ${String(f.error ?? "")}`;
    case "fence rejected the write: the lease was lost to another claim":
      return `${style.yellow(tag("! fence"))} ${row(f.outbox_id, f.effect)}: lease lost to another claim; its ${String(f.outcome)} was not written`;
    default: {
      if (record.level === "debug" && !verbose) return undefined;
      const color = record.level === "error" ? style.red : record.level === "warn" ? style.yellow : (s: string) => s;
      const extras = Object.entries(f)
        .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
        .join(" ");
      return `${color(tag(`• ${record.level}`))} ${record.msg}${extras ? style.dim(` ${extras}`) : ""}`;
    }
  }
}

function formatIds(ids: unknown): string {
  return Array.isArray(ids) ? ids.map((id) => `#${id}`).join(", ") : String(ids);
}

/** "12:00:01" in local time: the prefix of every output line. */
export function clock(date: Date = new Date()): string {
  return date.toTimeString().slice(0, 8);
}
