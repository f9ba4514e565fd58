// Generated from src/protocol/schemas.ts by src/protocol/gen.ts. Do not edit: run `npm run gen:types`.
import type { QueueExplanation } from "../resources/queue-explanation.ts";

export interface ResourceVector {
  cpu_millis?: number;
  memory_mb?: number;
  disk_mb?: number;
  gpu_count?: number;
  gpu_types?: string[];
}

export interface CacheAffinity {
  cache_key?: string | null;
  cache_hit?: boolean;
  worker_cache_enabled?: boolean;
  reason?: string;
}

export interface Shortfall {
  capacity?: number;
  reserved?: number;
  /** a number, or the gpu types asked for */
  requested?: unknown;
  short?: number;
  available?: string[];
  [key: string]: unknown;
}

export interface AdmissionObjectConcurrency {
  active_count?: number;
  effective_limit?: number;
  [key: string]: unknown;
}

export interface AdmissionObject {
  ok?: boolean;
  reason?: string | null;
  reasons?: string[];
  placement?: string;
  requested?: ResourceVector;
  capacity?: ResourceVector;
  reserved_before?: ResourceVector;
  available_before?: ResourceVector;
  available_after?: ResourceVector;
  shortfalls?: Record<string, Shortfall>;
  active_task_ids?: string[];
  exclusive_active?: boolean;
  concurrency?: AdmissionObjectConcurrency;
  [key: string]: unknown;
}

export interface ClaimedTaskControllerConcurrency {
  desired_concurrency?: number;
  max_concurrency?: number;
  initial_concurrency?: number;
  concurrency_policy?: string;
  active_count_at_claim?: number;
  resource_admission?: AdmissionObject;
  cache_affinity?: CacheAffinity;
  claim_batch_id?: string;
  claim_batch_size?: number;
  dispatch_mode?: string;
  [key: string]: unknown;
}

export interface ClaimedTaskControllerPush {
  push_id?: string;
  leased_at?: string;
  [key: string]: unknown;
}

export interface ClaimedTask {
  task_id: string;
  task_kind?: string;
  lease_until?: string;
  case_id?: string | null;
  run_id?: string | null;
  setting_id?: string | null;
  case_version?: string;
  scenario_id?: string | null;
  package_id?: string | null;
  campaign_id?: string | null;
  attempt_no?: number;
  assigned_worker_id?: string;
  payload?: Record<string, unknown>;
  /** the task's components as v1 sends them ({} when none) */
  components?: unknown;
  controller_concurrency?: ClaimedTaskControllerConcurrency;
  controller_push?: ClaimedTaskControllerPush;
  [key: string]: unknown;
}

export interface CapacityEntry {
  worker_id: string;
  status?: string;
  capacity?: ResourceVector;
  reserved?: ResourceVector;
  available?: ResourceVector;
  active_task_ids?: string[];
  exclusive_active?: boolean;
  max_concurrency?: number;
  desired_concurrency?: number;
  active_count?: number;
  effective_limit?: number;
  [key: string]: unknown;
}

export interface BlockingLease {
  task: string;
  since?: string;
  declared_seconds?: number;
  ends_at?: string;
  [key: string]: unknown;
}

export interface WorkerAdmission {
  worker_id: string;
  ok: boolean;
  reason?: string | null;
  reasons?: string[];
  shortfalls?: Record<string, Shortfall>;
  concurrency?: AdmissionObjectConcurrency;
  explanation?: string;
  cache_affinity?: CacheAffinity;
  blocking_leases?: BlockingLease[];
  blocking_until?: string;
  [key: string]: unknown;
}

export interface Suggestion {
  kind: "request" | "empty_worker";
  worker: string;
  change: string;
  resources?: ResourceVector;
  until?: string;
  [key: string]: unknown;
}

export interface LeaseReply {
  ok: boolean;
  task_id: string;
  old_state?: string;
  new_state?: string;
  state?: string;
  lease_until?: string;
  ignored_stale_failure?: boolean;
  auto_retry?: Record<string, unknown> | null;
  issues?: string[];
  attempt_no?: number;
  [key: string]: unknown;
}

export interface NominationEntry {
  worker_id: string;
  task_id: string;
  blocking_leases: string[];
  starts_by?: string;
}

export interface DispatchedTask {
  task_id: string;
  task_kind?: string;
  case_id?: string | null;
  run_id?: string | null;
  setting_id?: string | null;
  state: string;
}

export interface QueueReportEntry {
  name: string;
  limited: boolean;
  quota: Record<string, number>;
  borrowing_limit: Record<string, number>;
  lending_limit: Record<string, number>;
  weight: number;
  reclaim: string;
  used: Record<string, number>;
  borrowed: Record<string, number>;
  lent: Record<string, number>;
  pending: number;
  admitted: number;
  share: number;
  decayed_share: number;
  rank: number;
}

export interface RegisterRequestHealthResources {
  cpu_count?: number;
  mem_total_mb?: number;
  mem_available_mb?: number;
  disk_total_mb?: number;
  disk_available_mb?: number;
  gpu_count?: number;
  [key: string]: unknown;
}

export interface RegisterRequestHealthSourceCache {
  enabled?: boolean;
  keys?: string[];
  [key: string]: unknown;
}

export interface RegisterRequestHealth {
  hostname?: string;
  platform?: string;
  resources?: RegisterRequestHealthResources;
  source_cache?: RegisterRequestHealthSourceCache;
  [key: string]: unknown;
}

export interface RegisterRequest {
  worker_id: string;
  runner_api_version: 1;
  /** Hard ceiling on active tasks. */
  max_concurrency?: number;
  /** Desired concurrency at registration, at most max_concurrency. Default: max_concurrency. */
  initial_concurrency?: number;
  concurrency_policy?: "fixed" | "adaptive";
  /** Capabilities the worker offers; a task's required_capability must be among them. Default: what the Runner registers. */
  capabilities?: string[];
  /** a partial capacity, completed from the host snapshot (admission/capacity.ts checks it) */
  resource_capacity?: unknown;
  health?: RegisterRequestHealth;
}

export interface HeartbeatRequestCurrentRunsItem {
  task_id?: string;
  /** the run's package */
  package_id?: unknown;
  /** where the run is */
  phase?: unknown;
}

export interface HeartbeatRequest {
  worker_id: string;
  current_runs?: HeartbeatRequestCurrentRunsItem[];
  health?: RegisterRequestHealth;
}

export interface ClaimRequest {
  worker_id: string;
  /** 1..1024, default 1 */
  limit?: number;
  /** at least 30, default 600 */
  lease_seconds?: number;
  /** 0..60 */
  wait_seconds?: number;
  /** ignored: Loom wakes on change */
  wait_poll_seconds?: number;
}

export interface StartRequest {
  worker_id: string;
  task_id: string;
  attempt_no?: number;
}

export interface RenewRequest {
  worker_id: string;
  task_id: string;
  attempt_no?: number;
  /** at least 30, default 600 */
  lease_seconds?: number;
}

export interface CompleteRequest {
  worker_id: string;
  task_id: string;
  attempt_no?: number;
  /** the Runner's result summary */
  result?: unknown;
  /** the upload reply */
  upload?: unknown;
}

export interface FailRequestError {
  type?: string;
  detail?: string;
}

export interface FailRequest {
  worker_id: string;
  task_id: string;
  attempt_no?: number;
  /** the claim's controller_concurrency */
  controller_concurrency?: unknown;
  error?: FailRequestError;
}

export interface PushTaskRequest {
  task_id: string;
  worker_id?: string;
  /** who pushed */
  operator?: unknown;
  /** at least 30, default 600 */
  lease_seconds?: number;
  /** 10..120, default 30 */
  push_timeout_seconds?: number;
}

export interface CancelTaskRequest {
  task_id: string;
}

export interface RetryTaskRequest {
  task_id: string;
  /** true keeps the exclusions */
  preserve_excluded_workers?: unknown;
}

export interface WorkerControlRequest {
  worker_id: string;
}

export interface SetWorkerConcurrencyRequest {
  worker_id: string;
  desired_concurrency: number;
  /** a note for the event */
  reason?: unknown;
}

export interface OverrideStateRequest {
  /** only "task" */
  target_type?: unknown;
  /** the task */
  target_id?: unknown;
  /** the task, when target_id is absent */
  task_id?: unknown;
  /** a task state */
  state?: unknown;
  /** why */
  reason?: unknown;
  /** who */
  operator?: unknown;
}

export interface RegisterWorkerHostsRequest {
  /** who registered them */
  operator?: unknown;
  /** inventory v1 workers */
  hosts?: unknown;
  /** inventory v1 workers */
  workers?: unknown;
  /** an inventory v1 document */
  inventory?: unknown;
}

export interface DispatchRequest {
  schema_version: 1;
  /** who dispatched */
  operator?: unknown;
  /** merged under each task's payload */
  payload?: unknown;
  /** each task's default priority */
  priority?: unknown;
  /** each task's default capability */
  required_capability?: unknown;
  /** each task's default package */
  package_id?: unknown;
  /** each task's default queue */
  queue?: unknown;
  /** v1's task extensions */
  extensions?: unknown;
  tasks?: unknown[];
  case_ids?: unknown[];
}

export interface RepoRunRequest {
  repo_url: string;
  command?: string;
  commit?: string;
  ref?: string;
  task_id?: string;
  campaign_id?: string;
  case_id?: string;
  setting_id?: string;
  run_id?: string;
  operator?: string;
  /** Empty matches any worker. */
  required_capability?: string;
  /** Higher is claimed first. A queued task that fits nowhere and outranks a lease it waits on nominates that lease's worker at once (see nominate_after_seconds). */
  priority?: number;
  placement?: "shared" | "exclusive";
  timeout_seconds?: number;
  env?: Record<string, string>;
  artifact_paths?: string[];
}

export interface ExecuteRequest {
  task: ClaimedTask;
}

export interface RegisterReply {
  ok: boolean;
  worker_id: string;
  desired_concurrency?: number;
  max_concurrency?: number;
  initial_concurrency?: number;
  concurrency_policy?: string;
  resource_capacity?: ResourceVector;
}

export interface HeartbeatReply {
  ok: boolean;
  worker_id: string;
  time?: string;
  registered?: boolean;
  desired_concurrency?: number;
  max_concurrency?: number;
  initial_concurrency?: number;
  concurrency_policy?: string;
  resource_capacity?: ResourceVector;
  [key: string]: unknown;
}

export interface ClaimReply {
  tasks: ClaimedTask[];
  desired_concurrency?: number;
  max_concurrency?: number;
  initial_concurrency?: number;
  concurrency_policy?: string;
  active_count?: number;
  resource_capacity?: ResourceVector;
  reserved_resources?: ResourceVector;
  available_resources?: ResourceVector;
}

export interface UploadReply {
  ok: boolean;
  result_id: string;
  attempt_no?: number;
  verdict?: string;
  download_url?: string;
  auto_retry?: Record<string, unknown> | null;
  /** null: Loom runs no Oracles */
  oracle_outcome?: unknown;
  /** null: Loom runs no Oracles */
  oracle_dispatch?: unknown;
  [key: string]: unknown;
}

export interface PushTaskReplySelection {
  mode?: "explicit" | "cache-affine-auto";
  cache_affinity?: CacheAffinity;
}

export interface PushTaskReply {
  ok: boolean;
  task_id: string;
  worker_id: string;
  lease_until?: string;
  /** the Runner's reply, as it sent it */
  runner?: unknown;
  selection?: PushTaskReplySelection;
  [key: string]: unknown;
}

export interface ExecuteReply {
  ok: boolean;
  state: string;
  task_id?: string;
  worker_id?: string;
  [key: string]: unknown;
}

export interface WorkerCapacityReply {
  workers: CapacityEntry[];
}

export interface TaskAdmissionExecutionProfile {
  placement?: string;
  resources?: ResourceVector;
}

export interface TaskAdmission {
  task_id: string;
  state?: string;
  lease_until?: string | null;
  execution_profile?: TaskAdmissionExecutionProfile;
  required_capability?: string;
  eligible_worker_count?: number;
  unsatisfiable?: boolean;
  summary?: string;
  queue_position?: number | null;
  nominated_worker?: string | null;
  higher_priority_ahead?: string[];
  higher_priority_ahead_count?: number;
  suggestions?: Suggestion[];
  queue?: QueueExplanation;
  workers: WorkerAdmission[];
  [key: string]: unknown;
}

export interface QueuesReport {
  active: boolean;
  half_life_seconds: number;
  standing: string;
  queues: QueueReportEntry[];
}

export interface NominationsReply {
  nominations: NominationEntry[];
}

export interface ExpireLeasesReplyExpiredItem {
  task_id: string;
  old_state: string;
  new_state: string;
}

export interface ExpireLeasesReply {
  ok: boolean;
  expired: ExpireLeasesReplyExpiredItem[];
  count: number;
}

export interface SetWorkerConcurrencyReply {
  ok: boolean;
  worker_id: string;
  desired_concurrency: number;
  max_concurrency: number;
}

export interface DispatchReply {
  created: DispatchedTask[];
  existing: DispatchedTask[];
}

/** A request's schema name -> its type. */
export interface RequestTypes {
  "register": RegisterRequest;
  "heartbeat": HeartbeatRequest;
  "claim": ClaimRequest;
  "start": StartRequest;
  "renew": RenewRequest;
  "complete": CompleteRequest;
  "fail": FailRequest;
  "push": PushTaskRequest;
  "cancel-task": CancelTaskRequest;
  "retry-task": RetryTaskRequest;
  "worker-control": WorkerControlRequest;
  "set-worker-concurrency": SetWorkerConcurrencyRequest;
  "override-state": OverrideStateRequest;
  "register-worker-hosts": RegisterWorkerHostsRequest;
  "dispatch": DispatchRequest;
  "repo-run": RepoRunRequest;
  "execute": ExecuteRequest;
}
