// The shapes of the contract's data API (GET /api/data/worker-capacity, /api/data/task-admission)
// as the CLI reads them; every field optional that a printer can do without.

/** A resource vector in the contract's whole units. */
export type Vec = { cpu_millis?: number; memory_mb?: number; disk_mb?: number; gpu_count?: number; gpu_types?: string[] };

/** One dimension's shortfall, or a set requirement (`gpu_types`) that is not met. */
export type Shortfall = { capacity?: number; reserved?: number; requested?: number | string[]; short?: number; available?: string[] };

/** An admission object (RUNNER_PROTOCOL section 4) as the data API returns it per worker. */
export type WorkerAdmission = {
  worker_id: string;
  ok: boolean;
  reason?: string | null;
  reasons?: string[];
  shortfalls?: Record<string, Shortfall>;
  concurrency?: { active_count?: number; effective_limit?: number };
  explanation?: string;
  /** Present when only leases keep the task off this worker: the smallest set found. */
  blocking_leases?: BlockingLease[];
  /** When the last blocking lease should end, by declared run times. */
  blocking_until?: string;
};

export type BlockingLease = { task: string; since?: string; declared_seconds?: number; ends_at?: string };

export type Suggestion = { kind: "request" | "empty_worker"; worker: string; change: string; resources?: Vec; until?: string };

export type TaskAdmission = {
  task_id: string;
  state?: string;
  /** The active lease's end, renewals counted. */
  lease_until?: string | null;
  summary?: string;
  eligible_worker_count?: number;
  unsatisfiable?: boolean;
  execution_profile?: { placement?: string; resources?: Vec };
  workers: WorkerAdmission[];
  queue_position?: number | null;
  nominated_worker?: string | null;
  higher_priority_ahead?: string[];
  higher_priority_ahead_count?: number;
  suggestions?: Suggestion[];
  /** Present once some Queue exists. */
  queue?: QueueExplanation;
};

export type { QueueExplanation, QuotaLine } from "../resources/queue-explanation.ts";
import type { QueueExplanation } from "../resources/queue-explanation.ts";

type Figures = Record<string, number>;

/** GET /api/data/queues. */
export type QueuesReport = {
  active: boolean;
  half_life_seconds: number;
  standing: string;
  queues: {
    name: string;
    limited: boolean;
    quota: Figures;
    borrowing_limit: Figures;
    lending_limit: Figures;
    weight: number;
    reclaim: string;
    used: Figures;
    borrowed: Figures;
    lent: Figures;
    pending: number;
    admitted: number;
    share: number;
    decayed_share: number;
    rank: number;
  }[];
};

export type CapacityEntry = {
  worker_id: string;
  status?: string;
  capacity?: Vec;
  reserved?: Vec;
  available?: Vec;
  active_task_ids?: string[];
  exclusive_active?: boolean;
  active_count?: number;
  effective_limit?: number;
};

export type NominationEntry = { worker_id: string; task_id: string; blocking_leases: string[]; starts_by?: string };
