// Runner registration and heartbeats, and the operator's worker controls. Registration
// lands in the Worker's status; a worker no file declares is created from it, the way a
// kubelet registers its Node. Where the inventory declares a field, the inventory wins.
import {
  concurrencySettings,
  defaultCapacityFromHost,
  effectiveCapacity,
  overlayCapacity,
  concurrencyOf,
  reservedOf,
  sub,
} from "../admission/index.ts";
import { API_VERSION } from "../resources/crds.ts";
import { isActive, setCondition, type Worker, type WorkerStatus } from "../resources/types.ts";
import type { SchedulerContext } from "./context.ts";
import { HubError } from "../protocol/errors.ts";
import type { Heartbeat, Registration } from "../protocol/parse.ts";
import type { CapacityEntry, HeartbeatReply, RegisterReply, SetWorkerConcurrencyReply } from "../protocol/types.gen.ts";
import { jsonClone } from "../resources/json.ts";
import { conflictOrTaken } from "../store/retry.ts";

export const ORIGIN_LABEL = "loom.dev/origin";

/** The values a Runner must follow: the inventory's where declared, else what it registered. */
export function effectiveSettings(w: Worker) {
  return { ...concurrencySettings(w), resource_capacity: effectiveCapacity(w).capacity };
}

export { normaliseCapacityInput } from "../protocol/parse.ts";

export async function register(ctx: SchedulerContext, r: Registration): Promise<RegisterReply> {
  const {
    worker_id: id,
    max_concurrency: max,
    initial_concurrency: initial,
    concurrency_policy: policy,
    capabilities,
    reported_capacity: reported,
    health,
  } = r;
  const hostResources = health.resources && typeof health.resources === "object" ? health.resources : undefined;
  // A v1 Runner sends a complete vector; a partial one is completed from its host snapshot, as v1 does.
  const fullReported = overlayCapacity(defaultCapacityFromHost(hostResources), reported);

  // Another replica may create or rewrite the worker in between: both are retried.
  return ctx.readModifyWrite(
    async (commit) => {
      const now = ctx.now();
      const existing = ctx.worker(id);
      const status: WorkerStatus = jsonClone(existing?.status ?? {});
      status.registration = {
        registered_at: new Date(now).toISOString(),
        runner_api_version: 1,
        ...(typeof health.hostname === "string" ? { hostname: health.hostname } : {}),
        ...(typeof health.platform === "string" ? { platform: health.platform } : {}),
        capabilities,
        max_concurrency: max,
        initial_concurrency: initial,
        concurrency_policy: policy,
        resource_capacity: { ...fullReported, ...(fullReported.gpu_types.length ? {} : { gpu_types: undefined }) },
        ...(hostResources ? { host_resources: hostResources } : {}),
      };
      if (!status.registration.resource_capacity!.gpu_types) delete status.registration.resource_capacity!.gpu_types;
      status.conditions ??= [];
      setCondition(
        status.conditions,
        {
          type: "Registered",
          status: "True",
          reason: "RunnerRegistered",
          message: `runner registered from ${status.registration.hostname ?? "unknown host"}`,
        },
        new Date(now).toISOString(),
      );
      // Re-registering resets desired concurrency to initial and clears tuning (v1).
      delete status.tuning;
      const draft = {
        ...(existing ?? {
          apiVersion: API_VERSION,
          kind: "Worker",
          metadata: { name: id, labels: { [ORIGIN_LABEL]: "registration" } },
          spec: {},
        }),
        status,
      } as Worker;
      status.desired_concurrency = effectiveSettings({
        ...draft,
        status: { ...status, desired_concurrency: undefined },
      }).initial_concurrency;
      const op = existing ? { op: "updateStatus" as const, object: draft } : { op: "create" as const, object: draft };
      const [written] = await commit([op]);
      ctx.liveness.registered(id, now, health);
      const s = effectiveSettings(written);
      ctx.recordEvent({
        object: written,
        type: "Normal",
        reason: "Registered",
        message: `runner registered (max ${max}, initial ${initial}, ${policy})`,
      });
      return {
        ok: true,
        worker_id: id,
        initial_concurrency: s.initial_concurrency,
        desired_concurrency: s.desired_concurrency,
        max_concurrency: s.max_concurrency,
        concurrency_policy: s.concurrency_policy,
        resource_capacity: s.resource_capacity,
      };
    },
    { retryable: conflictOrTaken },
  );
}

export function heartbeat(ctx: SchedulerContext, hb: Heartbeat): HeartbeatReply {
  const id = hb.worker_id;
  const now = ctx.now();
  const w = ctx.worker(id);
  // A run the Hub already saw end (uploaded, failed, cancelled, requeued) no longer counts: a
  // heartbeat built just before a task finished must not hold its slot until the next one.
  // Runs the Hub does not know keep counting, as v1 counts them.
  const runs = hb.current_runs.filter((r) => {
    const t = typeof r.task_id === "string" ? ctx.task(r.task_id) : undefined;
    return !t || (isActive(t.status?.state) && t.status?.lease?.worker === id);
  });
  // An unknown worker gets 200 with defaults (v1); nothing is recorded for it.
  if (w) ctx.liveness.heartbeat(id, now, runs, hb.health);
  const s = w
    ? effectiveSettings(w)
    : {
        initial_concurrency: 1,
        desired_concurrency: 1,
        max_concurrency: 1,
        concurrency_policy: "fixed",
        resource_capacity: defaultCapacityFromHost(undefined),
      };
  if (w && (runs.length < ctx.activeTasksOn(id).length || runs.length === 0)) ctx.wake();
  // A Runner told it is not registered (its worker was pruned and declared again, the store was reset) registers again.
  return {
    ok: true,
    worker_id: id,
    time: new Date(now).toISOString(),
    registered: w?.status?.registration !== undefined,
    ...s,
  };
}

export async function setDesiredConcurrency(
  ctx: SchedulerContext,
  workerId: string,
  desired: number,
  reason: string,
): Promise<SetWorkerConcurrencyReply> {
  return ctx.readModifyWrite(async (commit) => {
    const w = ctx.worker(workerId);
    if (!w) throw new HubError(404, "worker_not_found", { worker_id: workerId });
    const max = effectiveSettings(w).max_concurrency;
    const value = Math.min(Math.max(desired, 1), max);
    if (w.status?.desired_concurrency !== value) {
      const [written] = await commit([
        { op: "updateStatus", object: { ...w, status: { ...w.status, desired_concurrency: value } } },
      ]);
      ctx.recordEvent({
        object: written,
        type: "Normal",
        reason: "ConcurrencySet",
        message: `desired concurrency ${value}${reason ? `: ${reason}` : ""}`,
      });
    }
    return { ok: true, worker_id: workerId, desired_concurrency: value, max_concurrency: max };
  });
}

/** Cordon or uncordon (v1's block/unblock): spec.unschedulable, like a Node. */
export async function setBlocked(ctx: SchedulerContext, workerId: string, blocked: boolean) {
  return ctx.readModifyWrite(async (commit) => {
    const w = ctx.worker(workerId);
    if (!w) throw new HubError(404, "worker_not_found", { worker_id: workerId });
    if ((w.spec.unschedulable ?? false) !== blocked) {
      const spec = { ...w.spec };
      if (blocked) spec.unschedulable = true;
      else delete spec.unschedulable;
      const [written] = await commit([{ op: "update", object: { ...w, spec } }]);
      ctx.recordEvent({
        object: written,
        type: "Normal",
        reason: blocked ? "Cordoned" : "Uncordoned",
        message: blocked ? "worker blocked: no new leases" : "worker unblocked",
      });
    }
    return { ok: true, worker_id: workerId, blocked };
  });
}

/** Worker status facts for the capacity API, all derived at read time. */
export function capacityEntry(ctx: SchedulerContext, w: Worker) {
  const view = ctx.workerView(w);
  const s = effectiveSettings(w);
  const reserved = reservedOf(view);
  const cap = view.capacity;
  const available = sub(cap, reserved);
  const c = concurrencyOf(view);
  return {
    worker_id: w.metadata.name,
    status: w.spec.unschedulable
      ? "blocked"
      : !w.status?.registration
        ? "unregistered"
        : view.ready
          ? "ready"
          : "not_ready",
    capacity: cap,
    reserved,
    available,
    active_task_ids: view.leases.map((l) => l.task),
    exclusive_active: view.leases.some((l) => l.placement === "exclusive"),
    max_concurrency: s.max_concurrency,
    desired_concurrency: s.desired_concurrency,
    active_count: c.active_count,
    effective_limit: c.effective_limit,
  } satisfies CapacityEntry;
}
