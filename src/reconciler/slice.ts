// Long passes (every queued task, every worker) run in slices: after `budgetMs` of
// synchronous work they yield to I/O, so no request waits behind a pass for longer than that.
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
