// Runs one reconciler off a work queue: reconcile(key) reads current state and converges;
// an error retries with backoff; a result may ask to look again later. Nothing is carried
// between calls but the key.
import { WorkQueue, type Key } from "./queue.ts";

export type Result = { requeueAfterMs?: number } | void;

export interface Reconciler {
  readonly name: string;
  reconcile(key: Key, signal: AbortSignal): Promise<Result>;
}

export type Logger = (level: "info" | "warn" | "error", msg: string, extra?: object) => void;

export class Controller {
  readonly queue: WorkQueue;
  private readonly abort = new AbortController();
  private loops: Promise<void>[] = [];
  /** Keys reconciled so far; tests and metrics read it. */
  passes = 0;

  constructor(readonly reconciler: Reconciler, private readonly log: Logger, private readonly workers = 1) {
    this.queue = new WorkQueue();
  }

  start(): void {
    for (let i = 0; i < this.workers; i++) this.loops.push(this.loop());
  }

  private async loop(): Promise<void> {
    for (;;) {
      const key = await this.queue.get();
      if (key === undefined) return;
      try {
        const res = await this.reconciler.reconcile(key, this.abort.signal);
        this.queue.forget(key);
        if (res && res.requeueAfterMs !== undefined) this.queue.addAfter(key, res.requeueAfterMs);
      } catch (e) {
        if (!this.abort.signal.aborted) {
          this.log("warn", `${this.reconciler.name}: reconcile ${key} failed; retrying`, { err: (e as Error).message });
          this.queue.addRateLimited(key);
        }
      } finally {
        this.passes++;
        this.queue.done(key);
      }
    }
  }

  async stop(): Promise<void> {
    this.abort.abort();
    this.queue.shutDown();
    await Promise.all(this.loops);
  }
}
