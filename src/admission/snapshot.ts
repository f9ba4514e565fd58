// The admission object, built in one place from what admission saw on a worker. A decision
// builds it (decide.ts); a lease stores only what admission saw (`AdmissionSeen`), since
// every other field follows from that and the lease: a granted lease was ok, with no reason
// and no shortfall, it requested its reservation, and the headroom is capacity arithmetic.
// So those fields are derived when a lease or an attempt is shown, never copied into it, and
// every write of a leased Task, and every attempt in its history, is that much smaller.
import type { TaskStatusLeaseAdmission } from "../resources/types.gen.ts";
import type { ResourceField, ResourceSpec } from "../resources/types.ts";
import type { SetShortfall, Shortfall } from "./checks.ts";
import type { ReasonCode, V1Reason } from "./reasons.ts";
import type { Concurrency, Placement } from "./view.ts";
import { headroomAfter, normalise, sub, type Vector } from "./vector.ts";

export type Shortfalls = Partial<Record<ResourceField, Shortfall>> & { gpu_types?: SetShortfall };

/** RUNNER_PROTOCOL section 4's admission object, plus Loom's `reasons`. */
export type AdmissionObject = {
  ok: boolean;
  /** The v1 code (first failing in v1 order); null when ok, as v1 writes it. */
  reason: V1Reason | null;
  reasons: ReasonCode[];
  placement: Placement;
  requested: Vector;
  capacity: Vector;
  reserved_before: Vector;
  available_before: Vector;
  available_after: Vector;
  shortfalls: Shortfalls;
  active_task_ids: string[];
  exclusive_active: boolean;
  concurrency: Concurrency;
};

/** What admission saw on the worker: the facts of an admission object that follow from nothing else. */
export type AdmissionSeen = Pick<
  AdmissionObject,
  "capacity" | "reserved_before" | "active_task_ids" | "exclusive_active" | "concurrency"
>;

/** The verdict of a decision: ok or not, and why. */
export type Verdict = Pick<AdmissionObject, "ok" | "reason" | "reasons"> & { shortfalls: Shortfalls };

const granted = (): Verdict => ({ ok: true, reason: null, reasons: [], shortfalls: {} });

/** The admission object, in RUNNER_PROTOCOL's field order. `requested` and `seen` become the object's own. */
export function admissionObject(
  verdict: Verdict,
  placement: Placement,
  requested: Vector,
  seen: AdmissionSeen,
): AdmissionObject {
  return {
    ok: verdict.ok,
    reason: verdict.reason,
    reasons: verdict.reasons,
    placement,
    requested,
    capacity: seen.capacity,
    reserved_before: seen.reserved_before,
    available_before: sub(seen.capacity, seen.reserved_before),
    available_after: headroomAfter(seen.capacity, seen.reserved_before, requested),
    shortfalls: verdict.shortfalls,
    active_task_ids: seen.active_task_ids,
    exclusive_active: seen.exclusive_active,
    concurrency: seen.concurrency,
  };
}

/** What a lease stores of the decision that granted it. Shares the decision's values: neither is changed after. */
export function seenBy(a: AdmissionObject): AdmissionSeen {
  return {
    capacity: a.capacity,
    reserved_before: a.reserved_before,
    active_task_ids: a.active_task_ids,
    exclusive_active: a.exclusive_active,
    concurrency: a.concurrency,
  };
}

/** A lease, or a finished attempt, as stored: what it holds and what admission saw. */
export type Granted = {
  placement?: Placement;
  reservation?: ResourceSpec;
  admission?: TaskStatusLeaseAdmission;
};

/**
 * The admission object of the decision that granted a lease or an attempt, undefined when it
 * recorded none. A lease granted by an earlier Loom stored the whole object: it is returned
 * as it was stored.
 */
export function grantedAdmission(g: Granted): AdmissionObject | undefined {
  const a = g.admission;
  if (!a) return undefined;
  // The whole object carries what the record leaves out; `requested` is in every one of them.
  if ("requested" in a) return a as unknown as AdmissionObject;
  const c = a.concurrency ?? {};
  const count = (n: unknown) => (typeof n === "number" && Number.isFinite(n) ? n : 0);
  const concurrency: Concurrency = {
    reported_active: count(c.reported_active),
    leased_active: count(c.leased_active),
    active_count: count(c.active_count),
    desired_concurrency: count(c.desired_concurrency),
    max_concurrency: count(c.max_concurrency),
    effective_limit: count(c.effective_limit),
  };
  return admissionObject(granted(), g.placement === "exclusive" ? "exclusive" : "shared", normalise(g.reservation), {
    capacity: normalise(a.capacity),
    reserved_before: normalise(a.reserved_before),
    active_task_ids: Array.isArray(a.active_task_ids) ? a.active_task_ids : [],
    exclusive_active: a.exclusive_active === true,
    concurrency,
  });
}
