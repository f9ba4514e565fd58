// The claim reply in v1's shape. The numbers a claim sends are clamped by protocol/clamps.ts
// (claimParams is re-exported here, where its tests have always found it).
import type { Worker } from "../resources/types.ts";
import type { ClaimReply } from "../protocol/types.gen.ts";
import { claimedTask, type Leased } from "./claim.ts";
import type { SchedulerContext } from "./context.ts";
import { capacityEntry, effectiveSettings } from "./workers.ts";

export { claimParams } from "../protocol/clamps.ts";

/**
 * v1's claim reply, for the tasks one claim leased on `worker`. `active_count`, and each
 * task's `active_count_at_claim`, is the count before this claim, as v1 gives it; a worker
 * that was already full gets no resource fields, as v1 and the protocol leave them out.
 */
export function claimReply(
  ctx: SchedulerContext,
  worker: Worker,
  leased: Leased[],
  batch: { id: string; size: number } | undefined,
): ClaimReply {
  const s = effectiveSettings(worker);
  const e = capacityEntry(ctx, worker);
  // Before the claim: the leases it wrote were not there; what the Runner reported was.
  const reported = ctx.liveness.get(worker.metadata.name)?.reportedActive ?? 0;
  const before = Math.max(reported, e.active_task_ids.length - leased.length);
  const head = {
    tasks: leased.map((l) => claimedTask(l, s, batch, { active_count_at_claim: before })),
    desired_concurrency: s.desired_concurrency,
    max_concurrency: s.max_concurrency,
    initial_concurrency: s.initial_concurrency,
    concurrency_policy: s.concurrency_policy,
    active_count: before,
  };
  if (before >= e.effective_limit) return head;
  return { ...head, resource_capacity: e.capacity, reserved_resources: e.reserved, available_resources: e.available };
}
