// Reclaim controller: one key (all queues). Each pass asks planReclaim which borrowed leases
// stand between a preempting queue below its quota and its next task, and requeues them.
// It looks again soon while some queue preempts, since borrowed leases come and go.
import type { SchedulerContext } from "../scheduler/context.ts";
import type { ClaimQueue } from "../scheduler/queue.ts";
import { planReclaim, reclaimLease } from "../scheduler/reclaim.ts";
import { ALL, type Reconciler, type Result } from "./controller.ts";

export class ReclaimController implements Reconciler {
  readonly name = "reclaim";
  constructor(private readonly ctx: SchedulerContext, private readonly queue: ClaimQueue) {}

  keys(): string[] {
    return [ALL];
  }

  async reconcile(): Promise<Result> {
    const ctx = this.ctx;
    if (!ctx.queues.active) return;
    let writes = 0;
    for (const plan of planReclaim(ctx, this.queue)) {
      for (const v of plan.victims) if (await reclaimLease(ctx, plan, v)) writes++;
      const q = ctx.cache.get("Queue", plan.queue);
      if (q && writes) ctx.recordEvent({ object: q, type: "Normal", reason: "Reclaimed", message: `ended ${plan.victims.map((v) => `${v.task} (${v.queue})`).join(", ")} on ${plan.worker} for ${plan.task}: ${plan.why}` });
    }
    const preempting = [...ctx.queues.book().limits.values()].some((l) => l.reclaim === "preempt");
    return { writes, ...(preempting ? { requeueAfterMs: 1000 } : {}) };
  }
}
