/**
 * The invocation's delivery lanes, shared by every deliverBatch it runs at once.
 *
 * A Worker invocation may have 6 connections waiting for response headers at a time (DELIVERY_CONCURRENCY): more calls only wait for
 * one with their timeout already running — a call that starts after its timeout fired is an effect retried, a
 * duplicate. And the query budget's margin past its stop (query-budget.ts) assumes that many rows in flight.
 * Both are the invocation's, so a consumer delivering several shards' groups in parallel shares one pool:
 * each group's lanes take a slot before they take a row and give it back when the row is finished.
 */
export class LanePool {
  private free: number;
  private readonly waiting: (() => void)[] = [];

  constructor(size: number) {
    this.free = size;
  }

  async acquire(): Promise<void> {
    if (this.free > 0) {
      this.free -= 1;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free += 1;
  }

  get available(): number {
    return this.free;
  }
}
