// A de-duplicating work queue of keys (client-go's workqueue, in small): a key waiting is
// not added twice, a key being processed is only marked dirty and comes back once it is
// done, so one key never runs twice at once and a burst of events becomes one pass.
export type Key = string;

export class WorkQueue {
  private readonly ready: Key[] = [];
  private readonly dirty = new Set<Key>();
  private readonly processing = new Set<Key>();
  /**
   * Delayed keys: each key's due time, and a min-heap of (due, key) under one timer for the
   * soonest. A key given a sooner due keeps its older heap entry, which is skipped when it
   * comes up (its due no longer matches), as is the entry of a cancelled key; once those
   * outnumber the live ones the heap is rebuilt. One timer however many keys wait: the
   * lease-expiry controller has one waiting for every active lease.
   */
  private readonly delayed = new Map<Key, number>();
  private readonly heap: Entry[] = [];
  private timer: NodeJS.Timeout | undefined;
  private timerDue = Number.POSITIVE_INFINITY;
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
    if (cur !== undefined && cur <= due) return;
    this.delayed.set(k, due);
    heapPush(this.heap, { due, key: k });
    this.compact();
    this.arm();
  }

  /**
   * Drop a delayed key: it does not come (a key already ready or in flight is not affected).
   * The lease-expiry controller's wake-up for a lease that has ended is owed nothing, and
   * would otherwise wait, holding memory, until the lease's old lease_until.
   */
  cancel(k: Key): void {
    if (!this.delayed.delete(k)) return;
    this.compact();
    if (this.delayed.size === 0 && this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.timerDue = Number.POSITIVE_INFINITY;
      this.heap.length = 0;
    }
  }

  /** Delayed keys waiting. */
  get waiting(): number {
    return this.delayed.size;
  }

  /** Rebuild the heap from the live keys once stale entries are more than half of it. */
  private compact(): void {
    if (this.heap.length < 64 || this.heap.length <= 2 * this.delayed.size) return;
    this.heap.length = 0;
    for (const [key, due] of this.delayed) heapPush(this.heap, { due, key });
  }

  /** The timer, set for the soonest due key. */
  private arm(): void {
    const next = this.heap[0]?.due;
    if (next === undefined || next >= this.timerDue) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerDue = next;
    // setTimeout takes at most 2^31 - 1 ms; a later due is reached by arming again.
    this.timer = setTimeout(() => this.fire(), Math.min(MAX_TIMER_MS, Math.max(0, next - Date.now())));
    this.timer.unref();
  }

  private fire(): void {
    this.timer = undefined;
    this.timerDue = Number.POSITIVE_INFINITY;
    const now = Date.now();
    while (this.heap.length > 0 && this.heap[0].due <= now) {
      const { due, key } = heapPop(this.heap);
      if (this.delayed.get(key) !== due) continue; // superseded by a sooner due, which came first
      this.delayed.delete(key);
      this.add(key);
    }
    this.arm();
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
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.delayed.clear();
    this.heap.length = 0;
    for (const w of this.waiters) w(undefined);
    this.waiters = [];
  }
}

const MAX_TIMER_MS = 2 ** 31 - 1;

type Entry = { due: number; key: Key };

function heapPush(h: Entry[], e: Entry): void {
  let i = h.push(e) - 1;
  while (i > 0) {
    const up = (i - 1) >> 1;
    if (h[up].due <= e.due) break;
    h[i] = h[up];
    i = up;
  }
  h[i] = e;
}

function heapPop(h: Entry[]): Entry {
  const top = h[0];
  const last = h.pop()!;
  if (h.length === 0) return top;
  let i = 0;
  for (;;) {
    const l = 2 * i + 1;
    if (l >= h.length) break;
    const c = l + 1 < h.length && h[l + 1].due < h[l].due ? l + 1 : l;
    if (h[c].due >= last.due) break;
    h[i] = h[c];
    i = c;
  }
  h[i] = last;
  return top;
}
