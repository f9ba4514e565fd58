// Granting leases: pull claims and push both come through leaseBatch(), which asks the one
// admission function and writes every lease (with its reservation) in one transaction.
import { randomUUID } from "node:crypto";
import {
  acceptsAny,
  admit,
  admits,
  asLease,
  taskView,
  type Decision,
  type WorkerView,
  type Vector,
  type LeaseView,
} from "../admission/index.ts";
import { isQueued, type Task, type Worker } from "../resources/types.ts";
import { cacheAffinity, type CacheAffinity } from "./affinity.ts";
import type { LockedCommit, SchedulerContext } from "./context.ts";
import { HubError } from "../protocol/errors.ts";
import type { ClaimedTask, ClaimedTaskControllerConcurrency } from "../protocol/types.gen.ts";
import { grantLease } from "./lifecycle.ts";
import { nominationEnded } from "./nomination.ts";
import type { ClaimQueue } from "./queue.ts";

export type Leased = { task: Task; decision: Decision; affinity: CacheAffinity };

/** A worker view after one more lease: used between picks of the same batch. */
function withLease(v: WorkerView, l: LeaseView): WorkerView {
  return { ...v, leases: [...v.leases, l] };
}

/**
 * Shapes that do not fit a worker that one claim may pass over before it answers with what it
 * has found (v1 looks at a window of 500 tasks). Skipping costs one admission check per
 * shape, so this bounds a claim's cost however many distinct shapes are queued.
 */
export const MAX_SKIPPED_SHAPES = 2048;

/**
 * Pick up to `limit` queued tasks for one worker, in claim order, skipping what does not fit
 * (no head-of-line blocking). The walk visits only shapes whose capability the worker has;
 * a shape that does not fit is not asked again in this claim, since each pick only adds a
 * lease and so can only make the next fit harder.
 *
 * With several Hub replicas (`ctx.stripe.count` > 1) every replica's queue has the same head,
 * and claims through different replicas would pick the same tasks and race for them. So
 * among the first few candidates (a window of (`limit` + the leases this replica's claims
 * have in flight) × replicas × 2) a claim takes the
 * tasks of its own replica's stripe (a hash of the name) first, and the others only after
 * them. Beyond that window nothing changes: no task waits more than a window's worth of
 * places longer than it would on one Hub, and a stripe whose replica has no Runners is
 * taken by the others as it reaches the head.
 */
export function pickForWorker(
  queue: ClaimQueue,
  ctx: SchedulerContext,
  worker: Worker,
  limit: number,
): { picks: Pick[]; view: WorkerView } {
  let view = ctx.workerView(worker);
  const picks: Pick[] = [];
  const walk = queue.walk(view.capabilities);
  const { index, count } = ctx.stripe;
  // Claims of this replica in flight hold tasks of its stripe near the head too: the window
  // reaches past them, or a busy replica would fall back on the others' stripes at once.
  const window = count > 1 ? (limit + ctx.assumedCount) * count * 2 : 0;
  /** Candidates of other stripes, in claim order, taken after this stripe's (see above). */
  const deferred: Task[] = [];
  const pick = (task: Task, tv: ReturnType<typeof taskView>) => {
    const lease = asLease(tv);
    picks.push({ task, decision: admit(tv, view), lease });
    view = withLease(view, lease);
  };
  try {
    let skipped = 0;
    while (
      picks.length < limit &&
      skipped < MAX_SKIPPED_SHAPES &&
      (window === 0 || deferred.length < window) &&
      acceptsAny(view)
    ) {
      const next = walk.next();
      if (!next) break;
      const task = ctx.task(next.entry.name);
      // Gone, no longer queued, or held by a decision whose commit is in flight.
      if (!task || !isQueued(task.status?.state ?? "queued") || ctx.isAssumed(task.metadata.name)) {
        walk.take();
        continue;
      }
      const tv = taskView(task);
      if (!admits(tv, view)) {
        walk.skip();
        skipped++;
        continue;
      }
      walk.take();
      if (window && stripeOf(tv.name, count) !== index) deferred.push(task);
      else pick(task, tv);
    }
    for (const task of deferred) {
      if (picks.length >= limit || !acceptsAny(view)) break;
      const tv = taskView(task);
      if (admits(tv, view)) pick(task, tv);
    }
  } finally {
    walk.close();
  }
  return { picks, view };
}

/** Which of `count` replicas' stripes a task is in: FNV-1a of its name. */
export function stripeOf(name: string, count: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return (h >>> 0) % count;
}

export type Pick = { task: Task; decision: Decision; lease: LeaseView };

/** Write the leases of one batch atomically: each task must still be the version we read. */
export async function commitLeases(
  ctx: SchedulerContext,
  worker: Worker,
  picks: { task: Task; decision: Decision }[],
  opts: { mode: "pull" | "push"; leaseSeconds: number; pushId?: string; commit?: LockedCommit },
): Promise<Leased[]> {
  if (!picks.length) return [];
  const now = ctx.now();
  const live = ctx.liveness.get(worker.metadata.name);
  const ops = picks.map(({ task, decision }) => {
    const tv = taskView(task);
    const status = grantLease(
      task,
      {
        worker: worker.metadata.name,
        mode: opts.mode,
        pushId: opts.pushId,
        leaseSeconds: opts.leaseSeconds,
        placement: tv.placement,
        reservation: tv.requests,
        admission: decision.admission,
      },
      now,
    );
    return { op: "updateStatus" as const, object: { ...task, status } };
  });
  // Each status is grantLease's fresh copy, so the store keeps it as it is.
  const written = await (opts.commit ?? ctx.commit.bind(ctx))(ops, { owned: true });
  return written.map((task, i) => {
    const decision = picks[i].decision;
    const held = picks[i].task.status?.nominated_worker;
    if (held) ctx.recordEvent(nominationEnded(task, held, `leased to ${worker.metadata.name}`));
    ctx.recordEvent({
      object: task,
      type: "Normal",
      reason: "LeaseGranted",
      message: `leased to ${worker.metadata.name} (${opts.mode}, epoch ${task.status?.attempt}); reserved ${fmtReservation(decision.admission.requested)}`,
    });
    return { task, decision, affinity: cacheAffinity(task, live) };
  });
}

const fmtReservation = (v: Vector) =>
  `cpu_millis=${v.cpu_millis} memory_mb=${v.memory_mb} disk_mb=${v.disk_mb} gpu_count=${v.gpu_count}`;

/** The claim-shaped task a Runner receives (RUNNER_PROTOCOL 1a), saved by it as task.json. */
export function claimedTask(
  l: Leased,
  settings: {
    desired_concurrency: number;
    max_concurrency: number;
    initial_concurrency: number;
    concurrency_policy: string;
  },
  batch: { id: string; size: number } | undefined,
  extra: Partial<ClaimedTaskControllerConcurrency> = {},
): ClaimedTask & { controller_concurrency: ClaimedTaskControllerConcurrency } {
  const t = l.task;
  const payload = t.spec.payload ?? {};
  return {
    task_id: t.metadata.name,
    task_kind: t.spec.task_kind ?? "execution",
    lease_until: t.status?.lease?.lease_until,
    case_id: t.spec.case_id ?? null,
    run_id: t.spec.run_id ?? null,
    setting_id: t.spec.setting_id ?? null,
    case_version: t.spec.case_version ?? "v1",
    scenario_id: t.spec.scenario_id ?? t.spec.setting_id ?? null,
    package_id: t.spec.package_id ?? null,
    campaign_id: t.spec.campaign_id ?? null,
    attempt_no: t.status?.attempt ?? 1,
    assigned_worker_id: t.status?.lease?.worker,
    payload,
    // v1 sends the task's components as an object, {} when it has none.
    components: payload.components ?? {},
    controller_concurrency: {
      desired_concurrency: settings.desired_concurrency,
      max_concurrency: settings.max_concurrency,
      initial_concurrency: settings.initial_concurrency,
      concurrency_policy: settings.concurrency_policy,
      active_count_at_claim: l.decision.admission.concurrency.active_count,
      resource_admission: l.decision.admission,
      cache_affinity: l.affinity,
      ...(batch ? { claim_batch_id: batch.id, claim_batch_size: batch.size } : {}),
      ...extra,
    },
  };
}

export const newBatchId = () => `claim-${randomUUID()}`;

/** Every worker's decision for one task: the task-admission API, conditions and the CLI use this. */
export function decideAll(
  ctx: SchedulerContext,
  task: Task,
): { worker: Worker; view: WorkerView; decision: Decision }[] {
  const tv = taskView(task);
  return ctx.cache.list("Worker").map((worker) => {
    const view = ctx.workerView(worker);
    return { worker, view, decision: admit(tv, view) };
  });
}

export function requireWorker(ctx: SchedulerContext, workerId: string): Worker {
  const w = ctx.worker(workerId);
  if (!w || !w.status?.registration)
    throw new HubError(403, "worker_not_available", { worker_id: workerId, detail: "worker is not registered" });
  if (w.spec.unschedulable)
    throw new HubError(403, "worker_not_available", { worker_id: workerId, detail: "worker is blocked" });
  return w;
}
