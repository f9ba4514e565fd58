// The contract's data API and the Hub's health and meta: worker-capacity, task-admission.
import { effectiveLeaseUntil } from "../scheduler/renewal.ts";
import type { FastifyInstance } from "fastify";
import { explainTask, explainWorker, summarize, taskView } from "../admission/index.ts";
import { cacheAffinity } from "../scheduler/affinity.ts";
import { decideAll } from "../scheduler/claim.ts";
import { HubError } from "../scheduler/errors.ts";
import { simulate } from "../scheduler/simulate.ts";
import { type BlockingLeases, blockingLeases, queuePositions, queueStanding, suggestions } from "../scheduler/why.ts";
import { capacityEntry } from "../scheduler/workers.ts";
import { explainQueue, queuesReport } from "../scheduler/queue-explain.ts";

export const CORE_PREVIEW_VERSION = "0.4.0";
import { PRODUCT_VERSION } from "../version.ts";

export { PRODUCT_VERSION };
/** v1's Hub capability names, as v1 clients look for them (loom_contract's hub list, in its order). */
export const V1_CAPABILITIES = [
  "hub-api-v1", "inventory-v1", "manifest-dispatch-v1", "bearer-auth", "leases", "fixed-concurrency", "adaptive-concurrency",
  "resource-reservations-v1", "shared-host-placement", "direct-runner-push", "attempt-result-retention", "task-extensions-v1",
  "immutable-source-descriptor-v1", "cache-affinity-v1", "worker-cache-inventory-v1", "oracle-v1", "trajectory-export-v1",
  "reward-contract-v1", "result-export-selectors-v1",
];
/** v1's CLI contract version: the verbs and flags of its Hub CLI, which `loom` keeps. */
export const CLI_CONTRACT_VERSION = 1;
/** Loom's own capability names, served after v1's. */
export const LOOM_CAPABILITIES = [
  "worker-register", "worker-heartbeat", "task-claim", "task-claim-long-poll", "task-start", "task-renew", "result-upload",
  "task-complete", "task-fail", "result-download", "task-dispatch", "dispatch-repo-run", "task-list", "task-counts",
  "worker-capacity", "task-admission", "resource-admission", "direct-push", "lease-expiry", "fencing", "per-worker-tokens",
];
export const CAPABILITIES = [...V1_CAPABILITIES, ...LOOM_CAPABILITIES];

/** A worker blocked only by leases: which (smallest set found) and when the last should end. */
function blockingFields(b: BlockingLeases | undefined) {
  if (!b) return {};
  return { blocking_leases: b.leases, ...(b.until ? { blocking_until: b.until } : {}) };
}

export async function dataRoutes(f: FastifyInstance): Promise<void> {
  const hub = f.hub;
  const ctx = hub.scheduler.ctx;

  f.get("/api/healthz", async () => {
    // `synced` claims that the store reflects every declared file: not while one is rejected.
    const rejected = hub.gitops?.rejectedFiles() ?? [];
    return {
      ok: true, time: new Date().toISOString(), core_preview_version: CORE_PREVIEW_VERSION, hub_api_version: 1, capabilities: CAPABILITIES, store: hub.store.backend,
      synced: hub.cache.synced && rejected.length === 0,
      informer_synced: hub.cache.synced,
      gitops: { rejected_files: rejected, ...(rejected.length ? { message: `${rejected.length} watched file(s) rejected; their previous state stays applied (see loom get events)` } : {}) },
      replica: hub.leadership.identity, leader: hub.leadership.leader() ?? null, leading: hub.leadership.isLeader(),
    };
  });
  // The Hub replicas alive now (one on SQLite), the leader marked: `loom get hubs`.
  f.get("/api/hubs", async () => ({ items: await hub.leadership.replicas() }));
  f.get("/api/meta", async () => ({
    service: "hub", product_version: PRODUCT_VERSION, core_preview_version: CORE_PREVIEW_VERSION, cli_contract_version: CLI_CONTRACT_VERSION, hub_api_version: 1, runner_api_version: 1, inventory_schema_version: 1, manifest_schema_version: 1, dispatch_schema_version: 1,
    api_version: 1, capabilities: CAPABILITIES, auth_required: hub.authRequired, runner_token_env: hub.opts.runnerTokenEnv, store: hub.store.backend,
  }));

  f.get("/api/data/worker-capacity", async () => ({
    workers: ctx.cache.list("Worker").filter((w) => !w.spec.unschedulable).map((w) => capacityEntry(ctx, w)),
  }));

  f.get("/api/data/task-admission", async (req) => {
    const taskId = (req.query as Record<string, string | undefined>).task_id;
    if (!taskId) throw new HubError(400, "task_id_required");
    const task = ctx.task(taskId);
    if (!task) throw new HubError(404, "task_not_found", { task_id: taskId, detail: `no task named "${taskId}"` });
    const all = decideAll(ctx, task);
    const decisions = all.map((x) => x.decision);
    const s = summarize(decisions);
    // Why it is pending: only a queued task has a place in the queue or leases in its way.
    const standing = queueStanding(hub.scheduler.queue, task, all);
    const tv = taskView(task);
    const blocking = new Map(standing ? all.map(({ view, decision }) => [view.name, blockingLeases(ctx, tv, view, decision)] as const) : []);
    const queue = explainQueue(ctx, hub.scheduler.queue, task, all, blocking);
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
      ...(queue ? { queue } : {}),
      workers: all.map(({ worker, decision }) => ({
        worker_id: worker.metadata.name,
        ...decision.admission,
        reason: decision.admission.reason,
        reasons: decision.reasons,
        explanation: explainWorker(decision),
        cache_affinity: cacheAffinity(task, worker.metadata.name, ctx.liveness.get(worker.metadata.name)),
        ...blockingFields(blocking.get(worker.metadata.name)),
      })),
    };
  });

  // Every queue's usage, quota, borrowing, counts and fair share: `loom get queues`, `describe queue`, the UI.
  f.get("/api/data/queues", async () => queuesReport(ctx));

  // What-if over a copy of the current state; nothing is written.
  f.post("/api/simulate", async (req) => simulate(ctx, hub.scheduler.queue, req.body));

  // worker -> the starving task it is held for, with what it waits on: the stored
  // nominations, as every claim on any replica sees them.
  f.get("/api/data/nominations", async () => ({
    nominations: ctx.cache.list("Worker").flatMap((w) => {
      const n = ctx.workerView(w).nominee;
      return n ? [{ worker_id: w.metadata.name, task_id: n.task.name, blocking_leases: n.blockers, ...(n.starts_at < Infinity ? { starts_by: new Date(n.starts_at).toISOString() } : {}) }] : [];
    }),
  }));

  // Every queued task's queue_position, for `loom get tasks -o wide`.
  f.get("/api/data/queue-positions", async () => ({
    positions: Object.fromEntries(queuePositions(hub.scheduler.queue, ctx.cache.list("Worker").map((w) => ctx.workerView(w)))),
  }));
}
