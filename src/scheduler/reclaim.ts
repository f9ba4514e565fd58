// Reclaim by preemption: a Queue with `reclaim: preempt`, below its quota, whose best queued
// task fits nowhere but would fit on some worker if leases borrowed by other queues ended,
// gets that worker back: the youngest, lowest-priority borrowed leases there are requeued
// (the fewest that make room). The attempt is not counted against max_attempts; the old
// holder's Runner is fenced off and stops the run at its next renew. Reclaim by waiting
// needs nothing here: a lender's queued work is never lent (admission/queues.ts).
import { admit, queueName, taskView, type Decision, type LeaseView, type WorkerView } from "../admission/index.ts";
import { demandOf, type Amounts } from "../admission/queues.ts";
import type { Task, TaskStatus } from "../resources/types.ts";
import type { SchedulerContext } from "./context.ts";
import { requeue } from "./lifecycle.ts";
import { claimOrder, type ClaimQueue, type QueueEntry } from "./queue.ts";
import { without } from "./why.ts";

/** The outcome an attempt ended by reclaim records; such attempts do not count against max_attempts. */
export const RECLAIMED = "reclaimed";

/** Attempts that count against max_attempts: reclaimed ones are the Hub's doing, not the task's. */
export function countedAttempts(st: TaskStatus | undefined): number {
  const reclaimed = (st?.attempts ?? []).filter((a) => a.outcome === RECLAIMED).length;
  return Math.max(1, (st?.attempt ?? 1) - reclaimed);
}

export type Victim = { task: string; queue: string; priority: number; leased_at: string; created: string };

/** Lowest priority first, then the youngest lease (a batch shares one lease time: then the latest in claim order). */
const victimOrder = (a: Victim, b: Victim) =>
  a.priority - b.priority || cmp(b.leased_at, a.leased_at) || cmp(b.created, a.created) || cmp(b.task, a.task);
const cmp = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0);
export type ReclaimPlan = { queue: string; task: string; worker: string; victims: Victim[]; why: string };

const fits = (d: Decision) => d.ok;

/** The best queued task of one queue, in claim order. */
function headOf(queue: ClaimQueue, name: string): QueueEntry | undefined {
  let best: QueueEntry | undefined;
  for (const s of queue.allShapes()) {
    if (s.queue !== name) continue;
    const e = s.entries.peek();
    if (e && (!best || claimOrder(e, best) < 0)) best = e;
  }
  return best;
}

/** Whether `demand` fits within the queue's nominal quota (no borrowing): only then may it reclaim. */
function withinNominal(quota: Amounts, used: Amounts, demand: Amounts): boolean {
  return Object.entries(quota).every(([d, n]) => (used[d] ?? 0) + (demand[d] ?? 0) <= n);
}

/** What to reclaim now: at most one worker per preempting queue. Pure over the informer; writes nothing. */
export function planReclaim(ctx: SchedulerContext, queue: ClaimQueue): ReclaimPlan[] {
  if (!ctx.queues.active) return [];
  const book = ctx.queues.book();
  const borrowing = (q: string) => Object.keys(book.borrowedBy(q)).length > 0;
  const views: WorkerView[] = ctx.cache.list("Worker").map((w) => ctx.workerView(w));
  const plans: ReclaimPlan[] = [];
  const taken = new Set<string>();
  for (const [name, limits] of book.limits) {
    if (limits.reclaim !== "preempt") continue;
    const head = headOf(queue, name);
    const task = head && ctx.task(head.name);
    if (!task) continue;
    const tv = taskView(task);
    if (!withinNominal(limits.quota, book.usedBy(name), demandOf(tv.requests))) continue;
    if (views.some((v) => fits(admit(tv, v)))) continue; // a claim will take it as it is
    let best: ReclaimPlan | undefined;
    for (const v of views) {
      if (taken.has(v.name)) continue;
      // Borrowed leases here: of other queues that are past their quota. Youngest and lowest priority go first.
      const candidates = v.leases
        .filter((l: LeaseView) => queueName(l) !== name && borrowing(queueName(l)))
        .map((l) => {
          const t = ctx.task(l.task);
          return {
            task: l.task,
            queue: queueName(l),
            priority: t?.spec.priority ?? 0,
            leased_at: t?.status?.lease?.leased_at ?? "",
            created: t?.metadata.creationTimestamp ?? "",
          };
        })
        .sort(victimOrder);
      const released = new Set<string>();
      const victims: Victim[] = [];
      for (const c of candidates) {
        if (best && victims.length >= best.victims.length) break;
        released.add(c.task);
        victims.push(c);
        if (fits(admit(tv, without(v, released)))) {
          const used = Object.entries(limits.quota)
            .map(([d, n]) => `${d} ${book.usedBy(name)[d] ?? 0} used of ${n} nominal`)
            .join(", ");
          best = {
            queue: name,
            task: task.metadata.name,
            worker: v.name,
            victims: [...victims],
            why: `queue ${name} is below its quota (${used}) and ${task.metadata.name} fits on ${v.name} once these borrowed leases end`,
          };
          break;
        }
      }
    }
    if (best) {
      taken.add(best.worker);
      plans.push(best);
    }
  }
  return plans;
}

/** Requeue one victim if it still holds the lease the plan saw; returns the task as written, or undefined. */
export async function reclaimLease(
  ctx: SchedulerContext,
  plan: ReclaimPlan,
  victim: Victim,
): Promise<Task | undefined> {
  const done = await ctx.updateTask<boolean>(victim.task, (t) => {
    if (t.status?.lease?.worker !== plan.worker || (t.status.state !== "leased" && t.status.state !== "running"))
      return { result: false };
    return { status: requeue(t.status, ctx.now(), RECLAIMED, "Reclaimed"), result: true };
  });
  const t = done ? ctx.task(victim.task) : undefined;
  if (t)
    ctx.recordEvent({
      object: t,
      type: "Normal",
      reason: "Reclaimed",
      message: `lease on ${plan.worker} ended and requeued (not counted against max_attempts): queue ${victim.queue} had borrowed it; ${plan.why}`,
    });
  return t;
}
