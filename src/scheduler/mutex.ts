// A promise-chain mutex: lease decisions run one at a time, so two claims can never both
// see the same headroom. (Across Hub replicas the store's compare-and-swap does the same.)
export class Mutex {
  private tail: Promise<unknown> = Promise.resolve();
  run<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.tail.then(fn, fn);
    this.tail = next.catch(() => undefined);
    return next;
  }
}
