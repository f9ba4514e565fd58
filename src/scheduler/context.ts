// What every scheduler operation shares: the store (truth), the informer (reads), the
// liveness table, the clock, one mutex for state changes, and a wake-up for long-polls.
import { leaseView, workerView, type WorkerView } from "../admission/index.ts";
import { isActive, type Task, type TaskStatus, type Worker } from "../resources/types.ts";
import type { Informer } from "../store/cache.ts";
import { isStoreError } from "../store/errors.ts";
import type { Store, StoredObject, TxnOp } from "../store/store.ts";
import { HubError } from "./errors.ts";
import { Liveness } from "./liveness.ts";
import { Mutex } from "./mutex.ts";

export type SchedulerOptions = {
  /** A worker whose last call is older than this is not Ready. */
  heartbeatGraceSeconds: number;
  /** Attempts a task gets when its leases keep expiring and it has no retry_policy. */
  defaultMaxAttempts: number;
  /** Where result ZIPs are kept. */
  resultsDir: string;
};

/** What the scheduler reports about its own work (the Hub wires metrics in); a no-op by default. */
export type SchedulerObserver = {
  /** `error` is what the commit threw, when it failed. */
  commit(seconds: number, ops: number, error?: unknown): void;
  claim(seconds: number, granted: number): void;
};

export type LoomEvent = { object: StoredObject; type: "Normal" | "Warning"; reason: string; message: string };

export class SchedulerContext {
  readonly liveness: Liveness;
  readonly mutex = new Mutex();
  private readonly wakers = new Set<() => void>();
  /** Records an Event about an object; the Hub wires the event recorder in. */
  recordEvent: (e: LoomEvent) => void = () => {};
  observer: SchedulerObserver = { commit: () => {}, claim: () => {} };

  constructor(
    readonly store: Store,
    readonly cache: Informer,
    readonly opts: SchedulerOptions,
    readonly now: () => number = Date.now,
  ) {
    this.liveness = new Liveness(opts.heartbeatGraceSeconds * 1000);
    cache.addIndex("Task", "leaseWorker", (o) => {
      const t = o as Task;
      return isActive(t.status?.state) && t.status?.lease ? [t.status.lease.worker] : [];
    });
    cache.addIndex("Task", "state", (o) => [(o as Task).status?.state ?? "queued"]);
  }

  task(name: string): Task | undefined {
    return this.cache.get<Task & StoredObject>("Task", name);
  }
  worker(name: string): Worker | undefined {
    return this.cache.get<Worker & StoredObject>("Worker", name);
  }
  activeTasksOn(worker: string): Task[] {
    return this.cache.byIndex<Task & StoredObject>("Task", "leaseWorker", worker);
  }
  tasksInState(state: string): Task[] {
    return this.cache.byIndex<Task & StoredObject>("Task", "state", state);
  }

  /** The admission view of a worker now: its leases (reservations derived) and its liveness. */
  workerView(w: Worker): WorkerView {
    const leases = this.activeTasksOn(w.metadata.name).map(leaseView).filter((l) => l !== undefined);
    const name = w.metadata.name;
    return workerView(w, leases, {
      ready: this.liveness.ready(name, this.now()),
      reported_active: this.liveness.get(name)?.reportedActive ?? 0,
    });
  }

  /** Commit, then wait until the informer has seen it, so the next decision reads its own write. */
  async commit(ops: TxnOp[]): Promise<StoredObject[]> {
    const started = performance.now();
    let out: StoredObject[];
    try {
      out = await this.store.txn(ops);
      // The store's revision, not the objects': a deleted object reports its last version.
      await this.cache.waitForRevision(await this.store.revision());
    } catch (e) {
      this.observer.commit((performance.now() - started) / 1000, ops.length, e);
      throw e;
    }
    this.observer.commit((performance.now() - started) / 1000, ops.length);
    this.wake();
    return out;
  }

  /**
   * Read-modify-write of one task's status under the mutex. `fn` returns the new status,
   * or undefined to write nothing. A conflict (someone wrote in between) retries on fresh data.
   */
  async updateTask<R>(name: string, fn: (t: Task) => { status?: TaskStatus; result: R }): Promise<R> {
    return this.mutex.run(async () => {
      for (let i = 0; ; i++) {
        const t = this.task(name);
        if (!t) throw new HubError(404, "task_not_found", { task_id: name });
        const { status, result } = fn(t);
        if (!status) return result;
        try {
          await this.commit([{ op: "updateStatus", object: { ...(t as StoredObject), status } }]);
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

  wake(): void {
    for (const w of [...this.wakers]) w();
  }
}
