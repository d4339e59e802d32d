/**
 * A long effect's claim (EffectDefinition.long), handed to it beside its context rather than in it: the app's
 * module graph (EffectDefinition, AttemptContext) stays free of D1, which only the engine's own long effects use.
 * The consumer's delivery (shared/delivery/deliver.ts) attaches the lease to the attempt's context; the effect
 * reads it back with leaseOf(ctx).
 */
/**
 * The claim a long effect holds while it works (an assistant's answer streams for minutes): the outbox's one
 * discipline, a token and an expiry, kept by the effect itself. `renew` is a fenced write — its row count the
 * verdict — that moves the lease's end to a lease after the clock read at the write; until it does, the attempt
 * ends (its signal aborts) a little before the lease it holds, so it never overlaps the next claimant's.
 */
export interface ClaimLease {
  /** The row's own D1 (its shard): what a long effect keeps of its progress lives beside it. */
  readonly db: D1Database;
  readonly rowId: number;
  readonly claimToken: string;
  /** When the lease ends, as last written (ms). */
  readonly expiresAt: () => number;
  /** How long a renewal holds it (LEASE_SECONDS). */
  readonly leaseMs: number;
  /**
   * Renews the lease: one batch of the fenced renewal and `also` (statements of the effect's progress, each
   * fenced itself: fence.ts, leaseHeldSql), in one transaction. Returns `also`'s results; undefined: the lease
   * was lost to another claim — stop, and touch nothing more.
   */
  renew(also?: readonly D1PreparedStatement[]): Promise<readonly D1Result<Record<string, unknown>>[] | undefined>;
}

const leases = new WeakMap<object, ClaimLease>();

/** `ctx` with `lease` attached (deliver.ts). */
export function withLease<C extends object>(ctx: C, lease: ClaimLease): C {
  leases.set(ctx, lease);
  return ctx;
}

/** The lease attached to an attempt's context: present for a long effect's attempt in the consumer, else undefined. */
export function leaseOf(ctx: object): ClaimLease | undefined {
  return leases.get(ctx);
}
