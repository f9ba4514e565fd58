// A task's queue, explained: where it stands inside its queue, the queue's usage against its
// quota in each dimension it limits, and its fair share against the other queues with work
// waiting. All of it comes from the ledger (usage summed from leases) and the claim queue.
import type { Decision, WorkerView } from "../admission/index.ts";
import { demandOf, queueName, type Amounts } from "../admission/queues.ts";
import { normalise } from "../admission/vector.ts";
import type { Task } from "../resources/types.ts";
import type { QueueExplanation } from "../resources/queue-explanation.ts";
import type { SchedulerContext } from "./context.ts";
import { standingSentence } from "./fair-share.ts";
import type { ClaimQueue } from "./queue.ts";
import { queueStanding, type BlockingLeases } from "./why.ts";

/** Shares are shown as claims compare them: decayed when a half-life is set. */
function standings(ctx: SchedulerContext, also: string): { queue: string; share: number }[] {
  const names = ctx.queues.names().filter((q) => q === also || ctx.queues.figures(q).pending > 0);
  return names.map((q) => ({ queue: q, share: Math.round(ctx.queues.rank(q) * 100) / 100 }));
}

/** Undefined while no Queue exists: then queues change nothing, and replies stay as they were. */
export function explainQueue(
  ctx: SchedulerContext,
  queue: ClaimQueue,
  task: Task,
  all: readonly { view: WorkerView; decision: Decision }[],
  blocking: ReadonlyMap<string, BlockingLeases | undefined> = new Map(),
): QueueExplanation | undefined {
  if (!ctx.queues.active) return undefined;
  const name = queueName(task.spec);
  const f = ctx.queues.figures(name);
  const book = ctx.queues.book();
  const demand: Amounts = demandOf(normalise(task.spec.execution_profile?.resources));
  const quota = Object.entries(f.limits?.quota ?? {}).map(([d, nominal]) => ({
    dimension: d,
    used: f.used[d] ?? 0,
    requested: demand[d] ?? 0,
    nominal,
    borrowing_limit: f.limits!.borrowing[d],
    borrowable: book.borrowable(name, d),
  }));
  const st = queueStanding(queue, task, all, (s) => s.queue === name);
  const list = standings(ctx, name);
  // Borrowed leases in its way: of other queues now past their own quota.
  const borrowing = (q: string) => q !== name && Object.keys(book.borrowedBy(q)).length > 0;
  const within = quota.every((l) => l.used + l.requested <= l.nominal);
  const waits = !within
    ? []
    : [...blocking.values()]
        .filter((b): b is BlockingLeases => !!b)
        .map((b) => ({
          b,
          leases: b.leases.map((l) => ({
            task: l.task,
            queue: queueName(ctx.task(l.task)?.spec),
            ...(l.ends_at ? { ends_at: l.ends_at } : {}),
          })),
        }))
        .filter(({ leases }) => leases.length > 0 && leases.every((l) => borrowing(l.queue)))
        .map(({ b, leases }) => ({ worker: b.worker, leases, ...(b.until ? { until: b.until } : {}) }))
        .sort((x, y) => ((x.until ?? "~") < (y.until ?? "~") ? -1 : (x.until ?? "~") > (y.until ?? "~") ? 1 : 0));
  return {
    name,
    limited: f.limits !== undefined,
    position: st?.queue_position ?? null,
    quota,
    share: Math.round(f.share * 100) / 100,
    decayed_share: Math.round(f.decayed_share * 100) / 100,
    standings: list,
    standing: standingSentence(list),
    reclaim: f.limits?.reclaim ?? "wait",
    ...(waits.length ? { waits_on_borrowed: waits } : {}),
  };
}

/** Every queue's figures, for `loom get queues`, `describe queue`, the UI and /metrics. */
export function queuesReport(ctx: SchedulerContext) {
  const names = ctx.queues.names();
  const list = standings(ctx, "");
  return {
    active: ctx.queues.active,
    half_life_seconds: ctx.queues.halfLifeMs / 1000,
    standing: standingSentence(list),
    queues: names.map((q) => {
      const f = ctx.queues.figures(q);
      return {
        name: q,
        limited: f.limits !== undefined,
        quota: f.limits?.quota ?? {},
        borrowing_limit: f.limits?.borrowing ?? {},
        lending_limit: f.limits?.lending ?? {},
        weight: f.limits?.weight ?? 1,
        reclaim: f.limits?.reclaim ?? "wait",
        used: f.used,
        borrowed: f.borrowed,
        lent: f.lent,
        pending: f.pending,
        admitted: f.admitted,
        share: f.share,
        decayed_share: f.decayed_share,
        rank: f.rank,
      };
    }),
  };
}
