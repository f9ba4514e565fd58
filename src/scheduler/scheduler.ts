// The scheduler: keeps the claim queue in step with the informer and grants leases for
// pull claims and Direct Runner pushes through the same admission function and the same
// atomic lease write.
import { isActive, isKind, isQueued, type Worker } from "../resources/types.ts";
import type { Informer } from "../store/cache.ts";
import type { Store } from "../store/store.ts";
import { isStoreError } from "../store/errors.ts";
import { commitLeases, newBatchId, pickForWorker, requireWorker, type Leased, type Pick } from "./claim.ts";
import { SchedulerContext, type SchedulerDeps, type SchedulerOptions } from "./context.ts";
import { checkRequest, HubError } from "./errors.ts";
import { ClaimQueue } from "./queue.ts";
import { claimParams, claimReply } from "./claim-params.ts";
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
        if (holder && isActive(old?.status?.state) && (ev.type === "DELETED" || !isActive(cur.status?.state))) this.ctx.liveness.finished(holder, cur.metadata.name);
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
        const { picks } = pickForWorker(this.queue, this.ctx, worker, Math.min(limit, this.ctx.store.maxWritesPerTxn - 4));
        return { worker, picks, hold: this.ctx.assume(worker.metadata.name, picks.map((p) => p.lease)) };
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
  private async commitRebasing(worker: Worker, picks: Pick[], leaseSeconds: number): Promise<Leased[]> {
    try {
      return await commitLeases(this.ctx, worker, picks, { mode: "pull", leaseSeconds });
    } catch (e) {
      if (!isStoreError(e, "Conflict")) throw e;
      this.ctx.observer.claimRaceLost?.();
      await this.ctx.caughtUp();
      // Still queued, and only its status moved (same generation: the request it was admitted for).
      const fresh = picks.map((p) => ({ ...p, task: this.ctx.task(p.task.metadata.name) }));
      if (!fresh.every((p, i) => p.task && isQueued(p.task.status?.state ?? "queued") && p.task.metadata.generation === picks[i].task.metadata.generation)) throw e;
      const again = fresh as Pick[];
      if (again.every((p, i) => p.task.metadata.resourceVersion === picks[i].task.metadata.resourceVersion)) throw e; // nothing moved: not a stale copy
      return commitLeases(this.ctx, this.ctx.worker(worker.metadata.name) ?? worker, again, { mode: "pull", leaseSeconds });
    }
  }

  /** POST /api/tasks/claim: lease up to `limit` tasks, long-polling up to wait_seconds for work. */
  async claim(body: Record<string, unknown>, signal?: AbortSignal) {
    const workerId = body.worker_id;
    if (typeof workerId !== "string" || !workerId) throw new HubError(400, "worker_id_required");
    checkRequest("claim", body);
    // Out-of-range numbers are clamped as v1 does (claim-params.ts); the route says which.
    const { limit, waitMs, leaseSeconds } = claimParams(body);
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
