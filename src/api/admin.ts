// Operator endpoints (RUNNER_PROTOCOL 1b): dispatch, the task list, and /api/admin/*.
import { effectiveLeaseUntil, type TaskLease } from "../scheduler/renewal.ts";
import type { FastifyInstance } from "fastify";
import { inventoryToWorkers } from "../resources/inventory.ts";
import { isFinal, isQueued, type Task } from "../resources/types.ts";
import { CLAMPED_HEADER, clampNotice, listParams } from "../protocol/clamps.ts";
import { HubError } from "../protocol/errors.ts";
import {
  bodyOf,
  parseCancel,
  parseDispatch,
  parseOverride,
  parsePush,
  parseRetry,
  parseSetConcurrency,
  parseWorkerControl,
  parseWorkerHosts,
} from "../protocol/parse.ts";
import { repoRunRequest } from "../protocol/repo-run.ts";
import { DEFAULT_ALLOWED_TOKEN_ENV, tokenEnvAllowed } from "../scheduler/push.ts";
import { topK } from "../scheduler/queue.ts";
import { replySchema } from "./reply-schemas.ts";

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
    lease_worker_id:
      st.lease?.worker ?? (isQueued(st.state ?? "queued") ? null : (st.attempts?.at(-1)?.worker ?? null)),
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

const FILTERS = [
  "state",
  "task_id",
  "case_id",
  "run_id",
  "setting_id",
  "package_id",
  "lease_worker_id",
  "attempt_no",
  "result_id",
  "task_kind",
  "campaign_id",
] as const;

export async function adminRoutes(f: FastifyInstance): Promise<void> {
  const hub = f.hub;
  const scheduler = hub.scheduler;

  const dispatched = replySchema("dispatch", 200, 201);
  f.post("/api/tasks/dispatch", dispatched, async (req, reply) => {
    const out = await scheduler.dispatch(parseDispatch(req.body));
    return reply.code(out.status).send(out.body);
  });
  f.post("/api/tasks/dispatch-repo-run", dispatched, async (req, reply) => {
    const out = await scheduler.dispatch(repoRunRequest(req.body));
    return reply.code(out.status).send(out.body);
  });

  f.get("/api/tasks", async (req, reply) => {
    const q = req.query as Record<string, string | undefined>;
    // limit and offset are clamped as v1 does; the header says what moved.
    const { limit, offset, clamps } = listParams(q);
    const clamped = clampNotice(clamps);
    if (clamped) reply.header(CLAMPED_HEADER, clamped);
    const wanted = FILTERS.flatMap((k) =>
      q[k]
        ? [
            [
              k,
              new Set(
                q[k]
                  .split(",")
                  .map((s) => s.trim())
                  .filter(Boolean),
              ),
            ] as const,
          ]
        : [],
    );
    // A task_id filter names its tasks: look them up rather than scanning every task.
    const named = wanted.find(([k]) => k === "task_id")?.[1];
    const candidates = named ? [...named].flatMap((n) => scheduler.task(n) ?? []) : hub.cache.list("Task");
    const rows = candidates
      .map((t) => taskRow(t, scheduler.renewal(t.metadata.name)))
      .filter((r) => wanted.every(([k, set]) => set.has(String(r[k] ?? ""))));
    const order = (a: ReturnType<typeof taskRow>, b: ReturnType<typeof taskRow>) =>
      b.priority - a.priority ||
      String(a.created_at).localeCompare(String(b.created_at)) ||
      a.task_id.localeCompare(b.task_id);
    // Only the requested page is sorted out of the matches: a selection of offset + limit, not a sort of all.
    const page = topK(rows, offset + limit, order).slice(offset);
    return {
      tasks: page,
      total: rows.length,
      offset,
      next_offset: offset + limit < rows.length ? offset + limit : null,
    };
  });

  f.post("/api/admin/cancel-task", replySchema("lease"), async (req) =>
    scheduler.cancel(parseCancel(bodyOf(req.body)).task_id),
  );
  f.post("/api/admin/retry-task", replySchema("lease"), async (req) => {
    const r = parseRetry(bodyOf(req.body));
    return scheduler.retry(r.task_id, r.preserve_excluded_workers);
  });
  f.post("/api/admin/expire-leases", replySchema("expire-leases"), async () => scheduler.expireLeases());
  // override-state: any task state by hand, through the same status write as every transition.
  f.post("/api/admin/override-state", async (req) => scheduler.overrideState(parseOverride(bodyOf(req.body))));
  f.post("/api/admin/block-worker", async (req) =>
    scheduler.setBlocked(parseWorkerControl(bodyOf(req.body)).worker_id, true),
  );
  f.post("/api/admin/unblock-worker", async (req) =>
    scheduler.setBlocked(parseWorkerControl(bodyOf(req.body)).worker_id, false),
  );
  f.post("/api/admin/set-worker-concurrency", replySchema("set-worker-concurrency"), async (req) => {
    const r = parseSetConcurrency(bodyOf(req.body));
    return scheduler.setDesiredConcurrency(r.worker_id, r.desired_concurrency, r.reason);
  });
  f.post("/api/admin/register-worker-hosts", async (req) => {
    const { inventory: inv, workers, operator } = parseWorkerHosts(bodyOf(req.body));
    const conv = inventoryToWorkers({ ...(inv ?? {}), inventory_version: 1, workers });
    // A token variable the Hub would refuse to push with is refused now, not at the first push.
    const allowed = hub.opts.directTokenEnv ?? DEFAULT_ALLOWED_TOKEN_ENV;
    const tokenErrors = conv.workers.flatMap((w, i) => {
      const name = w.spec.direct_api_token_env;
      return name && !tokenEnvAllowed(name, { defaultTokenEnv: hub.opts.runnerTokenEnv, allowedTokenEnv: allowed })
        ? [
            {
              field: `workers[${i}].direct_api_token_env`,
              message: `${JSON.stringify(name)} is not a variable this Hub pushes with; allowed: ${[...allowed, hub.opts.runnerTokenEnv].join(", ")} (loom hub --direct-token-env)`,
            },
          ]
        : [];
    });
    const errors = [...conv.errors.map(({ field, message }) => ({ field, message })), ...tokenErrors];
    if (errors.length)
      throw new HubError(400, "invalid_inventory", {
        errors,
        detail: errors.map((e) => `${e.field}: ${e.message}`).join("; "),
      });
    const registered = await scheduler.registerWorkers(conv.workers, operator);
    return { ok: true, registered };
  });
  f.post("/api/admin/push-task", replySchema("push", 202), async (req, reply) => {
    const out = await scheduler.push(parsePush(bodyOf(req.body)), {
      defaultTokenEnv: hub.opts.runnerTokenEnv,
      env: hub.opts.env,
      allowedTokenEnv: hub.opts.directTokenEnv,
    });
    return reply.code(out.status).send(out.body);
  });

  f.get("/api/data/task-counts", async () => {
    const by: Record<string, number> = {};
    let total = 0,
      final = 0,
      pending = 0;
    // From the informer's state index: a count per state, not a walk over every task.
    for (const [s, n] of hub.cache.indexCounts("Task", "state")) {
      by[s] = n;
      total += n;
      if (isFinal(s)) final += n;
      else if (isQueued(s) || s === "leased" || s === "running" || s === "returned" || s === "imported") pending += n;
    }
    return { total, final, pending, by_state: by };
  });
}
