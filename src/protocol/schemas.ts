// The v1 wire protocol (RUNNER_PROTOCOL §1) as JSON schemas, stated once. Three things come
// from them: the TypeScript types (gen.ts writes types.gen.ts, which the Hub, the Runner, the
// CLI and the web view import), the request validators (compiled once, below), and the
// fastify response schemas that serialise the fixed-shape replies.
//
// Requests stay open, as v1 Runners send fields Loom does not read; the fields Loom reads
// are checked, and the default limits (resources/limits.ts) apply to all of them. A field
// that v1 checks with a code of its own (parse.ts, before the schema runs) is described here
// with the same rule, so the two never disagree. A field with no `type` is checked by hand
// (parse.ts) and typed `unknown`.
//
// Replies list every field they send: fastify's serializer drops what a schema leaves out,
// so every object that carries more than it names says `additionalProperties: true`. Numbers
// are `number` (the serializer would round a non-integer into an `integer`), and a field
// that may be null says `nullable`.
import type { JSONSchema } from "../resources/crds.ts";
import { LIMITS, MAX_INT } from "../resources/limits.ts";
import { compileSchema, crdField, type FieldError } from "../resources/validate.ts";

const ID: JSONSchema = {
  type: "string",
  minLength: 1,
  maxLength: 253,
  pattern: "^[A-Za-z0-9]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?$",
};
const TEXT: JSONSchema = { type: "string", maxLength: LIMITS.stringLength };
const COUNT: JSONSchema = { type: "number", minimum: 0, maximum: MAX_INT };
/** Checked by hand, or carried without a look: typed `unknown`. */
const ANY = (description: string): JSONSchema => ({ description });
/** A number as clients send it; the Hub also takes a numeric string and clamps it as v1 does (clamps.ts). */
const LOOSE_NUMBER = (description: string): JSONSchema => ({ description, "x-ts-type": "number" });
const obj = (properties: Record<string, JSONSchema>, required: string[] = []): JSONSchema => ({
  type: "object",
  properties,
  ...(required.length ? { required } : {}),
});
/** An object that may carry fields beyond those named: its type says so, and the serializer keeps them. */
const open = (properties: Record<string, JSONSchema>, required: string[] = []): JSONSchema => ({
  ...obj(properties, required),
  additionalProperties: true,
});
const OPEN_MAP: JSONSchema = { type: "object", additionalProperties: true };
const NUM: JSONSchema = { type: "number" };
const STR: JSONSchema = { type: "string" };
const BOOL: JSONSchema = { type: "boolean" };
const nullable = (s: JSONSchema): JSONSchema => ({ ...s, nullable: true });
const list = (items: JSONSchema): JSONSchema => ({ type: "array", items });

// ---- shared pieces (named first, so the messages that hold them reuse the name) ----

/** What a Runner reports about its host; the capacity defaults read these numbers. */
const HOST_RESOURCES = open({
  cpu_count: COUNT,
  mem_total_mb: COUNT,
  mem_available_mb: COUNT,
  disk_total_mb: COUNT,
  disk_available_mb: COUNT,
  gpu_count: COUNT,
});
const HEALTH = open({
  hostname: { ...TEXT, maxLength: 253 },
  platform: TEXT,
  resources: HOST_RESOURCES,
  source_cache: open({ enabled: { type: "boolean" }, keys: { type: "array", maxItems: 10_000, items: TEXT } }),
});
const FENCED = { worker_id: ID, task_id: ID, attempt_no: { type: "integer", minimum: 0 } };

/** A resource vector in the contract's whole units (admission/vector.ts, or a CRD resources block: no other fields); every field optional that a printer can do without. */
const VEC: JSONSchema = obj({ cpu_millis: NUM, memory_mb: NUM, disk_mb: NUM, gpu_count: NUM, gpu_types: list(STR) });
const CONCURRENCY = {
  desired_concurrency: NUM,
  max_concurrency: NUM,
  initial_concurrency: NUM,
  concurrency_policy: STR,
};
const CACHE_AFFINITY: JSONSchema = obj({
  cache_key: nullable(STR),
  cache_hit: BOOL,
  worker_cache_enabled: BOOL,
  reason: STR,
});
/** One dimension's shortfall, or a set requirement (`gpu_types`) that is not met. */
const SHORTFALL: JSONSchema = open({
  capacity: NUM,
  reserved: NUM,
  requested: ANY("a number, or the gpu types asked for"),
  short: NUM,
  available: list(STR),
});
/** RUNNER_PROTOCOL §4's admission object, plus Loom's `reasons`. */
const ADMISSION: JSONSchema = open({
  ok: BOOL,
  reason: nullable(STR),
  reasons: list(STR),
  placement: STR,
  requested: VEC,
  capacity: VEC,
  reserved_before: VEC,
  available_before: VEC,
  available_after: VEC,
  shortfalls: { type: "object", additionalProperties: SHORTFALL },
  active_task_ids: list(STR),
  exclusive_active: BOOL,
  concurrency: open({ active_count: NUM, effective_limit: NUM }),
});
/** A task as a claim (or a Direct Runner push) hands it over; the Runner saves it as task.json. */
const CLAIMED_TASK: JSONSchema = open(
  {
    task_id: STR,
    task_kind: STR,
    lease_until: STR,
    case_id: nullable(STR),
    run_id: nullable(STR),
    setting_id: nullable(STR),
    case_version: STR,
    scenario_id: nullable(STR),
    package_id: nullable(STR),
    campaign_id: nullable(STR),
    attempt_no: NUM,
    assigned_worker_id: STR,
    payload: OPEN_MAP,
    components: ANY("the task's components as v1 sends them ({} when none)"),
    controller_concurrency: open({
      ...CONCURRENCY,
      active_count_at_claim: NUM,
      resource_admission: ADMISSION,
      cache_affinity: CACHE_AFFINITY,
      claim_batch_id: STR,
      claim_batch_size: NUM,
      dispatch_mode: STR,
    }),
    controller_push: open({ push_id: STR, leased_at: STR }),
  },
  ["task_id"],
);
const CAPACITY_ENTRY: JSONSchema = open(
  {
    worker_id: STR,
    status: STR,
    capacity: VEC,
    reserved: VEC,
    available: VEC,
    active_task_ids: list(STR),
    exclusive_active: BOOL,
    max_concurrency: NUM,
    desired_concurrency: NUM,
    active_count: NUM,
    effective_limit: NUM,
  },
  ["worker_id"],
);
const BLOCKING_LEASE: JSONSchema = open({ task: STR, since: STR, declared_seconds: NUM, ends_at: STR }, ["task"]);
/** An admission object as task-admission returns it per worker, with Loom's explanation. */
const WORKER_ADMISSION: JSONSchema = open(
  {
    worker_id: STR,
    ok: BOOL,
    reason: nullable(STR),
    reasons: list(STR),
    shortfalls: { type: "object", additionalProperties: SHORTFALL },
    concurrency: open({ active_count: NUM, effective_limit: NUM }),
    explanation: STR,
    cache_affinity: CACHE_AFFINITY,
    /** Present when only leases keep the task off this worker: the smallest set found. */
    blocking_leases: list(BLOCKING_LEASE),
    /** When the last blocking lease should end, by declared run times. */
    blocking_until: STR,
  },
  ["worker_id", "ok"],
);
const SUGGESTION: JSONSchema = open(
  { kind: { type: "string", enum: ["request", "empty_worker"] }, worker: STR, change: STR, resources: VEC, until: STR },
  ["kind", "worker", "change"],
);
const FIGURES: JSONSchema = { type: "object", additionalProperties: NUM };
const NOMINATION: JSONSchema = obj({ worker_id: STR, task_id: STR, blocking_leases: list(STR), starts_by: STR }, [
  "worker_id",
  "task_id",
  "blocking_leases",
]);
/** One queue's usage, quota, borrowing, counts and fair share. */
const QUEUE_ROW: JSONSchema = obj(
  {
    name: STR,
    limited: BOOL,
    quota: FIGURES,
    borrowing_limit: FIGURES,
    lending_limit: FIGURES,
    weight: NUM,
    reclaim: STR,
    used: FIGURES,
    borrowed: FIGURES,
    lent: FIGURES,
    pending: NUM,
    admitted: NUM,
    share: NUM,
    decayed_share: NUM,
    rank: NUM,
  },
  [
    "name",
    "limited",
    "quota",
    "borrowing_limit",
    "lending_limit",
    "weight",
    "reclaim",
    "used",
    "borrowed",
    "lent",
    "pending",
    "admitted",
    "share",
    "decayed_share",
    "rank",
  ],
);
/** One task a dispatch created or found already there. */
const DISPATCHED: JSONSchema = obj(
  {
    task_id: STR,
    task_kind: STR,
    case_id: nullable(STR),
    run_id: nullable(STR),
    setting_id: nullable(STR),
    state: STR,
  },
  ["task_id", "state"],
);
const LEASE_REPLY = open(
  {
    ok: BOOL,
    task_id: STR,
    old_state: STR,
    new_state: STR,
    state: STR,
    lease_until: STR,
    ignored_stale_failure: BOOL,
    auto_retry: nullable(OPEN_MAP),
    issues: list(STR),
    attempt_no: NUM,
  },
  ["ok", "task_id"],
);

/** Shared shapes, emitted first under these names. */
export const SHARED: Record<string, JSONSchema> = {
  ResourceVector: VEC,
  CacheAffinity: CACHE_AFFINITY,
  Shortfall: SHORTFALL,
  AdmissionObject: ADMISSION,
  ClaimedTask: CLAIMED_TASK,
  CapacityEntry: CAPACITY_ENTRY,
  BlockingLease: BLOCKING_LEASE,
  WorkerAdmission: WORKER_ADMISSION,
  Suggestion: SUGGESTION,
  LeaseReply: LEASE_REPLY,
  NominationEntry: NOMINATION,
  DispatchedTask: DISPATCHED,
  QueueReportEntry: QUEUE_ROW,
};

// ---- requests: validated on the way in ----

export const REQUESTS = {
  register: obj(
    {
      worker_id: ID,
      runner_api_version: { type: "integer", enum: [1] },
      max_concurrency: crdField("Worker", "spec.max_concurrency"),
      initial_concurrency: crdField("Worker", "spec.initial_concurrency"),
      concurrency_policy: { type: "string", enum: ["fixed", "adaptive"] },
      capabilities: crdField("Worker", "spec.capabilities"),
      resource_capacity: ANY("a partial capacity, completed from the host snapshot (admission/capacity.ts checks it)"),
      health: HEALTH,
    },
    ["worker_id", "runner_api_version"],
  ),
  heartbeat: obj(
    {
      worker_id: ID,
      current_runs: {
        type: "array",
        maxItems: 1024,
        items: {
          type: "object",
          properties: { task_id: TEXT, package_id: ANY("the run's package"), phase: ANY("where the run is") },
        },
      },
      health: HEALTH,
    },
    ["worker_id"],
  ),
  // The numbers are clamped as v1 does (clamps.ts), so a numeric string is taken too.
  claim: obj(
    {
      worker_id: ID,
      limit: LOOSE_NUMBER("1..1024, default 1"),
      lease_seconds: LOOSE_NUMBER("at least 30, default 600"),
      wait_seconds: LOOSE_NUMBER("0..60"),
      wait_poll_seconds: LOOSE_NUMBER("ignored: Loom wakes on change"),
    },
    ["worker_id"],
  ),
  start: obj(FENCED, ["worker_id", "task_id"]),
  renew: obj({ ...FENCED, lease_seconds: LOOSE_NUMBER("at least 30, default 600") }, ["worker_id", "task_id"]),
  complete: obj({ ...FENCED, result: ANY("the Runner's result summary"), upload: ANY("the upload reply") }, [
    "worker_id",
    "task_id",
  ]),
  fail: obj(
    {
      ...FENCED,
      controller_concurrency: ANY("the claim's controller_concurrency"),
      error: {
        type: "object",
        properties: { type: TEXT, detail: { type: "string", maxLength: LIMITS.freeStringLength } },
      },
    },
    ["worker_id", "task_id"],
  ),
  push: obj(
    {
      task_id: ID,
      worker_id: ID,
      operator: ANY("who pushed"),
      lease_seconds: LOOSE_NUMBER("at least 30, default 600"),
      push_timeout_seconds: LOOSE_NUMBER("10..120, default 30"),
    },
    ["task_id"],
  ),
  "cancel-task": obj({ task_id: { type: "string", minLength: 1 } }, ["task_id"]),
  "retry-task": obj(
    { task_id: { type: "string", minLength: 1 }, preserve_excluded_workers: ANY("true keeps the exclusions") },
    ["task_id"],
  ),
  "worker-control": obj({ worker_id: { type: "string", minLength: 1 } }, ["worker_id"]),
  "set-worker-concurrency": obj(
    {
      worker_id: { type: "string", minLength: 1 },
      desired_concurrency: { type: "integer" },
      reason: ANY("a note for the event"),
    },
    ["worker_id", "desired_concurrency"],
  ),
  // v1 reads each as `str(x or "")`: a number or a boolean is taken as its text (parse.ts).
  "override-state": obj({
    target_type: ANY('only "task"'),
    target_id: ANY("the task"),
    task_id: ANY("the task, when target_id is absent"),
    state: ANY("a task state"),
    reason: ANY("why"),
    operator: ANY("who"),
  }),
  "register-worker-hosts": obj({
    operator: ANY("who registered them"),
    hosts: ANY("inventory v1 workers"),
    workers: ANY("inventory v1 workers"),
    inventory: ANY("an inventory v1 document"),
  }),
  dispatch: obj(
    {
      schema_version: { enum: [1] },
      operator: ANY("who dispatched"),
      payload: ANY("merged under each task's payload"),
      priority: ANY("each task's default priority"),
      required_capability: ANY("each task's default capability"),
      package_id: ANY("each task's default package"),
      queue: ANY("each task's default queue"),
      extensions: ANY("v1's task extensions"),
      tasks: { type: "array", items: ANY("one task request (dispatch.ts checks each)") },
      case_ids: { type: "array", items: ANY("a case id: a string or a number") },
    },
    ["schema_version"],
  ),
  "repo-run": obj(
    {
      repo_url: { type: "string", minLength: 1, maxLength: 2048 },
      command: { type: "string", minLength: 1, maxLength: 64 * 1024, pattern: "^[^\\u0000]*$" },
      commit: TEXT,
      ref: TEXT,
      task_id: ID,
      campaign_id: TEXT,
      case_id: TEXT,
      setting_id: TEXT,
      run_id: TEXT,
      operator: TEXT,
      required_capability: crdField("Task", "spec.required_capability"),
      priority: crdField("Task", "spec.priority"),
      placement: { type: "string", enum: ["shared", "exclusive"] },
      timeout_seconds: { type: "integer", minimum: 1, maximum: LIMITS.leaseSeconds },
      env: {
        type: "object",
        maxProperties: 256,
        additionalProperties: { type: "string", maxLength: 64 * 1024, pattern: "^[^\\u0000]*$" },
      },
      artifact_paths: { type: "array", maxItems: 256, items: TEXT },
    },
    ["repo_url"],
  ),
  /** The Direct Runner API's POST /api/tasks/execute. */
  execute: obj({ task: CLAIMED_TASK }, ["task"]),
} satisfies Record<string, JSONSchema>;

// ---- replies: serialised on the way out ----

export const REPLIES = {
  register: obj({ ok: BOOL, worker_id: STR, ...CONCURRENCY, resource_capacity: VEC }, ["ok", "worker_id"]),
  heartbeat: open({ ok: BOOL, worker_id: STR, time: STR, registered: BOOL, ...CONCURRENCY, resource_capacity: VEC }, [
    "ok",
    "worker_id",
  ]),
  claim: obj(
    {
      tasks: list(CLAIMED_TASK),
      ...CONCURRENCY,
      active_count: NUM,
      resource_capacity: VEC,
      reserved_resources: VEC,
      available_resources: VEC,
    },
    ["tasks"],
  ),
  lease: LEASE_REPLY,
  upload: open(
    {
      ok: BOOL,
      result_id: STR,
      attempt_no: NUM,
      verdict: STR,
      download_url: STR,
      auto_retry: nullable(OPEN_MAP),
      oracle_outcome: ANY("null: Loom runs no Oracles"),
      oracle_dispatch: ANY("null: Loom runs no Oracles"),
    },
    ["ok", "result_id"],
  ),
  push: open(
    {
      ok: BOOL,
      task_id: STR,
      worker_id: STR,
      lease_until: STR,
      runner: ANY("the Runner's reply, as it sent it"),
      selection: obj({
        mode: { type: "string", enum: ["explicit", "cache-affine-auto"] },
        cache_affinity: CACHE_AFFINITY,
      }),
    },
    ["ok", "task_id", "worker_id"],
  ),
  execute: open({ ok: BOOL, state: STR, task_id: STR, worker_id: STR }, ["ok", "state"]),
  "worker-capacity": obj({ workers: list(CAPACITY_ENTRY) }, ["workers"]),
  "task-admission": open(
    {
      task_id: STR,
      state: STR,
      /** The active lease's end, renewals counted. */
      lease_until: nullable(STR),
      execution_profile: obj({ placement: STR, resources: VEC }),
      required_capability: STR,
      eligible_worker_count: NUM,
      unsatisfiable: BOOL,
      summary: STR,
      queue_position: nullable(NUM),
      nominated_worker: nullable(STR),
      higher_priority_ahead: list(STR),
      higher_priority_ahead_count: NUM,
      suggestions: list(SUGGESTION),
      /** Present once some Queue exists. */
      queue: { ...OPEN_MAP, "x-ts-type": "QueueExplanation" },
      workers: list(WORKER_ADMISSION),
    },
    ["task_id", "workers"],
  ),
  queues: obj(
    {
      active: BOOL,
      half_life_seconds: NUM,
      standing: STR,
      queues: list(QUEUE_ROW),
    },
    ["active", "half_life_seconds", "standing", "queues"],
  ),
  nominations: obj({ nominations: list(NOMINATION) }, ["nominations"]),
  "expire-leases": obj(
    {
      ok: BOOL,
      expired: list(obj({ task_id: STR, old_state: STR, new_state: STR }, ["task_id", "old_state", "new_state"])),
      count: NUM,
    },
    ["ok", "expired", "count"],
  ),
  "set-worker-concurrency": obj({ ok: BOOL, worker_id: STR, desired_concurrency: NUM, max_concurrency: NUM }, [
    "ok",
    "worker_id",
    "desired_concurrency",
    "max_concurrency",
  ]),
  dispatch: obj({ created: list(DISPATCHED), existing: list(DISPATCHED) }, ["created", "existing"]),
} satisfies Record<string, JSONSchema>;

/** The TypeScript name of each message (gen.ts). */
export const REQUEST_TYPES: Record<keyof typeof REQUESTS, string> = {
  register: "RegisterRequest",
  heartbeat: "HeartbeatRequest",
  claim: "ClaimRequest",
  start: "StartRequest",
  renew: "RenewRequest",
  complete: "CompleteRequest",
  fail: "FailRequest",
  push: "PushTaskRequest",
  "cancel-task": "CancelTaskRequest",
  "retry-task": "RetryTaskRequest",
  "worker-control": "WorkerControlRequest",
  "set-worker-concurrency": "SetWorkerConcurrencyRequest",
  "override-state": "OverrideStateRequest",
  "register-worker-hosts": "RegisterWorkerHostsRequest",
  dispatch: "DispatchRequest",
  "repo-run": "RepoRunRequest",
  execute: "ExecuteRequest",
};
export const REPLY_TYPES: Record<keyof typeof REPLIES, string> = {
  register: "RegisterReply",
  heartbeat: "HeartbeatReply",
  claim: "ClaimReply",
  lease: "LeaseReply",
  upload: "UploadReply",
  push: "PushTaskReply",
  execute: "ExecuteReply",
  "worker-capacity": "WorkerCapacityReply",
  "task-admission": "TaskAdmission",
  queues: "QueuesReport",
  nominations: "NominationsReply",
  "expire-leases": "ExpireLeasesReply",
  "set-worker-concurrency": "SetWorkerConcurrencyReply",
  dispatch: "DispatchReply",
};

/**
 * Documents checked field by field by their own rules, which name the field in v1's codes
 * (dispatch.ts, inventory.ts, parse.ts): a large dispatch is split into transactions, so the
 * default array limit must not cut it.
 */
const OWN_RULES = new Set<string>(["dispatch", "register-worker-hosts", "override-state"]);

export type RequestName = Exclude<keyof typeof REQUESTS, "dispatch" | "register-worker-hosts" | "override-state">;

const checks = new Map(
  Object.entries(REQUESTS)
    .filter(([k]) => !OWN_RULES.has(k))
    .map(([k, s]) => [k, compileSchema(s)]),
);

export function requestErrors(name: RequestName, body: unknown): FieldError[] {
  return checks.get(name)!(body);
}
