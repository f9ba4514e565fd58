// Lease renewals as small records. A renew moves one TaskLease object (the worker, the
// epoch and the new lease_until), not the whole Task: Kubernetes moved node heartbeats from
// Node status into Lease objects for the same reason. A task's lease ends at its renewal's
// lease_until when it has a renewal for the same worker and epoch (a renew sets the end to
// now + lease_seconds, as in v1, shorter or longer), and at status.lease.lease_until (set
// when it was granted) otherwise: derived each time, never copied back into the Task.
import type { Task } from "../resources/types.ts";
import { isActive } from "../resources/types.ts";
import type { StoredObject, TxnOp } from "../store/store.ts";

export const RENEWAL_KIND = "TaskLease";

/** One task's renewal: named as the task. */
export type TaskLease = StoredObject & {
  kind: typeof RENEWAL_KIND;
  spec: { worker: string; epoch: number; lease_until: string };
};

export function renewalObject(task: Task, leaseUntil: string, base?: TaskLease): TaskLease {
  const lease = task.status!.lease!;
  return {
    apiVersion: "loom.dev/v1alpha1",
    kind: RENEWAL_KIND,
    metadata: { name: task.metadata.name, ...(base ? { resourceVersion: base.metadata.resourceVersion } : {}) },
    spec: { worker: lease.worker, epoch: lease.epoch, lease_until: leaseUntil },
  };
}

/** The renewal, when it is for the task's current lease (same worker, same epoch). */
export function currentRenewal(task: Task, renewal: TaskLease | undefined): TaskLease | undefined {
  const lease = task.status?.lease;
  if (!renewal || !lease || !isActive(task.status?.state)) return undefined;
  return renewal.spec.worker === lease.worker && renewal.spec.epoch === lease.epoch ? renewal : undefined;
}

/** When the task's active lease ends (ms since the epoch), renewals counted; undefined without one. */
export function leaseDue(task: Task, renewal?: TaskLease): number | undefined {
  const lease = task.status?.lease;
  const granted = lease && isActive(task.status?.state) ? Date.parse(lease.lease_until) : NaN;
  if (Number.isNaN(granted)) return undefined; // a time that does not parse is never "past"
  const renewed = Date.parse(currentRenewal(task, renewal)?.spec.lease_until ?? "");
  return Number.isNaN(renewed) ? granted : renewed;
}

/** The lease_until to show: the renewal's, or the grant's. */
export function effectiveLeaseUntil(task: Task, renewal?: TaskLease): string | undefined {
  const due = leaseDue(task, renewal);
  return due === undefined ? task.status?.lease?.lease_until : new Date(due).toISOString();
}

/**
 * The op that pins a decision on the renewal as it was read: an expiry must fail if a
 * renewal landed meanwhile (it does not touch the Task, so the Task's precondition alone
 * would not see it).
 */
export function renewalCheck(name: string, renewal: TaskLease | undefined): TxnOp {
  return { op: "check", kind: RENEWAL_KIND, name, resourceVersion: renewal?.metadata.resourceVersion ?? "0" };
}
