// Nomination against starvation: a queued task that has waited past a threshold, and fits
// nowhere now, holds the worker where it could start soonest (its blocking leases end
// first). That worker then admits only work that cannot delay it (the `nomination` check
// in src/admission). Nominations are recomputed by the admission-conditions pass; a claim
// pays one map lookup per worker for them.
import { admit, taskView, type Nominee, type WorkerView } from "../admission/index.ts";
import type { SchedulerContext } from "./context.ts";
import { claimOrder, type ClaimQueue, type QueueEntry } from "./queue.ts";
import { blockingLeases } from "./why.ts";

export type Nomination = Omit<Nominee, "now">;

/**
 * Nominations for this moment: worker -> nominee. Only the best task of each requirement
 * shape can starve for its shape (the rest wait behind it anyway); those past the
 * threshold are served in claim order, each taking the free worker where its blockers end
 * first. Returns, too, when the next task crosses the threshold (ms, Infinity if none).
 */
export function nominate(ctx: SchedulerContext, queue: ClaimQueue, views: readonly WorkerView[], now: number, thresholdMs: number): { byWorker: Map<string, Nomination>; nextDue: number } {
  const plain = views.map((v) => ({ ...v, nominee: undefined }));
  const heads: QueueEntry[] = [];
  let nextDue = Infinity;
  for (const s of queue.allShapes()) {
    const head = s.entries.peek();
    if (!head) continue;
    const due = Date.parse(head.created) + thresholdMs;
    if (due <= now) heads.push(head);
    else if (due < nextDue) nextDue = due;
  }
  heads.sort(claimOrder);
  const byWorker = new Map<string, Nomination>();
  for (const h of heads) {
    const t = ctx.task(h.name);
    if (!t) continue;
    const tv = taskView(t);
    if (plain.some((v) => admit(tv, v).ok)) continue; // it will be claimed as it is
    let best: { worker: string; blockers: string[]; starts_at: number } | undefined;
    for (const v of plain) {
      if (byWorker.has(v.name)) continue;
      const b = blockingLeases(ctx, tv, v);
      if (!b) continue;
      const startsAt = b.until ? Date.parse(b.until) : Infinity;
      if (!best || startsAt < best.starts_at || (startsAt === best.starts_at && b.leases.length < best.blockers.length)) best = { worker: v.name, blockers: b.leases.map((l) => l.task), starts_at: startsAt };
    }
    if (best) byWorker.set(best.worker, { task: tv, blockers: best.blockers, starts_at: best.starts_at });
  }
  return { byWorker, nextDue };
}
