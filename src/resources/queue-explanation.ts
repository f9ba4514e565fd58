// How a task's queue standing is explained (task-admission's `queue` section): built by
// scheduler/queue-explain.ts, read by the CLI and the web view. Plain types, no Node imports,
// so the web view compiles this file as it is.
export type QuotaLine = {
  dimension: string;
  used: number;
  requested: number;
  nominal: number;
  borrowing_limit: number;
  borrowable: number;
};

export type QueueExplanation = {
  name: string;
  /** A Queue object exists for it (otherwise nothing limits it and its weight is 1). */
  limited: boolean;
  /** 1 + the queued tasks of the same queue ahead of it for the same workers; null when not queued. */
  position: number | null;
  quota: QuotaLine[];
  share: number;
  decayed_share: number;
  /** The queues with work waiting (and this one), by the share claims order them by. */
  standings: { queue: string; share: number }[];
  /** "team-b has share 0.62, team-a 0.31: team-a goes first". */
  standing: string;
  reclaim: "wait" | "preempt";
  /**
   * While its queue is within its quota but other queues' borrowed leases fill the workers it
   * could use: on each such worker, those borrowed leases, and when the last should end (by
   * declared run times; absent when one declares none). Soonest first.
   */
  waits_on_borrowed?: { worker: string; leases: { task: string; queue: string; ends_at?: string }[]; until?: string }[];
};
