// Operator endpoints (RUNNER_PROTOCOL 1b): dispatch, the task list, and /api/admin/*.
import { effectiveLeaseUntil, type TaskLease } from "../scheduler/renewal.ts";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { inventoryToWorkers } from "../resources/inventory.ts";
import { isFinal, isQueued, type Task } from "../resources/types.ts";
import { dispatch, repoRunRequest } from "../scheduler/dispatch.ts";
import { CLAMPED_HEADER, clampNotice, listParams } from "../scheduler/claim-params.ts";
import { HubError } from "../scheduler/errors.ts";
import { overrideState } from "../scheduler/override.ts";
import { DEFAULT_ALLOWED_TOKEN_ENV, pushTask, tokenEnvAllowed } from "../scheduler/push.ts";
import { topK } from "../scheduler/queue.ts";
import { cancel, expireLeases, retry } from "../scheduler/transitions.ts";
import { setBlocked, setDesiredConcurrency } from "../scheduler/workers.ts";
import { applyWorkers } from "../scheduler/hosts.ts";

type Body = Record<string, unknown>;
const body = (req: FastifyRequest): Body => (req.body && typeof req.body === "object" && !Buffer.isBuffer(req.body) ? (req.body as Body) : {});
const need = (b: Body, k: string): string => {
  const v = b[k];
  if (typeof v !== "string" || !v) throw new HubError(400, `${k}_required`, { field: k });
  return v;
};

/** A v1 task row, with JSON as JSON (section 7.5), never JSON in strings. */
export function taskRow(t: Task, renewal?: TaskLease) {
  const st = t.status ?? {};
  return {
    task_id: t.metadata.name,
    task_kind: t.spec.task_kind ?? "execution",
    state: st.state ?? "queued",
    campaign_id: t.spec.campaign_id ?? null,
    case_id: t.spec.case_id ?? null,
    run_id: t.spec.run_id ?? null,
    setting_id: t.spec.setting_id ?? null,
    case_version: t.spec.case_version ?? null,
    scenario_id: t.spec.scenario_id ?? null,
    package_id: t.spec.package_id ?? null,
    priority: t.spec.priority ?? 0,
    required_capability: t.spec.required_capability ?? "",
    attempt_no: st.attempt ?? 1,
    // v1 keeps the worker that produced a result; a requeued task has none until its next lease.
    lease_worker_id: st.lease?.worker ?? (isQueued(st.state ?? "queued") ? null : st.attempts?.at(-1)?.worker ?? null),
    lease_until: effectiveLeaseUntil(t, renewal) ?? null,
    result_id: st.result?.result_id ?? null,
    verdict: st.result?.verdict ?? null,
    execution_profile: t.spec.execution_profile ?? { placement: "shared", resources: {} },
    payload: t.spec.payload ?? {},
    excluded_worker_ids: st.excluded_workers ?? [],
    error: st.error ?? null,
    created_at: t.metadata.creationTimestamp ?? null,
  };
}

const FILTERS = ["state", "task_id", "case_id", "run_id", "setting_id", "package_id", "lease_worker_id", "attempt_no", "result_id", "task_kind", "campaign_id"] as const;

export async function adminRoutes(f: FastifyInstance): Promise<void> {
  const hub = f.hub;
  const ctx = hub.scheduler.ctx;

  f.post("/api/tasks/dispatch", async (req, reply) => {
    const out = await dispatch(ctx, req.body);
    return reply.code(out.status).send(out.body);
  });
  f.post("/api/tasks/dispatch-repo-run", async (req, reply) => {
    const out = await dispatch(ctx, repoRunRequest(req.body));
    return reply.code(out.status).send(out.body);
  });

  f.get("/api/tasks", async (req, reply) => {
    const q = req.query as Record<string, string | undefined>;
    // limit and offset are clamped as v1 does; the header says what moved.
    const { limit, offset, clamps } = listParams(q);
    const clamped = clampNotice(clamps);
    if (clamped) reply.header(CLAMPED_HEADER, clamped);
    const wanted = FILTERS.flatMap((k) => (q[k] ? [[k, new Set(q[k]!.split(",").map((s) => s.trim()).filter(Boolean))] as const] : []));
    // A task_id filter names its tasks: look them up rather than scanning every task.
    const named = wanted.find(([k]) => k === "task_id")?.[1];
    const candidates = named ? [...named].flatMap((n) => ctx.task(n) ?? []) : ctx.cache.list("Task");
    const rows = candidates.map((t) => taskRow(t, ctx.renewal(t.metadata.name))).filter((r) => wanted.every(([k, set]) => set.has(String(r[k] ?? ""))));
    const order = (a: ReturnType<typeof taskRow>, b: ReturnType<typeof taskRow>) => b.priority - a.priority || String(a.created_at).localeCompare(String(b.created_at)) || a.task_id.localeCompare(b.task_id);
    // Only the requested page is sorted out of the matches: a selection of offset + limit, not a sort of all.
    const page = topK(rows, offset + limit, order).slice(offset);
    return { tasks: page, total: rows.length, offset, next_offset: offset + limit < rows.length ? offset + limit : null };
  });

  f.post("/api/admin/cancel-task", async (req) => cancel(ctx, need(body(req), "task_id")));
  f.post("/api/admin/retry-task", async (req) => retry(ctx, need(body(req), "task_id"), body(req).preserve_excluded_workers === true));
  f.post("/api/admin/expire-leases", async () => expireLeases(ctx));
  // override-state: any task state by hand, through the same status write as every transition.
  f.post("/api/admin/override-state", async (req) => overrideState(ctx, body(req)));
  f.post("/api/admin/block-worker", async (req) => setBlocked(ctx, need(body(req), "worker_id"), true));
  f.post("/api/admin/unblock-worker", async (req) => setBlocked(ctx, need(body(req), "worker_id"), false));
  f.post("/api/admin/set-worker-concurrency", async (req) => {
    const b = body(req);
    return setDesiredConcurrency(ctx, need(b, "worker_id"), b.desired_concurrency as number, typeof b.reason === "string" ? b.reason : "");
  });
  f.post("/api/admin/register-worker-hosts", async (req) => {
    const b = body(req);
    const inv = b.inventory && typeof b.inventory === "object" ? (b.inventory as Body) : undefined;
    const workers: unknown = inv?.workers ?? b.workers ?? b.hosts;
    if (inv) {
      if (inv.inventory_version === undefined) throw new HubError(400, "inventory_version_required");
      if (inv.inventory_version !== 1) throw new HubError(400, "unsupported_inventory_version", { received: inv.inventory_version });
    }
    if (!Array.isArray(workers) || !workers.length) throw new HubError(400, "hosts_required");
    const conv = inventoryToWorkers({ ...(inv ?? {}), inventory_version: 1, workers });
    // A token variable the Hub would refuse to push with is refused now, not at the first push.
    const allowed = hub.opts.directTokenEnv ?? DEFAULT_ALLOWED_TOKEN_ENV;
    const tokenErrors = conv.workers.flatMap((w, i) => {
      const name = w.spec.direct_api_token_env;
      return name && !tokenEnvAllowed(name, { defaultTokenEnv: hub.opts.runnerTokenEnv, allowedTokenEnv: allowed })
        ? [{ field: `workers[${i}].direct_api_token_env`, message: `${JSON.stringify(name)} is not a variable this Hub pushes with; allowed: ${[...allowed, hub.opts.runnerTokenEnv].join(", ")} (loom hub --direct-token-env)` }]
        : [];
    });
    const errors = [...conv.errors.map(({ field, message }) => ({ field, message })), ...tokenErrors];
    if (errors.length) throw new HubError(400, "invalid_inventory", { errors, detail: errors.map((e) => `${e.field}: ${e.message}`).join("; ") });
    const registered = await applyWorkers(ctx, conv.workers, typeof b.operator === "string" ? b.operator : undefined);
    return { ok: true, registered };
  });
  f.post("/api/admin/push-task", async (req, reply) => {
    const out = await pushTask(ctx, body(req), { defaultTokenEnv: hub.opts.runnerTokenEnv, env: hub.opts.env, allowedTokenEnv: hub.opts.directTokenEnv });
    return reply.code(out.status).send(out.body);
  });

  f.get("/api/data/task-counts", async () => {
    const by: Record<string, number> = {};
    let total = 0, final = 0, pending = 0;
    // From the informer's state index: a count per state, not a walk over every task.
    for (const [s, n] of ctx.cache.indexCounts("Task", "state")) {
      by[s] = n;
      total += n;
      if (isFinal(s)) final += n;
      else if (isQueued(s) || s === "leased" || s === "running" || s === "returned" || s === "imported") pending += n;
    }
    return { total, final, pending, by_state: by };
  });
}
