/**
 * How long after its ack an inline row's backup message reaches the consumer
 * under a set of settings: the pipeline section waits that long (uncounted)
 * so the consumer's visits to rows the first attempt already finished land
 * in the events load that caused them, not in the next healthz load. The
 * product's own settings parser and inline bounds decide it. Type-checked
 * with the Workers' types (tsconfig.json), like the modules it reads.
 */
import { inlineBounds } from "../../shared/delivery/first-attempt.ts";
import { parseSettings } from "../../shared/settings.ts";

/** 0 when no backup message is sent (FIRST_ATTEMPT=off). */
export function backupDelayMs(vars: Readonly<Record<string, string>>): number {
  const parsed = parseSettings(vars);
  if (!parsed.ok) throw new Error(`bench settings: ${parsed.errors.join("; ")}`);
  if (!parsed.settings.firstAttempt) return 0;
  // deliverFirstAttempt sends the backup with delaySeconds = ceil(inline lease / 1 s).
  return Math.ceil(inlineBounds(parsed.settings).leaseMs / 1000) * 1000;
}
