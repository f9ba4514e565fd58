// What-if: the admission engine over a copy of the current workers, leases and queue, with
// changes applied. Nothing here writes: the copy is plain views, thrown away after the answer.
import {
  admits,
  asLease,
  normalise,
  taskView,
  workerView,
  type LeaseView,
  type TaskView,
  type WorkerView,
} from "../admission/index.ts";
import { inventoryToWorkers } from "../resources/inventory.ts";
import { isActive, RESOURCE_FIELDS, type Worker } from "../resources/types.ts";
import type { SchedulerContext } from "./context.ts";
import { HubError } from "../protocol/errors.ts";
import type { Changes } from "../protocol/parse.ts";
import { claimOrder, shapeKey, type ClaimQueue, type QueueEntry } from "./queue.ts";
import { queueLimitsAfter, QueueSim } from "./simulate-queues.ts";
import type { Amounts, QueueLimits } from "../admission/queues.ts";

export type Placed = { order: number; task: string; worker: string };
export type SimulationResult = {
  admitted: Placed[];
  queued_before: number;
  still_queued: number;
  baseline_admitted: number;
};

const bad = (field: string, detail: string) => new HubError(400, "invalid_simulation", { field, detail });

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function names(v: unknown, field: string): string[] {
  if (v === undefined) return [];
  if (!Array.isArray(v) || v.some((x) => typeof x !== "string" || !x)) throw bad(field, "must be a list of names");
  return v as string[];
}

function inventoryWorkers(doc: unknown, field: string): Worker[] {
  const r = inventoryToWorkers(doc);
  if (r.errors.length) {
    const e = r.errors[0];
    throw bad(e.field ? `${field}.${e.field}` : field, e.message);
  }
  return r.workers;
}

function positiveInt(v: unknown, field: string): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1) throw bad(field, "must be an integer of at least 1");
  return v;
}

/**
 * The queued tasks that would be leased, where and in what order, if the changes were made
 * now: tasks in claim order, each to the first worker (by name) that admission accepts, its
 * lease then counting against that worker. Also runs without the changes
 * (`baseline_admitted`) so the answer says what the changes are worth.
 */
export function simulate(ctx: SchedulerContext, queue: ClaimQueue, c: Changes): SimulationResult {
  const baseViews = new Map<string, WorkerView>();
  for (const w of ctx.cache.list("Worker")) baseViews.set(w.metadata.name, ctx.workerView(w));
  const entries: QueueEntry[] = [];
  for (const s of queue.allShapes()) for (const n of queue.namesOf(s)) entries.push(queue.locate(n)!.entry);
  entries.sort(claimOrder);
  const tasks = new Map<string, TaskView>(entries.map((e) => [e.name, taskView(ctx.task(e.name)!)]));
  const shapes = new Map<string, string>(entries.map((e) => [e.name, e.shape]));
  const { limits: current, ...used } = ctx.queues.snapshot();
  const baseline = place(entries, tasks, shapes, [...baseViews.values()], current, used).length;
  const limits = queueLimitsAfter(ctx, c.queues);

  const views = new Map([...baseViews].map(([k, v]) => [k, { ...v, leases: [...v.leases] }]));
  for (const [i, n] of names(c.remove_workers, "remove_workers").entries()) {
    if (!views.delete(n)) throw bad(`remove_workers[${i}]`, `no worker named "${n}"`);
  }
  const added = [
    ...(c.add_workers === undefined
      ? []
      : Array.isArray(c.add_workers)
        ? inventoryWorkers({ inventory_version: 1, workers: c.add_workers }, "add_workers")
        : (() => {
            throw bad("add_workers", "must be a list of inventory worker entries");
          })()),
    ...(c.inventory === undefined ? [] : inventoryWorkers(c.inventory, "inventory")),
  ];
  // A worker that is not running yet is taken as registered, ready and idle.
  for (const w of added)
    views.set(
      w.metadata.name,
      workerView(w, views.get(w.metadata.name)?.leases ?? [], { ready: true, reported_active: 0 }),
    );
  if (c.workers !== undefined && !isObj(c.workers)) throw bad("workers", "must be an object of worker name to changes");
  for (const [n, ch] of Object.entries(c.workers ?? {})) {
    const at = `workers.${n}`;
    const v = views.get(n);
    if (!v) throw bad(at, `no worker named "${n}"`);
    if (!isObj(ch)) throw bad(at, "must be an object");
    for (const k of Object.keys(ch))
      if (!["resource_capacity", "max_concurrency", "desired_concurrency"].includes(k))
        throw bad(`${at}.${k}`, "unknown change; one of: resource_capacity, max_concurrency, desired_concurrency");
    if (ch.resource_capacity !== undefined) {
      if (!isObj(ch.resource_capacity)) throw bad(`${at}.resource_capacity`, "must be an object");
      const given = normalise(ch.resource_capacity);
      for (const f of RESOURCE_FIELDS)
        if (f in ch.resource_capacity) {
          v.capacity = { ...v.capacity, [f]: given[f] };
          v.unknown = v.unknown.filter((u) => u !== f);
        }
      if ("gpu_types" in ch.resource_capacity) v.capacity = { ...v.capacity, gpu_types: given.gpu_types };
    }
    v.max_concurrency = positiveInt(ch.max_concurrency, `${at}.max_concurrency`) ?? v.max_concurrency;
    v.desired_concurrency = positiveInt(ch.desired_concurrency, `${at}.desired_concurrency`) ?? v.desired_concurrency;
  }
  const queued = new Set(entries.map((e) => e.name));
  for (const [i, n] of names(c.cancel_tasks, "cancel_tasks").entries()) {
    const t = ctx.task(n);
    if (!t) throw bad(`cancel_tasks[${i}]`, `no task named "${n}"`);
    if (queued.delete(n)) continue;
    if (!isActive(t.status?.state))
      throw bad(`cancel_tasks[${i}]`, `task "${n}" is ${t.status?.state}, neither queued nor active`);
    const v = views.get(t.status?.lease?.worker ?? "");
    // Releasing a lease ends one run the Runner reports, too.
    if (v)
      Object.assign(v, {
        leases: v.leases.filter((l: LeaseView) => l.task !== n),
        reported_active: Math.max(0, v.reported_active - 1),
      });
  }
  if (c.tasks !== undefined && !isObj(c.tasks)) throw bad("tasks", "must be an object of task name to changes");
  for (const [n, ch] of Object.entries(c.tasks ?? {})) {
    const at = `tasks.${n}`;
    const t = ctx.task(n);
    if (!t || !queued.has(n)) throw bad(at, t ? `task "${n}" is not queued` : `no task named "${n}"`);
    if (!isObj(ch) || !isObj(ch.execution_profile))
      throw bad(`${at}.execution_profile`, "required: the new placement and resources");
    const p = ch.execution_profile;
    if (p.placement !== undefined && p.placement !== "shared" && p.placement !== "exclusive")
      throw bad(`${at}.execution_profile.placement`, "must be shared or exclusive");
    if (p.resources !== undefined && !isObj(p.resources))
      throw bad(`${at}.execution_profile.resources`, "must be an object");
    const changed = { ...t, spec: { ...t.spec, execution_profile: { ...t.spec.execution_profile, ...p } } } as typeof t;
    tasks.set(n, taskView(changed));
    shapes.set(n, shapeKey(changed));
  }
  const admitted = place(
    entries.filter((e) => queued.has(e.name)),
    tasks,
    shapes,
    [...views.values()],
    limits,
    used,
  );
  return {
    admitted,
    queued_before: entries.length,
    still_queued: queued.size - admitted.length,
    baseline_admitted: baseline,
  };
}

/**
 * Each lease only makes the next fit harder, so a worker that refuses a shape refuses it for
 * the rest of the run: each shape keeps a cursor into the workers, and the run costs
 * O(tasks + shapes * workers) checks rather than tasks * workers.
 */
function place(
  entries: readonly QueueEntry[],
  tasks: Map<string, TaskView>,
  shapes: Map<string, string>,
  views: WorkerView[],
  limits: Map<string, QueueLimits>,
  used: { used: Map<string, Amounts>; waiting: Map<string, Amounts> },
): Placed[] {
  const ws = views.map((v) => ({ ...v, leases: [...v.leases] })).sort((a, b) => (a.name < b.name ? -1 : 1));
  // A queue's usage is shared by every worker: the simulation moves it with each placement.
  const sim = new QueueSim(limits, used, ws);
  sim.attach(ws);
  const cursor = new Map<string, number>();
  const out: Placed[] = [];
  for (const e of sim.order(entries, tasks)) {
    const shape = shapes.get(e.name)!;
    const tv = tasks.get(e.name)!;
    let i = cursor.get(shape) ?? 0;
    while (i < ws.length && !admits(tv, ws[i])) i++;
    cursor.set(shape, i);
    if (i === ws.length) continue;
    const l = asLease(tv);
    ws[i].leases.push(l);
    sim.placed(ws[i], l, ws);
    out.push({ order: out.length + 1, task: e.name, worker: ws[i].name });
  }
  return out;
}
