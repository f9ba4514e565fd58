// Queues in a what-if: new quotas and weights (or new queues) over a copy of the ledger's
// limits and usage, and the order a claim would take queues in, as the claim walk does:
// the queue with the lowest weighted dominant share first, then claim order within it.
import {
  addAmounts,
  demandOf,
  queueLimits,
  queueName,
  QueueBook,
  type Amounts,
  type QueueLimits,
} from "../admission/queues.ts";
import { sum, type Vector } from "../admission/vector.ts";
import type { LeaseView, TaskView, WorkerView } from "../admission/view.ts";
import type { Queue } from "../resources/types.ts";
import { validateObject } from "../resources/validate.ts";
import type { SchedulerContext } from "./context.ts";
import { HubError } from "../protocol/errors.ts";
import { dominantShare } from "./fair-share.ts";
import { claimOrder, type QueueEntry } from "./queue.ts";
import type { Changes } from "../protocol/parse.ts";

const bad = (field: string, detail: string) => new HubError(400, "invalid_simulation", { field, detail });
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The Queues after `changes` (queue name -> spec fields that replace the stored ones; a new
 * name is a new Queue), each checked by the Queue schema, naming the field on error.
 */
export function queueLimitsAfter(ctx: SchedulerContext, changes: Changes["queues"]): Map<string, QueueLimits> {
  // The parser (protocol/parse.ts) passes this part through as it came: its shape is checked
  // here, beside the merge with the stored Queues that its validation needs.
  const { limits } = ctx.queues.snapshot();
  if (changes === undefined) return limits;
  if (!isObj(changes))
    throw bad(
      "queues",
      "must be an object of queue name to spec changes (quota, borrowing_limit, lending_limit, weight, reclaim)",
    );
  for (const [name, ch] of Object.entries(changes)) {
    if (!isObj(ch)) throw bad(`queues.${name}`, "must be an object");
    let stored: Queue | undefined;
    try {
      const o = ctx.cache.get("Queue", name);
      stored = o?.kind === "Queue" ? o : undefined;
    } catch {
      stored = undefined;
    }
    const q = {
      apiVersion: "loom.dev/v1alpha1",
      kind: "Queue",
      metadata: { name },
      spec: { ...(stored?.spec ?? {}), ...ch },
    } as Queue;
    const errs = validateObject(q);
    if (errs.length) throw bad(`queues.${name}.${errs[0].field.replace(/^spec\./, "")}`, errs[0].message);
    limits.set(name, queueLimits(q));
  }
  return limits;
}

/** A simulated ledger: usage moves with each placement, and every worker view reads the same book. */
export class QueueSim {
  private readonly used: Map<string, Amounts>;
  private readonly waiting: Map<string, Amounts>;
  private book: QueueBook;
  private readonly fleet: Vector;

  constructor(
    private readonly limits: Map<string, QueueLimits>,
    state: { used: Map<string, Amounts>; waiting: Map<string, Amounts> },
    views: readonly WorkerView[],
  ) {
    this.used = new Map(state.used);
    this.waiting = new Map(state.waiting);
    this.book = new QueueBook(limits, this.used, this.waiting);
    this.fleet = sum(views.map((v) => v.capacity));
  }

  get active(): boolean {
    return this.limits.size > 0;
  }

  /** The views as the quota check must see them: one book, each view's leases counted in it. */
  attach(views: WorkerView[]): void {
    for (const v of views)
      v.queues = this.active ? { book: this.book, counted: new Set(v.leases.map((l) => l.task)) } : undefined;
  }

  placed(v: WorkerView, l: LeaseView, views: WorkerView[]): void {
    if (!this.active) return;
    const q = queueName(l);
    this.used.set(q, addAmounts(this.used.get(q) ?? {}, demandOf(l.reservation)));
    this.waiting.set(q, addAmounts(this.waiting.get(q) ?? {}, demandOf(l.reservation), -1));
    this.book = new QueueBook(this.limits, this.used, this.waiting);
    for (const w of views)
      w.queues = { book: this.book, counted: w === v ? new Set([...w.queues!.counted, l.task]) : w.queues!.counted };
  }

  private rank(q: string): number {
    return dominantShare(this.used.get(q) ?? {}, this.fleet, this.limits.get(q)?.weight ?? 1);
  }

  /**
   * The entries in the order claims would offer them: per queue in claim order, the queue
   * with the lowest share first (shares moving as `take` is told what was placed); with no
   * Queue, claim order alone.
   */
  *order(entries: readonly QueueEntry[], tasks: Map<string, TaskView>): Generator<QueueEntry> {
    if (!this.active) return yield* [...entries].sort(claimOrder);
    const byQueue = new Map<string, QueueEntry[]>();
    for (const e of [...entries].sort(claimOrder)) {
      const q = queueName(tasks.get(e.name));
      byQueue.set(q, [...(byQueue.get(q) ?? []), e]);
    }
    const heads = new Map([...byQueue.keys()].map((q) => [q, 0]));
    for (;;) {
      let best: string | undefined;
      for (const [q, i] of heads) {
        if (i >= byQueue.get(q)!.length) continue;
        if (best === undefined) {
          best = q;
          continue;
        }
        const d = this.rank(q) - this.rank(best);
        if (d < 0 || (d === 0 && claimOrder(byQueue.get(q)![i], byQueue.get(best)![heads.get(best)!]) < 0)) best = q;
      }
      if (best === undefined) return;
      const i = heads.get(best)!;
      heads.set(best, i + 1);
      yield byQueue.get(best)![i];
    }
  }
}
