// The contract's inspection replies, built from the scheduler's state: task-admission (why a
// task waits, per worker), worker-capacity, the stored nominations and the queue positions.
// Nothing here writes.
import { explainTask, summarize, taskView } from "../admission/index.ts";
import { HubError } from "../protocol/errors.ts";
import type { JsonText } from "../protocol/json-text.ts";
import type { NominationsReply, TaskAdmission, WorkerCapacityReply } from "../protocol/types.gen.ts";
import { AdmissionEntries } from "./admission-entry.ts";
import { affinityFor, sourceCacheKey } from "./affinity.ts";
import { decideAll } from "./claim.ts";
import type { SchedulerContext } from "./context.ts";
import { explainQueue } from "./queue-explain.ts";
import type { ClaimQueue } from "./queue.ts";
import { effectiveLeaseUntil } from "./renewal.ts";
import { blockingLeases, queuePositions, queueStanding, suggestions } from "./why.ts";
import { capacityEntry } from "./workers.ts";

/**
 * The task-admission answer with each worker's entry already encoded (admission-entry.ts):
 * the HTTP reply writes the entries' text as it is, and JSON.stringify gives the same JSON
 * as a TaskAdmission.
 */
export type TaskAdmissionReply = Omit<TaskAdmission, "workers"> & { workers: JsonText[] };

/** GET /api/data/task-admission: every worker's decision for one task, and why it is pending. */
export function taskAdmission(ctx: SchedulerContext, queue: ClaimQueue, taskId: string): TaskAdmissionReply {
  const task = ctx.task(taskId);
  if (!task) throw new HubError(404, "task_not_found", { task_id: taskId, detail: `no task named "${taskId}"` });
  const all = decideAll(ctx, task);
  const decisions = all.map((x) => x.decision);
  const s = summarize(decisions);
  // Why it is pending: only a queued task has a place in the queue or leases in its way.
  const standing = queueStanding(queue, task, all);
  const tv = taskView(task);
  const blocking = new Map(
    standing ? all.map(({ view, decision }) => [view.name, blockingLeases(ctx, tv, view, decision)] as const) : [],
  );
  const explained = explainQueue(ctx, queue, task, all, blocking);
  const sourceKey = sourceCacheKey(task.spec.payload);
  const entries = new AdmissionEntries();
  return {
    task_id: taskId,
    state: task.status?.state ?? "queued",
    // The lease's end with renewals counted (they live in a TaskLease record, not the Task).
    lease_until: effectiveLeaseUntil(task, ctx.renewal(taskId)) ?? null,
    execution_profile: task.spec.execution_profile ?? { placement: "shared", resources: {} },
    required_capability: task.spec.required_capability ?? "",
    eligible_worker_count: s.admittable.length,
    unsatisfiable: s.unsatisfiable,
    summary: explainTask(decisions),
    queue_position: standing?.queue_position ?? null,
    nominated_worker: task.status?.nominated_worker ?? null,
    higher_priority_ahead: standing?.higher_priority_ahead ?? [],
    higher_priority_ahead_count: standing?.higher_priority_ahead_count ?? 0,
    suggestions: standing ? suggestions(ctx, task, all, blocking) : [],
    // Only once some Queue exists: without queues the reply is what it always was.
    ...(explained ? { queue: explained } : {}),
    workers: all.map(({ worker, view, decision }) =>
      entries.entry(
        worker,
        view,
        decision,
        affinityFor(sourceKey, ctx.liveness.get(worker.metadata.name)),
        blocking.get(worker.metadata.name),
      ),
    ),
  };
}

/** GET /api/data/worker-capacity: the workers not blocked, with what they hold and have free. */
export function workerCapacity(ctx: SchedulerContext): WorkerCapacityReply {
  return {
    workers: ctx.cache
      .list("Worker")
      .filter((w) => !w.spec.unschedulable)
      .map((w) => capacityEntry(ctx, w)),
  };
}

/** worker -> the starving task it is held for, with what it waits on, as every replica sees them. */
export function nominations(ctx: SchedulerContext): NominationsReply {
  return {
    nominations: ctx.cache.list("Worker").flatMap((w) => {
      const n = ctx.workerView(w).nominee;
      return n
        ? [
            {
              worker_id: w.metadata.name,
              task_id: n.task.name,
              blocking_leases: n.blockers,
              ...(n.starts_at < Infinity ? { starts_by: new Date(n.starts_at).toISOString() } : {}),
            },
          ]
        : [];
    }),
  };
}

/** Every queued task's queue_position. */
export function positions(ctx: SchedulerContext, queue: ClaimQueue): Map<string, number> {
  return queuePositions(
    queue,
    ctx.cache.list("Worker").map((w) => ctx.workerView(w)),
  );
}
