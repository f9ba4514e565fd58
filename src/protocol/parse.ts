// A request body in, a typed request out, or a HubError with v1's status and code. The v1
// codes (`worker_id_required`, `unsupported_runner_api_version`, ...) come first, in v1's
// order, so a v1 Runner gets the answer it got from v1; the schema (schemas.ts) then checks
// every field Loom reads and names each one that breaks its rule. Nothing here reads state:
// what needs the store (a task's lease, a worker's max) is the scheduler's to check.
import { CapacityError, parseCapacity, type Vector } from "../admission/index.ts";
import type { TaskState } from "../resources/types.ts";
import { crdField, validateMetadata } from "../resources/validate.ts";
import { claimParams, leaseSecondsOf, numIn, type ClaimParams } from "./clamps.ts";
import { checkRequest, HubError, type HubErrorCode } from "./errors.ts";
import type {
  DispatchRequest,
  FailRequest,
  HeartbeatRequestCurrentRunsItem,
  RegisterRequestHealth,
} from "./types.gen.ts";

type Body = Record<string, unknown>;
const isObj = (v: unknown): v is Body => !!v && typeof v === "object" && !Array.isArray(v);
const isInt = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v);

/** A JSON body as fastify hands it over: anything but an object is v1's empty body, `{}`. */
export const bodyOf = (raw: unknown): Body => (isObj(raw) && !Buffer.isBuffer(raw) ? raw : {});

/** A required id: a non-empty string, or the 400 `code` v1 answers. */
const need = (v: unknown, code: HubErrorCode, detail: Body = {}): string => {
  if (typeof v !== "string" || !v) throw new HubError(400, code, detail);
  return v;
};

/** The host facts a Runner reports (health.resources and the rest), as given. */
export type Health = RegisterRequestHealth;

/** POST /api/workers/register, with v1's defaults filled in and the capacity normalised. */
export type Registration = {
  worker_id: string;
  capabilities: string[];
  max_concurrency: number;
  initial_concurrency: number;
  concurrency_policy: "fixed" | "adaptive";
  /** What the Runner said of its capacity, before it is completed from the host snapshot. */
  reported_capacity: Partial<Vector>;
  health: Health;
};

/** A capacity in a registration body; a broken rule is a 400 naming the field. */
export function normaliseCapacityInput(raw: unknown, field = "resource_capacity"): Partial<Vector> {
  try {
    return parseCapacity(raw, field);
  } catch (e) {
    if (e instanceof CapacityError)
      throw new HubError(400, "invalid_resource_capacity", { field: e.field, detail: e.detail });
    throw e;
  }
}

export function parseRegister(b: Body): Registration {
  if (b.runner_api_version === undefined || b.runner_api_version === null)
    throw new HubError(400, "runner_api_version_required");
  if (b.runner_api_version !== 1)
    throw new HubError(400, "unsupported_runner_api_version", { received: b.runner_api_version, expected: 1 });
  const id = need(b.worker_id, "worker_id_required");
  if (validateMetadata({ metadata: { name: id } }).length)
    throw new HubError(400, "invalid_worker_id", {
      field: "worker_id",
      detail: "must be 1-253 characters of A-Z a-z 0-9 _ . - starting with a letter or digit",
    });
  const max = b.max_concurrency ?? 1;
  const initial = b.initial_concurrency ?? max;
  if (!isInt(max) || !isInt(initial))
    throw new HubError(400, "concurrency_values_must_be_integers", {
      received: { max_concurrency: max, initial_concurrency: initial },
    });
  if (initial < 1 || initial > max)
    throw new HubError(400, "initial_concurrency_must_be_between_one_and_max_concurrency", {
      received: { max_concurrency: max, initial_concurrency: initial },
    });
  const policy = b.concurrency_policy ?? "fixed";
  if (policy !== "fixed" && policy !== "adaptive")
    throw new HubError(400, "unsupported_concurrency_policy", { received: policy, allowed: ["fixed", "adaptive"] });
  const capabilities = b.capabilities ?? [];
  if (!Array.isArray(capabilities) || capabilities.some((c) => typeof c !== "string"))
    throw new HubError(400, "invalid_capabilities", { field: "capabilities", detail: "must be a list of strings" });
  const r = checkRequest("register", b);
  const reported = normaliseCapacityInput(r.resource_capacity);
  return {
    worker_id: id,
    capabilities,
    max_concurrency: max,
    initial_concurrency: initial,
    concurrency_policy: policy,
    reported_capacity: reported,
    health: r.health ?? {},
  };
}

export type Heartbeat = { worker_id: string; current_runs: HeartbeatRequestCurrentRunsItem[]; health?: Health };

export function parseHeartbeat(b: Body): Heartbeat {
  const id = need(b.worker_id, "worker_id_required");
  const h = checkRequest("heartbeat", b);
  return { worker_id: id, current_runs: h.current_runs ?? [], ...(h.health ? { health: h.health } : {}) };
}

/** POST /api/tasks/claim, its numbers clamped as v1 does (clamps.ts). */
export type ClaimOrder = { worker_id: string } & ClaimParams;

export function parseClaim(b: Body): ClaimOrder {
  const id = need(b.worker_id, "worker_id_required");
  checkRequest("claim", b);
  return { worker_id: id, ...claimParams(b) };
}

/** What every lease holder's call names: who asks, about which task, and (if it says) which attempt. */
export type LeaseCall = { worker_id: string; task_id: string; attempt_no?: number };
export type Renewal = LeaseCall & { lease_seconds: number };
export type Failure = LeaseCall & { error: NonNullable<FailRequest["error"]> & Body };

function leaseCall(verb: "start" | "renew" | "complete" | "fail", b: Body): LeaseCall {
  const worker = need(b.worker_id, "worker_id_required");
  const task = need(b.task_id, "task_id_required");
  const { attempt_no } = checkRequest(verb, b);
  return { worker_id: worker, task_id: task, ...(attempt_no !== undefined ? { attempt_no } : {}) };
}

export const parseStart = (b: Body): LeaseCall => leaseCall("start", b);
export const parseComplete = (b: Body): LeaseCall => leaseCall("complete", b);
export const parseRenew = (b: Body): Renewal => ({
  ...leaseCall("renew", b),
  lease_seconds: leaseSecondsOf(b.lease_seconds),
});

export function parseFail(b: Body): Failure {
  const call = leaseCall("fail", b);
  const error = b.error ?? { type: "run_error" };
  if (!isObj(error)) throw new HubError(400, "invalid_request", { field: "error", detail: "error: must be an object" });
  return { ...call, error };
}

/** POST /api/admin/push-task. */
export type PushOrder = { task_id: string; worker_id?: string; lease_seconds: number; timeout_ms: number };

export function parsePush(b: Body): PushOrder {
  const taskId = need(b.task_id, "task_id_required");
  checkRequest("push", b);
  const leaseSeconds = leaseSecondsOf(b.lease_seconds);
  const timeoutMs = numIn(b.push_timeout_seconds, 10, 120, 30, "push_timeout_seconds") * 1000;
  return {
    task_id: taskId,
    ...(typeof b.worker_id === "string" && b.worker_id ? { worker_id: b.worker_id } : {}),
    lease_seconds: leaseSeconds,
    timeout_ms: timeoutMs,
  };
}

/** The admin verbs' ids: `<field>_required` naming the field, as v1 answers. */
const adminId = (b: Body, k: "task_id" | "worker_id") => need(b[k], `${k}_required`, { field: k });

export const parseCancel = (b: Body) => {
  const task_id = adminId(b, "task_id");
  checkRequest("cancel-task", b);
  return { task_id };
};
export const parseRetry = (b: Body) => {
  const task_id = adminId(b, "task_id");
  checkRequest("retry-task", b);
  return { task_id, preserve_excluded_workers: b.preserve_excluded_workers === true };
};
export const parseWorkerControl = (b: Body) => {
  const worker_id = adminId(b, "worker_id");
  checkRequest("worker-control", b);
  return { worker_id };
};
export function parseSetConcurrency(b: Body): { worker_id: string; desired_concurrency: number; reason: string } {
  const worker_id = adminId(b, "worker_id");
  if (!isInt(b.desired_concurrency))
    throw new HubError(400, "desired_concurrency_must_be_integer", { field: "desired_concurrency" });
  checkRequest("set-worker-concurrency", b);
  return {
    worker_id,
    desired_concurrency: b.desired_concurrency,
    reason: typeof b.reason === "string" ? b.reason : "",
  };
}

/** Every state a task may be in, as the Task schema lists them. */
const TASK_STATES = (crdField("Task", "status.state").enum ?? []) as TaskState[];

/** A field as v1 reads it (`str(x or "")`); a list or an object is an error naming the field. */
function text(b: Body, field: string): string {
  const v = b[field];
  if (v === undefined || v === null || v === "") return "";
  if (typeof v === "string") return v.trim();
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  throw new HubError(400, "invalid_request", { field, detail: `${field}: must be a string` });
}

/** POST /api/admin/override-state: any task state by hand, with a reason. */
export type StateOverride = { task_id: string; state: TaskState; reason: string; operator: string };

export function parseOverride(b: Body): StateOverride {
  const targetType = text(b, "target_type") || "task";
  const taskId = text(b, "target_id") || text(b, "task_id");
  const state = text(b, "state") as TaskState;
  const reason = text(b, "reason");
  const operator = text(b, "operator") || "local-admin";
  // v1's code for any of the four missing; the field says which.
  const missing =
    targetType !== "task" ? "target_type" : !taskId ? "target_id" : !state ? "state" : !reason ? "reason" : undefined;
  if (missing)
    throw new HubError(400, "target_type_task_target_id_state_reason_required", {
      field: missing,
      detail:
        missing === "target_type" ? `only "task" can be overridden, not "${targetType}"` : `${missing} is required`,
    });
  if (!TASK_STATES.includes(state))
    throw new HubError(400, "invalid_state", {
      field: "state",
      received: state,
      allowed: TASK_STATES,
      detail: `"${state}" is not a task state`,
    });
  return { task_id: taskId, state, reason, operator };
}

/** POST /api/admin/register-worker-hosts: the inventory v1 workers, from whichever field holds them. */
export type WorkerHosts = { inventory?: Body; workers: unknown[]; operator?: string };

export function parseWorkerHosts(b: Body): WorkerHosts {
  const inv = isObj(b.inventory) ? b.inventory : undefined;
  const workers: unknown = inv?.workers ?? b.workers ?? b.hosts;
  if (inv) {
    if (inv.inventory_version === undefined) throw new HubError(400, "inventory_version_required");
    if (inv.inventory_version !== 1)
      throw new HubError(400, "unsupported_inventory_version", { received: inv.inventory_version });
  }
  if (!Array.isArray(workers) || !workers.length) throw new HubError(400, "hosts_required");
  return {
    ...(inv ? { inventory: inv } : {}),
    workers,
    ...(typeof b.operator === "string" ? { operator: b.operator } : {}),
  };
}

/** POST /api/tasks/dispatch: the document's frame; each task request is checked by dispatch.ts. */
export function parseDispatch(raw: unknown): DispatchRequest {
  if (!isObj(raw)) throw new HubError(400, "invalid_dispatch", { detail: "body must be a JSON object" });
  if (raw.schema_version === undefined) throw new HubError(400, "dispatch_requires_schema_version");
  if (raw.schema_version !== 1)
    throw new HubError(400, "unsupported_dispatch_schema_version", { received: raw.schema_version, expected: 1 });
  if (raw.tasks !== undefined && !Array.isArray(raw.tasks))
    throw new HubError(400, "invalid_task_extensions", { errors: [{ field: "tasks", message: "must be a list" }] });
  const str = (v: unknown) => (typeof v === "string" && v !== "") || typeof v === "number";
  if (raw.case_ids !== undefined && (!Array.isArray(raw.case_ids) || raw.case_ids.some((c) => !str(c))))
    throw new HubError(400, "invalid_task_extensions", {
      errors: [{ field: "case_ids", message: "must be a list of ids" }],
    });
  return { ...raw, schema_version: 1 }; // the frame is checked above; its tasks are unknown until dispatch.ts checks each
}

/** POST /api/simulate: what would change; each change's values are checked as it is applied (scheduler/simulate.ts). */
export type Changes = {
  /** Worker entries in the inventory file's format (worker_id, max_concurrency, resource_capacity, ...). */
  add_workers?: unknown[];
  /** A whole inventory document: its workers are added, replacing any of the same name. */
  inventory?: unknown;
  remove_workers?: string[];
  /** Per worker: a new resource_capacity (fields given replace the effective ones), max or desired concurrency. */
  workers?: Record<
    string,
    { resource_capacity?: Record<string, unknown>; max_concurrency?: number; desired_concurrency?: number }
  >;
  /** Queued tasks leave the queue; active ones release their lease. */
  cancel_tasks?: string[];
  /** Per queued task: a new execution_profile (placement, resources). */
  tasks?: Record<string, { execution_profile?: { placement?: string; resources?: Record<string, unknown> } }>;
  /** Per Queue: spec fields that replace the stored ones (quota, borrowing_limit, lending_limit, weight); a new name is a new Queue. */
  queues?: Record<string, Record<string, unknown>>;
};

const CHANGE_KEYS = ["add_workers", "inventory", "remove_workers", "workers", "cancel_tasks", "tasks", "queues"];

export function parseChanges(raw: unknown): Changes {
  if (!isObj(raw))
    throw new HubError(400, "invalid_simulation", { field: "", detail: "the changes must be an object" });
  for (const k of Object.keys(raw))
    if (!CHANGE_KEYS.includes(k))
      throw new HubError(400, "invalid_simulation", {
        field: k,
        detail: `unknown change; one of: ${CHANGE_KEYS.join(", ")}`,
      });
  return raw; // only the keys are known here; simulate() checks each value as it applies it
}
