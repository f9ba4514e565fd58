// Generated from crds/*.yaml by src/resources/gen-types.ts. Do not edit: run `npm run gen:types`.
import type { Resource } from "./meta.ts";

export interface CampaignSpec {
  schema_version?: number;
  campaign_id: string;
  /** Values every case inherits; case values override them. */
  defaults?: Record<string, unknown>;
  cases: Record<string, unknown>[];
}

export interface CampaignStatusConditionsItem {
  type: string;
  status: "True" | "False" | "Unknown";
  reason?: string;
  /** Free text; may span lines. */
  message?: string;
  lastTransitionTime?: string;
  observedGeneration?: number;
}

export interface CampaignStatus {
  observedGeneration?: number;
  task_count?: number;
  pending?: number;
  active?: number;
  final?: number;
  by_state?: Record<string, number>;
  conditions?: CampaignStatusConditionsItem[];
}

export type Campaign = Resource<"Campaign", CampaignSpec, CampaignStatus>;

export interface TaskSpecExecutionProfileResources {
  cpu_millis?: number;
  memory_mb?: number;
  disk_mb?: number;
  gpu_count?: number;
  gpu_types?: string[];
}

export interface TaskSpecExecutionProfile {
  placement?: "shared" | "exclusive";
  resources?: TaskSpecExecutionProfileResources;
}

export interface TaskSpecRetryPolicy {
  max_attempts?: number;
  retry_categories?: ("terminal_resource_insufficient" | "token_balance_insufficient" | "rate_limited" | "auth_failed" | "network_unavailable")[];
  different_worker?: boolean;
}

export interface TaskSpec {
  /** Kind of work; 'execution' unless stated. */
  task_kind?: string;
  campaign_id?: string;
  case_id?: string;
  setting_id?: string;
  run_id?: string;
  case_version?: string;
  scenario_id?: string;
  package_id?: string;
  /** Empty matches any worker. */
  required_capability?: string;
  /** Higher is claimed first. */
  priority?: number;
  execution_profile?: TaskSpecExecutionProfile;
  retry_policy?: TaskSpecRetryPolicy;
  /** What the Runner executes (runner, command, phases, source, env, ...), passed through unchanged. */
  payload?: Record<string, unknown>;
  expected?: Record<string, unknown>;
}

/** The active lease. Its reservation is the only record of the resources it holds. */
export interface TaskStatusLease {
  worker: string;
  /** The attempt this lease belongs to; older epochs are fenced off. */
  epoch: number;
  mode?: "pull" | "push";
  push_id?: string;
  leased_at: string;
  lease_until: string;
  started_at?: string;
  placement?: "shared" | "exclusive";
  reservation?: TaskSpecExecutionProfileResources;
  /** The admission snapshot taken when the lease was granted. */
  admission?: Record<string, unknown>;
}

export interface TaskStatusAttemptsItem {
  attempt?: number;
  worker?: string;
  mode?: string;
  leased_at?: string;
  ended_at?: string;
  outcome?: string;
  reason?: string;
  result_id?: string;
  admission?: Record<string, unknown>;
}

export interface TaskStatusResult {
  result_id?: string;
  verdict?: string;
  bytes?: number;
  sha256?: string;
  uploaded_at?: string;
}

export interface TaskStatus {
  observedGeneration?: number;
  state?: "queued" | "retry_queued" | "leased" | "running" | "imported" | "returned" | "clean" | "dirty" | "run_error" | "needs_review" | "accepted" | "ignored" | "blocked" | "cancelled" | "lease_expired";
  attempt?: number;
  /** Dispatch order; ties in priority are claimed in this order */
  created_order?: number;
  /** The active lease. Its reservation is the only record of the resources it holds. */
  lease?: TaskStatusLease;
  attempts?: TaskStatusAttemptsItem[];
  result?: TaskStatusResult;
  error?: Record<string, unknown>;
  issues?: string[];
  excluded_workers?: string[];
  finished_at?: string;
  conditions?: CampaignStatusConditionsItem[];
}

export type Task = Resource<"Task", TaskSpec, TaskStatus>;

/** One inventory worker (inventory v1 field names). */
export interface WorkerSpec {
  /** SSH or network host of the worker. */
  host?: string;
  private_host?: string;
  user?: string;
  key_path?: string;
  port?: number;
  connection_mode?: "ssh-start" | "long-poll" | "direct-worker-api" | "prestarted";
  /** Hard ceiling on active tasks. */
  max_concurrency?: number;
  initial_concurrency?: number;
  concurrency_policy?: "fixed" | "adaptive";
  /** Upper bounds the scheduler may reserve. Omitted fields come from the Runner's host snapshot. */
  resource_capacity?: TaskSpecExecutionProfileResources;
  capabilities?: string[];
  /** Cordoned; no new leases are admitted. */
  unschedulable?: boolean;
  source_cache_dir?: string;
  source_cache_max_mb?: number;
  instance_type?: string;
  cpu?: number;
  memory_gb?: number;
  env?: Record<string, string>;
  poll_seconds?: number;
  claim_wait_seconds?: number;
  serve_host?: string;
  serve_port?: number;
  command_port?: number;
  /** Base URL of a Direct Runner (http or https, no credentials). */
  worker_url?: string;
  direct_api_dispatch_mode?: "pull" | "push";
  /** Name of the Hub environment variable holding the push token; the Hub allows only names the operator lists (loom hub --direct-token-env). */
  direct_api_token_env?: string;
  direct_api_run_on_start?: boolean;
  max_tasks?: number;
  predeployed?: boolean;
}

/** What the Runner reported when it last registered. */
export interface WorkerStatusRegistration {
  registered_at?: string;
  runner_api_version?: number;
  hostname?: string;
  platform?: string;
  capabilities?: string[];
  max_concurrency?: number;
  initial_concurrency?: number;
  concurrency_policy?: string;
  /** Upper bounds the scheduler may reserve. Omitted fields come from the Runner's host snapshot. */
  resource_capacity?: TaskSpecExecutionProfileResources;
  host_resources?: Record<string, unknown>;
}

/** Adaptive concurrency state. */
export interface WorkerStatusTuning {
  good?: number;
  bad?: number;
  theoretical?: number;
}

export interface WorkerStatus {
  observedGeneration?: number;
  /** What the Runner reported when it last registered. */
  registration?: WorkerStatusRegistration;
  /** Flushed periodically; the live value is kept in memory. */
  last_heartbeat_at?: string;
  /** Length of current_runs in the last heartbeat. */
  reported_active?: number;
  desired_concurrency?: number;
  effective_limit?: number;
  active_count?: number;
  /** Adaptive concurrency state. */
  tuning?: WorkerStatusTuning;
  /** Upper bounds the scheduler may reserve. Omitted fields come from the Runner's host snapshot. */
  capacity?: TaskSpecExecutionProfileResources;
  /** Upper bounds the scheduler may reserve. Omitted fields come from the Runner's host snapshot. */
  reserved?: TaskSpecExecutionProfileResources;
  /** Upper bounds the scheduler may reserve. Omitted fields come from the Runner's host snapshot. */
  available?: TaskSpecExecutionProfileResources;
  active_task_ids?: string[];
  exclusive_holder?: string;
  conditions?: CampaignStatusConditionsItem[];
}

export type Worker = Resource<"Worker", WorkerSpec, WorkerStatus>;

export const KINDS = ["Campaign","Task","Worker"] as const;
export type Kind = (typeof KINDS)[number];
export type AnyResource = Campaign | Task | Worker;
