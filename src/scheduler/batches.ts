// Results seen per claim batch, for the adaptive concurrency policy (tuning.ts).
export type Batch = { size: number; healthy: number; unhealthy: number };

/**
 * Results seen per claim batch, so a batch steps concurrency up only once it is complete and
 * clean. Bounded: a batch whose results never all arrive (a lost Runner, a failure report
 * without a result) is dropped oldest first once `maxBatches` are open.
 */
export class BatchTally {
  private readonly open = new Map<string, Batch>();
  constructor(readonly maxBatches = 1024) {}

  get size(): number {
    return this.open.size;
  }

  /** Counts one result; the batch's totals when it is now complete (and forgotten), else undefined. */
  count(batchId: string, size: number, healthy: boolean): Batch | undefined {
    const b = this.open.get(batchId) ?? { size, healthy: 0, unhealthy: 0 };
    if (healthy) b.healthy++;
    else b.unhealthy++;
    this.open.delete(batchId);
    if (b.healthy + b.unhealthy >= b.size) return b;
    this.open.set(batchId, b);
    while (this.open.size > this.maxBatches) this.open.delete(this.open.keys().next().value!);
    return undefined;
  }
}
