/**
 * What the Workers said during a run, counted from their log lines (one JSON
 * object per line, shared/log.ts): the ack's `first_attempt` verdict per
 * request, and every other line by message. How a section shows where each
 * row went and why, from the Workers' own account rather than a guess.
 */

/**
 * The Workers' own account, tallied from their log lines: the ack's
 * `first_attempt` verdict per request (inline, or why not: the gate's reason,
 * a claim the write found not claimable), and every other line by message
 * ("delivered" from both Workers, "first attempt left rows to the queue", …).
 */
export interface Said {
  readonly firstAttempt: Readonly<Record<string, number>>;
  readonly lines: Readonly<Record<string, number>>;
}

/** A tally to count into. */
export function emptySaid(): { firstAttempt: Record<string, number>; lines: Record<string, number> } {
  return { firstAttempt: {}, lines: {} };
}

/** Counts one Worker log line (a JSON object per line, shared/log.ts) into `said`. */
export function tally(said: { firstAttempt: Record<string, number>; lines: Record<string, number> }, message: string): void {
  let line: { msg?: unknown; first_attempt?: unknown };
  try {
    line = JSON.parse(message);
  } catch {
    return;
  }
  if (line.msg === "slack request") {
    if (typeof line.first_attempt === "string") said.firstAttempt[line.first_attempt] = (said.firstAttempt[line.first_attempt] ?? 0) + 1;
    return;
  }
  if (typeof line.msg === "string") said.lines[line.msg] = (said.lines[line.msg] ?? 0) + 1;
}

export function snapshot(said: Said): Said {
  return { firstAttempt: { ...said.firstAttempt }, lines: { ...said.lines } };
}

export function since(before: Said, now: Said): Said {
  const minus = (a: Readonly<Record<string, number>>, b: Readonly<Record<string, number>>) =>
    Object.fromEntries(Object.entries(a).flatMap(([k, n]) => (n - (b[k] ?? 0) > 0 ? [[k, n - (b[k] ?? 0)]] : [])));
  return { firstAttempt: minus(now.firstAttempt, before.firstAttempt), lines: minus(now.lines, before.lines) };
}

export function add(a: Said | undefined, b: Said): Said {
  const plus = (x: Readonly<Record<string, number>>, y: Readonly<Record<string, number>>) => {
    const out: Record<string, number> = { ...x };
    for (const [k, n] of Object.entries(y)) out[k] = (out[k] ?? 0) + n;
    return out;
  };
  return { firstAttempt: plus(a?.firstAttempt ?? {}, b.firstAttempt), lines: plus(a?.lines ?? {}, b.lines) };
}

/**
 * The ack's first-attempt verdict from one line npm start printed (cli/local/pretty.ts, "← accepted … → first
 * attempt" or "→ queue (in flight)"): "inline", the gate's reason, or "queue" (the first attempt off or not
 * wanted); undefined for any other line. For a run whose raw lines are not at hand: the pipeline section reads
 * npm start's output as a user sees it.
 */
export function verdictOfPrinted(line: string): string | undefined {
  if (!line.includes("← accepted")) return undefined;
  const path = /→ (first attempt|queue(?: \(([a-z ]+)\))?)/.exec(line.slice(line.lastIndexOf("→ outbox")));
  if (!path) return undefined;
  if (path[1] === "first attempt") return "inline";
  return path[2] ? path[2].replace(" ", "_") : "queue";
}
