// Worker controller: the Worker's status shows its effective capacity, what its active
// leases reserve, its headroom, the exclusive holder and its conditions. All of it is
// derived from the leases and the liveness table at each pass, and written only when a
// fact changes or Ready flips (never for a heartbeat alone; a Direct Runner's last call is
// kept up to within half the grace period, see lastCallWorthKeeping). A worker the inventory
// stopped declaring is deleted once it holds no active lease.
import { exclusiveActive } from "../admission/index.ts";
import { setCondition, type Worker, type WorkerStatus } from "../resources/types.ts";
import type { ControllerServices } from "../scheduler/controller-services.ts";
import { directEndpoint } from "../scheduler/direct-endpoint.ts";
import { effectiveSettings } from "../scheduler/workers.ts";
import { isStoreError } from "../store/errors.ts";
import type { StoredObject } from "../store/store.ts";
import type { Reconciler, Result } from "./controller.ts";
import { jsonClone } from "../resources/json.ts";

export const PRUNED_ANNOTATION = "loom.dev/pruned";

/** Status fields that change without being news: never a reason to write on their own. */
const VOLATILE: (keyof WorkerStatus)[] = ["last_heartbeat_at"];

function comparable(s: WorkerStatus | undefined): string {
  const c: Record<string, unknown> = { ...(s ?? {}) };
  for (const k of VOLATILE) delete c[k];
  return JSON.stringify(c);
}

/**
 * A Direct Runner may call only rarely (v1's heartbeats only around pushes), and the Hub
 * carries its last call over a restart from the stored last_heartbeat_at. So for such a
 * worker the stored time is brought up to date once it lags by half the grace period:
 * at most one write per half-grace per worker, and none for pull Runners.
 */
function lastCallWorthKeeping(w: Worker, lastSeen: number | undefined, graceMs: number): boolean {
  if (lastSeen === undefined || !directEndpoint(w)) return false;
  const stored = Date.parse(w.status?.last_heartbeat_at ?? "");
  return Number.isNaN(stored) || lastSeen - stored > graceMs / 2;
}

/** What the worker controller reads and writes: workers, their views and capacity, their last calls. */
export type WorkerControllerDeps = Pick<
  ControllerServices,
  "store" | "cache" | "now" | "recordEvent" | "worker" | "workerView" | "capacityEntry" | "heartbeatGraceSeconds"
> & {
  readonly liveness: Pick<ControllerServices["liveness"], "get">;
};

export class WorkerReconciler implements Reconciler {
  readonly name = "worker";
  constructor(private readonly deps: WorkerControllerDeps) {}

  keys(): string[] {
    return this.deps.cache.list<StoredObject>("Worker").map((w) => w.metadata.name);
  }

  async reconcile(name: string): Promise<Result> {
    const deps = this.deps;
    const w = deps.worker(name);
    if (!w) return;
    const now = deps.now();
    const view = deps.workerView(w);
    if (w.metadata.annotations?.[PRUNED_ANNOTATION] === "true" && view.leases.length === 0) {
      try {
        await deps.store.delete("Worker", name, { resourceVersion: w.metadata.resourceVersion });
        deps.recordEvent({
          object: w,
          type: "Normal",
          reason: "Deleted",
          message: "no longer declared and no active lease: deleted",
        });
      } catch (e) {
        if (!isStoreError(e, "Conflict") && !isStoreError(e, "NotFound")) throw e;
      }
      return;
    }
    const e = deps.capacityEntry(w);
    const s = effectiveSettings(w);
    const live = deps.liveness.get(name);
    const iso = new Date(now).toISOString();
    const st: WorkerStatus = jsonClone(w.status ?? {});
    st.observedGeneration = w.metadata.generation;
    st.capacity = e.capacity;
    st.reserved = e.reserved;
    st.available = e.available;
    st.active_task_ids = e.active_task_ids;
    st.active_count = e.active_count;
    st.effective_limit = e.effective_limit;
    st.desired_concurrency = s.desired_concurrency;
    const holder = view.leases.find((l) => l.placement === "exclusive")?.task;
    if (holder) st.exclusive_holder = holder;
    else delete st.exclusive_holder;
    if (live) st.last_heartbeat_at = new Date(live.lastSeen).toISOString();
    st.conditions ??= [];
    setCondition(
      st.conditions,
      st.registration
        ? {
            type: "Registered",
            status: "True",
            reason: "RunnerRegistered",
            message: `registered at ${st.registration.registered_at}`,
          }
        : {
            type: "Registered",
            status: "False",
            reason: "NotRegistered",
            message: "no Runner has registered as this worker",
          },
      iso,
    );
    const ready = view.ready;
    setCondition(
      st.conditions,
      ready
        ? {
            type: "Ready",
            status: "True",
            reason: "RunnerAlive",
            message: `last call within ${deps.heartbeatGraceSeconds}s`,
          }
        : {
            type: "Ready",
            status: "False",
            reason: live ? "HeartbeatMissing" : "NoHeartbeat",
            message: live
              ? `no call since ${new Date(live.lastSeen).toISOString()} (grace ${deps.heartbeatGraceSeconds}s)`
              : "no heartbeat since the Hub started",
          },
      iso,
    );
    if (w.spec.unschedulable)
      setCondition(
        st.conditions,
        {
          type: "Cordoned",
          status: "True",
          reason: w.metadata.annotations?.[PRUNED_ANNOTATION] === "true" ? "NoLongerDeclared" : "Blocked",
          message: "no new leases are admitted",
        },
        iso,
      );
    else if (st.conditions.some((c) => c.type === "Cordoned"))
      setCondition(
        st.conditions,
        { type: "Cordoned", status: "False", reason: "Schedulable", message: "accepting leases" },
        iso,
      );
    if (exclusiveActive(view))
      setCondition(
        st.conditions,
        { type: "ExclusiveHeld", status: "True", reason: "ExclusiveLease", message: `held by ${holder}` },
        iso,
      );
    else if (st.conditions.some((c) => c.type === "ExclusiveHeld"))
      setCondition(
        st.conditions,
        { type: "ExclusiveHeld", status: "False", reason: "NoExclusiveLease", message: "no exclusive lease is active" },
        iso,
      );

    if (
      comparable(st) !== comparable(w.status) ||
      lastCallWorthKeeping(w, live?.lastSeen, deps.heartbeatGraceSeconds * 1000)
    ) {
      try {
        // Read-only results: the store keeps the object as written, and a claim this replica
        // decides before its informer shows the write compares against it, not against the
        // copy this write replaced (store/etcd.ts).
        const applied = await deps.store.apply([{ op: "updateStatus", object: { ...w, status: st } }], {
          readOnlyResults: true,
        });
        await applied.durable;
      } catch (err) {
        if (!isStoreError(err, "Conflict")) throw err;
        return { requeueAfterMs: 50 }; // someone else wrote: look again with fresh data
      }
    }
    // Come back when Ready would flip by the clock alone.
    if (ready && live)
      return { requeueAfterMs: Math.max(1000, live.lastSeen + deps.heartbeatGraceSeconds * 1000 - now + 50) };
  }
}
