// Pure task-status transitions. Each takes a status and returns a new one; the scheduler
// decides when to apply them and writes the result. The lease is the reservation: granting
// one writes both, and every way out of the active states removes both together.
import type { AdmissionObject } from "../admission/index.ts";
import { seenBy } from "../admission/snapshot.ts";
import {
  getCondition,
  initialStatus,
  isActive,
  isQueued,
  setCondition,
  type Condition,
  type TaskStatus,
  type TaskState,
  type Task,
} from "../resources/types.ts";
import type { Vector } from "../admission/index.ts";
import { iso } from "../resources/time.ts";

export type LeaseGrant = {
  worker: string;
  mode: "pull" | "push";
  pushId?: string;
  leaseSeconds: number;
  placement: "shared" | "exclusive";
  reservation: Vector;
  admission: AdmissionObject;
};

/**
 * A status to build the next one in: a new object sharing what it keeps with `status`
 * (which is the informer's, and never changed). Transitions replace fields and arrays, and
 * setCondition replaces a condition it changes, so the conditions array alone is copied:
 * the lease, what admission saw, the attempt history and every unchanged condition stay
 * shared, and validation does not look at them again.
 */
function editableStatus(status: TaskStatus, without?: "lease"): TaskStatus {
  // A field the new status drops is left out of the copy, not deleted from it: V8 holds an
  // object that lost a field as a hash table, larger and slower to read, encode and copy.
  let st: TaskStatus;
  if (without !== undefined) {
    const { [without]: _dropped, ...rest } = status;
    st = rest;
  } else st = { ...status };
  if (status.conditions) st.conditions = [...status.conditions];
  return st;
}

/** queued -> leased, recording the lease with its reservation and what admission saw. */
export function grantLease(task: Task, g: LeaseGrant, now: number): TaskStatus {
  const st = editableStatus(task.status ?? initialStatus());
  const attempt = st.attempt ?? 1;
  st.state = "leased";
  st.attempt = attempt;
  st.lease = {
    worker: g.worker,
    epoch: attempt,
    mode: g.mode,
    ...(g.pushId ? { push_id: g.pushId } : {}),
    leased_at: iso(now),
    lease_until: iso(now + g.leaseSeconds * 1000),
    placement: g.placement,
    reservation: {
      cpu_millis: g.reservation.cpu_millis,
      memory_mb: g.reservation.memory_mb,
      disk_mb: g.reservation.disk_mb,
      gpu_count: g.reservation.gpu_count,
      ...(g.reservation.gpu_types.length ? { gpu_types: g.reservation.gpu_types } : {}),
    },
    // What admission saw, not the whole object: the rest follows from it (admission/snapshot.ts).
    admission: seenBy(g.admission),
  };
  st.conditions ??= [];
  setCondition(
    st.conditions,
    {
      type: "Leased",
      status: "True",
      reason: "LeaseGranted",
      message: `leased to ${g.worker} (epoch ${attempt}) until ${st.lease.lease_until}`,
    },
    iso(now),
  );
  settleAdmission(st, iso(now));
  clearNomination(st, "Leased", `leased to ${g.worker}`, iso(now));
  return st;
}

/**
 * End the current lease (if any): it moves into the attempt history with its reservation
 * and what admission saw, and the task's state becomes `next`. Leaving the active states
 * is what releases the reservation; there is nothing else to free.
 */
export function endLease(
  status: TaskStatus,
  next: TaskState,
  now: number,
  outcome: string,
  reason: string,
  extra: { resultId?: string } = {},
): TaskStatus {
  const lease = status.lease;
  const st = editableStatus(status, "lease");
  if (lease) {
    st.attempts = [...(status.attempts ?? [])];
    st.attempts.push({
      attempt: lease.epoch,
      worker: lease.worker,
      mode: lease.mode,
      leased_at: lease.leased_at,
      ...(lease.started_at ? { started_at: lease.started_at } : {}),
      ended_at: iso(now),
      outcome,
      reason,
      ...(extra.resultId ? { result_id: extra.resultId } : {}),
      ...(lease.placement ? { placement: lease.placement } : {}),
      ...(lease.reservation ? { reservation: lease.reservation } : {}),
      ...(lease.admission ? { admission: lease.admission } : {}),
    });
    // Keep the history bounded: a task retried for ever must not grow without limit.
    if (st.attempts.length > 50) st.attempts.splice(0, st.attempts.length - 50);
    st.conditions ??= [];
    setCondition(
      st.conditions,
      {
        type: "Leased",
        status: "False",
        reason,
        message: `lease on ${lease.worker} (epoch ${lease.epoch}) ended: ${outcome}`,
      },
      iso(now),
    );
  }
  st.state = next;
  return settleAdmission(st, iso(now));
}

/** The conditions controller's answer for a queued task: its Admitted condition, and Unsatisfiable when no worker could ever admit it. */
export type AdmissionAnswer = {
  admitted: { status: "True" | "False"; reason: string; message: string };
  unsatisfiable?: { reason: string; message: string };
};

/**
 * The one writer of a task's Admitted and Unsatisfiable conditions. While the task is
 * queued they are the conditions controller's `answer` (for the task's `generation`), and
 * without one nothing changes. A lease answers the question they ask: Admitted turns True
 * on the lease's worker, and an Unsatisfiable condition turns False. A task out of the queue
 * for good (finished, returned, imported) asks nothing: it keeps Admitted=True as the record
 * of where it was admitted, and no other admission condition. Every write that moves a task
 * out of the queue passes through here (a grant, in the same write as the lease; the end of
 * a lease; a status written through the API), and the conditions controller repairs with it
 * whatever was stored otherwise, so no task holds Unsatisfiable=True beside a lease or a
 * final state. Mutates and returns `st`.
 */
export function writeAdmission(
  st: TaskStatus,
  nowIso: string,
  queued?: { answer: AdmissionAnswer; generation: number | undefined },
): TaskStatus {
  const state = st.state ?? "queued";
  if (isQueued(state)) {
    if (!queued) return st;
    const conds = (st.conditions ??= []);
    const { answer, generation } = queued;
    const observed = { observedGeneration: generation };
    setCondition(conds, { type: "Admitted", ...answer.admitted, ...observed }, nowIso);
    if (answer.unsatisfiable)
      setCondition(conds, { type: "Unsatisfiable", status: "True", ...answer.unsatisfiable, ...observed }, nowIso);
    else if (getCondition(conds, "Unsatisfiable"))
      setCondition(
        conds,
        {
          type: "Unsatisfiable",
          status: "False",
          reason: "Satisfiable",
          message: "some worker could admit this task",
          ...observed,
        },
        nowIso,
      );
    return st;
  }
  if (isActive(state) && st.lease) {
    const conds = (st.conditions ??= []);
    const { admitted, unsatisfiable } = leasedAdmission(st.lease.worker);
    setCondition(conds, admitted, nowIso);
    if (getCondition(conds, "Unsatisfiable")) setCondition(conds, unsatisfiable, nowIso);
    return st;
  }
  if (st.conditions)
    st.conditions = st.conditions.filter(
      (c) => c.type !== "Unsatisfiable" && !(c.type === "Admitted" && c.status !== "True"),
    );
  return st;
}

/** The admission conditions the task's state leaves standing (writeAdmission with no answer: a queued task's stay as they are). */
export function settleAdmission(st: TaskStatus, nowIso: string): TaskStatus {
  return writeAdmission(st, nowIso);
}

/** Whether the admission conditions contradict the task's state: whether settleAdmission would change them. */
export function admissionUnsettled(st: TaskStatus | undefined): boolean {
  if (!st || isQueued(st.state ?? "queued")) return false;
  // Out of the queue with no lease: what settleAdmission would filter out (no copy on the informer's hot path).
  if (!(isActive(st.state) && st.lease))
    return (
      st.conditions?.some((c) => c.type === "Unsatisfiable" || (c.type === "Admitted" && c.status !== "True")) ?? false
    );
  // Leased or running: whether writeAdmission's conditions would change a field (this runs on
  // every Task the informer stores, so it compares in place).
  const { admitted, unsatisfiable } = leasedAdmission(st.lease.worker);
  const differs = (c: Condition | undefined, want: Omit<Condition, "lastTransitionTime">) =>
    c === undefined || c.status !== want.status || c.reason !== want.reason || c.message !== want.message;
  const un = getCondition(st.conditions, "Unsatisfiable");
  return differs(getCondition(st.conditions, "Admitted"), admitted) || (un !== undefined && differs(un, unsatisfiable));
}

/** The admission conditions of a task that holds a lease on `worker`. */
function leasedAdmission(worker: string): Record<"admitted" | "unsatisfiable", Omit<Condition, "lastTransitionTime">> {
  const message = `admitted on ${worker}`;
  return {
    admitted: { type: "Admitted", status: "True", reason: "Admitted", message },
    unsatisfiable: { type: "Unsatisfiable", status: "False", reason: "Admitted", message },
  };
}

export const FAILED_STATES: readonly string[] = ["dirty", "run_error", "blocked", "cancelled", "lease_expired"];

/**
 * A task that leaves the queue (leased, finished, cancelled) holds no worker: its
 * nomination is removed and a Nominated condition, if it had one, turns False. Returns the
 * worker it held, if any.
 */
export function clearNomination(
  st: TaskStatus,
  reason: string,
  message: string,
  nowIso: string,
  generation?: number,
): string | undefined {
  const held = st.nominated_worker;
  delete st.nominated_worker;
  delete st.nomination_blockers;
  if (st.conditions?.some((c) => c.type === "Nominated"))
    setCondition(
      st.conditions,
      {
        type: "Nominated",
        status: "False",
        reason,
        message: held ? `no longer holds ${held}: ${message}` : message,
        ...(generation !== undefined ? { observedGeneration: generation } : {}),
      },
      nowIso,
    );
  return held;
}

/** Succeeded / Failed conditions for a task that reached a final state. */
export function markFinal(st: TaskStatus, now: number, reason: string, message: string): TaskStatus {
  st.conditions ??= [];
  const failed = FAILED_STATES.includes(st.state ?? "");
  setCondition(st.conditions, { type: failed ? "Failed" : "Succeeded", status: "True", reason, message }, iso(now));
  st.conditions = st.conditions.filter((c: Condition) => c.type !== (failed ? "Succeeded" : "Failed"));
  st.finished_at = iso(now);
  clearNomination(st, reason, `finished: ${st.state}`, iso(now));
  return st;
}

/** Back to the queue for another attempt; the epoch moves on, fencing the old holder out. */
export function requeue(
  status: TaskStatus,
  now: number,
  outcome: string,
  reason: string,
  opts: { excludeWorker?: string; keepAttempt?: boolean; clearExclusions?: boolean } = {},
): TaskStatus {
  const st = endLease(status, "retry_queued", now, outcome, reason);
  if (!opts.keepAttempt) st.attempt = (st.attempt ?? 1) + 1;
  if (opts.clearExclusions) delete st.excluded_workers;
  if (opts.excludeWorker)
    st.excluded_workers = [...new Set([...(st.excluded_workers ?? []), opts.excludeWorker])].sort();
  delete st.result;
  delete st.error;
  delete st.finished_at;
  st.conditions = (st.conditions ?? []).filter((c) => c.type !== "Succeeded" && c.type !== "Failed");
  return st;
}
