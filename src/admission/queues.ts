// Queues as admission sees them: quotas, borrowing and lending in the contract's units, and
// the usage that counts against them. Usage is always summed from active leases (the
// scheduler's ledger and the store's guard both derive it), never kept as a second record.
import { RESOURCE_FIELDS, type Queue, type QueueSpecQuota } from "../resources/types.ts";
import type { Vector } from "./vector.ts";

/** The queue of a task (or a campaign) that names none. */
export const DEFAULT_QUEUE = "default";

export const queueName = (spec: { queue?: string } | undefined): string => spec?.queue ?? DEFAULT_QUEUE;

/**
 * Amounts by dimension: the four resource fields, and `gpu_types.<type>` for GPUs of one
 * type. A quota holds only the dimensions it limits.
 */
export type Amounts = Record<string, number>;

export const TYPED_GPU = "gpu_types.";

/** The dimensions a quota object names, with their amounts. */
export function amountsOf(q: QueueSpecQuota | undefined): Amounts {
  const out: Amounts = {};
  if (!q) return out;
  for (const f of RESOURCE_FIELDS) if (typeof q[f] === "number") out[f] = q[f]!;
  for (const [t, n] of Object.entries(q.gpu_types ?? {})) out[TYPED_GPU + t] = n;
  return out;
}

/**
 * What one reservation counts against a queue: every resource field, and its GPUs against
 * every type it accepts (a task that takes a100 or h100 may land on either, so it is counted
 * against both: a typed quota is never exceeded, at worst under-used).
 */
export function demandOf(v: Vector): Amounts {
  return addDemand({}, v);
}

/** Add (sign 1) or take away (-1) what `v` counts against a queue (demandOf) to `into`, in place; an amount that reaches 0 is dropped. */
export function addDemand(into: Amounts, v: Vector, sign: 1 | -1 = 1): Amounts {
  for (const f of RESOURCE_FIELDS) if (v[f] > 0) bump(into, f, sign * v[f]);
  if (v.gpu_count > 0) for (const t of v.gpu_types) bump(into, TYPED_GPU + t, sign * v.gpu_count);
  return into;
}

function bump(a: Amounts, k: string, by: number): void {
  const n = (a[k] ?? 0) + by;
  if (n === 0) delete a[k];
  else a[k] = n;
}

export function addAmounts(a: Amounts, b: Amounts, sign = 1): Amounts {
  const out: Amounts = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const n = (out[k] ?? 0) + sign * v;
    if (n === 0) delete out[k];
    else out[k] = n;
  }
  return out;
}

export type QueueLimits = {
  name: string;
  /** Nominal quota; a dimension not named is not limited. */
  quota: Amounts;
  /** Per quota dimension: how far past it the queue may go (default 0). */
  borrowing: Amounts;
  /** Per quota dimension: how much of its unused quota others may borrow (default all of it). */
  lending: Amounts;
  weight: number;
  reclaim: "wait" | "preempt";
};

export function queueLimits(q: Queue): QueueLimits {
  const quota = amountsOf(q.spec?.quota);
  const bl = amountsOf(q.spec?.borrowing_limit);
  const ll = amountsOf(q.spec?.lending_limit);
  const borrowing: Amounts = {};
  const lending: Amounts = {};
  for (const [d, n] of Object.entries(quota)) {
    borrowing[d] = bl[d] ?? 0;
    lending[d] = Math.min(ll[d] ?? n, n);
  }
  return {
    name: q.metadata.name,
    quota,
    borrowing,
    lending,
    weight: q.spec?.weight ?? 1,
    reclaim: q.spec?.reclaim === "preempt" ? "preempt" : "wait",
  };
}

/** The hard ceiling of one dimension: nominal plus the borrowing limit. The store's guard keeps it. */
export const ceilingOf = (l: QueueLimits, d: string): number => (l.quota[d] ?? Infinity) + (l.borrowing[d] ?? 0);

const borrowedIn = (l: QueueLimits, used: Amounts, d: string) => Math.max(0, (used[d] ?? 0) - l.quota[d]);
/**
 * What of its quota a queue leaves unused and lets others borrow. Its own queued work is a
 * claim on its quota too: while it waits, that part is not lent (reclaim by waiting: no new
 * borrowing of it, and the borrowed leases give it back as they end).
 */
const lendableIn = (l: QueueLimits, used: Amounts, d: string, waiting: Amounts = {}) =>
  Math.min(l.lending[d], Math.max(0, l.quota[d] - (used[d] ?? 0) - (waiting[d] ?? 0)));

/**
 * Every queue's limits and usage at one moment, with the pool's totals per dimension: what
 * all queues leave unused and lendable, and what all of them borrow. Built by the scheduler's
 * ledger from the informer; read by the quota check.
 */
export class QueueBook {
  private readonly lendable: Amounts = {};
  private readonly borrowed: Amounts = {};

  constructor(
    readonly limits: ReadonlyMap<string, QueueLimits>,
    readonly used: ReadonlyMap<string, Amounts>,
    /** What each queue's queued tasks ask for: not lent while they wait. */
    readonly waiting: ReadonlyMap<string, Amounts> = new Map(),
  ) {
    for (const l of limits.values()) {
      const u = used.get(l.name) ?? {};
      for (const d of Object.keys(l.quota)) {
        this.lendable[d] = (this.lendable[d] ?? 0) + lendableIn(l, u, d, waiting.get(l.name));
        this.borrowed[d] = (this.borrowed[d] ?? 0) + borrowedIn(l, u, d);
      }
    }
  }

  usedBy(queue: string): Amounts {
    return this.used.get(queue) ?? {};
  }

  /**
   * How far past its quota `queue` may go in `d` now: its borrowing limit, or less when the
   * other queues' unused lendable quota, less what the others already borrow, is smaller.
   */
  borrowable(queue: string, d: string): number {
    const l = this.limits.get(queue);
    if (!l || !(d in l.quota)) return Infinity;
    const u = this.usedBy(queue);
    const othersFree = (this.lendable[d] ?? 0) - lendableIn(l, u, d, this.waiting.get(queue));
    const othersBorrowed = (this.borrowed[d] ?? 0) - borrowedIn(l, u, d);
    return Math.max(0, Math.min(l.borrowing[d], othersFree - othersBorrowed));
  }

  /** What others borrow of this queue's unused quota, if they borrow from it first (an estimate: lending is pooled). */
  lentBy(queue: string): Amounts {
    const l = this.limits.get(queue);
    const out: Amounts = {};
    if (!l) return out;
    const u = this.usedBy(queue);
    for (const d of Object.keys(l.quota)) {
      const othersBorrowed = (this.borrowed[d] ?? 0) - borrowedIn(l, u, d);
      const n = Math.min(l.lending[d], Math.max(0, l.quota[d] - (u[d] ?? 0)), Math.max(0, othersBorrowed));
      if (n > 0) out[d] = n;
    }
    return out;
  }

  borrowedBy(queue: string): Amounts {
    const l = this.limits.get(queue);
    const out: Amounts = {};
    if (!l) return out;
    const u = this.usedBy(queue);
    for (const d of Object.keys(l.quota)) if (borrowedIn(l, u, d) > 0) out[d] = borrowedIn(l, u, d);
    return out;
  }
}

/** One dimension a request does not fit in its queue: used + requested > nominal + borrowable. */
export type QueueShortfall = {
  queue: string;
  dimension: string;
  used: number;
  requested: number;
  nominal: number;
  borrowable: number;
  borrowing_limit: number;
};

export const describeQueueShortfall = (s: QueueShortfall): string =>
  `queue ${s.queue}: ${s.dimension} ${s.used} used + ${s.requested} requested > ${s.nominal} nominal + ${s.borrowable} borrowable`;

/**
 * Every quota dimension `demand` does not fit in `queue`, given what the queue uses now
 * (`used`, which may include leases picked in this batch but not yet in the book).
 */
export function quotaShortfalls(book: QueueBook, queue: string, used: Amounts, demand: Amounts): QueueShortfall[] {
  const l = book.limits.get(queue);
  if (!l) return [];
  const out: QueueShortfall[] = [];
  for (const [d, req] of Object.entries(demand)) {
    if (!(d in l.quota) || req <= 0) continue;
    const u = used[d] ?? 0;
    const b = book.borrowable(queue, d);
    if (u + req <= l.quota[d] + b) continue;
    out.push({
      queue,
      dimension: d,
      used: u,
      requested: req,
      nominal: l.quota[d],
      borrowable: b,
      borrowing_limit: l.borrowing[d],
    });
  }
  return out;
}

/** The dimensions of `demand` past the queue's hard ceiling (nominal + borrowing limit), given `used` without it. */
export function ceilingBreaches(l: QueueLimits, used: Amounts, demand: Amounts): QueueShortfall[] {
  const out: QueueShortfall[] = [];
  for (const [d, req] of Object.entries(demand)) {
    if (!(d in l.quota) || req <= 0) continue;
    const u = used[d] ?? 0;
    if (u + req > ceilingOf(l, d))
      out.push({
        queue: l.name,
        dimension: d,
        used: u,
        requested: req,
        nominal: l.quota[d],
        borrowable: l.borrowing[d],
        borrowing_limit: l.borrowing[d],
      });
  }
  return out;
}
