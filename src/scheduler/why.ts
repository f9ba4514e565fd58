// "Why is it pending, and what would change that?": a queued task's standing in the queue,
// the leases whose release would let it fit, and verified changes to its request. Every
// answer here is a what-if run through the one admission function, never a second rule.
import {
  admit,
  declaredSeconds,
  taskView,
  type Decision,
  type LeaseView,
  type TaskView,
  type Vector,
  type WorkerView,
} from "../admission/index.ts";
import { RESOURCE_FIELDS, type ResourceSpec, type Task } from "../resources/types.ts";
import { claimOrder, topK, type ClaimQueue, type QueueEntry, type Shape } from "./queue.ts";

/** At most this many higher-priority tasks ahead are named; the rest are counted. */
export const NAMED_AHEAD = 10;

export type QueueStanding = {
  /**
   * 1 + the number of queued tasks ahead of this one in claim order (priority, then age,
   * then name) that a worker this task could run on could also run: the tasks such a
   * worker's claims are offered first. "Could run" means the capability matches and the
   * task fits the worker when it is empty.
   */
  queue_position: number;
  /** Queued tasks ahead with a higher priority: named (the first NAMED_AHEAD by claim order), and counted. */
  higher_priority_ahead: string[];
  higher_priority_ahead_count: number;
};

/**
 * The standing of a queued task, or undefined when it is not queued. Costs one admission
 * check per shape and candidate worker (stopping at the first worker a shape reaches), plus
 * the entries ahead: no sort of the queue.
 */
export function queueStanding(
  queue: ClaimQueue,
  task: Task,
  decisions: readonly { view: WorkerView; decision: Decision }[],
  only: (s: Shape) => boolean = () => true,
): QueueStanding | undefined {
  const me = queue.locate(task.metadata.name);
  if (!me) return undefined;
  // Workers this task could ever run on: failures that hold even when empty rule the rest out.
  const candidates = decisions.filter((d) => !d.decision.unresolvable).map((d) => d.view);
  let ahead = 0;
  let higherCount = 0;
  const higher: QueueEntry[] = [];
  for (const shape of queue.allShapes()) {
    if (!only(shape)) continue;
    const sv = taskView(shape.sample);
    const competes = shape === me.shape || candidates.some((v) => !admit(sv, v).unresolvable);
    if (!competes) continue;
    const st = queue.standing(shape, me.entry, NAMED_AHEAD);
    ahead += st.ahead;
    higherCount += st.higher;
    higher.push(...st.first);
  }
  return {
    queue_position: ahead + 1,
    higher_priority_ahead: topK(higher, NAMED_AHEAD, claimOrder).map((e) => e.name),
    higher_priority_ahead_count: higherCount,
  };
}

/**
 * Every queued task's position at once, for `get tasks -o wide`: one pass over the queue in
 * claim order with a running count per shape, so O(n log n + n * shapes), not n standings.
 */
export function queuePositions(queue: ClaimQueue, views: readonly WorkerView[]): Map<string, number> {
  const shapes = [...queue.allShapes()];
  const tv = shapes.map((s) => taskView(s.sample));
  // reach[i]: the workers shape i could ever run on.
  const reach = tv.map((t) => new Set(views.filter((v) => !admit(t, v).unresolvable).map((v) => v.name)));
  const competes = shapes.map((_, i) => shapes.map((_, j) => i === j || [...reach[i]].some((w) => reach[j].has(w))));
  const entries = shapes.flatMap((s, i) => queue.namesOf(s).map((name) => ({ ...queue.locate(name)!.entry, i })));
  entries.sort(claimOrder);
  const seen = new Array<number>(shapes.length).fill(0);
  const out = new Map<string, number>();
  for (const e of entries) {
    let ahead = 0;
    for (let j = 0; j < shapes.length; j++) if (competes[e.i][j]) ahead += seen[j];
    out.set(e.name, ahead + 1);
    seen[e.i]++;
  }
  return out;
}

// --- Leases in the way

export type LeaseTiming = {
  task: string;
  placement: LeaseView["placement"];
  reservation: Vector;
  /** When the task started (or was leased, if it has not started). */
  since?: string;
  /** The run time the task declares (payload.timeout_seconds, else the sum of its phases'). */
  declared_seconds?: number;
  /** since + declared: when it should end at the latest. Absent when nothing is declared. */
  ends_at?: string;
};

/** Times are absolute, so the same state gives the same answer however late it is asked. */
export type BlockingLeases = {
  worker: string;
  leases: LeaseTiming[];
  /** When the last of them should end; absent when one of them declares no run time. */
  until?: string;
};

/** What reading a lease's timing needs: the task it leases, from the informer. */
export type TaskReads = { task(name: string): Task | undefined };

export function leaseTiming(ctx: TaskReads, l: LeaseView): LeaseTiming {
  const t = ctx.task(l.task);
  const since = t?.status?.lease?.started_at ?? t?.status?.lease?.leased_at;
  const declared = declaredSeconds(t);
  const start = since ? Date.parse(since) : NaN;
  return {
    task: l.task,
    placement: l.placement,
    reservation: l.reservation,
    ...(since ? { since } : {}),
    ...(declared !== undefined ? { declared_seconds: declared } : {}),
    ...(declared !== undefined && !Number.isNaN(start)
      ? { ends_at: new Date(start + declared * 1000).toISOString() }
      : {}),
  };
}

const endMs = (l: LeaseTiming) => (l.ends_at ? Date.parse(l.ends_at) : Infinity);

/**
 * The worker as it would be with these leases released. Runs the Runner reports beyond the
 * Hub's leases stay counted: releasing a lease ends one reported run, not the others.
 */
export function without(v: WorkerView, released: ReadonlySet<string>): WorkerView {
  const leases = v.leases.filter((l) => !released.has(l.task));
  return { ...v, leases, reported_active: Math.max(0, v.reported_active - (v.leases.length - leases.length)) };
}

/**
 * The smallest set of active leases on a worker whose release lets the task fit, or
 * undefined when leases are not all that is in the way (the worker is cordoned, not ready,
 * too small, or it fits already). Greedy: release leases, soonest-ending first, until the
 * task fits; then put back every lease the fit does not need. The result is checked by
 * admit() once more; no lease in it can be dropped (minimal), though a different set of
 * the same or smaller size may exist (smallest in the greedy sense, not a global optimum).
 */
export function blockingLeases(
  ctx: TaskReads,
  task: TaskView,
  view: WorkerView,
  now: Decision = admit(task, view),
): BlockingLeases | undefined {
  // `now` is admit(task, view), when the caller has it already. A task that fits, or that
  // would not fit even on the empty worker, has no blocking leases.
  if (now.ok || now.unresolvable || !admit(task, without(view, new Set(view.leases.map((l) => l.task)))).ok)
    return undefined;
  const timings = view.leases.map((l) => leaseTiming(ctx, l));
  const soonest = [...timings].sort((a, b) => endMs(a) - endMs(b) || (a.task < b.task ? -1 : 1));
  const released = new Set<string>();
  for (const l of soonest) {
    released.add(l.task);
    if (admit(task, without(view, released)).ok) break;
  }
  for (const l of [...soonest].reverse()) {
    if (!released.has(l.task)) continue;
    released.delete(l.task);
    if (!admit(task, without(view, released)).ok) released.add(l.task);
  }
  if (!admit(task, without(view, released)).ok) return undefined; // cannot happen: the full release fits
  const leases = soonest.filter((l) => released.has(l.task));
  const until = Math.max(...leases.map(endMs));
  return { worker: view.name, leases, ...(until < Infinity ? { until: new Date(until).toISOString() } : {}) };
}

// --- Suggestions for a task that fits nowhere

export type Suggestion =
  | { kind: "request"; worker: string; resources: ResourceSpec; change: string }
  | { kind: "empty_worker"; worker: string; change: string; until?: string };

/**
 * For a task no worker admits now: the smallest reduction of its request that one worker
 * admits now (fields lowered to that worker's free amount), and the worker where it fits
 * once empty (soonest by blocking leases). Each one was admitted by admit() before it is
 * returned; a change admit() rejects is not suggested.
 */
export function suggestions(
  ctx: TaskReads,
  task: Task,
  rows: readonly { view: WorkerView; decision: Decision }[],
  blocking?: ReadonlyMap<string, BlockingLeases | undefined>,
): Suggestion[] {
  if (rows.some((r) => r.decision.ok)) return [];
  const tv = taskView(task);
  const out: Suggestion[] = [];
  let best: { worker: string; resources: ResourceSpec; cost: number; change: string } | undefined;
  for (const { view, decision } of rows) {
    // Only a request that is too large for what is free now can be shrunk into a fit.
    if (!decision.failures.every((f) => f.check === "resource_fit")) continue;
    const free = decision.admission.available_before;
    const req: Vector = { ...tv.requests, gpu_types: [...tv.requests.gpu_types] };
    const changes: string[] = [];
    let cost = 0;
    for (const f of RESOURCE_FIELDS) {
      if (req[f] <= free[f]) continue;
      changes.push(`${f} ${req[f]} -> ${free[f]}`);
      cost += req[f] ? (req[f] - free[f]) / req[f] : 0;
      req[f] = free[f];
    }
    if (!changes.length || !admit({ ...tv, requests: req }, view).ok) continue;
    if (!best || cost < best.cost)
      best = { worker: view.name, resources: specOf(req), cost, change: changes.join(", ") };
  }
  if (best)
    out.push({
      kind: "request",
      worker: best.worker,
      resources: best.resources,
      change: `lower ${best.change} to fit ${best.worker} now`,
    });
  let soonest: BlockingLeases | undefined;
  for (const { view, decision } of rows) {
    const b = blocking ? blocking.get(view.name) : blockingLeases(ctx, tv, view, decision);
    if (
      b &&
      (!soonest || (b.until ? Date.parse(b.until) : Infinity) < (soonest.until ? Date.parse(soonest.until) : Infinity))
    )
      soonest = b;
  }
  if (soonest)
    out.push({
      kind: "empty_worker",
      worker: soonest.worker,
      change: `fits ${soonest.worker} once its blocking leases end`,
      ...(soonest.until ? { until: soonest.until } : {}),
    });
  return out;
}

function specOf(v: Vector): ResourceSpec {
  const out: ResourceSpec = {};
  for (const f of RESOURCE_FIELDS) if (v[f]) out[f] = v[f];
  if (v.gpu_types.length) out.gpu_types = [...v.gpu_types];
  return out;
}
