// The scheduler: keeps the claim queue in step with the informer and grants leases for
// pull claims and Direct Runner pushes through the same admission function and the same
// atomic lease write.
import { isActive, isKind } from "../resources/types.ts";
import type { Informer } from "../store/cache.ts";
import type { Store } from "../store/store.ts";
import { claimedTask, commitLeases, newBatchId, pickForWorker, requireWorker } from "./claim.ts";
import { SchedulerContext, type SchedulerDeps, type SchedulerOptions } from "./context.ts";
import { checkRequest, HubError } from "./errors.ts";
import { ClaimQueue } from "./queue.ts";
import { leaseSecondsOf } from "./transitions.ts";
import { capacityEntry, effectiveSettings } from "./workers.ts";

export class Scheduler {
  readonly ctx: SchedulerContext;
  readonly queue = new ClaimQueue();
  private unsubscribe: () => void;

  constructor(store: Store, cache: Informer, opts: SchedulerOptions, deps?: SchedulerDeps) {
    this.ctx = new SchedulerContext(store, cache, opts, deps);
    this.queue.rank = (q, extra) => this.ctx.queues.rank(q, extra);
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

  stop(): void {
    this.unsubscribe();
    this.ctx.queues.stop();
    this.ctx.wake();
  }

  /** POST /api/tasks/claim: lease up to `limit` tasks, long-polling up to wait_seconds for work. */
  async claim(body: Record<string, unknown>, signal?: AbortSignal) {
    const workerId = body.worker_id;
    if (typeof workerId !== "string" || !workerId) throw new HubError(400, "worker_id_required");
    checkRequest("claim", body);
    const limit = intIn(body.limit, 1, 1024, 1, "limit");
    const leaseSeconds = leaseSecondsOf(body.lease_seconds);
    const waitMs = numIn(body.wait_seconds, 0, 60, 0, "wait_seconds") * 1000;
    const deadline = this.ctx.now() + waitMs;
    for (;;) {
      this.ctx.liveness.touch(workerId, this.ctx.now());
      const started = performance.now();
      const reply = await this.ctx.locked(async () => {
        // Decide on the latest state; a task that changed under the decision anyway (another
        // replica, a write that raced the informer) is a Conflict, and the claim decides again.
        const leased = await this.ctx.retryOnConflict(() => {
          const worker = requireWorker(this.ctx, workerId);
          // Admission's concurrency check stops the batch at the worker's limit; `limit` caps it for the Runner.
          const { picks } = pickForWorker(this.queue, this.ctx, worker, limit);
          return commitLeases(this.ctx, worker, picks, { mode: "pull", leaseSeconds });
        });
        const worker = requireWorker(this.ctx, workerId);
        const batch = leased.length ? { id: newBatchId(), size: leased.length } : undefined;
        const fresh = this.ctx.worker(workerId) ?? worker;
        const s = effectiveSettings(fresh);
        const e = capacityEntry(this.ctx, fresh);
        return {
          tasks: leased.map((l) => claimedTask(l, s, batch)),
          desired_concurrency: s.desired_concurrency,
          max_concurrency: s.max_concurrency,
          initial_concurrency: s.initial_concurrency,
          concurrency_policy: s.concurrency_policy,
          active_count: e.active_count,
          resource_capacity: e.capacity,
          reserved_resources: e.reserved,
          available_resources: e.available,
        };
      });
      this.ctx.observer.claim((performance.now() - started) / 1000, reply.tasks.length);
      const remaining = deadline - this.ctx.now();
      if (reply.tasks.length || remaining <= 0 || signal?.aborted) return reply;
      // Long-poll: sleep until something that could admit work changes, not on a timer.
      await this.ctx.waitForChange(remaining, signal);
    }
  }
}

export function intIn(v: unknown, min: number, max: number, dflt: number, field: string): number {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) throw new HubError(400, `invalid_${field}`, { field, detail: `must be an integer from ${min} to ${max}`, received: v });
  return v;
}
export function numIn(v: unknown, min: number, max: number, dflt: number, field: string): number {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== "number" || !Number.isFinite(v) || v < min || v > max) throw new HubError(400, `invalid_${field}`, { field, detail: `must be a number from ${min} to ${max}`, received: v });
  return v;
}
