// A de-duplicating work queue of keys (client-go's workqueue, in small): a key waiting is
// not added twice, a key being processed is only marked dirty and comes back once it is
// done, so one key never runs twice at once and a burst of events becomes one pass.
export type Key = string;

export class WorkQueue {
  private readonly ready: Key[] = [];
  private readonly dirty = new Set<Key>();
  private readonly processing = new Set<Key>();
  private readonly delayed = new Map<Key, { timer: NodeJS.Timeout; due: number }>();
  private readonly failures = new Map<Key, number>();
  private waiters: ((k: Key | undefined) => void)[] = [];
  private shut = false;

  constructor(
    private readonly baseBackoffMs = 100,
    private readonly maxBackoffMs = 30_000,
  ) {}

  get length(): number {
    return this.ready.length;
  }

  add(k: Key): void {
    if (this.shut || this.dirty.has(k)) return;
    this.dirty.add(k);
    if (this.processing.has(k)) return;
    const w = this.waiters.shift();
    if (w) {
      this.dirty.delete(k);
      this.processing.add(k);
      w(k);
    } else this.ready.push(k);
  }

  /** Add after a delay. Of two delays for one key the sooner wins, so a long "look again later" never swallows a prompt wake-up. */
  addAfter(k: Key, ms: number): void {
    if (this.shut) return;
    if (ms <= 0) return this.add(k);
    const due = Date.now() + ms;
    const cur = this.delayed.get(k);
    if (cur && cur.due <= due) return;
    if (cur) clearTimeout(cur.timer);
    const timer = setTimeout(() => {
      this.delayed.delete(k);
      this.add(k);
    }, ms);
    timer.unref();
    this.delayed.set(k, { timer, due });
  }

  /** Retry with per-key exponential backoff. */
  addRateLimited(k: Key): void {
    const n = (this.failures.get(k) ?? 0) + 1;
    this.failures.set(k, n);
    this.addAfter(k, Math.min(this.maxBackoffMs, this.baseBackoffMs * 2 ** (n - 1)));
  }

  /** Success: the next failure starts from the shortest backoff again. */
  forget(k: Key): void {
    this.failures.delete(k);
  }

  /** The next key to process, or undefined once the queue is shut down. */
  get(): Promise<Key | undefined> {
    if (this.shut) return Promise.resolve(undefined);
    const k = this.ready.shift();
    if (k !== undefined) {
      this.dirty.delete(k);
      this.processing.add(k);
      return Promise.resolve(k);
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  done(k: Key): void {
    this.processing.delete(k);
    if (this.dirty.has(k)) {
      this.dirty.delete(k);
      this.add(k);
    }
  }

  shutDown(): void {
    this.shut = true;
    for (const d of this.delayed.values()) clearTimeout(d.timer);
    this.delayed.clear();
    for (const w of this.waiters) w(undefined);
    this.waiters = [];
  }
}
