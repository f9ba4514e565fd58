// Reclaim controller: one key (all queues). Each pass asks planReclaim which borrowed leases
// stand between a preempting queue below its quota and its next task, and requeues them.
// It looks again soon while some queue preempts, since borrowed leases come and go.
import type { ControllerServices } from "../scheduler/controller-services.ts";
import { ALL, type Reconciler, type Result } from "./controller.ts";

/** What the reclaim controller uses: the queues' limits, the plan, and the lease it ends. */
export type ReclaimControllerDeps = Pick<
  ControllerServices,
  "cache" | "recordEvent" | "planReclaim" | "reclaimLease"
> & {
  readonly queues: Pick<ControllerServices["queues"], "active" | "book">;
};

export class ReclaimController implements Reconciler {
  readonly name = "reclaim";
  constructor(private readonly deps: ReclaimControllerDeps) {}

  keys(): string[] {
    return [ALL];
  }

  async reconcile(): Promise<Result> {
    const deps = this.deps;
    if (!deps.queues.active) return;
    let writes = 0;
    for (const plan of deps.planReclaim()) {
      for (const v of plan.victims) if (await deps.reclaimLease(plan, v)) writes++;
      const q = deps.cache.get("Queue", plan.queue);
      if (q && writes)
        deps.recordEvent({
          object: q,
          type: "Normal",
          reason: "Reclaimed",
          message: `ended ${plan.victims.map((v) => `${v.task} (${v.queue})`).join(", ")} on ${plan.worker} for ${plan.task}: ${plan.why}`,
        });
    }
    const preempting = [...deps.queues.book().limits.values()].some((l) => l.reclaim === "preempt");
    return { writes, ...(preempting ? { requeueAfterMs: 1000 } : {}) };
  }
}
