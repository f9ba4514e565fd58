// The admission invariant, checked where leases commit. Callers (claim, push, the status
// subresource, GitOps, the admin API) decide with admit(); the store re-checks every write
// that adds a lease to a worker against that worker's leases inside the same transaction,
// so no path, and no race between Hub replicas, can over-reserve a worker.
import type { Queue, Task, Worker } from "../resources/types.ts";
import { addAmounts, ceilingBreaches, demandOf, queueLimits, queueName, type Amounts } from "./queues.ts";
import { concurrency, exclusiveHolder, exclusiveNeedsEmpty, gpuTypes, resourceFit, type Check } from "./checks.ts";
import { admit } from "./decide.ts";
import { describeFailure } from "./explain.ts";
import { leaseView, workerView, type LeaseView, type TaskView } from "./view.ts";

/**
 * The checks no lease may break, whoever writes it: accelerator types, exclusive alone,
 * active < max_concurrency and reserved + requested <= capacity. Readiness, cordons,
 * capabilities and the adaptive desired concurrency are admission policy that a privileged
 * writer may override; these are the worker's hard limits.
 */
export const INVARIANT_CHECKS: readonly Check[] = [
  gpuTypes,
  exclusiveHolder,
  exclusiveNeedsEmpty,
  concurrency,
  resourceFit,
];

/** One active lease as the store indexes it: the worker it holds and what it holds there. */
export type Allocation = { worker: string; task: string; lease: LeaseView };

/** The allocation a stored task holds, if it is in an active state with a lease. */
export function allocationOf(task: Task): Allocation | undefined {
  const l = leaseView(task);
  const worker = task.status?.lease?.worker;
  return l && typeof worker === "string" ? { worker, task: l.task, lease: l } : undefined;
}

/** Same worker, same placement, same reservation, same queue: a renew or a start, not a new claim on the worker or the queue. */
export function sameAllocation(a: Allocation | undefined, b: Allocation | undefined): boolean {
  if (!a || !b) return a === b;
  return (
    a.worker === b.worker &&
    a.lease.placement === b.lease.placement &&
    a.lease.queue === b.lease.queue &&
    JSON.stringify(a.lease.reservation) === JSON.stringify(b.lease.reservation)
  );
}

export type GuardCause = { field: string; message: string };

/**
 * Why adding `added` to a worker that holds `held` would break the invariant; empty when it
 * may commit. `worker` undefined means the lease names a worker that does not exist.
 */
export function leaseViolations(
  worker: Worker | undefined,
  added: Allocation,
  held: readonly LeaseView[],
): GuardCause[] {
  if (!worker) return [{ field: "status.lease.worker", message: `worker "${added.worker}" does not exist` }];
  const task: TaskView = {
    name: added.task,
    required_capability: "",
    placement: added.lease.placement,
    requests: added.lease.reservation,
    excluded_workers: [],
  };
  // Only the Hub's own leases count here: a Runner's reported runs are admission's concern.
  const base = workerView(worker, held, { ready: true, reported_active: 0 });
  const view = { ...base, desired_concurrency: base.max_concurrency };
  const d = admit(task, view, INVARIANT_CHECKS);
  return d.failures.map((f) => ({
    field: f.field ? `status.lease.reservation.${f.field}` : "status.lease",
    message: `worker "${worker.metadata.name}": ${describeFailure(f, d)}`,
  }));
}

/** The queue an allocation counts against (`default` when its task names none). */
export const allocationQueue = (a: Allocation): string => queueName(a.lease);

/**
 * Why adding `added` would take its queue past nominal + borrowing limit, given what the
 * queue's other active leases hold (`usedWithout`); empty when it may commit. A queue with no
 * Queue object is not limited. Borrowing only what others leave unused is admission's
 * policy; this ceiling is the queue's hard limit, which no writer and no race may pass.
 */
export function queueViolations(queue: Queue | undefined, added: Allocation, usedWithout: Amounts): GuardCause[] {
  if (!queue) return [];
  return ceilingBreaches(queueLimits(queue), usedWithout, demandOf(added.lease.reservation)).map((s) => ({
    field: "spec.queue",
    message: `queue "${s.queue}": ${s.dimension} ${s.used} used + ${s.requested} requested > ${s.nominal} nominal + ${s.borrowing_limit} borrowing limit`,
  }));
}

/** What a set of leases holds against a queue: the sum of their demands. */
export const usageOf = (leases: Iterable<LeaseView>): Amounts => {
  let out: Amounts = {};
  for (const l of leases) out = addAmounts(out, demandOf(l.reservation));
  return out;
};
