// Admission checks in the spirit of kube-scheduler's Filter plugins: each is one named step
// that returns its failures as data (numbers stay numbers). Adding a check = adding one
// entry to CHECKS.
import { RESOURCE_FIELDS, type ResourceField } from "../resources/types.ts";
import { Reason, type ReasonCode } from "./reasons.ts";
import {
  addAmounts,
  demandOf,
  describeQueueShortfall,
  queueName,
  quotaShortfalls,
  type Amounts,
  type QueueShortfall,
} from "./queues.ts";
import {
  activeCount,
  asLease,
  effectiveLimit,
  exclusiveActive,
  reservedOf,
  type TaskView,
  type WorkerView,
} from "./view.ts";

/** One resource dimension that does not fit: reserved + requested > capacity, by `short`. */
export type Shortfall = { capacity: number; reserved: number; requested: number; short: number };
/** A set requirement that is not met: `requested` is not a subset of `available`. */
export type SetShortfall = { available: string[]; requested: string[] };

export type FailureField = ResourceField | "gpu_types" | "required_capability";

export type Failure = {
  code: ReasonCode;
  check: CheckName;
  field?: FailureField;
  shortfall?: Shortfall | SetShortfall;
  /** false: it will not fit on this worker even when the worker is empty (kube's UnschedulableAndUnresolvable). */
  resolvable: boolean;
  message?: string;
  /** queue_quota_exhausted / queue_borrowing_limit: the queue, the dimension and the numbers. */
  queue?: QueueShortfall;
};

export type CheckName =
  | "capability"
  | "excluded_worker"
  | "cordoned"
  | "ready"
  | "gpu_types"
  | "exclusive_holder"
  | "exclusive_needs_empty"
  | "concurrency"
  | "resource_fit"
  | "queue_quota"
  | "nomination";

export type Check = { name: CheckName; run(t: TaskView, w: WorkerView): readonly Failure[] };

/**
 * What a check returns when it passes: one shared, empty list. A decision runs every check
 * on every worker it looks at (2,000 of them in one task-admission answer), and most pass.
 */
export const NONE: readonly Failure[] = Object.freeze([]);

export const isSetShortfall = (s: Shortfall | SetShortfall | undefined): s is SetShortfall => !!s && "available" in s;

export const capability: Check = {
  name: "capability",
  run(t, w) {
    const need = t.required_capability;
    if (!need || w.capabilities.includes(need) || w.capabilities.includes("*")) return NONE;
    return [
      {
        code: Reason.capability_missing,
        check: "capability",
        field: "required_capability",
        shortfall: { available: [...w.capabilities], requested: [need] },
        resolvable: false,
      },
    ];
  },
};

/** A different_worker retry never lands where it failed. */
export const excludedWorker: Check = {
  name: "excluded_worker",
  run: (t, w) =>
    t.excluded_workers.includes(w.name)
      ? [{ code: Reason.worker_excluded, check: "excluded_worker", resolvable: false }]
      : NONE,
};

/** Cordoned is an operator decision that can be undone, so it is resolvable. */
export const cordoned: Check = {
  name: "cordoned",
  run: (_t, w) => (w.cordoned ? [{ code: Reason.worker_cordoned, check: "cordoned", resolvable: true }] : NONE),
};

export const ready: Check = {
  name: "ready",
  run: (_t, w) => (w.ready ? NONE : [{ code: Reason.worker_not_ready, check: "ready", resolvable: true }]),
};

/**
 * Requested accelerator types must all be on the worker; a type constraint only means
 * something when GPUs are requested. While the worker's GPUs are unknown it may still fit.
 */
export const gpuTypes: Check = {
  name: "gpu_types",
  run(t, w) {
    const wanted = t.requests.gpu_types;
    if (t.requests.gpu_count <= 0 || wanted.length === 0) return NONE;
    if (wanted.every((g) => w.capacity.gpu_types.includes(g))) return NONE;
    const known = !w.unknown.includes("gpu_count");
    return [
      {
        code: known ? Reason.exceeds_worker_capacity : Reason.resource_reservation_unavailable,
        check: "gpu_types",
        field: "gpu_types",
        shortfall: { available: [...w.capacity.gpu_types], requested: [...wanted] },
        resolvable: !known,
      },
    ];
  },
};

/** While an exclusive lease is active the worker takes nothing else. */
export const exclusiveHolder: Check = {
  name: "exclusive_holder",
  run: (_t, w) =>
    exclusiveActive(w)
      ? [{ code: Reason.worker_has_exclusive_task, check: "exclusive_holder", resolvable: true }]
      : NONE,
};

/** An exclusive task needs an empty worker; a run the Runner reports counts as much as a lease. */
export const exclusiveNeedsEmpty: Check = {
  name: "exclusive_needs_empty",
  run: (t, w) =>
    t.placement === "exclusive" && activeCount(w) > 0
      ? [{ code: Reason.exclusive_worker_busy, check: "exclusive_needs_empty", resolvable: true }]
      : NONE,
};

/** active < min(clamp(desired, 1, max), max), with active = max(reported, leased). */
export const concurrency: Check = {
  name: "concurrency",
  run: (_t, w) =>
    activeCount(w) < effectiveLimit(w)
      ? NONE
      : [{ code: Reason.worker_concurrency_reached, check: "concurrency", resolvable: true }],
};

/**
 * reserved + requested <= capacity in every dimension, each short dimension reported.
 * A request larger than the whole of a known capacity never fits (exceeds_worker_capacity);
 * against an unknown capacity it waits for the Runner to register.
 */
export const resourceFit: Check = {
  name: "resource_fit",
  run(t, w) {
    const reserved = reservedOf(w);
    let out: Failure[] | undefined;
    for (const f of RESOURCE_FIELDS) {
      const [capacity, res, requested] = [w.capacity[f], reserved[f], t.requests[f]];
      if (res + requested <= capacity) continue;
      const never = requested > capacity && !w.unknown.includes(f);
      (out ??= []).push({
        code: never ? Reason.exceeds_worker_capacity : Reason.resource_reservation_unavailable,
        check: "resource_fit",
        field: f,
        shortfall: { capacity, reserved: res, requested, short: res + requested - capacity },
        resolvable: !never,
      });
    }
    return out ?? NONE;
  },
};

/** What the queue uses as this view sees it: the book's count, plus the leases picked since. */
function queueUsedOn(w: WorkerView, queue: string): Amounts {
  const q = w.queues!;
  let used = q.book.usedBy(queue);
  for (const l of w.leases)
    if (!q.counted.has(l.task) && queueName(l) === queue) used = addAmounts(used, demandOf(l.reservation));
  return used;
}

/**
 * used + requested <= nominal + borrowable in every dimension the task's queue limits.
 * Past a positive borrowing limit of the queue's own it is queue_borrowing_limit; otherwise
 * (no borrowing allowed, or nothing left to borrow) queue_quota_exhausted. A request larger
 * than nominal + borrowing limit never fits in its queue. Only a queue with a Queue object
 * is limited.
 */
export const queueQuota: Check = {
  name: "queue_quota",
  run(t, w) {
    if (!w.queues) return NONE;
    const queue = queueName(t);
    if (!w.queues.book.limits.has(queue)) return NONE;
    return quotaShortfalls(w.queues.book, queue, queueUsedOn(w, queue), demandOf(t.requests)).map((s) => {
      // A queue allowed to borrow that would go past what it may borrow; otherwise its quota is simply used up.
      const pastLimit = s.borrowing_limit > 0 && s.used + s.requested > s.nominal + s.borrowing_limit;
      return {
        code: pastLimit ? Reason.queue_borrowing_limit : Reason.queue_quota_exhausted,
        check: "queue_quota" as const,
        resolvable: s.requested <= s.nominal + s.borrowing_limit,
        message: describeQueueShortfall(s),
        queue: s,
      };
    });
  },
};

/**
 * Backfill beside a nominee: a worker held for a starving task admits other work only if
 * the nominee still fits beside it once the nominee's blocking leases end, or if its
 * declared run time ends before the nominee could start. Anything else could delay it.
 */
export const nomination: Check = {
  name: "nomination",
  run(t, w) {
    const n = w.nominee;
    if (!n || n.task.name === t.name) return NONE;
    const leases = w.leases.filter((l) => !n.blockers.includes(l.task));
    const after: WorkerView = {
      ...w,
      nominee: undefined,
      reported_active: Math.max(0, w.reported_active - (w.leases.length - leases.length)),
      leases: [...leases, asLease(t)],
    };
    if (fitChecks().every((c) => c.run(n.task, after).length === 0)) return NONE;
    // An unknown start (a blocker declares no run time) admits nothing by time: a stream of
    // declared work would otherwise keep the nominee waiting for ever.
    if (t.declared_seconds !== undefined && n.starts_at < Infinity && n.now + t.declared_seconds * 1000 <= n.starts_at)
      return NONE;
    return [
      {
        code: Reason.worker_nominated,
        check: "nomination",
        resolvable: true,
        message: `held for ${n.task.name}, which waits on ${n.blockers.length ? n.blockers.join(", ") : "nothing"}; only work that cannot delay it is admitted`,
      },
    ];
  },
};

export const CHECKS: readonly Check[] = [
  capability,
  excludedWorker,
  cordoned,
  ready,
  gpuTypes,
  exclusiveHolder,
  exclusiveNeedsEmpty,
  concurrency,
  resourceFit,
  queueQuota,
  nomination,
];

/** Every check but nomination, derived from CHECKS: what a nominee itself must pass. */
let fit: readonly Check[] | undefined;
export const fitChecks = (): readonly Check[] => (fit ??= CHECKS.filter((c) => c !== nomination));
