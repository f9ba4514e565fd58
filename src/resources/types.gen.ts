// Generated from crds/*.yaml by src/resources/gen-types.ts. Do not edit: run `npm run gen:types`.
import type { Resource } from "./meta.ts";

/** Values every case inherits; case values override them. */
export interface CampaignSpecDefaults {
  /** An identifier of the case: a non-empty string of at most 253 characters without control characters, or an integer of at most 2^53-1. */
  case_id?: number | string;
  /** An identifier of the case: a non-empty string of at most 253 characters without control characters, or an integer of at most 2^53-1. */
  setting_id?: number | string;
  /** An identifier of the case: a non-empty string of at most 253 characters without control characters, or an integer of at most 2^53-1. */
  run_id?: number | string;
  /** An identifier of the case: a non-empty string of at most 253 characters without control characters, or an integer of at most 2^53-1. */
  case_version?: number | string;
  /** A case's scenario or package identifier: a non-empty string of at most 253 characters without control characters. */
  scenario_id?: string;
  /** A case's scenario or package identifier: a non-empty string of at most 253 characters without control characters. */
  package_id?: string;
  [key: string]: unknown;
}

export interface CampaignSpecCasesItem {
  /** An identifier of the case: a non-empty string of at most 253 characters without control characters, or an integer of at most 2^53-1. */
  task_id?: number | string;
  /** An identifier of the case: a non-empty string of at most 253 characters without control characters, or an integer of at most 2^53-1. */
  case_id?: number | string;
  /** An identifier of the case: a non-empty string of at most 253 characters without control characters, or an integer of at most 2^53-1. */
  setting_id?: number | string;
  /** An identifier of the case: a non-empty string of at most 253 characters without control characters, or an integer of at most 2^53-1. */
  run_id?: number | string;
  /** An identifier of the case: a non-empty string of at most 253 characters without control characters, or an integer of at most 2^53-1. */
  case_version?: number | string;
  /** A case's scenario or package identifier: a non-empty string of at most 253 characters without control characters. */
  scenario_id?: string;
  /** A case's scenario or package identifier: a non-empty string of at most 253 characters without control characters. */
  package_id?: string;
  [key: string]: unknown;
}

/** A campaign manifest: defaults and cases, one task per case. */
export interface CampaignSpec {
  /** Manifest schema version; only 1. */
  schema_version?: number;
  /** Campaign identifier; task names start with it. At most 63 characters, since its tasks carry it in the loom.dev/campaign label. */
  campaign_id: string;
  /** Seconds a task of this campaign may wait queued, fitting nowhere, before it nominates (holds) the worker where it could start soonest. Copied into each task's spec. Default: the Hub's --nominate-after-seconds (60). */
  nominate_after_seconds?: number;
  /** The Queue this campaign's tasks belong to, copied into each task's spec.queue. Default: default. */
  queue?: string;
  /** Values every case inherits; case values override them. */
  defaults?: CampaignSpecDefaults;
  /** The cases; each becomes one Task (case values override defaults, resources merge by name). */
  cases: CampaignSpecCasesItem[];
}

export interface CampaignStatusConditionsItem {
  /** Condition type, e.g. Ready, Admitted, Leased, Succeeded. */
  type: string;
  /** True, False or Unknown. */
  status: "True" | "False" | "Unknown";
  /** A one-word token for the last transition (a Loom reason code or CamelCase). */
  reason?: string;
  /** Free text; may span lines. */
  message?: string;
  /** When status last changed (RFC 3339). */
  lastTransitionTime?: string;
  /** The spec generation the condition was set from. */
  observedGeneration?: number;
}

/** Observed state, written only by Loom. */
export interface CampaignStatus {
  /** The spec generation this status was computed from. */
  observedGeneration?: number;
  /** Tasks this campaign owns. */
  task_count?: number;
  /** Tasks not yet final (queued, leased, running). */
  pending?: number;
  /** Tasks holding an active lease. */
  active?: number;
  /** Tasks in a final state. */
  final?: number;
  /** Task count per state. */
  by_state?: Record<string, number>;
  /** Conditions, one per type (Kubernetes conventions); see `loom describe`. */
  conditions?: CampaignStatusConditionsItem[];
}

export type Campaign = Resource<"Campaign", CampaignSpec, CampaignStatus>;

/** Nominal amount per dimension, in the contract's whole units. A dimension left out is not limited by this queue. */
export interface QueueSpecQuota {
  /** CPU in millicores (1000 = one core). */
  cpu_millis?: number;
  /** Memory in MiB. */
  memory_mb?: number;
  /** Ephemeral disk in MiB. */
  disk_mb?: number;
  /** GPUs, whole devices, of any type. */
  gpu_count?: number;
  /** GPUs by type (e.g. a100: 4). A lease counts against every type its task accepts. */
  gpu_types?: Record<string, number>;
}

/** A team's share of the fleet: quota, borrowing, lending, weight and reclaim. */
export interface QueueSpec {
  /** Nominal amount per dimension, in the contract's whole units. A dimension left out is not limited by this queue. */
  quota?: QueueSpecQuota;
  /** How far past its quota, per dimension, the queue may go on quota other queues leave unused. Default: 0 (no borrowing). */
  borrowing_limit?: QueueSpecQuota;
  /** How much of its unused quota, per dimension, other queues may borrow. Default: all of it. */
  lending_limit?: QueueSpecQuota;
  /** Fair-share weight: the queue with the lowest dominant share divided by its weight is claimed from first. Default: 1. */
  weight?: number;
  /** What a queue below its quota does when others have borrowed what it needs: wait (default) stops new borrowing there; preempt also ends the youngest borrowed leases. */
  reclaim?: "wait" | "preempt";
}

export interface QueueStatusConditionsItem {
  /** Condition type: Borrowing (it uses more than its quota), QuotaExhausted (all of its nominal quota in some dimension is in use). */
  type: string;
  /** True, False or Unknown. */
  status: "True" | "False" | "Unknown";
  /** A one-word token for the last transition (a Loom reason code or CamelCase). */
  reason?: string;
  /** Free text; may span lines. */
  message?: string;
  /** When status last changed (RFC 3339). */
  lastTransitionTime?: string;
  /** The spec generation the condition was set from. */
  observedGeneration?: number;
}

/** Observed state, written only by Loom. */
export interface QueueStatus {
  /** The spec generation this status was computed from. */
  observedGeneration?: number;
  /** What the queue's active leases reserve (derived from the leases). */
  used?: QueueSpecQuota;
  /** What the queue uses past its quota, e.g. cpu_millis=500,gpu_count=1; - for nothing. */
  borrowed?: string;
  /** What other queues use of this queue's unused quota (an estimate: lending is pooled); - for nothing. */
  lent?: string;
  /** Queued tasks of this queue. */
  pending?: number;
  /** Tasks of this queue holding an active lease. */
  admitted?: number;
  /** Weighted dominant share now: the largest fraction of the fleet's capacity it uses in any dimension, divided by its weight. */
  share?: number;
  /** The same share from usage decayed over the Hub's --fair-share-half-life; what claims order by when a half-life is set. */
  decayed_share?: number;
  /** Conditions, one per type (Kubernetes conventions); see `loom describe queue`. */
  conditions?: QueueStatusConditionsItem[];
}

export type Queue = Resource<"Queue", QueueSpec, QueueStatus>;

/** Resources reserved on the worker while the lease is active. Default: none. */
export interface TaskSpecExecutionProfileResources {
  /** CPU requested, in millicores (1000 = one core). Default: 0. */
  cpu_millis?: number;
  /** Memory requested, in MiB. Default: 0. */
  memory_mb?: number;
  /** Disk requested, in MiB. Default: 0. */
  disk_mb?: number;
  /** GPUs requested, whole devices. Default: 0. */
  gpu_count?: number;
  /** GPU models requested (e.g. a100); needs a positive gpu_count. Default: any. */
  gpu_types?: string[];
}

/** Placement and resources the task needs. Default: shared, no resources. */
export interface TaskSpecExecutionProfile {
  /** shared runs beside other tasks; exclusive needs an empty worker and holds it alone. Default: shared. */
  placement?: "shared" | "exclusive";
  /** Resources reserved on the worker while the lease is active. Default: none. */
  resources?: TaskSpecExecutionProfileResources;
}

/** When a failed attempt is retried automatically. */
export interface TaskSpecRetryPolicy {
  /** Attempts in all, the first included (1-20). Default: 3 for expired leases, 1 otherwise. */
  max_attempts?: number;
  /** Failure categories that are retried. Default: none. */
  retry_categories?: ("terminal_resource_insufficient" | "token_balance_insufficient" | "rate_limited" | "auth_failed" | "network_unavailable")[];
  /** Retry on another worker than the one that failed. Default: false. */
  different_worker?: boolean;
}

/** One runnable unit of work and what it needs. */
export interface TaskSpec {
  /** Kind of work; 'execution' unless stated. */
  task_kind?: string;
  /** Campaign this task belongs to, if any. */
  campaign_id?: string;
  /** Case of the campaign manifest this task runs. */
  case_id?: string;
  /** Setting (configuration) the case runs under. */
  setting_id?: string;
  /** Run identifier, for repeated runs of a case. */
  run_id?: string;
  /** Version of the case definition. */
  case_version?: string;
  /** Scenario identifier, passed through to results. */
  scenario_id?: string;
  /** Package identifier, passed through to results. */
  package_id?: string;
  /** Empty matches any worker. */
  required_capability?: string;
  /** Higher is claimed first. A queued task that fits nowhere and outranks a lease it waits on nominates that lease's worker at once (see nominate_after_seconds). */
  priority?: number;
  /** Seconds this task may wait queued, fitting nowhere, before it nominates (holds) the worker where it could start soonest; that worker then admits only work that cannot delay it. Copied from its Campaign's nominate_after_seconds. Default: the Hub's --nominate-after-seconds (60). */
  nominate_after_seconds?: number;
  /** The Queue this task belongs to (its campaign's spec.queue). Default: default. */
  queue?: string;
  /** Placement and resources the task needs. Default: shared, no resources. */
  execution_profile?: TaskSpecExecutionProfile;
  /** When a failed attempt is retried automatically. */
  retry_policy?: TaskSpecRetryPolicy;
  /** What the Runner executes (runner, command, phases, source, env, ...), passed through unchanged. */
  payload?: Record<string, unknown>;
  /** What a correct result looks like, passed to the Runner and the reviewers. */
  expected?: Record<string, unknown>;
}

/** The worker's effective capacity; reserved_before: what its other leases held. */
export interface TaskStatusLeaseAdmissionCapacity {
  /** CPU, in millicores. */
  cpu_millis?: number;
  /** Memory, in MiB. */
  memory_mb?: number;
  /** Disk, in MiB. */
  disk_mb?: number;
  /** GPUs, whole devices. */
  gpu_count?: number;
  /** GPU models. */
  gpu_types?: string[];
}

/** The worker's concurrency as admission counted it. */
export interface TaskStatusLeaseAdmissionConcurrency {
  /** Runs the worker's last heartbeat reported. */
  reported_active?: number;
  /** Active leases the Hub counted on the worker. */
  leased_active?: number;
  /** The larger of the two. */
  active_count?: number;
  /** The worker's desired concurrency. */
  desired_concurrency?: number;
  /** The worker's maximum concurrency. */
  max_concurrency?: number;
  /** min(desired_concurrency, max_concurrency). */
  effective_limit?: number;
}

/** What admission saw on the worker when the lease was granted. The rest of the admission object a claim answers with follows from it and the lease: ok, with no reason and no shortfalls; requested is the reservation; available_before is capacity minus reserved_before, and available_after is that minus requested. `loom describe task` shows them. A lease granted by an earlier Loom keeps the whole object here. */
export interface TaskStatusLeaseAdmission {
  /** The worker's effective capacity; reserved_before: what its other leases held. */
  capacity?: TaskStatusLeaseAdmissionCapacity;
  /** The worker's effective capacity; reserved_before: what its other leases held. */
  reserved_before?: TaskStatusLeaseAdmissionCapacity;
  /** The worker's other active leases, by task. */
  active_task_ids?: string[];
  /** Whether one of them held the worker exclusively. */
  exclusive_active?: boolean;
  /** The worker's concurrency as admission counted it. */
  concurrency?: TaskStatusLeaseAdmissionConcurrency;
  [key: string]: unknown;
}

/** The active lease. Its reservation is the only record of the resources it holds. */
export interface TaskStatusLease {
  /** Worker holding the lease. */
  worker: string;
  /** The attempt this lease belongs to; older epochs are fenced off. */
  epoch: number;
  /** pull (claimed by the Runner) or push (sent by the Hub). */
  mode?: "pull" | "push";
  /** Identifier of the push that delivered the task. */
  push_id?: string;
  /** When the lease was granted (RFC 3339). */
  leased_at: string;
  /** When the lease expires unless renewed (RFC 3339). */
  lease_until: string;
  /** When the Runner reported the task started (RFC 3339). */
  started_at?: string;
  /** shared or exclusive, as admitted. */
  placement?: "shared" | "exclusive";
  /** Resources reserved on the worker by the lease. */
  reservation?: TaskSpecExecutionProfileResources;
  /** What admission saw on the worker when the lease was granted. The rest of the admission object a claim answers with follows from it and the lease: ok, with no reason and no shortfalls; requested is the reservation; available_before is capacity minus reserved_before, and available_after is that minus requested. `loom describe task` shows them. A lease granted by an earlier Loom keeps the whole object here. */
  admission?: TaskStatusLeaseAdmission;
}

export interface TaskStatusAttemptsItem {
  /** The attempt number (its lease epoch). */
  attempt?: number;
  /** Worker that ran the attempt. */
  worker?: string;
  /** pull or push. */
  mode?: string;
  /** When the attempt's lease was granted (RFC 3339). */
  leased_at?: string;
  /** When the Runner reported the attempt started (RFC 3339); absent if it never did. */
  started_at?: string;
  /** When the attempt's lease ended (RFC 3339). */
  ended_at?: string;
  /** How it ended: a verdict (clean, dirty), run_error, lease_expired, cancelled, ... */
  outcome?: string;
  /** Reason token of the end (ResultUploaded, LeaseExpired, Cancelled, ...). */
  reason?: string;
  /** Result ZIP uploaded by the attempt, if any. */
  result_id?: string;
  /** shared or exclusive, as admitted. */
  placement?: "shared" | "exclusive";
  /** Resources reserved on the worker by the lease. */
  reservation?: TaskSpecExecutionProfileResources;
  /** What admission saw on the worker when the lease was granted. The rest of the admission object a claim answers with follows from it and the lease: ok, with no reason and no shortfalls; requested is the reservation; available_before is capacity minus reserved_before, and available_after is that minus requested. `loom describe task` shows them. A lease granted by an earlier Loom keeps the whole object here. */
  admission?: TaskStatusLeaseAdmission;
}

/** The result of the last attempt that uploaded one. */
export interface TaskStatusResult {
  /** Result identifier; download with loom result download ID. */
  result_id?: string;
  /** clean, dirty, run_error or needs_review, from the result. */
  verdict?: string;
  /** Size of the result ZIP, in bytes. */
  bytes?: number;
  /** SHA-256 of the result ZIP, hex. */
  sha256?: string;
  /** When the result was uploaded (RFC 3339). */
  uploaded_at?: string;
}

/** Observed state, written only by Loom. */
export interface TaskStatus {
  /** The spec generation this status was computed from. */
  observedGeneration?: number;
  /** Where the task is: queued, retry_queued, leased, running, or a final state (clean, dirty, run_error, cancelled, lease_expired, ...). */
  state?: "queued" | "retry_queued" | "leased" | "running" | "imported" | "returned" | "clean" | "dirty" | "run_error" | "needs_review" | "accepted" | "ignored" | "blocked" | "cancelled" | "lease_expired";
  /** The current attempt number, from 1; it is the lease epoch. */
  attempt?: number;
  /** Dispatch order; ties in priority are claimed in this order, then by name. */
  created_order?: number;
  /** The active lease. Its reservation is the only record of the resources it holds. */
  lease?: TaskStatusLease;
  /** Finished attempts, oldest first (at most 50). */
  attempts?: TaskStatusAttemptsItem[];
  /** The result of the last attempt that uploaded one. */
  result?: TaskStatusResult;
  /** The failure the Runner reported (type and detail), for run_error. */
  error?: Record<string, unknown>;
  /** Problems found in the result, one sentence each. */
  issues?: string[];
  /** Workers a retry must avoid. */
  excluded_workers?: string[];
  /** The worker this queued task has nominated: it fits nowhere now, and has waited past its threshold or outranks a lease it waits on, so that worker is held for it and admits only work that cannot delay it. Absent when not nominated; cleared when the task is leased, finishes or is cancelled. The Nominated condition says why. */
  nominated_worker?: string;
  /** With nominated_worker: the active leases on that worker (task names) this task waits on; once they end it fits. */
  nomination_blockers?: string[];
  /** When the task reached a final state (RFC 3339). */
  finished_at?: string;
  /** Conditions, one per type (Kubernetes conventions); see `loom describe`. */
  conditions?: CampaignStatusConditionsItem[];
}

export type Task = Resource<"Task", TaskSpec, TaskStatus>;

/** Upper bounds the scheduler may reserve. Omitted fields come from the Runner's host snapshot. */
export interface WorkerSpecResourceCapacity {
  /** CPU the worker offers, in millicores (1000 = one core). Default: 0. */
  cpu_millis?: number;
  /** Memory the worker offers, in MiB. Default: 0. */
  memory_mb?: number;
  /** Disk the worker offers, in MiB. Default: 0. */
  disk_mb?: number;
  /** GPUs the worker offers, whole devices. Default: 0. */
  gpu_count?: number;
  /** GPU models the worker offers (e.g. a100); needs a positive gpu_count. Default: any. */
  gpu_types?: string[];
}

/** One inventory worker (inventory v1 field names). */
export interface WorkerSpec {
  /** SSH or network host of the worker. */
  host?: string;
  /** Address used from inside the worker's network, when it differs from host. */
  private_host?: string;
  /** SSH user for ssh-start workers. */
  user?: string;
  /** SSH private key path for ssh-start workers. */
  key_path?: string;
  /** SSH port for ssh-start workers. Default: 22. */
  port?: number;
  /** How the Runner reaches the Hub: ssh-start, long-poll (pull), direct-worker-api (push) or prestarted. Default: long-poll. */
  connection_mode?: "ssh-start" | "long-poll" | "direct-worker-api" | "prestarted";
  /** Hard ceiling on active tasks. */
  max_concurrency?: number;
  /** Desired concurrency at registration, at most max_concurrency. Default: max_concurrency. */
  initial_concurrency?: number;
  /** fixed keeps the desired concurrency; adaptive tunes it from task outcomes. Default: fixed. */
  concurrency_policy?: "fixed" | "adaptive";
  /** Upper bounds the scheduler may reserve. Omitted fields come from the Runner's host snapshot. */
  resource_capacity?: WorkerSpecResourceCapacity;
  /** Capabilities the worker offers; a task's required_capability must be among them. Default: what the Runner registers. */
  capabilities?: string[];
  /** Cordoned; no new leases are admitted. */
  unschedulable?: boolean;
  /** Directory where the Runner caches source checkouts. */
  source_cache_dir?: string;
  /** Size limit of the source cache, in MiB. 0: no cache. */
  source_cache_max_mb?: number;
  /** Free-form machine type, for people. */
  instance_type?: string;
  /** Cores of the machine, for people (admission uses resource_capacity). */
  cpu?: number;
  /** Memory of the machine in GB, for people (admission uses resource_capacity). */
  memory_gb?: number;
  /** Environment variables the Runner sets for every task. */
  env?: Record<string, string>;
  /** Seconds between claims when the Runner polls. Default: the Runner's. */
  poll_seconds?: number;
  /** Long-poll wait of a claim, in seconds (0-60). */
  claim_wait_seconds?: number;
  /** Address a Direct Runner listens on. */
  serve_host?: string;
  /** Port a Direct Runner listens on. */
  serve_port?: number;
  /** Port of the Runner's command API, when it has one. */
  command_port?: number;
  /** Base URL of a Direct Runner (http or https, no credentials). */
  worker_url?: string;
  /** push: the Hub sends tasks; pull: the Direct Runner claims them. */
  direct_api_dispatch_mode?: "pull" | "push";
  /** Name of the Hub environment variable holding the push token; the Hub allows only names the operator lists (loom hub --direct-token-env). */
  direct_api_token_env?: string;
  /** Whether a Direct Runner starts claiming as soon as it starts. */
  direct_api_run_on_start?: boolean;
  /** Tasks the Runner runs before it exits. 0: no limit. */
  max_tasks?: number;
  /** The Runner is installed already; nothing is copied to the host. */
  predeployed?: boolean;
}

/** What the Runner reported when it last registered. */
export interface WorkerStatusRegistration {
  /** When the Runner last registered (RFC 3339). */
  registered_at?: string;
  /** Runner protocol version the Runner speaks. */
  runner_api_version?: number;
  /** Host name the Runner reported. */
  hostname?: string;
  /** Operating system and architecture the Runner reported. */
  platform?: string;
  /** Capabilities the Runner reported. */
  capabilities?: string[];
  /** Concurrency ceiling the Runner reported. */
  max_concurrency?: number;
  /** Initial concurrency the Runner reported. */
  initial_concurrency?: number;
  /** Concurrency policy the Runner reported. */
  concurrency_policy?: string;
  /** Capacity the Runner reported; the inventory's fields win over it. */
  resource_capacity?: WorkerSpecResourceCapacity;
  /** The Runner's host snapshot (cores, memory, disk), used for defaults. */
  host_resources?: Record<string, unknown>;
}

/** Adaptive concurrency state. */
export interface WorkerStatusTuning {
  /** Recent good outcomes counted by adaptive tuning. */
  good?: number;
  /** Recent bad outcomes counted by adaptive tuning. */
  bad?: number;
  /** Concurrency adaptive tuning would choose without limits. */
  theoretical?: number;
}

/** Observed state, written only by Loom. */
export interface WorkerStatus {
  /** The spec generation this status was computed from. */
  observedGeneration?: number;
  /** What the Runner reported when it last registered. */
  registration?: WorkerStatusRegistration;
  /** Flushed periodically; the live value is kept in memory. */
  last_heartbeat_at?: string;
  /** Length of current_runs in the last heartbeat. */
  reported_active?: number;
  /** Concurrency Loom currently allows, at most max_concurrency. */
  desired_concurrency?: number;
  /** min(desired_concurrency, max_concurrency): the active-lease ceiling admission uses. */
  effective_limit?: number;
  /** Active leases (leased or running) on this worker. */
  active_count?: number;
  /** Adaptive concurrency state. */
  tuning?: WorkerStatusTuning;
  /** Effective capacity: the inventory's values, else the Runner's, else host defaults. */
  capacity?: WorkerSpecResourceCapacity;
  /** Sum of the reservations of the active leases on this worker. */
  reserved?: WorkerSpecResourceCapacity;
  /** capacity - reserved, per dimension. */
  available?: WorkerSpecResourceCapacity;
  /** Tasks holding an active lease here. */
  active_task_ids?: string[];
  /** The task holding an exclusive lease here, if any. */
  exclusive_holder?: string;
  /** Conditions, one per type (Kubernetes conventions); see `loom describe`. */
  conditions?: CampaignStatusConditionsItem[];
}

export type Worker = Resource<"Worker", WorkerSpec, WorkerStatus>;

export const KINDS = ["Campaign","Queue","Task","Worker"] as const;
export type Kind = (typeof KINDS)[number];
export type AnyResource = Campaign | Queue | Task | Worker;
