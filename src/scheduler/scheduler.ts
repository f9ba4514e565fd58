// The scheduler: keeps the claim queue in step with the informer and grants leases for
// pull claims and Direct Runner pushes through the same admission function and the same
// atomic lease write. The API sees it only through `SchedulerApi` (end of file): verbs that
// take typed requests (protocol/parse.ts) and reads that answer in the protocol's shapes.
import { isActive, isKind, isQueued, type Task, type Worker } from "../resources/types.ts";
import type { Informer } from "../store/cache.ts";
import type { Store } from "../store/store.ts";
import { isStoreError } from "../store/errors.ts";
import { commitLeases, newBatchId, pickForWorker, requireWorker, type Leased, type Pick as Picked } from "./claim.ts";
import { SchedulerContext, type SchedulerDeps, type SchedulerOptions } from "./context.ts";
import type {
  Changes,
  ClaimOrder,
  Failure,
  Heartbeat,
  LeaseCall,
  PushOrder,
  Registration,
  Renewal,
  StateOverride,
} from "../protocol/parse.ts";
import type { ClaimReply, DispatchRequest, TaskAdmission } from "../protocol/types.gen.ts";
import { ClaimQueue } from "./queue.ts";
import { claimReply } from "./claim-params.ts";
import { dispatch } from "./dispatch.ts";
import { applyWorkers } from "./hosts.ts";
import { nominations, positions, taskAdmission, workerCapacity } from "./inspect.ts";
import { overrideState } from "./override.ts";
import { pushTask, type PushOptions } from "./push.ts";
import { queuesReport } from "./queue-explain.ts";
import { simulate } from "./simulate.ts";
import * as transitions from "./transitions.ts";
import { capacityEntry, heartbeat, register, setBlocked, setDesiredConcurrency } from "./workers.ts";
import { controllerServices, type ControllerServices } from "./controller-services.ts";
import { rememberLiveness } from "./direct-liveness.ts";

export class Scheduler {
  readonly ctx: SchedulerContext;
  readonly queue = new ClaimQueue();
  /** What the controllers use of it (reconciler/ never sees the context). */
  readonly controllers: ControllerServices;
  private unsubscribe: () => void;

  constructor(store: Store, cache: Informer, opts: SchedulerOptions, deps?: SchedulerDeps) {
    this.ctx = new SchedulerContext(store, cache, opts, deps);
    this.queue.rank = (q, extra) => this.ctx.queues.rank(q, extra);
    this.controllers = controllerServices(this.ctx, this.queue);
    this.unsubscribe = cache.on((ev) => {
      if (isKind(ev.object, "Task")) {
        const cur = ev.object;
        if (ev.type === "DELETED") this.queue.remove(cur.metadata.name);
        else this.queue.upsert(cur);
        const old = isKind(ev.old, "Task") ? ev.old : undefined;
        const holder = old?.status?.lease?.worker;
        if (holder && isActive(old?.status?.state) && (ev.type === "DELETED" || !isActive(cur.status?.state)))
          this.ctx.liveness.finished(holder, cur.metadata.name);
        this.ctx.wake();
      } else if (ev.object.kind === "Worker") {
        // A deleted worker's liveness goes with it: if it is declared again, it is Ready only once its Runner calls in.
        if (ev.type === "DELETED") this.ctx.liveness.forget(ev.object.metadata.name);
        this.ctx.wake();
      }
    });
  }

  /** Rebuild the queue from the cache (after the informer's first sync). */
  resync(): void {
    for (const t of this.ctx.cache.list("Task")) this.queue.upsert(t);
    this.ctx.queues.rebuild();
  }

  /** Once the informer has synced: each worker's last call as stored carries over a restart, within the grace period. */
  synced(): void {
    rememberLiveness(this.ctx);
  }

  stop(): void {
    this.unsubscribe();
    this.ctx.queues.stop();
    this.ctx.wake();
  }

  /**
   * Decide under the lock, commit outside it (assume, then bind): the picks are counted by
   * every other decision until their write reaches the informer, so other claims decide
   * while this commit is in flight. A commit that loses a race (another replica's write, or
   * one the informer had not shown yet) decides again on caught-up state; a claim that loses
   * every race leases nothing and answers with no tasks, never with a Conflict.
   */
  private async grant(workerId: string, limit: number, leaseSeconds: number): Promise<Leased[]> {
    for (let attempt = 1; ; attempt++) {
      const { worker, picks, hold } = await this.ctx.decide(() => {
        const worker = requireWorker(this.ctx, workerId);
        // Admission's concurrency check stops the batch at the worker's limit; `limit` caps it
        // for the Runner, and one batch is one transaction, so it fits the store's (etcd's 128 ops).
        const { picks } = pickForWorker(
          this.queue,
          this.ctx,
          worker,
          Math.min(limit, this.ctx.store.maxWritesPerTxn - 4),
        );
        return {
          worker,
          picks,
          hold: this.ctx.assume(
            worker.metadata.name,
            picks.map((p) => p.lease),
          ),
        };
      });
      try {
        return await this.commitRebasing(worker, picks, leaseSeconds);
      } catch (e) {
        if (!isStoreError(e, "Conflict")) throw e;
        if (attempt >= CLAIM_ATTEMPTS) return [];
        await this.ctx.caughtUp();
      } finally {
        hold.release();
      }
    }
  }

  /**
   * Commit a claim's picks. When the commit loses a race only because a task was rewritten
   * meanwhile (the conditions pass on another replica, say) and is still queued, the same
   * picks are committed again on the fresh copies, still held by the assumption: no new walk,
   * no other claim taking them in between. Anything else (a task leased or gone, the lease
   * guard refusing) throws for the claim to decide again.
   */
  private async commitRebasing(worker: Worker, picks: Picked[], leaseSeconds: number): Promise<Leased[]> {
    try {
      return await commitLeases(this.ctx, worker, picks, { mode: "pull", leaseSeconds });
    } catch (e) {
      if (!isStoreError(e, "Conflict")) throw e;
      this.ctx.observer.claimRaceLost?.();
      await this.ctx.caughtUp();
      // Still queued, and only its status moved (same generation: the request it was admitted for).
      const fresh = picks.map((p) => ({ ...p, task: this.ctx.task(p.task.metadata.name) }));
      if (
        !fresh.every(
          (p, i) =>
            p.task &&
            isQueued(p.task.status?.state ?? "queued") &&
            p.task.metadata.generation === picks[i].task.metadata.generation,
        )
      )
        throw e;
      const again = fresh as Picked[];
      if (again.every((p, i) => p.task.metadata.resourceVersion === picks[i].task.metadata.resourceVersion)) throw e; // nothing moved: not a stale copy
      return commitLeases(this.ctx, this.ctx.worker(worker.metadata.name) ?? worker, again, {
        mode: "pull",
        leaseSeconds,
      });
    }
  }

  // ---- the Runner API ----
  register(r: Registration) {
    return register(this.ctx, r);
  }
  heartbeat(h: Heartbeat) {
    return heartbeat(this.ctx, h);
  }
  start(c: LeaseCall) {
    return transitions.start(this.ctx, c);
  }
  renew(c: Renewal) {
    return transitions.renew(this.ctx, c);
  }
  complete(c: LeaseCall) {
    return transitions.complete(this.ctx, c);
  }
  fail(c: Failure) {
    return transitions.fail(this.ctx, c);
  }
  /** The checks an upload passes before its body is read (transitions.ts). */
  uploadFence(h: { taskId?: string; workerId?: string }) {
    return transitions.uploadFence(this.ctx, h);
  }
  upload(h: { taskId?: string; workerId?: string }, file: transitions.UploadedFile) {
    return transitions.upload(this.ctx, h, file);
  }
  get resultsDir(): string {
    return this.ctx.opts.resultsDir;
  }

  // ---- the operator's verbs ----
  push(order: PushOrder, o: PushOptions) {
    return pushTask(this.ctx, order, o);
  }
  dispatch(req: DispatchRequest) {
    return dispatch(this.ctx, req);
  }
  cancel(taskId: string) {
    return transitions.cancel(this.ctx, taskId);
  }
  retry(taskId: string, preserveExcluded: boolean) {
    return transitions.retry(this.ctx, taskId, preserveExcluded);
  }
  expireLeases() {
    return transitions.expireLeases(this.ctx);
  }
  overrideState(o: StateOverride) {
    return overrideState(this.ctx, o);
  }
  setBlocked(workerId: string, blocked: boolean) {
    return setBlocked(this.ctx, workerId, blocked);
  }
  setDesiredConcurrency(workerId: string, desired: number, reason: string) {
    return setDesiredConcurrency(this.ctx, workerId, desired, reason);
  }
  /** Declared workers (register-worker-hosts), already converted from the inventory. */
  registerWorkers(workers: Worker[], operator?: string) {
    return applyWorkers(this.ctx, workers, operator);
  }

  // ---- reads, in the protocol's shapes ----
  task(name: string): Task | undefined {
    return this.ctx.task(name);
  }
  renewal(name: string) {
    return this.ctx.renewal(name);
  }
  /** What the worker's Runner last said, and when. */
  liveness(name: string) {
    return this.ctx.liveness.get(name);
  }
  capacity(w: Worker) {
    return capacityEntry(this.ctx, w);
  }
  workerCapacity() {
    return workerCapacity(this.ctx);
  }
  /** The task-admission answer as the HTTP reply writes it: each worker's entry already JSON. */
  taskAdmissionReply(taskId: string) {
    return taskAdmission(this.ctx, this.queue, taskId);
  }
  /** The same answer as plain values, for readers in this process. */
  taskAdmission(taskId: string): TaskAdmission {
    return JSON.parse(JSON.stringify(this.taskAdmissionReply(taskId))) as TaskAdmission;
  }
  queuesReport() {
    return queuesReport(this.ctx);
  }
  simulate(changes: Changes) {
    return simulate(this.ctx, this.queue, changes);
  }
  nominations() {
    return nominations(this.ctx);
  }
  queuePositions() {
    return positions(this.ctx, this.queue);
  }

  /** POST /api/tasks/claim: lease up to `limit` tasks, long-polling up to wait_seconds for work. */
  async claim(order: ClaimOrder, signal?: AbortSignal): Promise<ClaimReply> {
    // Out-of-range numbers were clamped as v1 does (protocol/clamps.ts); the route says which.
    const { worker_id: workerId, limit, waitMs, leaseSeconds } = order;
    const deadline = this.ctx.now() + waitMs;
    for (;;) {
      this.ctx.liveness.touch(workerId, this.ctx.now());
      const started = performance.now();
      const leased = await this.grant(workerId, limit, leaseSeconds);
      const worker = requireWorker(this.ctx, workerId);
      const batch = leased.length ? { id: newBatchId(), size: leased.length } : undefined;
      const reply = claimReply(this.ctx, worker, leased, batch);
      this.ctx.observer.claim((performance.now() - started) / 1000, reply.tasks.length);
      const remaining = deadline - this.ctx.now();
      if (reply.tasks.length || remaining <= 0 || signal?.aborted) return reply;
      // Long-poll: sleep until something that could admit work changes, not on a timer.
      await this.ctx.waitForChange(remaining, signal);
    }
  }
}

/** Decisions one claim makes before it answers with nothing, when every commit lost a race. */
const CLAIM_ATTEMPTS = 5;

/** The verbs and reads the API calls; the scheduler's context stays behind them. */
export type SchedulerApi = Pick<
  Scheduler,
  | "register"
  | "heartbeat"
  | "claim"
  | "start"
  | "renew"
  | "complete"
  | "fail"
  | "uploadFence"
  | "upload"
  | "resultsDir"
  | "push"
  | "dispatch"
  | "cancel"
  | "retry"
  | "expireLeases"
  | "overrideState"
  | "setBlocked"
  | "setDesiredConcurrency"
  | "registerWorkers"
  | "task"
  | "renewal"
  | "liveness"
  | "capacity"
  | "workerCapacity"
  | "taskAdmissionReply"
  | "queuesReport"
  | "simulate"
  | "nominations"
  | "queuePositions"
>;
