// Direct Runner push (admin push-task, and the push dispatcher): the same admission and
// the same atomic lease as a pull, then POST {worker_url}/api/tasks/execute. A definite
// refusal from the Runner (4xx), or a connection that failed before anything was sent
// (refused, no such host), releases the lease at once; only an unknown outcome (timeout,
// cut connection) keeps it until it is renewed or expires.
import { randomUUID } from "node:crypto";
import { admit, concurrencyOf, taskView, type Decision } from "../admission/index.ts";
import { isQueued, type Task, type Worker } from "../resources/types.ts";
import { claimedTask, commitLeases, requireWorker, type Leased } from "./claim.ts";
import type { SchedulerContext } from "./context.ts";
import { HubError } from "../protocol/errors.ts";
import type { PushOrder } from "../protocol/parse.ts";
import type { PushTaskReply } from "../protocol/types.gen.ts";
import { confirmBeforePush } from "./direct-liveness.ts";
import { endLease } from "./lifecycle.ts";
import { effectiveSettings } from "./workers.ts";
import { directEndpoint, runnerToken, type PushOptions } from "./direct-endpoint.ts";

export { DEFAULT_ALLOWED_TOKEN_ENV, directEndpoint, tokenEnvAllowed, type PushOptions } from "./direct-endpoint.ts";

/** 409/429 codes for a decision that says no, in v1's terms. */
function refusal(d: Decision): HubError {
  if (d.reasons.includes("worker_cordoned")) return new HubError(403, "worker_not_available", { worker_id: d.worker });
  if (d.reasons.includes("capability_missing") || d.reasons.includes("worker_excluded"))
    return new HubError(409, "worker_not_eligible", { worker_id: d.worker, reasons: d.reasons });
  if (d.reasons.length === 1 && d.reasons[0] === "worker_concurrency_reached")
    return new HubError(429, "worker_capacity_reached", { worker_id: d.worker, admission: d.admission });
  return new HubError(409, "worker_resource_unavailable", {
    worker_id: d.worker,
    reasons: d.reasons,
    admission: d.admission,
  });
}

/**
 * Socket errors raised before a request can have left this host: the Runner cannot have
 * received it, so the lease may be released at once. A timeout or a cut connection stays
 * "unknown". fetch wraps the socket's error (TypeError "fetch failed", cause), and a host
 * with several addresses fails with an AggregateError of one error per address.
 */
const NOT_DELIVERED = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH"]);

function notDelivered(e: unknown): string | undefined {
  for (
    let c = e as { code?: unknown; cause?: unknown; errors?: unknown } | undefined, depth = 0;
    c && depth < 5;
    c = c.cause as typeof c, depth++
  ) {
    if (typeof c.code === "string" && NOT_DELIVERED.has(c.code)) return c.code;
    if (Array.isArray(c.errors) && c.errors.length) {
      const codes = c.errors.map((x) => notDelivered(x));
      return codes.every(Boolean) ? codes[0] : undefined;
    }
  }
  return undefined;
}

/** Put a pushed task back in the queue with the same attempt, if it still holds this push's lease. */
function releasePush(
  ctx: SchedulerContext,
  taskId: string,
  pushId: string,
  outcome: string,
  reason: string,
): Promise<void> {
  return ctx.updateTask(taskId, (t) => {
    if (t.status?.lease?.push_id !== pushId) return { result: undefined };
    return { status: endLease(t.status, "queued", ctx.now(), outcome, reason), result: undefined };
  });
}

type Granted = { leased: Leased; worker: Worker; pushId: string; mode: "explicit" | "cache-affine-auto" };
/** What came of sending the task: the Runner's answer, or a connection that failed before anything was sent, or no answer. */
type Delivery =
  | { kind: "answered"; status: number; ok: boolean; reply: unknown }
  | { kind: "not_delivered"; code: string }
  | { kind: "no_answer"; error: Error };

/**
 * The Direct Runner to push to, with admission's decision: the `explicit` worker, or among
 * the registered Direct Runners that admit the task, one with a cache hit first, then the
 * least busy.
 */
function chooseWorker(
  ctx: SchedulerContext,
  task: Task,
  explicit: string | undefined,
): { worker: Worker; decision: Decision; mode: Granted["mode"] } {
  const tv = taskView(task);
  if (explicit) {
    const worker = requireWorker(ctx, explicit);
    if (!directEndpoint(worker))
      throw new HubError(409, "direct_worker_endpoint_not_registered", { worker_id: explicit });
    const decision = admit(tv, ctx.workerView(worker));
    if (!decision.ok) throw refusal(decision);
    return { worker, decision, mode: "explicit" };
  }
  const ranked = ctx.cache
    .list("Worker")
    .filter((w) => directEndpoint(w) && w.status?.registration && !w.spec.unschedulable)
    .map((w) => ({ w, view: ctx.workerView(w) }))
    .map((x) => ({ ...x, d: admit(tv, x.view), hit: ctx.liveness.get(x.w.metadata.name)?.cacheKeys.size ? 1 : 0 }))
    .filter((x) => x.d.ok)
    .sort(
      (a, b) =>
        b.hit - a.hit ||
        concurrencyOf(a.view).active_count - concurrencyOf(b.view).active_count ||
        (a.w.metadata.name < b.w.metadata.name ? -1 : 1),
    );
  if (!ranked.length) throw new HubError(409, "no_eligible_direct_worker", { task_id: task.metadata.name });
  return { worker: ranked[0].w, decision: ranked[0].d, mode: "cache-affine-auto" };
}

/** Decide and write the push's lease (under the lock; a Conflict decides again on caught-up state). */
function leaseForPush(ctx: SchedulerContext, order: PushOrder, o: PushOptions): Promise<Granted> {
  return ctx.readModifyWrite(async (commit) => {
    const task = ctx.task(order.task_id);
    if (!task) throw new HubError(404, "task_not_found", { task_id: order.task_id });
    if (!isQueued(task.status?.state))
      throw new HubError(409, "task_not_queueable", { task_id: order.task_id, state: task.status?.state });
    const { worker, decision, mode } = chooseWorker(ctx, task, order.worker_id);
    runnerToken(worker, o); // refuse before leasing if we could not deliver
    const pushId = `push-${randomUUID()}`;
    const [leased] = await commitLeases(ctx, worker, [{ task, decision }], {
      mode: "push",
      leaseSeconds: order.lease_seconds,
      pushId,
      commit,
    });
    return { leased, worker, pushId, mode };
  });
}

/** POST the leased task to the worker's Direct Runner; never throws for what the network or the Runner does. */
async function deliver(g: Granted, timeoutMs: number, o: PushOptions): Promise<Delivery> {
  const wire = claimedTask(g.leased, effectiveSettings(g.worker), undefined, { dispatch_mode: "direct-push" });
  const payload = {
    task: { ...wire, controller_push: { push_id: g.pushId, leased_at: g.leased.task.status?.lease?.leased_at } },
  };
  let res: Response;
  let text: string;
  try {
    res = await (o.fetchImpl ?? fetch)(`${directEndpoint(g.worker)}/api/tasks/execute`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${runnerToken(g.worker, o)}` },
      body: JSON.stringify(payload),
      signal: AbortSignal.timeout(timeoutMs),
    });
    text = await res.text();
  } catch (e) {
    const code = notDelivered(e);
    return code ? { kind: "not_delivered", code } : { kind: "no_answer", error: e as Error };
  }
  let reply: unknown = text;
  try {
    reply = JSON.parse(text);
  } catch {
    /* keep the text */
  }
  return { kind: "answered", status: res.status, ok: res.ok, reply };
}

/**
 * The push's answer from what came of the delivery. A definite no (a 4xx, or nothing sent)
 * is undone: the task goes back to the queue with the same attempt, and the reservation is
 * gone. An unknown outcome keeps the lease until it is renewed or expires.
 */
async function answerOrUndo(
  ctx: SchedulerContext,
  g: Granted,
  d: Delivery,
): Promise<{ status: 202; body: PushTaskReply }> {
  const { leased, worker, pushId } = g;
  const task_id = leased.task.metadata.name;
  const worker_id = worker.metadata.name;
  const lease_until = leased.task.status?.lease?.lease_until;
  const url = `${directEndpoint(worker)}/api/tasks/execute`;
  if (d.kind === "not_delivered") {
    await releasePush(ctx, task_id, pushId, "push_not_delivered", "PushNotDelivered");
    ctx.recordEvent({
      object: leased.task,
      type: "Warning",
      reason: "PushNotDelivered",
      message: `push to ${worker_id} not delivered (${d.code} on ${url}); lease released, task requeued`,
    });
    throw new HubError(502, "push_not_delivered", {
      task_id,
      worker_id,
      state: "queued",
      cause: d.code,
      detail: `the connection to ${url} failed before anything was sent (${d.code}); the task is queued again`,
    });
  }
  if (d.kind === "no_answer") {
    ctx.recordEvent({
      object: leased.task,
      type: "Warning",
      reason: "PushDeliveryUnknown",
      message: `push to ${worker_id} had no answer (${d.error.name}); the lease stands until it is renewed or expires`,
    });
    throw new HubError(502, "push_delivery_unknown", {
      task_id,
      worker_id,
      state: "leased",
      lease_until,
      detail: d.error.message,
    });
  }
  if (d.ok)
    return {
      status: 202,
      body: {
        ok: true,
        task_id,
        worker_id,
        lease_until,
        runner: d.reply,
        selection: { mode: g.mode, cache_affinity: leased.affinity },
      },
    };
  if (d.status >= 400 && d.status < 500) {
    await releasePush(ctx, task_id, pushId, "push_refused", "PushRefused");
    ctx.recordEvent({
      object: leased.task,
      type: "Warning",
      reason: "PushRefused",
      message: `runner ${worker_id} answered ${d.status}; lease released, task requeued`,
    });
    const code = d.status === 429 ? "worker_capacity_reached" : "push_refused";
    throw new HubError(d.status === 429 ? 429 : 409, code, {
      task_id,
      worker_id,
      state: "queued",
      runner_status: d.status,
      runner: d.reply,
    });
  }
  ctx.recordEvent({
    object: leased.task,
    type: "Warning",
    reason: "PushDeliveryUnknown",
    message: `runner ${worker_id} answered ${d.status}`,
  });
  throw new HubError(502, "push_delivery_unknown", {
    task_id,
    worker_id,
    state: "leased",
    lease_until,
    runner_status: d.status,
    runner: d.reply,
  });
}

/** Push one queued task to a Direct Runner: decide and lease, deliver, then answer or undo. */
export async function pushTask(
  ctx: SchedulerContext,
  order: PushOrder,
  o: PushOptions,
): Promise<{ status: 202; body: PushTaskReply }> {
  // A Direct Runner that has been quiet is asked whether it is alive before admission decides.
  await confirmBeforePush(ctx, o, order.worker_id);
  const granted = await leaseForPush(ctx, order, o);
  return answerOrUndo(ctx, granted, await deliver(granted, order.timeout_ms, o));
}
