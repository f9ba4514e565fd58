// Long passes (every queued task, every worker) run in slices: after `budgetMs` of
// synchronous work they yield to I/O, so no request waits behind a pass for longer than that.
// Their writes go in transactions sized the same way (ChunkSize).
import { setImmediate as yieldToIo } from "node:timers/promises";

export class TimeSlice {
  private start = performance.now();
  constructor(private readonly budgetMs = 8) {}

  /** True once this slice has used its budget: the caller should `await pause()`. */
  due(): boolean {
    return performance.now() - this.start >= this.budgetMs;
  }

  async pause(): Promise<void> {
    await yieldToIo();
    this.restart();
  }

  /** Start a fresh budget (after the caller waited for work, which used none of it). */
  restart(): void {
    this.start = performance.now();
  }
}

/**
 * How many writes background work (a conditions pass, a burst of Events) puts in one
 * transaction. A transaction runs as one synchronous step, deciding, validating and encoding
 * each write (with SQLite, also writing its rows), so a request that arrives meanwhile waits
 * for all of it. The first is `min` writes; each next size comes from the last
 * transaction's time per write, to take about `budgetMs`, between `min` and `max`.
 */
export class ChunkSize {
  private size: number;

  constructor(
    private readonly budgetMs: number,
    private readonly min: number,
    private readonly max: number,
  ) {
    this.size = min;
  }

  /** The next transaction's size, at most `limit` (the store's maxWritesPerTxn). */
  next(limit: number): number {
    return Math.max(1, Math.min(this.size, limit));
  }

  /** Run the synchronous part of one transaction of `writes` writes (the call to apply()), and size the next from its time. */
  timed<R>(writes: number, step: () => R): R {
    const started = performance.now();
    try {
      return step();
    } finally {
      // One write alone says too little (a retry after a conflict, say) to size the next.
      if (writes > 1) {
        const perWrite = Math.max((performance.now() - started) / writes, 1e-3);
        this.size = Math.max(this.min, Math.min(this.max, Math.floor(this.budgetMs / perWrite)));
      }
    }
  }
}
