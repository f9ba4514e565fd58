// The claim queue: queued tasks grouped by requirement shape (capability, placement,
// requests, gpu types, exclusions), each group kept sorted in claim order. Shapes sit in one
// heap per required capability, ordered by their best task, so a claim walks only the
// shapes a worker could run, best first, and stops as soon as it has what it asked for.
// Its cost follows the claim's size and the shapes it has to skip (bounded), not the depth
// of the queue or the number of shapes.
//
// Queues: a shape belongs to one Queue, and each Queue has its own heaps. A walk merges them
// by the queues' fair-share rank first (lowest weighted dominant share first), then claim
// order, so across queues the one furthest below its share goes first and within a queue
// priority and arrival decide, as before. With no Queue objects every rank is 0: claim order alone.
import { demandOf, queueName, addAmounts, type Amounts } from "../admission/queues.ts";
import { normalise } from "../admission/vector.ts";
import type { Task } from "../resources/types.ts";
import { isQueued } from "../resources/types.ts";

export type QueueEntry = { name: string; priority: number; created: string; shape: string };

/** Claim order: priority descending, then creation time, then name. The web view sorts its queue by it too. */
export function claimOrder(
  a: Pick<QueueEntry, "name" | "priority" | "created">,
  b: Pick<QueueEntry, "name" | "priority" | "created">,
): number {
  return (
    b.priority - a.priority ||
    (a.created < b.created ? -1 : a.created > b.created ? 1 : 0) ||
    (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
  );
}

/** The first k items of xs in `order`, without sorting all of xs (k is at most a few hundred). */
export function topK<T>(xs: T[], k: number, order: (a: T, b: T) => number): T[] {
  if (xs.length <= k * 4) return xs.sort(order).slice(0, k);
  const best: T[] = [];
  for (const x of xs) {
    if (best.length === k && order(x, best[k - 1]) >= 0) continue;
    let lo = 0,
      hi = best.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (order(best[mid], x) <= 0) lo = mid + 1;
      else hi = mid;
    }
    best.splice(lo, 0, x);
    if (best.length > k) best.pop();
  }
  return best;
}

export function shapeKey(t: Task): string {
  const p = t.spec.execution_profile ?? {};
  const r = p.resources ?? {};
  return JSON.stringify([
    capabilityOf(t),
    p.placement ?? "shared",
    r.cpu_millis ?? 0,
    r.memory_mb ?? 0,
    r.disk_mb ?? 0,
    r.gpu_count ?? 0,
    [...(r.gpu_types ?? [])].sort(),
    [...(t.status?.excluded_workers ?? [])].sort(),
    // Only a named queue is part of the key, so without queues the keys are what they were.
    ...(t.spec.queue ? [t.spec.queue] : []),
  ]);
}

/**
 * A queue's fair-share rank when it has taken `extra` more in this walk: lower is claimed
 * from first. Equal ranks fall back to claim order.
 */
export type QueueRank = (queue: string, extra: Amounts) => number;

const capabilityOf = (t: Task) => (t.spec.required_capability ?? "").trim();

/** A binary heap whose items know their position, so any item can be removed or re-placed in O(log n). */
class IndexedHeap<T extends { heapIndex: number }> {
  readonly items: T[] = [];
  constructor(private readonly before: (a: T, b: T) => boolean) {}
  get size(): number {
    return this.items.length;
  }
  peek(): T | undefined {
    return this.items[0];
  }
  push(x: T): void {
    x.heapIndex = this.items.length;
    this.items.push(x);
    this.up(x.heapIndex);
  }
  pop(): T | undefined {
    const top = this.items[0];
    if (top) this.removeAt(0);
    return top;
  }
  remove(x: T): boolean {
    if (this.items[x.heapIndex] !== x) return false;
    this.removeAt(x.heapIndex);
    return true;
  }
  /** x's key changed: restore the order around it. */
  update(x: T): void {
    if (this.items[x.heapIndex] !== x) return this.push(x);
    this.up(x.heapIndex);
    this.down(x.heapIndex);
  }
  private removeAt(i: number): void {
    const gone = this.items[i];
    const last = this.items.pop()!;
    gone.heapIndex = -1;
    if (i < this.items.length) {
      this.items[i] = last;
      last.heapIndex = i;
      this.up(i);
      this.down(i);
    }
  }
  private swap(i: number, j: number): void {
    const a = this.items[i],
      b = this.items[j];
    this.items[i] = b;
    b.heapIndex = i;
    this.items[j] = a;
    a.heapIndex = j;
  }
  private up(i: number): void {
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.before(this.items[i], this.items[p])) return;
      this.swap(i, p);
      i = p;
    }
  }
  private down(i: number): void {
    for (;;) {
      const l = 2 * i + 1,
        r = l + 1;
      let m = i;
      if (l < this.items.length && this.before(this.items[l], this.items[m])) m = l;
      if (r < this.items.length && this.before(this.items[r], this.items[m])) m = r;
      if (m === i) return;
      this.swap(i, m);
      i = m;
    }
  }
}

type Entry = QueueEntry & { heapIndex: number };

/** Arrival order within one priority: creation time, then name (claim order's tie-breaks). */
const arrives = (a: QueueEntry, b: QueueEntry) => a.created < b.created || (a.created === b.created && a.name < b.name);

/**
 * One priority's entries of a shape in arrival order: a sorted array read from `head`, so
 * the claims that take its first entries cost O(1), and a task dispatched last is appended.
 */
class ArrivalRun {
  private items: (Entry | undefined)[] = [];
  private head = 0;
  get size(): number {
    return this.items.length - this.head;
  }
  /** How many entries arrive before `e`. */
  before(e: QueueEntry): number {
    let lo = this.head,
      hi = this.items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (arrives(this.items[mid]!, e)) lo = mid + 1;
      else hi = mid;
    }
    return lo - this.head;
  }
  insert(e: Entry): void {
    const last = this.items[this.items.length - 1];
    if (this.size === 0 || arrives(last!, e)) this.items.push(e);
    else this.items.splice(this.head + this.before(e), 0, e);
  }
  remove(e: Entry): void {
    if (this.items[this.head] === e) {
      this.items[this.head++] = undefined;
      if (this.head > 64 && this.head * 2 > this.items.length)
        [this.items, this.head] = [this.items.slice(this.head), 0];
      return;
    }
    const i = this.head + this.before(e);
    if (this.items[i] === e) this.items.splice(i, 1);
  }
  first(k: number): Entry[] {
    return this.items.slice(this.head, this.head + k) as Entry[];
  }
}

/** A shape's entries by priority: what task-admission counts ahead of a task without walking them. */
class PriorityRuns {
  private readonly runs = new Map<number, ArrivalRun>();
  /** The priorities present, highest first (recomputed when one appears or empties). */
  private order: number[] = [];
  insert(e: Entry): void {
    let run = this.runs.get(e.priority);
    if (!run) {
      this.runs.set(e.priority, (run = new ArrivalRun()));
      this.order = [...this.runs.keys()].sort((a, b) => b - a);
    }
    run.insert(e);
  }
  remove(e: Entry): void {
    const run = this.runs.get(e.priority);
    if (!run) return;
    run.remove(e);
    if (run.size === 0) {
      this.runs.delete(e.priority);
      this.order = this.order.filter((p) => p !== e.priority);
    }
  }
  standing(pivot: QueueEntry, name: number): { ahead: number; higher: number; first: QueueEntry[] } {
    let higher = 0;
    const first: QueueEntry[] = [];
    for (const p of this.order) {
      if (p <= pivot.priority) break;
      const run = this.runs.get(p)!;
      higher += run.size;
      if (first.length < name) first.push(...run.first(name - first.length));
    }
    const same = this.runs.get(pivot.priority);
    return { ahead: higher + (same ? same.before(pivot) : 0), higher, first };
  }
}

/** The queued tasks of one requirement shape, best first (a heap: inserting and removing cost O(log n) at any depth). */
export type Shape = {
  key: string;
  capability: string;
  queue: string;
  sample: Task;
  entries: IndexedHeap<Entry>;
  ranks: PriorityRuns;
  heapIndex: number;
};

/** Shapes ordered by their best task. */
const shapeHeap = () => new IndexedHeap<Shape>((a, b) => claimOrder(a.entries.peek()!, b.entries.peek()!) < 0);

export class ClaimQueue {
  private readonly shapes = new Map<string, Shape>();
  private readonly byName = new Map<string, Entry>();
  /** Shapes by required capability ("" = any worker), then by queue. */
  private readonly heaps = new Map<string, Map<string, IndexedHeap<Shape>>>();
  /** Set by the scheduler from its queue ledger; unset, every queue ranks the same. */
  rank: QueueRank = () => 0;

  get size(): number {
    return this.byName.size;
  }

  /** Track a task's latest version: queued tasks are (re)inserted, others removed. */
  upsert(task: Task): void {
    const name = task.metadata.name;
    // A task with no status yet is new, so queued.
    if (!isQueued(task.status?.state ?? "queued")) return this.remove(name);
    const entry: Entry = {
      name,
      priority: task.spec.priority ?? 0,
      created: task.metadata.creationTimestamp ?? "",
      shape: shapeKey(task),
      heapIndex: -1,
    };
    const old = this.byName.get(name);
    if (old && old.shape === entry.shape && old.priority === entry.priority && old.created === entry.created) {
      this.shapes.get(old.shape)!.sample = task;
      return;
    }
    if (old) this.remove(name);
    let shape = this.shapes.get(entry.shape);
    if (!shape)
      this.shapes.set(
        entry.shape,
        (shape = {
          key: entry.shape,
          capability: capabilityOf(task),
          queue: queueName(task.spec),
          sample: task,
          entries: new IndexedHeap<Entry>((a, b) => claimOrder(a, b) < 0),
          ranks: new PriorityRuns(),
          heapIndex: -1,
        }),
      );
    entry.shape = shape.key; // one string per shape, not one per queued task
    shape.sample = task;
    const head = shape.entries.peek();
    shape.entries.push(entry);
    shape.ranks.insert(entry);
    this.byName.set(name, entry);
    if (!head) this.heap(shape).push(shape);
    else if (shape.entries.peek() !== head) this.heap(shape).update(shape);
  }

  remove(name: string): void {
    const e = this.byName.get(name);
    if (!e) return;
    this.byName.delete(name);
    const shape = this.shapes.get(e.shape)!;
    const wasHead = shape.entries.peek() === e;
    shape.entries.remove(e);
    shape.ranks.remove(e);
    const heap = this.heap(shape);
    if (shape.entries.size === 0) {
      heap.remove(shape);
      this.shapes.delete(e.shape);
      if (heap.size === 0) {
        const byQueue = this.heaps.get(shape.capability)!;
        byQueue.delete(shape.queue);
        if (byQueue.size === 0) this.heaps.delete(shape.capability);
      }
    } else if (wasHead) heap.update(shape);
  }

  has(name: string): boolean {
    return this.byName.has(name);
  }

  /** A queued task's entry and the shape it is queued under. */
  locate(name: string): { entry: QueueEntry; shape: Shape } | undefined {
    const e = this.byName.get(name);
    return e && { entry: e, shape: this.shapes.get(e.shape)! };
  }

  /**
   * How a shape's entries stand against `pivot`: how many come before it in claim order, how
   * many of those have a strictly higher priority, and the first `name` of those, best first.
   * O(priorities × log n): task-admission asks this of every competing shape at 200,000 queued.
   */
  standing(shape: Shape, pivot: QueueEntry, name: number): { ahead: number; higher: number; first: QueueEntry[] } {
    return shape.ranks.standing(pivot, name);
  }

  allShapes(): IterableIterator<Shape> {
    return this.shapes.values();
  }

  /** The names of a shape's queued tasks, in no particular order. */
  namesOf(shape: Shape): string[] {
    return shape.entries.items.map((e) => e.name);
  }

  get shapeCount(): number {
    return this.shapes.size;
  }

  /**
   * The queued tasks a worker with these capabilities could run, best first, one shape at a
   * time: `next()` yields the shape holding the best remaining task; `skip()` drops that
   * shape for the rest of the walk (it does not fit), `take()` consumes its head. Shapes
   * requiring a capability the worker lacks are never visited. `close()` must be called:
   * it puts every visited shape back (nothing in the queue changes until the leases are
   * written and the informer removes their tasks).
   */
  walk(capabilities: readonly string[]): ClaimWalk {
    const caps = capabilities.includes("*")
      ? [...this.heaps.values()]
      : ["", ...new Set(capabilities)].map((c) => this.heaps.get(c)).filter((m) => !!m);
    return new ClaimWalk(
      caps.flatMap((m) => [...m.values()]),
      this.rank,
    );
  }

  private heap(shape: Shape): IndexedHeap<Shape> {
    let byQueue = this.heaps.get(shape.capability);
    if (!byQueue) this.heaps.set(shape.capability, (byQueue = new Map()));
    let h = byQueue.get(shape.queue);
    if (!h) byQueue.set(shape.queue, (h = shapeHeap()));
    return h;
  }
}

/**
 * A shape in the merge: the node at `index` of its capability heap. `pulled`: the node's
 * children in that heap have joined the merge (the heap only vouches for this shape's first
 * entry: past it, a child may come first).
 */
type Cursor = { shape: Shape; source: IndexedHeap<Shape>; index: number; pulled: boolean; heapIndex: number };
/** One queue's open cursors, best head first, and the queue's rank as this walk has moved it. */
type QueueCursors = { queue: string; rank: number; cursors: IndexedHeap<Cursor>; heapIndex: number };

const headOf = (c: Cursor): Entry => c.shape.entries.peek()!;
const cursorHeap = () => new IndexedHeap<Cursor>((a, b) => claimOrder(headOf(a), headOf(b)) < 0);

/**
 * A k-way merge over the capability heaps, read in place: a walk starts at each heap's root
 * and opens a node's children once it has moved past the node's first entry, so the heaps
 * themselves never change and a walk costs what it visits, not the number of heaps. Entries
 * taken off their shape are put back by close(), which restores every shape's head, and so
 * every heap's order. Open cursors sit in a heap per queue, and the queues in a heap by rank,
 * then best head: a step re-places only the queue it took from.
 */
export class ClaimWalk {
  private readonly taken: { shape: Shape; entry: Entry }[] = [];
  private current: Cursor | undefined;
  /** What each queue has taken in this walk (its rank is recomputed when it takes more). */
  private readonly extra = new Map<string, Amounts>();
  private readonly queues = new Map<string, QueueCursors>();
  private readonly order = new IndexedHeap<QueueCursors>(
    (a, b) =>
      a.rank < b.rank || (a.rank === b.rank && claimOrder(headOf(a.cursors.peek()!), headOf(b.cursors.peek()!)) < 0),
  );

  constructor(
    sources: IndexedHeap<Shape>[],
    private readonly rank: QueueRank = () => 0,
  ) {
    for (const h of sources) this.open(h, 0);
  }

  /** The best remaining task and its shape, or undefined when the walk is over. */
  next(): { shape: Shape; entry: QueueEntry } | undefined {
    const best = this.order.peek()?.cursors.peek();
    this.current = best;
    return best && { shape: best.shape, entry: headOf(best) };
  }

  /** The last task returned is taken (or gone): its shape offers its next one. */
  take(): void {
    const c = this.current!;
    const q = this.queues.get(c.shape.queue)!;
    const extra = addAmounts(
      this.extra.get(q.queue) ?? {},
      demandOf(normalise(c.shape.sample.spec.execution_profile?.resources)),
    );
    this.extra.set(q.queue, extra);
    q.rank = this.rank(q.queue, extra);
    this.taken.push({ shape: c.shape, entry: c.shape.entries.pop()! });
    if (c.shape.entries.size === 0) {
      q.cursors.remove(c);
      this.current = undefined;
    } else q.cursors.update(c);
    this.place(q);
    this.pullAfter(c);
  }

  /** The last shape returned does not fit this worker: none of its tasks are offered again. */
  skip(): void {
    const c = this.current!;
    const q = this.queues.get(c.shape.queue)!;
    q.cursors.remove(c);
    this.place(q);
    this.current = undefined;
    this.pullAfter(c);
  }

  close(): void {
    for (const { shape, entry } of this.taken) shape.entries.push(entry);
    this.taken.length = 0;
    // The cursors only point into the heaps, which the walk never changed: dropping them is enough.
    this.queues.clear();
    this.order.items.length = 0;
  }

  /** A queue's rank or best head moved: re-place it among the queues (an empty one leaves). */
  private place(q: QueueCursors): void {
    if (q.cursors.size === 0) this.order.remove(q);
    else this.order.update(q);
  }

  private pullAfter(c: Cursor): void {
    if (c.pulled) return;
    c.pulled = true;
    this.open(c.source, 2 * c.index + 1);
    this.open(c.source, 2 * c.index + 2);
  }

  /** Let the shape at `index` of heap `h` join the merge. */
  private open(h: IndexedHeap<Shape>, index: number): void {
    const shape = h.items[index];
    if (!shape) return;
    let q = this.queues.get(shape.queue);
    if (!q)
      this.queues.set(
        shape.queue,
        (q = { queue: shape.queue, rank: this.rank(shape.queue, {}), cursors: cursorHeap(), heapIndex: -1 }),
      );
    q.cursors.push({ shape, source: h, index, pulled: false, heapIndex: -1 });
    this.place(q);
  }
}
