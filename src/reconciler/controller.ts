// Every piece of background work in the Hub has this one shape: keys on a de-duplicating,
// rate-limited work queue; reconcile(key) reads current state and converges, so running it
// twice changes nothing; an error retries the key with backoff; a result may ask to look
// again later (a delayed requeue); a periodic resync puts every key back on the queue as a
// backstop for a missed event; and each reconcile is measured under the controller's name.
// Nothing is carried between calls but the key.
import { MAX_TIMER_MS } from "../resources/limits.ts";
import { isConflict, retryDelayMs } from "../store/retry.ts";
import { WorkQueue, type Key } from "./queue.ts";
import { TimeSlice } from "./slice.ts";

export type Result = {
  /** Look at this key again after this long (the sooner of two requests wins). */
  requeueAfterMs?: number;
  /** Objects this reconcile wrote, for the metrics. */
  writes?: number;
} | void;

export interface Reconciler {
  readonly name: string;
  reconcile(key: Key, signal: AbortSignal): Promise<Result>;
  /** Every key a resync looks at again. */
  keys(): Iterable<Key>;
}

export type Logger = (level: "info" | "warn" | "error", msg: string, extra?: object) => void;

/** Where each reconcile is reported (the Hub's metrics); `error` is what it threw, when it failed. */
export type ReconcileObserver = (controller: string, seconds: number, writes: number, error?: unknown) => void;

export type ControllerOptions = {
  log: Logger;
  observe?: ReconcileObserver;
  /** How often every key is queued again (0: never). */
  resyncMs?: number;
  /** Keys reconciled at once (never the same key twice at once). */
  workers?: number;
};

/** The key of a controller that has one piece of work (a pass over all of something). */
export const ALL = "all";

export class Controller {
  readonly queue = new WorkQueue();
  private readonly abort = new AbortController();
  private loops: Promise<void>[] = [];
  private resyncTimer: NodeJS.Timeout | undefined;
  /** Reconciles started, and finished, so far; tests read them. */
  started = 0;
  passes = 0;

  constructor(
    readonly reconciler: Reconciler,
    private readonly opts: ControllerOptions,
  ) {}

  get name(): string {
    return this.reconciler.name;
  }

  start(): void {
    for (let i = 0; i < (this.opts.workers ?? 1); i++) this.loops.push(this.loop());
    this.resync();
    const every = this.opts.resyncMs ?? 0;
    if (every > 0) {
      this.resyncTimer = setInterval(() => this.resync(), Math.min(every, MAX_TIMER_MS));
      this.resyncTimer.unref();
    }
  }

  /** Queue a key now, or after `delayMs`. */
  enqueue(key: Key, delayMs = 0): void {
    this.queue.addAfter(key, Math.min(delayMs, MAX_TIMER_MS));
  }

  /** Drop a key's pending delayed wake-up (WorkQueue.cancel). */
  cancel(key: Key): void {
    this.queue.cancel(key);
  }

  /** Keys waiting on a delay. */
  get waiting(): number {
    return this.queue.waiting;
  }

  /** Queue every key again: the backstop for anything an event did not say. */
  resync(): void {
    for (const k of this.reconciler.keys()) this.queue.add(k);
  }

  private async loop(): Promise<void> {
    // Keys whose reconcile does no I/O follow one another in one turn (a resync of 2,000
    // workers with nothing to write): yield to I/O once a slice of them has run.
    const slice = new TimeSlice();
    for (;;) {
      if (slice.due()) await slice.pause();
      const waits = this.queue.length === 0;
      const key = await this.queue.get();
      if (waits) slice.restart();
      if (key === undefined) return;
      this.started++;
      const started = performance.now();
      const seconds = () => (performance.now() - started) / 1000;
      try {
        const res = await this.reconciler.reconcile(key, this.abort.signal);
        this.queue.forget(key);
        this.opts.observe?.(this.name, seconds(), res?.writes ?? 0);
        if (res && res.requeueAfterMs !== undefined) this.enqueue(key, res.requeueAfterMs);
      } catch (e) {
        if (isConflict(e) && !this.abort.signal.aborted) {
          // Someone wrote the object since this pass read it: not a failure, look again soon on fresh data.
          this.opts.observe?.(this.name, seconds(), 0);
          this.enqueue(key, retryDelayMs(1));
        } else if (!this.abort.signal.aborted) {
          this.opts.observe?.(this.name, seconds(), 0, e);
          this.opts.log("warn", `${this.name}: reconcile ${key} failed; retrying`, { err: (e as Error).message });
          this.queue.addRateLimited(key);
        }
      } finally {
        this.passes++;
        this.queue.done(key);
      }
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.resyncTimer);
    this.abort.abort();
    this.queue.shutDown();
    await Promise.all(this.loops);
  }
}
