// Direct Runner push (admin push-task, and the push dispatcher): the same admission and
// the same atomic lease as a pull, then POST {worker_url}/api/tasks/execute. A definite
// refusal from the Runner (4xx), or a connection that failed before anything was sent
// (refused, no such host), releases the lease at once; only an unknown outcome (timeout,
// cut connection) keeps it until it is renewed or expires.
import { randomUUID } from "node:crypto";
import { admit, concurrencyOf, taskView, type Decision } from "../admission/index.ts";
import { isQueued, type Worker } from "../resources/types.ts";
import { claimedTask, commitLeases, requireWorker } from "./claim.ts";
import type { SchedulerContext } from "./context.ts";
import { checkRequest, HubError } from "./errors.ts";
import { confirmBeforePush } from "./direct-liveness.ts";
import { endLease } from "./lifecycle.ts";
import { effectiveSettings } from "./workers.ts";
import { numIn } from "./scheduler.ts";
import { leaseSecondsOf } from "./transitions.ts";

/** Where a worker's Direct Runner listens, if it has one. */
export function directEndpoint(w: Worker): string | undefined {
  const s = w.spec;
  if (s.worker_url) return s.worker_url.replace(/\/+$/, "");
  if (s.connection_mode !== "direct-worker-api") return undefined;
  const host = s.private_host || s.host;
  if (!host) return undefined;
  return `http://${host}:${s.command_port ?? s.serve_port ?? 9876}`;
}

export type PushOptions = {
  defaultTokenEnv: string;
  env?: NodeJS.ProcessEnv;
  /**
   * Which variables a Worker's direct_api_token_env may name: exact names, or prefixes ending
   * in "*". The Hub sends the value to the worker's URL, which the API can set, so any other
   * name (the Hub's own token, a cloud key) would be a way to read the Hub's secrets.
   */
  allowedTokenEnv?: readonly string[];
  fetchImpl?: typeof fetch;
};

export const DEFAULT_ALLOWED_TOKEN_ENV = ["LOOM_DIRECT_TOKEN_*"] as const;

export function tokenEnvAllowed(name: string, o: PushOptions): boolean {
  if (name === o.defaultTokenEnv) return true;
  return (o.allowedTokenEnv ?? DEFAULT_ALLOWED_TOKEN_ENV).some((p) => (p.endsWith("*") ? name.startsWith(p.slice(0, -1)) : name === p));
}

export function runnerToken(w: Worker, o: PushOptions): string {
  const name = w.spec.direct_api_token_env || o.defaultTokenEnv;
  if (!tokenEnvAllowed(name, o))
    throw new HubError(403, "token_env_not_allowed", { field: "spec.direct_api_token_env", worker_id: w.metadata.name, token_env: name, detail: `the Hub pushes only with variables the operator allows (loom hub --direct-token-env; now: ${(o.allowedTokenEnv ?? DEFAULT_ALLOWED_TOKEN_ENV).join(", ")})` });
  const v = (o.env ?? process.env)[name];
  if (!v) throw new HubError(400, "runner_token_missing", { detail: `the Hub's environment has no ${name}`, token_env: name });
  return v;
}

/** 409/429 codes for a decision that says no, in v1's terms. */
function refusal(d: Decision): HubError {
  if (d.reasons.includes("worker_cordoned")) return new HubError(403, "worker_not_available", { worker_id: d.worker });
  if (d.reasons.includes("capability_missing") || d.reasons.includes("worker_excluded")) return new HubError(409, "worker_not_eligible", { worker_id: d.worker, reasons: d.reasons });
  if (d.reasons.length === 1 && d.reasons[0] === "worker_concurrency_reached") return new HubError(429, "worker_capacity_reached", { worker_id: d.worker, admission: d.admission });
  return new HubError(409, "worker_resource_unavailable", { worker_id: d.worker, reasons: d.reasons, admission: d.admission });
}

/**
 * Socket errors raised before a request can have left this host: the Runner cannot have
 * received it, so the lease may be released at once. A timeout or a cut connection stays
 * "unknown". fetch wraps the socket's error (TypeError "fetch failed", cause), and a host
 * with several addresses fails with an AggregateError of one error per address.
 */
const NOT_DELIVERED = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH"]);

function notDelivered(e: unknown): string | undefined {
  for (let c = e as { code?: unknown; cause?: unknown; errors?: unknown } | undefined, depth = 0; c && depth < 5; c = c.cause as typeof c, depth++) {
    if (typeof c.code === "string" && NOT_DELIVERED.has(c.code)) return c.code;
    if (Array.isArray(c.errors) && c.errors.length) {
      const codes = c.errors.map((x) => notDelivered(x));
      return codes.every(Boolean) ? codes[0] : undefined;
    }
  }
  return undefined;
}

/** Put a pushed task back in the queue with the same attempt, if it still holds this push's lease. */
function releasePush(ctx: SchedulerContext, taskId: string, pushId: string, outcome: string, reason: string): Promise<void> {
  return ctx.updateTask(taskId, (t) => {
    if (t.status?.lease?.push_id !== pushId) return { result: undefined };
    return { status: endLease(t.status, "queued", ctx.now(), outcome, reason), result: undefined };
  });
}

export async function pushTask(ctx: SchedulerContext, body: Record<string, unknown>, o: PushOptions) {
  const taskId = body.task_id;
  if (typeof taskId !== "string" || !taskId) throw new HubError(400, "task_id_required");
  checkRequest("push", body);
  const leaseSeconds = leaseSecondsOf(body.lease_seconds);
  const timeoutMs = numIn(body.push_timeout_seconds, 10, 120, 30, "push_timeout_seconds") * 1000;
  const explicit = typeof body.worker_id === "string" && body.worker_id ? body.worker_id : undefined;

  // A Direct Runner that has been quiet is asked whether it is alive before admission decides.
  await confirmBeforePush(ctx, o, explicit);
  const granted = await ctx.readModifyWrite(async () => {
    const task = ctx.task(taskId);
    if (!task) throw new HubError(404, "task_not_found", { task_id: taskId });
    if (!isQueued(task.status?.state)) throw new HubError(409, "task_not_queueable", { task_id: taskId, state: task.status?.state });
    const tv = taskView(task);
    let worker: Worker;
    let decision: Decision;
    let mode: "explicit" | "cache-affine-auto";
    if (explicit) {
      worker = requireWorker(ctx, explicit);
      if (!directEndpoint(worker)) throw new HubError(409, "direct_worker_endpoint_not_registered", { worker_id: explicit });
      decision = admit(tv, ctx.workerView(worker));
      if (!decision.ok) throw refusal(decision);
      mode = "explicit";
    } else {
      const ranked = ctx.cache.list("Worker")
        .filter((w) => directEndpoint(w) && w.status?.registration && !w.spec.unschedulable)
        .map((w) => ({ w, view: ctx.workerView(w) }))
        .map((x) => ({ ...x, d: admit(tv, x.view), hit: ctx.liveness.get(x.w.metadata.name)?.cacheKeys.size ? 1 : 0 }))
        .filter((x) => x.d.ok)
        .sort((a, b) => b.hit - a.hit || concurrencyOf(a.view).active_count - concurrencyOf(b.view).active_count || (a.w.metadata.name < b.w.metadata.name ? -1 : 1));
      if (!ranked.length) throw new HubError(409, "no_eligible_direct_worker", { task_id: taskId });
      ({ w: worker, d: decision } = ranked[0]);
      mode = "cache-affine-auto";
    }
    runnerToken(worker, o); // refuse before leasing if we could not deliver
    const pushId = `push-${randomUUID()}`;
    const [leased] = await commitLeases(ctx, worker, [{ task, decision }], { mode: "push", leaseSeconds, pushId });
    return { leased, worker, pushId, mode };
  });

  const { leased, worker, pushId, mode } = granted;
  const s = effectiveSettings(worker);
  const wire = claimedTask(leased, s, undefined, { dispatch_mode: "direct-push" });
  const payload = { task: { ...wire, controller_push: { push_id: pushId, leased_at: leased.task.status?.lease?.leased_at } } };
  const url = `${directEndpoint(worker)}/api/tasks/execute`;
  let res: Response;
  let text: string;
  try {
    res = await (o.fetchImpl ?? fetch)(url, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${runnerToken(worker, o)}` },
      body: JSON.stringify(payload),
      signal: AbortSignal.timeout(timeoutMs),
    });
    text = await res.text();
  } catch (e) {
    const refused = notDelivered(e);
    if (refused) {
      await releasePush(ctx, taskId, pushId, "push_not_delivered", "PushNotDelivered");
      ctx.recordEvent({ object: leased.task, type: "Warning", reason: "PushNotDelivered", message: `push to ${worker.metadata.name} not delivered (${refused} on ${url}); lease released, task requeued` });
      throw new HubError(502, "push_not_delivered", { task_id: taskId, worker_id: worker.metadata.name, state: "queued", cause: refused, detail: `the connection to ${url} failed before anything was sent (${refused}); the task is queued again` });
    }
    ctx.recordEvent({ object: leased.task, type: "Warning", reason: "PushDeliveryUnknown", message: `push to ${worker.metadata.name} had no answer (${(e as Error).name}); the lease stands until it is renewed or expires` });
    throw new HubError(502, "push_delivery_unknown", { task_id: taskId, worker_id: worker.metadata.name, state: "leased", lease_until: leased.task.status?.lease?.lease_until, detail: (e as Error).message });
  }
  let reply: unknown = text;
  try { reply = JSON.parse(text); } catch { /* keep the text */ }
  if (res.ok) return { status: 202, body: { ok: true, task_id: taskId, worker_id: worker.metadata.name, lease_until: leased.task.status?.lease?.lease_until, runner: reply, selection: { mode, cache_affinity: leased.affinity } } };
  if (res.status >= 400 && res.status < 500) {
    // A definite no: the task goes back to the queue with the same attempt, and the reservation is gone.
    await releasePush(ctx, taskId, pushId, "push_refused", "PushRefused");
    ctx.recordEvent({ object: leased.task, type: "Warning", reason: "PushRefused", message: `runner ${worker.metadata.name} answered ${res.status}; lease released, task requeued` });
    const code = res.status === 429 ? "worker_capacity_reached" : "push_refused";
    throw new HubError(res.status === 429 ? 429 : 409, code, { task_id: taskId, worker_id: worker.metadata.name, state: "queued", runner_status: res.status, runner: reply });
  }
  ctx.recordEvent({ object: leased.task, type: "Warning", reason: "PushDeliveryUnknown", message: `runner ${worker.metadata.name} answered ${res.status}` });
  throw new HubError(502, "push_delivery_unknown", { task_id: taskId, worker_id: worker.metadata.name, state: "leased", lease_until: leased.task.status?.lease?.lease_until, runner_status: res.status, runner: reply });
}

