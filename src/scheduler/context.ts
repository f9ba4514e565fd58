// What every scheduler operation shares: the store (truth), the informer (reads), the
// liveness table, the clock, one mutex for state changes, and a wake-up for long-polls.
import { AsyncLocalStorage } from "node:async_hooks";
import { leaseView, workerView, type WorkerView } from "../admission/index.ts";
import { isActive, type Task, type TaskStatus, type Worker } from "../resources/types.ts";
import type { Informer } from "../store/cache.ts";
import { isStoreError } from "../store/errors.ts";
import type { Applied, Store, StoredObject, TxnOp } from "../store/store.ts";
import { HubError } from "./errors.ts";
import { Liveness } from "./liveness.ts";
import { Mutex } from "./mutex.ts";
import { NOMINATED_INDEX, nominatedIndexFn, storedNominee } from "./nomination.ts";
import { QueueLedger } from "./queue-ledger.ts";
import { BatchTally } from "./tuning.ts";

export type SchedulerOptions = {
  /** A worker whose last call is older than this is not Ready. */
  heartbeatGraceSeconds: number;
  /** Attempts a task gets when its leases keep expiring and it has no retry_policy. */
  defaultMaxAttempts: number;
  /** Where result ZIPs are kept. */
  resultsDir: string;
  /** A queued task that fits nowhere this long nominates a worker (default 60); a task's spec.nominate_after_seconds wins. */
  nominateAfterSeconds?: number;
  /** Fair share across queues from usage decayed over this half-life; 0 or unset: from current usage. */
  fairShareHalfLifeSeconds?: number;
};

/** What the scheduler reports about its own work (the Hub passes its metrics in). */
export type SchedulerObserver = {
  /** `error` is what the commit threw, when it failed. */
  commit(seconds: number, ops: number, error?: unknown): void;
  claim(seconds: number, granted: number): void;
};

/** What the scheduler is built with besides the store; each defaults to doing nothing (tests). */
export type SchedulerDeps = {
  recordEvent?: (e: LoomEvent) => void;
  observer?: SchedulerObserver;
  /** The clock (ms since epoch). */
  now?: () => number;
};

export type { LoomEvent } from "../resources/meta.ts";
import type { LoomEvent } from "../resources/meta.ts";

export class SchedulerContext {
  readonly liveness: Liveness;
  private readonly mutex = new Mutex();
  /** Inside locked(): the durability promises of the writes made there. */
  private readonly unflushed = new AsyncLocalStorage<Promise<void>[]>();
  private readonly wakers = new Set<() => void>();
  /** Open claim batches of adaptive workers (tuning.ts). */
  readonly batches = new BatchTally();
  /** Records an Event about an object. */
  readonly recordEvent: (e: LoomEvent) => void;
  readonly observer: SchedulerObserver;
  readonly now: () => number;
  /** Queues' limits, usage and shares, from the informer. */
  readonly queues: QueueLedger;

  constructor(
    readonly store: Store,
    readonly cache: Informer,
    readonly opts: SchedulerOptions,
    deps: SchedulerDeps = {},
  ) {
    this.recordEvent = deps.recordEvent ?? (() => {});
    this.observer = deps.observer ?? { commit: () => {}, claim: () => {} };
    this.now = deps.now ?? Date.now;
    // Liveness only for registered workers: a declared worker whose Runner has not registered (again) is not Ready.
    this.liveness = new Liveness(opts.heartbeatGraceSeconds * 1000, (w) => this.worker(w)?.status?.registration !== undefined);
    cache.addIndex("Task", "leaseWorker", (t) => (isActive(t.status?.state) && t.status?.lease ? [t.status.lease.worker] : []));
    cache.addIndex("Task", "state", (t) => [t.status?.state ?? "queued"]);
    // Queued tasks by the worker they nominated (status.nominated_worker): what a claim asks.
    cache.addIndex("Task", NOMINATED_INDEX, nominatedIndexFn);
    this.queues = new QueueLedger(cache, this.now, (opts.fairShareHalfLifeSeconds ?? 0) * 1000);
  }

  task(name: string): Task | undefined {
    return this.cache.get("Task", name);
  }
  worker(name: string): Worker | undefined {
    return this.cache.get("Worker", name);
  }
  activeTasksOn(worker: string): Task[] {
    return this.cache.byIndex("Task", "leaseWorker", worker);
  }
  tasksInState(state: string): Task[] {
    return this.cache.byIndex("Task", "state", state);
  }

  /**
   * The admission view of a worker now: its leases (reservations derived), its liveness and
   * the stored nomination holding it, if any (one index lookup).
   */
  workerView(w: Worker): WorkerView {
    const leases = this.activeTasksOn(w.metadata.name).map(leaseView).filter((l) => l !== undefined);
    const name = w.metadata.name;
    const v = workerView(w, leases, {
      ready: this.liveness.ready(name, this.now()),
      reported_active: this.liveness.get(name)?.reportedActive ?? 0,
    });
    const n = storedNominee(this, v, this.now());
    const queues = this.queues.viewFor(leases.map((l) => l.task));
    return n || queues ? { ...v, ...(n ? { nominee: n } : {}), ...(queues ? { queues } : {}) } : v;
  }

  /**
   * Lease decisions run one at a time, so two of them never see the same headroom. The lock
   * is held only while deciding and applying; the writes made under it become durable after
   * it is released, in one group flush with other callers' writes, and `locked` resolves
   * once they are (group commit: the answer is never sent before its write is on disk).
   */
  async locked<R>(fn: () => Promise<R>): Promise<R> {
    const writes: Promise<void>[] = [];
    try {
      return await this.mutex.run(() => this.unflushed.run(writes, fn));
    } finally {
      // Also on failure: what was applied before the error is answered only once durable.
      await Promise.all(writes);
    }
  }

  /**
   * Apply, then wait until the informer has seen it, so the next decision reads its own
   * write. Inside locked() durability is awaited when the lock is released; elsewhere here.
   */
  async commit<T extends StoredObject = StoredObject>(ops: TxnOp<T>[]): Promise<T[]> {
    const started = performance.now();
    const observed = (e?: unknown) => this.observer.commit((performance.now() - started) / 1000, ops.length, e);
    let applied: Applied;
    try {
      applied = await this.store.apply(ops);
      await this.cache.waitForRevision(applied.revision);
    } catch (e) {
      observed(e);
      throw e;
    }
    this.wake();
    // Commit latency runs until the write is durable, whoever waits for that.
    const durable = applied.durable.then(() => observed(), (e: unknown) => (observed(e), Promise.reject(e)));
    const writes = this.unflushed.getStore();
    if (writes) writes.push(durable);
    else await durable;
    // The results are the ops' objects as written, in op order, so each is of its op's type.
    return applied.results as T[];
  }

  /** Resolves once the informer reflects every write the store has applied. */
  async caughtUp(): Promise<void> {
    await this.cache.waitForRevision(await this.store.revision());
  }

  /**
   * Run a decide-and-write step on caught-up state; when its write meets a Conflict (the
   * state moved under it), catch up and decide again, a few times.
   */
  async retryOnConflict<R>(step: () => Promise<R>, attempts = 4): Promise<R> {
    for (let i = 1; ; i++) {
      await this.caughtUp();
      try {
        return await step();
      } catch (e) {
        if (!isStoreError(e, "Conflict") || i >= attempts) throw e;
      }
    }
  }

  /**
   * Read-modify-write of one task's status under the lock. `fn` returns the new status,
   * or undefined to write nothing. A conflict (someone wrote in between) retries on fresh data.
   */
  async updateTask<R>(name: string, fn: (t: Task) => { status?: TaskStatus; result: R }): Promise<R> {
    return this.locked(async () => {
      for (let i = 0; ; i++) {
        const t = this.task(name);
        if (!t) throw new HubError(404, "task_not_found", { task_id: name });
        const { status, result } = fn(t);
        if (!status) return result;
        try {
          await this.commit([{ op: "updateStatus", object: { ...t, status } }]);
          return result;
        } catch (e) {
          if (!isStoreError(e, "Conflict") || i >= 3) throw e;
          const fresh = await this.store.get("Task", name);
          if (fresh) await this.cache.waitForRevision(Number(fresh.metadata.resourceVersion));
        }
      }
    });
  }

  /** Resolves on the next change that could make work admissible, or after ms. */
  waitForChange(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakers.delete(done);
        signal?.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakers.add(done);
      signal?.addEventListener("abort", done, { once: true });
    });
  }

  /** How many callers are in waitForChange now (long-poll claims waiting for work). */
  get waiting(): number {
    return this.wakers.size;
  }

  wake(): void {
    for (const w of [...this.wakers]) w();
  }
}
