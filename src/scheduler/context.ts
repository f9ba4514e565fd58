// What every scheduler operation shares: the store (truth), the informer (reads), the
// liveness table, the clock, one mutex for state changes, and a wake-up for long-polls.
import { leaseView, sameLeases, workerView, type LeaseView, type WorkerView } from "../admission/index.ts";
import { isActive, type Task, type TaskStatus, type Worker } from "../resources/types.ts";
import type { Informer } from "../store/cache.ts";
import { retryOnConflict, type RetryOptions } from "../store/retry.ts";
import type { Applied, Known, Store, StoredObject, TxnOp } from "../store/store.ts";
import { HubError } from "../protocol/errors.ts";
import { StoreError } from "../store/errors.ts";
import { RENEWAL_KIND, type TaskLease } from "./renewal.ts";
import { Liveness } from "./liveness.ts";
import { Mutex } from "./mutex.ts";
import { NOMINATED_INDEX, nominatedIndexFn, storedNominee } from "./nomination.ts";
import { QueueLedger } from "./queue-ledger.ts";
import { BatchTally } from "./batches.ts";

export type { SchedulerDeps, SchedulerObserver, SchedulerOptions } from "./options.ts";
import type { SchedulerDeps, SchedulerObserver, SchedulerOptions } from "./options.ts";

export type { LoomEvent } from "../resources/meta.ts";
import type { LoomEvent } from "../resources/meta.ts";

/** `owned`: the ops' objects are handed to the store and never changed afterwards (ApplyOptions.ownedInput). */
export type CommitOptions = { owned?: boolean };

/**
 * How a step run under the lock commits: like SchedulerContext.commit, except that the
 * write's durability is awaited once the lock is let go, so the lock is never held across
 * a flush, and the step's caller is answered only when every write it made is durable.
 */
export type LockedCommit = <T extends StoredObject = StoredObject>(ops: TxnOp<T>[], o?: CommitOptions) => Promise<T[]>;

/** One caller's ops waiting to be merged into a transaction (commitMerged()). */
type MergedWrite = { ops: TxnOp[]; resolve: () => void; reject: (e: unknown) => void };

export class SchedulerContext {
  readonly liveness: Liveness;
  private readonly mutex = new Mutex();
  private readonly wakers = new Set<() => void>();
  /** Open claim batches of adaptive workers (tuning.ts). */
  readonly batches = new BatchTally();
  /** Records an Event about an object. */
  readonly recordEvent: (e: LoomEvent) => void;
  readonly observer: SchedulerObserver;
  readonly now: () => number;
  /**
   * Leases decided and not yet in the informer, by task (kube-scheduler's assume): a claim
   * commits outside the lock, so the decisions made meanwhile must count what it holds.
   */
  private readonly assumed = new Map<string, { worker: string; lease: LeaseView }>();
  /** The same, by worker: what workerView() adds to each worker's leases. */
  private readonly assumedOn = new Map<string, Map<string, LeaseView>>();
  /** Where this replica's place among the live replicas comes from. */
  private readonly stripeOf: () => { index: number; count: number };
  /** The informer's copy of an object: what the store may decide on instead of reading it. */
  readonly known: Known = (kind, name) => (this.cache.caches(kind) ? (this.cache.get(kind, name) ?? null) : undefined);
  /** Queues' limits, usage and shares, from the informer. */
  readonly queues: QueueLedger;
  /** Status writes waiting for the end of this turn of the event loop (commitMerged()). */
  private merging: MergedWrite[] | undefined;
  /** The last view built of each Worker object, and the liveness it was built with (workerView()). */
  private readonly views = new WeakMap<Worker, { ready: boolean; reported: number; view: WorkerView }>();

  constructor(
    readonly store: Store,
    readonly cache: Informer,
    readonly opts: SchedulerOptions,
    deps: SchedulerDeps = {},
  ) {
    this.recordEvent = deps.recordEvent ?? (() => {});
    this.observer = deps.observer ?? { commit: () => {}, claim: () => {} };
    this.now = deps.now ?? Date.now;
    const sole = { index: 0, count: 1 };
    this.stripeOf = deps.stripe ?? (() => sole);
    // Liveness only for registered workers: a declared worker whose Runner has not registered (again) is not Ready.
    this.liveness = new Liveness(
      opts.heartbeatGraceSeconds * 1000,
      (w) => this.worker(w)?.status?.registration !== undefined,
    );
    cache.addIndex("Task", "leaseWorker", (t) =>
      isActive(t.status?.state) && t.status?.lease ? [t.status.lease.worker] : [],
    );
    cache.addIndex("Task", "state", (t) => [t.status?.state ?? "queued"]);
    // Queued tasks by the worker they nominated (status.nominated_worker): what a claim asks.
    cache.addIndex("Task", NOMINATED_INDEX, nominatedIndexFn);
    this.queues = new QueueLedger(cache, this.now, (opts.fairShareHalfLifeSeconds ?? 0) * 1000);
  }

  /** This replica's place among the live replicas: claims prefer their own stripe of the queue's head (claim.ts). */
  get stripe(): { index: number; count: number } {
    return this.stripeOf();
  }

  task(name: string): Task | undefined {
    return this.cache.get("Task", name);
  }
  /** A task's lease renewal record, if the informer follows them (renewal.ts). */
  renewal(name: string): TaskLease | undefined {
    return this.cache.caches(RENEWAL_KIND) ? this.cache.get<TaskLease>(RENEWAL_KIND, name) : undefined;
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
    const name = w.metadata.name;
    const leases = this.activeTasksOn(name)
      .map(leaseView)
      .filter((l) => l !== undefined);
    const held = this.assumedOn.get(name);
    if (held) for (const [task, l] of held) if (!leases.some((x) => x.task === task)) leases.push(l);
    const ready = this.liveness.ready(name, this.now());
    const reported = this.liveness.get(name)?.reportedActive ?? 0;
    // The view of the same Worker object with the same leases and liveness is the one built
    // before: a fleet-wide answer (task-admission, conditions) asks for every worker's view,
    // and most have not changed since the last one. Frozen, as every reader shares it.
    const known = this.views.get(w);
    let v: WorkerView;
    if (known && known.ready === ready && known.reported === reported && sameLeases(known.view.leases, leases))
      v = known.view;
    else {
      v = workerView(w, leases, { ready, reported_active: reported });
      Object.freeze(v.leases);
      this.views.set(w, { ready, reported, view: Object.freeze(v) });
    }
    const n = storedNominee(this, v, this.now());
    const queues = this.queues.viewFor(leases);
    return n || queues ? { ...v, ...(n ? { nominee: n } : {}), ...(queues ? { queues } : {}) } : v;
  }

  /** How many tasks decisions in flight hold (see assume()). */
  get assumedCount(): number {
    return this.assumed.size;
  }

  /** A decision in flight holds this task (see assume()). */
  isAssumed(task: string): boolean {
    return this.assumed.has(task);
  }

  /**
   * Count these leases in every decision until `release()`: called under the lock by a
   * decision whose commit runs after the lock is released, and released once the commit has
   * reached the informer (or failed).
   */
  assume(worker: string, leases: readonly LeaseView[]): { release(): void } {
    if (leases.length === 0) return { release: () => {} };
    let on = this.assumedOn.get(worker);
    if (!on) this.assumedOn.set(worker, (on = new Map()));
    for (const l of leases) {
      this.assumed.set(l.task, { worker, lease: l });
      on.set(l.task, l);
    }
    return {
      release: () => {
        for (const l of leases) {
          if (this.assumed.get(l.task)?.worker !== worker) continue;
          this.assumed.delete(l.task);
          on.delete(l.task);
        }
        if (on.size === 0 && this.assumedOn.get(worker) === on) this.assumedOn.delete(worker);
      },
    };
  }

  /** Run a decision alone (no other decision or locked() step in between); it must not touch the store. */
  decide<R>(fn: () => R): Promise<R> {
    return this.mutex.run(async () => fn());
  }

  /**
   * Lease decisions run one at a time, so two of them never see the same headroom. The lock
   * is held only while deciding and applying; the writes made under it become durable after
   * it is released, in one group flush with other callers' writes, and `locked` resolves
   * once they are (group commit: the answer is never sent before its write is on disk).
   */
  async locked<R>(fn: (commit: LockedCommit) => Promise<R>): Promise<R> {
    const writes: Promise<void>[] = [];
    const commit: LockedCommit = (ops, o) => this.apply(ops, o, writes);
    try {
      return await this.mutex.run(() => fn(commit));
    } finally {
      // Also on failure: what was applied before the error is answered only once durable.
      await Promise.all(writes);
    }
  }

  /**
   * Apply, then wait until the informer has seen it, so the next decision reads its own
   * write, and until it is durable. Under locked(), commit with the function it hands the
   * step instead: durability is then awaited when the lock is released.
   * `owned`: the ops' objects are handed to the store and never changed afterwards.
   */
  commit<T extends StoredObject = StoredObject>(ops: TxnOp<T>[], o: CommitOptions = {}): Promise<T[]> {
    return this.apply(ops, o, undefined);
  }

  /** commit(), with durability left to `unflushed` when given (locked() awaits it once the lock is let go). */
  private async apply<T extends StoredObject>(
    ops: TxnOp<T>[],
    o: CommitOptions = {},
    unflushed: Promise<void>[] | undefined,
  ): Promise<T[]> {
    const observe = this.observeCommit(ops.length);
    let applied: Applied;
    try {
      applied = await this.storeApply(ops, o.owned === true);
    } catch (e) {
      observe(e);
      throw e;
    }
    await this.settle(applied, observe, unflushed);
    // The results are the ops' objects as written, in op order, so each is of its op's type.
    return applied.results as T[];
  }

  /**
   * The store's apply, as every commit makes it: the results are read like informer objects
   * (never mutated), so the store need not copy them; `owned` ops were built for this commit
   * alone (ApplyOptions.ownedInput).
   */
  private storeApply(ops: TxnOp[], owned: boolean): Promise<Applied> {
    return this.store.apply(ops, { known: this.known, readOnlyResults: true, ownedInput: owned });
  }

  /** Reports a commit of `ops` ops to the observer, timed from now until it is called. */
  private observeCommit(ops: number): (error?: unknown) => void {
    const started = performance.now();
    return (e) => this.observer.commit((performance.now() - started) / 1000, ops, e);
  }

  /**
   * After the store applied a commit: wait until the informer has it, so the next decision
   * reads its own write, wake the long-polls, and wait until it is durable (or leave that to
   * `unflushed`). The commit is observed once durable: its latency runs until then,
   * whoever waits for that.
   */
  private async settle(
    applied: Applied,
    observe: (error?: unknown) => void,
    unflushed?: Promise<void>[],
  ): Promise<void> {
    try {
      await this.cache.waitForRevision(applied.revision);
    } catch (e) {
      observe(e);
      throw e;
    }
    this.wake();
    const durable = applied.durable.then(
      () => observe(),
      (e: unknown) => (observe(e), Promise.reject(e)),
    );
    if (unflushed) unflushed.push(durable);
    else await durable;
  }

  /**
   * commit() of owned ops, in one store transaction with the other writes merged this way
   * in the same turn of the event loop: the Runners' status writes that arrive together
   * (start, complete, fail) share one decision pass, one revision and one informer update,
   * which costs the Hub less than a transaction each. The writes are collected until the
   * turn's I/O callbacks have run (setImmediate), which is before the store's next flush
   * would have made any of them durable. When the merged transaction is refused (a write's
   * precondition or validation failed), nothing of it was applied, and each write is
   * committed alone, so that each caller learns its own outcome as if never merged.
   */
  private commitMerged(ops: TxnOp[]): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (!this.merging) {
        this.merging = [];
        setImmediate(() => this.flushMerged());
      }
      this.merging.push({ ops, resolve, reject });
    });
  }

  private flushMerged(): void {
    const all = this.merging ?? [];
    this.merging = undefined;
    // A status write that ends or moves a lease also writes its worker's lease set and its
    // queue's usage, each a key of its own on etcd: a transaction holds a third as many.
    const most = Math.max(1, Math.floor(this.store.maxWritesPerTxn / 3));
    let batch: MergedWrite[] = [];
    let size = 0;
    const send = () => {
      if (batch.length > 0) void this.applyMerged(batch);
      batch = [];
      size = 0;
    };
    for (const w of all) {
      if (size + w.ops.length > most) send();
      batch.push(w);
      size += w.ops.length;
    }
    send();
  }

  private async applyMerged(batch: MergedWrite[]): Promise<void> {
    const alone = (w: MergedWrite) => this.apply(w.ops, { owned: true }, undefined).then(() => w.resolve(), w.reject);
    if (batch.length === 1) return void (await alone(batch[0]));
    const ops = batch.flatMap((w) => w.ops);
    const observe = this.observeCommit(ops.length);
    let applied: Applied;
    try {
      applied = await this.storeApply(ops, true);
    } catch (e) {
      // A store that refuses a transaction applies none of it (StoreError): each write goes
      // alone. Anything else may have left it applied or not, so every write of it is told,
      // as a single write would be.
      if (e instanceof StoreError) return void (await Promise.all(batch.map(alone)));
      observe(e);
      for (const w of batch) w.reject(e);
      return;
    }
    try {
      await this.settle(applied, observe);
    } catch (e) {
      for (const w of batch) w.reject(e);
      return;
    }
    for (const w of batch) w.resolve();
  }

  /** Resolves once the informer reflects every write the store has applied. */
  async caughtUp(): Promise<void> {
    await this.cache.waitForRevision(await this.store.revision());
  }

  /**
   * A read-modify-write the Hub makes on its own behalf (an operator verb, a push): `step`
   * reads from the informer and commits, under the lock. A Conflict means the informer
   * trailed the store (another replica or a controller wrote), so the lock is let go, the
   * informer catches up, and `step` runs again after a short jittered wait.
   */
  readModifyWrite<R>(step: (commit: LockedCommit) => Promise<R>, o: Pick<RetryOptions, "retryable"> = {}): Promise<R> {
    return retryOnConflict(() => this.locked(step), { ...o, refresh: () => this.caughtUp() });
  }

  /**
   * Read-modify-write of one task's status (a Runner's state change, an expiry). `fn`
   * returns the new status, or undefined to write nothing: a status made for this write,
   * handed to the store as it is (it may share parts with `t`, which nobody changes, but
   * nothing its maker changes later); `also` adds ops to the same
   * transaction. It takes no lock: the store's precondition on the task's resourceVersion
   * keeps it exact, and a Conflict retries on caught-up data (retryOnConflict). A decision
   * made meanwhile sees the task as it was, which only ever holds more back.
   */
  async updateTask<R>(
    name: string,
    fn: (t: Task) => { status?: TaskStatus; result: R },
    also: () => TxnOp[] = () => [],
  ): Promise<R> {
    return retryOnConflict(
      async () => {
        const t = this.task(name);
        if (!t) throw new HubError(404, "task_not_found", { task_id: name });
        const { status, result } = fn(t);
        if (status) await this.commitMerged([{ op: "updateStatus", object: { ...t, status } }, ...also()]);
        return result;
      },
      { refresh: () => this.caughtUp() },
    );
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
