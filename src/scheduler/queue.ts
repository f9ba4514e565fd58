// The claim queue: queued tasks grouped by requirement shape (capability, placement,
// requests, gpu types, exclusions), each group kept sorted in claim order. Shapes sit in one
// heap per required capability, ordered by their best task, so a claim walks only the
// shapes a worker could run, best first, and stops as soon as it has what it asked for.
// Its cost follows the claim's size and the shapes it has to skip (bounded), not the depth
// of the queue or the number of shapes.
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
    capabilityOf(t),
    p.placement ?? "shared",
    r.cpu_millis ?? 0, r.memory_mb ?? 0, r.disk_mb ?? 0, r.gpu_count ?? 0,
    [...(r.gpu_types ?? [])].sort(),
    [...(t.status?.excluded_workers ?? [])].sort(),
  ]);
}

const capabilityOf = (t: Task) => (t.spec.required_capability ?? "").trim();

export type Shape = { key: string; capability: string; sample: Task; entries: QueueEntry[]; heapIndex: number };

/** A binary heap of shapes by their first entry, with positions so a shape can move when its head changes. */
class ShapeHeap {
  readonly items: Shape[] = [];
  get size(): number { return this.items.length; }
  peek(): Shape | undefined { return this.items[0]; }
  push(s: Shape): void {
    s.heapIndex = this.items.length;
    this.items.push(s);
    this.up(s.heapIndex);
  }
  pop(): Shape | undefined {
    const top = this.items[0];
    if (top) this.removeAt(0);
    return top;
  }
  remove(s: Shape): void {
    if (this.items[s.heapIndex] === s) this.removeAt(s.heapIndex);
  }
  /** The shape's head changed: restore the heap order around it. */
  update(s: Shape): void {
    if (this.items[s.heapIndex] !== s) return this.push(s);
    this.up(s.heapIndex);
    this.down(s.heapIndex);
  }
  private removeAt(i: number): void {
    const last = this.items.pop()!;
    this.items[i] && (this.items[i].heapIndex = -1);
    if (i < this.items.length) {
      this.items[i] = last;
      last.heapIndex = i;
      this.up(i);
      this.down(i);
    }
  }
  private less(i: number, j: number): boolean {
    return claimOrder(this.items[i].entries[0], this.items[j].entries[0]) < 0;
  }
  private swap(i: number, j: number): void {
    const a = this.items[i], b = this.items[j];
    this.items[i] = b; b.heapIndex = i;
    this.items[j] = a; a.heapIndex = j;
  }
  private up(i: number): void {
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(i, p)) return;
      this.swap(i, p);
      i = p;
    }
  }
  private down(i: number): void {
    for (;;) {
      const l = 2 * i + 1, r = l + 1;
      let m = i;
      if (l < this.items.length && this.less(l, m)) m = l;
      if (r < this.items.length && this.less(r, m)) m = r;
      if (m === i) return;
      this.swap(i, m);
      i = m;
    }
  }
}

export class ClaimQueue {
  private readonly shapes = new Map<string, Shape>();
  private readonly byName = new Map<string, QueueEntry>();
  /** Shapes by required capability ("" = any worker). */
  private readonly heaps = new Map<string, ShapeHeap>();

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
    if (!shape) this.shapes.set(entry.shape, (shape = { key: entry.shape, capability: capabilityOf(task), sample: task, entries: [], heapIndex: -1 }));
    shape.sample = task;
    const at = this.insertAt(shape.entries, entry);
    shape.entries.splice(at, 0, entry);
    this.byName.set(name, entry);
    if (shape.entries.length === 1) this.heap(shape.capability).push(shape);
    else if (at === 0) this.heap(shape.capability).update(shape);
  }

  remove(name: string): void {
    const e = this.byName.get(name);
    if (!e) return;
    this.byName.delete(name);
    const shape = this.shapes.get(e.shape)!;
    let i = this.insertAt(shape.entries, e);
    // insertAt finds the first position not before e; e itself sits there
    if (shape.entries[i]?.name !== e.name) i = shape.entries.findIndex((x) => x.name === e.name);
    shape.entries.splice(i, 1);
    const heap = this.heap(shape.capability);
    if (shape.entries.length === 0) {
      heap.remove(shape);
      this.shapes.delete(e.shape);
      if (heap.size === 0) this.heaps.delete(shape.capability);
    } else if (i === 0) heap.update(shape);
  }

  has(name: string): boolean { return this.byName.has(name); }

  allShapes(): IterableIterator<Shape> { return this.shapes.values(); }

  get shapeCount(): number { return this.shapes.size; }

  /**
   * The queued tasks a worker with these capabilities could run, best first, one shape at a
   * time: `next()` yields the shape holding the best remaining task; `skip()` drops that
   * shape for the rest of the walk (it does not fit), `take()` consumes its head. Shapes
   * requiring a capability the worker lacks are never visited. `close()` must be called:
   * it puts every visited shape back (nothing in the queue changes until the leases are
   * written and the informer removes their tasks).
   */
  walk(capabilities: readonly string[]): ClaimWalk {
    const sources = capabilities.includes("*") ? [...this.heaps.values()] : ["", ...new Set(capabilities)].map((c) => this.heaps.get(c)).filter((h): h is ShapeHeap => !!h);
    return new ClaimWalk(sources);
  }

  private heap(capability: string): ShapeHeap {
    let h = this.heaps.get(capability);
    if (!h) this.heaps.set(capability, (h = new ShapeHeap()));
    return h;
  }

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

/** `pulled`: the source's next shape has joined the merge (the heap only vouches for this shape's first entry). */
type Cursor = { shape: Shape; offset: number; source: ShapeHeap; pulled: boolean };

/** A k-way merge over the capability heaps, with a read offset per visited shape. */
export class ClaimWalk {
  private readonly open: Cursor[] = [];
  private readonly popped: { shape: Shape; source: ShapeHeap }[] = [];
  private current: Cursor | undefined;

  constructor(private readonly sources: ShapeHeap[]) {
    for (const h of sources) this.pull(h);
  }

  /** The best remaining task and its shape, or undefined when the walk is over. */
  next(): { shape: Shape; entry: QueueEntry } | undefined {
    let best = -1;
    for (let i = 0; i < this.open.length; i++) {
      const c = this.open[i];
      if (best < 0 || claimOrder(c.shape.entries[c.offset], this.open[best].shape.entries[this.open[best].offset]) < 0) best = i;
    }
    if (best < 0) return (this.current = undefined);
    this.current = this.open[best];
    return { shape: this.current.shape, entry: this.current.shape.entries[this.current.offset] };
  }

  /** The last task returned is taken (or gone): its shape offers its next one. */
  take(): void {
    const c = this.current!;
    c.offset++;
    // Past its first entry this shape may rank below the next shape of its heap.
    this.pullAfter(c);
    if (c.offset >= c.shape.entries.length) this.drop(c);
  }

  /** The last shape returned does not fit this worker: none of its tasks are offered again. */
  skip(): void {
    this.drop(this.current!);
  }

  close(): void {
    for (const { shape, source } of this.popped) source.push(shape);
    this.popped.length = 0;
    this.open.length = 0;
  }

  private drop(c: Cursor): void {
    this.open.splice(this.open.indexOf(c), 1);
    this.current = undefined;
    this.pullAfter(c);
  }

  private pullAfter(c: Cursor): void {
    if (c.pulled) return;
    c.pulled = true;
    this.pull(c.source);
  }

  private pull(h: ShapeHeap): void {
    const shape = h.pop();
    if (!shape) return;
    this.popped.push({ shape, source: h });
    this.open.push({ shape, offset: 0, source: h, pulled: false });
  }
}
