// The claim queue: queued tasks grouped by requirement shape (capability, placement,
// requests, gpu types, exclusions), each group kept sorted in claim order. A claim asks
// admission once per shape instead of once per task, so its cost follows the number of
// distinct shapes, not the depth of the queue.
import type { Task } from "../resources/types.ts";
import { isQueued } from "../resources/types.ts";

export type QueueEntry = { name: string; priority: number; created: string; shape: string };

/** Claim order: priority descending, then creation time, then name. */
export function claimOrder(a: QueueEntry, b: QueueEntry): number {
  return b.priority - a.priority || (a.created < b.created ? -1 : a.created > b.created ? 1 : 0) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
}

export function shapeKey(t: Task): string {
  const p = t.spec.execution_profile ?? {};
  const r = p.resources ?? {};
  return JSON.stringify([
    t.spec.required_capability ?? "",
    p.placement ?? "shared",
    r.cpu_millis ?? 0, r.memory_mb ?? 0, r.disk_mb ?? 0, r.gpu_count ?? 0,
    [...(r.gpu_types ?? [])].sort(),
    [...(t.status?.excluded_workers ?? [])].sort(),
  ]);
}

export type Shape = { key: string; sample: Task; entries: QueueEntry[] };

export class ClaimQueue {
  private readonly shapes = new Map<string, Shape>();
  private readonly byName = new Map<string, QueueEntry>();

  get size(): number { return this.byName.size; }

  /** Track a task's latest version: queued tasks are (re)inserted, others removed. */
  upsert(task: Task): void {
    const name = task.metadata.name;
    // A task with no status yet is new, so queued.
    if (!isQueued(task.status?.state ?? "queued")) return this.remove(name);
    const entry: QueueEntry = { name, priority: task.spec.priority ?? 0, created: task.metadata.creationTimestamp ?? "", shape: shapeKey(task) };
    const old = this.byName.get(name);
    if (old && old.shape === entry.shape && old.priority === entry.priority && old.created === entry.created) {
      this.shapes.get(old.shape)!.sample = task;
      return;
    }
    if (old) this.remove(name);
    let shape = this.shapes.get(entry.shape);
    if (!shape) this.shapes.set(entry.shape, (shape = { key: entry.shape, sample: task, entries: [] }));
    shape.sample = task;
    shape.entries.splice(this.insertAt(shape.entries, entry), 0, entry);
    this.byName.set(name, entry);
  }

  remove(name: string): void {
    const e = this.byName.get(name);
    if (!e) return;
    this.byName.delete(name);
    const shape = this.shapes.get(e.shape)!;
    const i = this.insertAt(shape.entries, e);
    // insertAt finds the first position not before e; e itself sits there
    if (shape.entries[i]?.name === e.name) shape.entries.splice(i, 1);
    else shape.entries.splice(shape.entries.findIndex((x) => x.name === e.name), 1);
    if (shape.entries.length === 0) this.shapes.delete(e.shape);
  }

  has(name: string): boolean { return this.byName.has(name); }

  allShapes(): IterableIterator<Shape> { return this.shapes.values(); }

  get shapeCount(): number { return this.shapes.size; }

  private insertAt(list: QueueEntry[], e: QueueEntry): number {
    let lo = 0, hi = list.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (claimOrder(list[mid], e) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
