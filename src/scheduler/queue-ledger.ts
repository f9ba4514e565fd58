// Every queue's limits and usage as the informer shows them. Usage is summed from the active
// leases (a lease's reservation, under its task's queue) and kept in step with each Task
// event, the way an index is: it is rebuilt from the cache, never written anywhere. The
// decayed average is the only thing with a memory, and it is a moving average of the same.
import { effectiveCapacity } from "../admission/capacity.ts";
import {
  addAmounts,
  demandOf,
  queueLimits,
  queueName,
  QueueBook,
  type Amounts,
  type QueueLimits,
} from "../admission/queues.ts";
import { leaseView, type QueuesView } from "../admission/view.ts";
import { add, normalise, zero, type Vector } from "../admission/vector.ts";
import { isKind, isQueued, type Task } from "../resources/types.ts";
import { isNews, type Informer, type InformerEvent } from "../store/cache.ts";
import { decayTowards, dominantShare } from "./fair-share.ts";

type Contribution = { queue: string; demand: Amounts; admitted: number; pending: number };

/** Two demands alike, dimension by dimension (this runs on every Task event: no encoding). */
function sameAmounts(a: Amounts | undefined, b: Amounts | undefined): boolean {
  if (a === b) return true;
  if (!a || !b) return false;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k]);
}

function contributionOf(t: Task | undefined): Contribution | undefined {
  if (!t) return undefined;
  const queue = queueName(t.spec);
  const l = leaseView(t);
  if (l) return { queue, demand: demandOf(l.reservation), admitted: 1, pending: 0 };
  if (isQueued(t.status?.state ?? "queued"))
    return { queue, demand: demandOf(normalise(t.spec.execution_profile?.resources)), admitted: 0, pending: 1 };
  return undefined;
}

export type QueueFigures = {
  name: string;
  /** Undefined for a queue tasks name that has no Queue object (not limited). */
  limits?: QueueLimits;
  used: Amounts;
  borrowed: Amounts;
  lent: Amounts;
  pending: number;
  admitted: number;
  share: number;
  decayed_share: number;
  /** The share claims order by: decayed when a half-life is set, else current. */
  rank: number;
};

export class QueueLedger {
  private readonly limits = new Map<string, QueueLimits>();
  private readonly used = new Map<string, Amounts>();
  /** What queued tasks ask for, per queue: not lent to others while they wait. */
  private readonly waiting = new Map<string, Amounts>();
  private readonly admitted = new Map<string, number>();
  private readonly pending = new Map<string, number>();
  private readonly decayed = new Map<string, { at: number; avg: Amounts }>();
  private fleetCache: Vector | undefined;
  private bookCache: QueueBook | undefined;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly cache: Informer,
    private readonly now: () => number,
    /** 0: fair share from current usage only. */
    readonly halfLifeMs: number,
  ) {
    this.unsubscribe = cache.on((ev) => this.apply(ev));
    this.rebuild();
  }

  stop(): void {
    this.unsubscribe();
  }

  /** Recount everything from the cache (after a relist). Decayed averages are kept. */
  rebuild(): void {
    this.limits.clear();
    this.used.clear();
    this.waiting.clear();
    this.admitted.clear();
    this.pending.clear();
    for (const q of this.queueObjects()) if (isKind(q, "Queue")) this.limits.set(q.metadata.name, queueLimits(q));
    for (const t of this.cache.list<Task>("Task")) this.count(contributionOf(t), 1);
    this.fleetCache = undefined;
    this.bookCache = undefined;
  }

  /** An informer built without the Queue kind (a bare scheduler in a test) has no queues. */
  private queueObjects() {
    try {
      return this.cache.list("Queue");
    } catch {
      return [];
    }
  }

  /** True when at least one Queue object exists: only then does anything limit or reorder claims. */
  get active(): boolean {
    return this.limits.size > 0;
  }

  private apply(ev: InformerEvent): void {
    const kind = ev.object.kind;
    if (kind === "Task") {
      const before = contributionOf(isKind(ev.old, "Task") ? ev.old : undefined);
      const after = ev.type === "DELETED" ? undefined : contributionOf(ev.object as Task);
      if (
        before?.queue === after?.queue &&
        before?.admitted === after?.admitted &&
        before?.pending === after?.pending &&
        sameAmounts(before?.demand, after?.demand)
      )
        return;
      this.count(before, -1);
      this.count(after, 1);
    } else if (kind === "Queue") {
      // Limits come from the spec: a status write (the queue controller's) keeps them, and the book.
      if (!isNews(ev)) return;
      if (ev.type === "DELETED") this.limits.delete(ev.object.metadata.name);
      else if (isKind(ev.object, "Queue")) this.limits.set(ev.object.metadata.name, queueLimits(ev.object));
      this.bookCache = undefined;
    } else if (kind === "Worker") this.fleetCache = undefined;
  }

  private count(c: Contribution | undefined, sign: 1 | -1): void {
    if (!c) return;
    if (Object.keys(c.demand).length) {
      if (c.admitted) this.settle(c.queue);
      const m = c.admitted ? this.used : this.waiting;
      const next = addAmounts(m.get(c.queue) ?? {}, c.demand, sign);
      if (Object.keys(next).length) m.set(c.queue, next);
      else m.delete(c.queue);
      this.bookCache = undefined;
    }
    bump(this.admitted, c.queue, sign * c.admitted);
    bump(this.pending, c.queue, sign * c.pending);
  }

  /** Fold the usage held since the last change into the decayed average, before it changes. */
  private settle(queue: string): void {
    if (!this.halfLifeMs) return;
    const now = this.now();
    const d = this.decayed.get(queue);
    this.decayed.set(queue, {
      at: now,
      avg: d
        ? decayTowards(d.avg, this.used.get(queue) ?? {}, now - d.at, this.halfLifeMs)
        : { ...(this.used.get(queue) ?? {}) },
    });
  }

  /** The decayed average usage of a queue now. */
  decayedUsage(queue: string): Amounts {
    const d = this.decayed.get(queue);
    const used = this.used.get(queue) ?? {};
    if (!this.halfLifeMs) return used;
    return d ? decayTowards(d.avg, used, this.now() - d.at, this.halfLifeMs) : used;
  }

  /** The sum of every worker's effective capacity: what a share is a fraction of. */
  fleet(): Vector {
    return (this.fleetCache ??= this.cache
      .list("Worker")
      .reduce((acc, w) => (isKind(w, "Worker") ? add(acc, effectiveCapacity(w).capacity) : acc), zero()));
  }

  /** The Queues' limits and usage now, as copies a what-if may change. */
  snapshot(): { limits: Map<string, QueueLimits>; used: Map<string, Amounts>; waiting: Map<string, Amounts> } {
    return { limits: new Map(this.limits), used: new Map(this.used), waiting: new Map(this.waiting) };
  }

  book(): QueueBook {
    return (this.bookCache ??= new QueueBook(this.limits, this.used, this.waiting));
  }

  /**
   * What the quota check needs on one worker's view, given the leases it holds; undefined (no
   * check at all, and nothing built) while no Queue exists.
   */
  viewFor(leases: readonly { task: string }[]): QueuesView | undefined {
    return this.active ? { book: this.book(), counted: new Set(leases.map((l) => l.task)) } : undefined;
  }

  private weight(queue: string): number {
    return this.limits.get(queue)?.weight ?? 1;
  }

  share(queue: string, extra: Amounts = {}): number {
    return dominantShare(addAmounts(this.used.get(queue) ?? {}, extra), this.fleet(), this.weight(queue));
  }

  decayedShare(queue: string): number {
    return dominantShare(this.decayedUsage(queue), this.fleet(), this.weight(queue));
  }

  /**
   * The claim order's rank of a queue (lower first): its decayed share when a half-life is
   * set, else its current share with what this claim has already taken. 0 for every queue
   * while no Queue exists, so claim order is exactly priority, then arrival.
   */
  rank(queue: string, extra: Amounts = {}): number {
    if (!this.active) return 0;
    return this.halfLifeMs ? this.decayedShare(queue) : this.share(queue, extra);
  }

  /** Every queue with a Queue object or with tasks, by name. */
  names(): string[] {
    return [
      ...new Set([...this.limits.keys(), ...this.used.keys(), ...this.admitted.keys(), ...this.pending.keys()]),
    ].sort();
  }

  figures(queue: string): QueueFigures {
    const book = this.book();
    return {
      name: queue,
      ...(this.limits.has(queue) ? { limits: this.limits.get(queue) } : {}),
      used: book.usedBy(queue),
      borrowed: book.borrowedBy(queue),
      lent: book.lentBy(queue),
      pending: this.pending.get(queue) ?? 0,
      admitted: this.admitted.get(queue) ?? 0,
      share: this.share(queue),
      decayed_share: this.decayedShare(queue),
      rank: this.active ? this.rank(queue) : 0,
    };
  }
}

function bump(m: Map<string, number>, k: string, by: number): void {
  if (!by) return;
  const n = (m.get(k) ?? 0) + by;
  if (n) m.set(k, n);
  else m.delete(k);
}
