// The one admission decision: pull claims, push, task conditions, the task-admission API
// and the CLI all call admit(), so they cannot disagree about why a task does not fit.
import { RESOURCE_FIELDS, type ResourceField } from "../resources/types.ts";
import { CHECKS, isSetShortfall, type Check, type Failure } from "./checks.ts";
import { firstV1Reason, orderReasons, type ReasonCode, type V1Reason } from "./reasons.ts";
import { snapshotOf, zero } from "./vector.ts";
import { admissionObject, type AdmissionObject, type Shortfalls } from "./snapshot.ts";
import { concurrencyOf, exclusiveActive, reservedOf, type TaskView, type WorkerView } from "./view.ts";

export type { AdmissionObject, Shortfalls } from "./snapshot.ts";

export type Decision = {
  task: string;
  worker: string;
  ok: boolean;
  /** The v1 code; absent when ok. */
  reason?: V1Reason;
  /** Every fine code that applies, de-duplicated, in REASON_ORDER. */
  reasons: ReasonCode[];
  /** Every failing check, in CHECKS order. */
  failures: Failure[];
  /** Some failure cannot clear on this worker even when it is empty. */
  unresolvable: boolean;
  admission: AdmissionObject;
};

function shortfallsOf(failures: readonly Failure[]): Shortfalls {
  const out: Shortfalls = {};
  if (failures.length === 0) return out;
  for (const f of failures) {
    if (!f.shortfall) continue;
    if (f.field === "gpu_types" && isSetShortfall(f.shortfall)) out.gpu_types = f.shortfall;
    else if (RESOURCE_FIELDS.includes(f.field as ResourceField) && !isSetShortfall(f.shortfall))
      out[f.field as ResourceField] = f.shortfall;
  }
  return out;
}

/**
 * Runs every check (not the first failing one), so the answer lists everything in the way.
 * `checks` narrows the list only for the store's invariant guard (guard.ts).
 */
export function admit(task: TaskView, worker: WorkerView, checks: readonly Check[] = CHECKS): Decision {
  const failures: Failure[] = [];
  for (const c of checks) {
    const fs = c.run(task, worker);
    for (let i = 0; i < fs.length; i++) failures.push(fs[i]);
  }
  const ok = failures.length === 0;
  const reasons = ok ? [] : orderReasons(failures.map((f) => f.code));
  const reason = ok ? undefined : firstV1Reason(reasons);
  const admission = admissionObject(
    { ok, reason: reason ?? null, reasons, shortfalls: shortfallsOf(failures) },
    task.placement,
    snapshotOf(task.requests),
    {
      capacity: snapshotOf(worker.capacity),
      reserved_before: reservedOf(worker),
      active_task_ids: worker.leases.map((l) => l.task),
      exclusive_active: exclusiveActive(worker),
      concurrency: concurrencyOf(worker),
    },
  );
  const unresolvable = failures.some((f) => !f.resolvable);
  // Two literals rather than a spread of `reason`: the same fields, built without a copy.
  return reason
    ? { task: task.name, worker: worker.name, ok, reason, reasons, failures, unresolvable, admission }
    : { task: task.name, worker: worker.name, ok, reasons, failures, unresolvable, admission };
}

/**
 * admit(task, worker).ok without the explanation: the same checks, stopping at the first
 * failure. For scans that only need a yes or no (a claim looking for the next task that fits).
 */
export function admits(task: TaskView, worker: WorkerView, checks: readonly Check[] = CHECKS): boolean {
  for (const c of checks) if (c.run(task, worker).length > 0) return false;
  return true;
}

/**
 * False when the worker can take no task at all right now (cordoned, not ready, an exclusive
 * lease active, or its concurrency reached): a task asking for nothing is the easiest fit.
 */
export function acceptsAny(worker: WorkerView): boolean {
  // A nominated worker may still take short work beside its nominee (backfill): not decided here.
  return admits(
    { name: "", required_capability: "", placement: "shared", requests: zero(), excluded_workers: [] },
    worker,
    ACCEPT_CHECKS,
  );
}

const ACCEPT_CHECKS = CHECKS.filter((c) => c.name !== "nomination");

/** One decision per worker, in the order given. */
export const admitAll = (task: TaskView, workers: readonly WorkerView[]): Decision[] =>
  workers.map((w) => admit(task, w));
