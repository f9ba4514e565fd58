// A promise-chain mutex: lease decisions run one at a time, so two claims can never both
// see the same headroom. (Across Hub replicas the store's compare-and-swap does the same.)
//
// Holders that follow each other without a pause run in one chain of microtasks, and nothing
// else runs on the event loop meanwhile: not the completion of the WAL flush that makes the
// first holders' writes durable, so not their answers either. A burst of claims (every
// Runner claiming at once when a Hub starts) would be answered all together, after the last
// one was decided. So once holders have run back to back for `sliceMs`, the next one waits
// until the event loop has passed through its I/O phase once: what finished meanwhile (the
// flush, and the answers waiting on it) goes out first.
export class Mutex {
  private tail: Promise<unknown> = Promise.resolve();
  /** When the current run of back-to-back holders began; undefined once the loop moved on. */
  private busySince: number | undefined;

  constructor(private readonly sliceMs = 10) {}

  run<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.tail.then(() => this.turn()).then(fn, fn);
    this.tail = next.catch(() => undefined);
    return next;
  }

  /** Resolves when the next holder may start: at once, or after one pass of the event loop's I/O phase. */
  private turn(): Promise<void> | undefined {
    const now = performance.now();
    if (this.busySince === undefined) {
      this.busySince = now;
      // A check phase reached means the loop moved on: the next holder starts a new run.
      setImmediate(() => (this.busySince = undefined));
      return undefined;
    }
    if (now - this.busySince < this.sliceMs) return undefined;
    // Two check phases apart means one I/O phase between: completed I/O runs before the next holder.
    return new Promise((resolve) => setImmediate(() => setImmediate(resolve)));
  }
}
