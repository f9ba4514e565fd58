// The inputs of one admission decision, built from the stored resources. Nothing here is
// stored back: a worker's reservation is recomputed from its active leases every time, so
// there is no second copy that could drift from the leases.
import { isActive, type ResourceField, type Task, type Worker } from "../resources/types.ts";
import { getCondition } from "../resources/meta.ts";
import { effectiveCapacity } from "./capacity.ts";
import type { QueueBook } from "./queues.ts";
import { freeze, normalise, sumOf, type Vector } from "./vector.ts";

export type Placement = "shared" | "exclusive";

export type TaskView = {
  name: string;
  /** Empty matches any worker. */
  required_capability: string;
  placement: Placement;
  /** What the task reserves while leased; requests.gpu_types are the acceptable accelerator types. */
  requests: Vector;
  /** Workers a different_worker retry must avoid. */
  excluded_workers: string[];
  /** The run time the task declares, if any: backfill beside a nominee may rely on it. */
  declared_seconds?: number;
  /** The Queue it names (spec.queue); absent means `default`. */
  queue?: string;
};

/**
 * A starving task this worker is held for (nomination). `blockers` are the leases it waits
 * on; `starts_at` (ms) is when they should all have ended, Infinity when one declares no
 * run time; `now` is when the view was built.
 */
export type Nominee = { task: TaskView; blockers: string[]; starts_at: number; now: number };

export type LeaseView = { task: string; placement: Placement; reservation: Vector; queue?: string };

/** The lease a task would hold once admitted: what a batch adds to a view between picks. */
export const asLease = (t: TaskView): LeaseView => ({
  task: t.name,
  placement: t.placement,
  reservation: t.requests,
  ...(t.queue ? { queue: t.queue } : {}),
});

/**
 * The queues' limits and usage, for the quota check. `counted`: the leases of this view
 * that the book's usage already includes; the others were picked since (a batch).
 */
export type QueuesView = { book: QueueBook; counted: ReadonlySet<string> };

export type WorkerView = {
  name: string;
  capabilities: string[];
  /** Effective capacity; capacity.gpu_types are the worker's accelerator types. */
  capacity: Vector;
  /** Capacity fields nobody has declared yet (see capacity.ts). */
  unknown: ResourceField[];
  cordoned: boolean;
  ready: boolean;
  desired_concurrency: number;
  max_concurrency: number;
  /** Length of current_runs in the last heartbeat; may lag the Hub's own leases. */
  reported_active: number;
  /** Active (leased or running) leases on this worker. */
  leases: LeaseView[];
  nominee?: Nominee;
  /** Present only when some Queue exists: with none, no quota applies. */
  queues?: QueuesView;
};

const placementOf = (profile: Task["spec"]["execution_profile"]): Placement =>
  profile?.placement === "exclusive" ? "exclusive" : "shared";

/** An omitted profile is shared with zero requests, as in v1. */
export function taskView(task: Task): TaskView {
  const profile = task.spec.execution_profile;
  const declared = declaredSeconds(task);
  return {
    name: task.metadata.name,
    required_capability: (task.spec.required_capability ?? "").trim(),
    placement: placementOf(profile),
    requests: freeze(normalise(profile?.resources)),
    excluded_workers: [...(task.status?.excluded_workers ?? [])],
    ...(declared !== undefined ? { declared_seconds: declared } : {}),
    ...(task.spec.queue ? { queue: task.spec.queue } : {}),
  };
}

/** The run time a task declares, in seconds: payload.timeout_seconds, else the sum of its phases'. */
export function declaredSeconds(task: Task | undefined): number | undefined {
  const p = (task?.spec.payload ?? {}) as { timeout_seconds?: unknown; phases?: { timeout_seconds?: unknown }[] };
  if (typeof p.timeout_seconds === "number" && p.timeout_seconds > 0) return p.timeout_seconds;
  const phases = Array.isArray(p.phases) ? p.phases : [];
  const ts = phases.map((x) => x?.timeout_seconds);
  return ts.length && ts.every((t) => typeof t === "number" && t > 0)
    ? (ts as number[]).reduce((a, b) => a + b, 0)
    : undefined;
}

/** Decided once per Task object, as effectiveCapacity() is per Worker: a write makes a new object. */
const leaseViews = new WeakMap<Task, LeaseView>();

/**
 * The lease a task holds, if it is active. The lease's own reservation is the record; a
 * lease written without one reserves what the task's profile asks for. The same (frozen)
 * object for as long as the Task object is current, so a worker's view can be compared
 * lease by lease with an earlier one (admission-entry.ts).
 */
export function leaseView(task: Task): LeaseView | undefined {
  const lease = task.status?.lease;
  if (!lease || !isActive(task.status?.state)) return undefined;
  let l = leaseViews.get(task);
  if (l) return l;
  // The fields taskView() would give, read directly: this runs on every Task event.
  const profile = task.spec.execution_profile;
  const queue = task.spec.queue;
  l = Object.freeze({
    task: task.metadata.name,
    placement: lease.placement ?? placementOf(profile),
    reservation: freeze(normalise(lease.reservation ?? profile?.resources)),
    ...(queue ? { queue } : {}),
  });
  leaseViews.set(task, l);
  return l;
}

/**
 * Give `after` the lease view of `before` when it holds the very same lease: both active,
 * with the same worker, placement and reservation, on the same spec (a start, a renewal, a
 * progress note). Neither the store's guard nor a worker's view then builds it again, and a
 * comparison by identity sees the lease unchanged. Returns whether it did.
 */
export function shareLeaseView(before: Task, after: Task): boolean {
  const a = before.status?.lease;
  const b = after.status?.lease;
  if (!a || !b || a.worker !== b.worker || a.placement !== b.placement || a.reservation !== b.reservation) return false;
  if (before.spec !== after.spec || before.metadata.name !== after.metadata.name) return false;
  if (!isActive(after.status?.state)) return false;
  const l = leaseView(before);
  if (!l) return false;
  leaseViews.set(after, l);
  return true;
}

/** The same leases in the same order, compared by identity (one object per Task object: leaseView()). */
export const sameLeases = (a: readonly LeaseView[], b: readonly LeaseView[]): boolean =>
  a.length === b.length && a.every((l, i) => l === b[i]);

/** The active leases on one worker, by task name. */
export function leasesOn(worker: string, tasks: Iterable<Task>): LeaseView[] {
  const out: LeaseView[] = [];
  for (const t of tasks) {
    const l = t.status?.lease?.worker === worker ? leaseView(t) : undefined;
    if (l) out.push(l);
  }
  return out.sort((a, b) => (a.task < b.task ? -1 : a.task > b.task ? 1 : 0));
}

export type WorkerViewOptions = {
  /** Heartbeat within the grace period. Defaults to the worker's Ready condition. */
  ready?: boolean;
  /** The live heartbeat value, which may be newer than status. Defaults to status.reported_active. */
  reported_active?: number;
};

export type ConcurrencySettings = {
  max_concurrency: number;
  initial_concurrency: number;
  /** Starts at initial; results and the operator move it within [1, max]. */
  desired_concurrency: number;
  concurrency_policy: "fixed" | "adaptive";
};

/**
 * The concurrency values a worker follows: the inventory's where declared, else what the
 * Runner registered. Nothing declared starts at one task (max defaults to 1, initial to 1),
 * so a worker never takes more than it was told it may.
 */
export function concurrencySettings(worker: Worker): ConcurrencySettings {
  const { spec, status } = worker;
  const reg = status?.registration;
  const max = spec.max_concurrency ?? reg?.max_concurrency ?? 1;
  const initial = Math.min(spec.initial_concurrency ?? reg?.initial_concurrency ?? 1, max);
  return {
    max_concurrency: max,
    initial_concurrency: initial,
    desired_concurrency: Math.min(Math.max(status?.desired_concurrency ?? initial, 1), max),
    concurrency_policy: (spec.concurrency_policy ?? reg?.concurrency_policy) === "adaptive" ? "adaptive" : "fixed",
  };
}

/** Where the inventory declares a field it wins over the registration. */
export function workerView(worker: Worker, leases: readonly LeaseView[], opts: WorkerViewOptions = {}): WorkerView {
  const { spec, status } = worker;
  const reg = status?.registration;
  const eff = effectiveCapacity(worker);
  const c = concurrencySettings(worker);
  return {
    name: worker.metadata.name,
    capabilities: [...(spec.capabilities ?? reg?.capabilities ?? [])],
    capacity: eff.capacity,
    unknown: eff.unknown,
    cordoned: spec.unschedulable === true,
    ready: opts.ready ?? getCondition(status?.conditions, "Ready")?.status === "True",
    desired_concurrency: c.desired_concurrency,
    max_concurrency: c.max_concurrency,
    reported_active: opts.reported_active ?? status?.reported_active ?? 0,
    leases: [...leases],
  };
}

/** The sum of the active leases' reservations: the only definition of "reserved". */
export const reservedOf = (w: WorkerView): Vector => sumOf(w.leases, (l) => l.reservation);

export const exclusiveActive = (w: WorkerView): boolean => w.leases.some((l) => l.placement === "exclusive");

export type Concurrency = {
  reported_active: number;
  leased_active: number;
  /** max(reported, leased): the Hub counts its own leases before any heartbeat mentions them. */
  active_count: number;
  desired_concurrency: number;
  max_concurrency: number;
  effective_limit: number;
};

const maxOf = (w: WorkerView) => Math.max(1, Math.floor(w.max_concurrency));
const desiredOf = (w: WorkerView, max: number) => Math.min(Math.max(Math.floor(w.desired_concurrency), 1), max);
const reportedOf = (w: WorkerView) => Math.max(0, Math.floor(w.reported_active));

/** max(reported, leased): what the concurrency checks count (concurrencyOf's active_count). */
export const activeCount = (w: WorkerView): number => Math.max(reportedOf(w), w.leases.length);

/** min(clamp(desired, 1, max), max): concurrencyOf's effective_limit. */
export function effectiveLimit(w: WorkerView): number {
  const max = maxOf(w);
  return Math.min(desiredOf(w, max), max);
}

export function concurrencyOf(w: WorkerView): Concurrency {
  const max = maxOf(w);
  const desired = desiredOf(w, max);
  return {
    reported_active: reportedOf(w),
    leased_active: w.leases.length,
    active_count: activeCount(w),
    desired_concurrency: desired,
    max_concurrency: max,
    effective_limit: effectiveLimit(w),
  };
}
